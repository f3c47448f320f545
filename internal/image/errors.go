package image

import "errors"

// Sentinels that errors from this package wrap, for callers to test with
// errors.Is. Each error also names the image and, where there is one, the
// layer.
var (
	// ErrBadReference: a reference in none of the accepted forms, or options
	// that do not fit it.
	ErrBadReference = errors.New("bad image reference")
	// ErrNotFound: the registry, repository, tag, digest, directory or file
	// does not exist.
	ErrNotFound = errors.New("image not found")
	// ErrNotStored: the image is not in the store, and the pull policy
	// (PullNever) forbids fetching it. Errors that wrap it wrap
	// ErrNotFound too.
	ErrNotStored = errors.New("image not stored")
	// ErrBadImage: the image is corrupt, truncated, does not match its
	// digests, or has a layer that tries to write outside its root.
	ErrBadImage = errors.New("bad image")
	// ErrPlatform: the image has no variant for the requested platform.
	ErrPlatform = errors.New("image not available for platform")
	// ErrTooLarge: the image exceeds PullOptions.MaxBytes or
	// PullOptions.MaxUnpackedBytes.
	ErrTooLarge = errors.New("image too large")
	// ErrInsecure: plain HTTP was asked for, or offered, where it is not
	// allowed.
	ErrInsecure = errors.New("insecure registry refused")
	// ErrTransfer: the connection to the registry broke while the image
	// was being read (reset, closed before the end of a blob): nothing
	// is known to be wrong with the image, and a pull tried again may
	// succeed. It is never ErrBadImage, which says the bytes that
	// arrived were wrong.
	ErrTransfer = errors.New("image transfer broken off")
)

// ErrTimeout: the pull took longer than PullOptions.Timeout. The error
// matches context.DeadlineExceeded too, as a pull that ran out of ctx's
// deadline does; ErrTimeout tells the two apart, since the cure differs
// (a longer Timeout, or a longer deadline).
var ErrTimeout = errors.New("image pull timed out")

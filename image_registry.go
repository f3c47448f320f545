package sandbox

import (
	"errors"
	"fmt"
	"slices"

	"github.com/fumehood/sandbox/internal/image"
)

// DefaultPullTimeout is Image.PullTimeout's default, 10 minutes: a
// registry that stalls must not hold a Run (or a pool's filling, which
// has no caller's deadline) for ever, and ten minutes fetches a few
// gigabytes on a link of 100 Mbit/s, more than most images are.
const DefaultPullTimeout = image.DefaultTimeout

// ErrImageTimeout is matched, with context.DeadlineExceeded, when a pull
// took longer than Image.PullTimeout; a pull cut short by the caller's
// own ctx matches context.DeadlineExceeded alone. The cure differs: a
// longer PullTimeout, or a longer deadline.
var ErrImageTimeout = image.ErrTimeout

// checkRegistry reports the first wrong registry option of im: its
// mirrors (an error that matches ErrBadImageRef as well as
// ErrInvalidOption) and its pull timeout.
func (im *Image) checkRegistry() error {
	if err := image.CheckMirrors(im.Mirrors); err != nil {
		return &mirrorError{OptionError{Option: "Options.Root (Image.Mirrors)", Value: fmt.Sprint(im.Mirrors), Reason: err.Error()}, err}
	}
	if im.Pull < PullMissing || im.Pull > PullNever {
		return optionErr("Options.Root (Image.Pull)", im.Pull.String(), "is not a pull policy: PullMissing, PullAlways or PullNever")
	}
	if im.PullTimeout < 0 {
		return optionErr("Options.Root (Image.PullTimeout)", im.PullTimeout.String(), "must not be negative (zero: %v)", DefaultPullTimeout)
	}
	return nil
}

// mirrorError is a wrong Image.Mirrors: an OptionError that also matches
// ErrBadImageRef, as a wrong reference does.
type mirrorError struct {
	OptionError
	err error
}

func (e *mirrorError) Unwrap() []error { return []error{&e.OptionError, e.err} }

// pullTimedOut adds to a pull's error which option to raise when it ran
// out of Image.PullTimeout.
func (im *Image) pullTimedOut(err error) error {
	if !errors.Is(err, image.ErrTimeout) {
		return err
	}
	d := im.PullTimeout
	if d == 0 {
		d = DefaultPullTimeout
	}
	return fmt.Errorf("%w; raise Image.PullTimeout (%v) for a large image or a slow registry", err, d)
}

// registryOptions sets the registry options of im in o.
func (im *Image) registryOptions(o *image.PullOptions) {
	o.Mirrors = im.Mirrors
	o.Timeout = im.PullTimeout
}

// cloneMirrors copies Image.Mirrors, which the caller may change after
// New, as it may change the Image.
func cloneMirrors(m map[string][]string) map[string][]string {
	if m == nil {
		return nil
	}
	out := make(map[string][]string, len(m))
	for reg, mirrors := range m {
		out[reg] = slices.Clone(mirrors)
	}
	return out
}

package sandbox

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/fumehood/sandbox/internal/image"
	"github.com/fumehood/sandbox/internal/wire"
	"github.com/google/go-containerregistry/pkg/authn"
)

// Image names a container image whose filesystem is the sandbox's root
// (Options.Root), and says how to fetch it. The image is pulled into a
// store on the host once, at the Sandbox's first Run (or when its pool is
// first filled), and used from there; later Sandboxes find it stored.
//
// The root is the image's files, read-only, in place of the host's /usr,
// /bin, /lib*, exactly as with a RootDir: /proc, /dev, /tmp,
// /workspace and the generated /etc files are the sandbox's own, and the
// trust store is the image's. The image's config supplies:
//
//   - the environment: its Env, under Options.Env and Cmd.Env, which
//     override it per variable; its PATH is the one programs are looked
//     up in;
//   - the working directory: its WorkingDir when Cmd.Dir is empty, so
//     that a program finds what the image put there as it would under
//     docker run; /workspace when the image sets none.
//
// Its User is not applied: every sandbox runs as its own unprivileged
// user (SandboxUID), whatever the image says, and the image's files all
// belong to the store's owner, readable as their modes allow. The
// layers' set-uid and set-gid bits, device nodes and extended attributes
// are dropped: no file capability (security.capability), and no user.*
// attribute either, so a program that stores data in xattrs finds none. Its
// Entrypoint and Cmd are not run for you: the Cmd given to Run is the
// program.
type Image struct {
	// Ref is the image: a registry reference
	// ("docker.io/library/python:3.12-slim", "localhost:5000/x:tag",
	// "name@sha256:..."), or in the transport names skopeo and podman
	// use, "oci:DIR[:TAG]" (an OCI image layout directory),
	// "oci-archive:FILE[:TAG]" (a tar of one) or
	// "docker-archive:FILE[:REF]" (what docker save writes). Required.
	Ref string
	// Platform is "os/arch[/variant]", e.g. "linux/arm64/v8". Empty:
	// linux and this machine's architecture. An image for another
	// architecture is refused, not emulated.
	Platform string
	// Store is the host directory of the image store, made if missing.
	// Others may search it but not list it (mode 0711), so that a
	// sandbox whose user is not its owner reaches its image's root; the
	// parents it makes get that mode too. A parent that exists is left
	// as it is: if it keeps the sandbox's host uid out (a root caller's
	// sandbox runs as nobody, see Options.HostIDs), Run fails naming it.
	// Empty: ImageStoreDir().
	Store string
	// Credentials gives the user name and password (or token) for a
	// registry host such as "ghcr.io"; empty strings mean an anonymous
	// pull. Nil: docker's credentials (~/.docker/config.json and its
	// helpers). A function rather than a go-containerregistry Keychain,
	// so that the library's API does not tie its callers to that
	// module's types and versions.
	Credentials func(registry string) (username, password string, err error)
	// Insecure allows plain HTTP to a registry on a loopback address or
	// localhost (a test registry); for any other registry it is an error.
	// False: HTTPS only.
	Insecure bool
	// MaxBytes bounds the compressed bytes a pull reads, in bytes; the
	// layers unpacked may be 4 times that. Zero: 4 GiB.
	MaxBytes int64
	// Progress, when set, is called as layers are fetched, from the
	// goroutine that pulls (the one calling Run).
	Progress func(ImageProgress)

	// Mirrors gives, per registry host ("docker.io", "ghcr.io"), mirrors
	// to fetch its images from, each "HOST[:PORT][/PATH]" (e.g.
	// "mirror.example:5000"), tried in order before the registry itself,
	// as docker's registry-mirrors. The image keeps its own Ref and is
	// checked by the same digests: a mirror can withhold an image, never
	// change one. A mirror that does not have the image, refuses, fails
	// or cannot be reached passes the pull to the next (then to the
	// registry); one that serves a manifest other than a Ref's digest, or
	// sends the pull to plain HTTP off loopback, fails it. A tag is
	// answered by the first mirror that has it, as by a registry: pin a
	// digest (name@sha256:...) to trust a mirror with nothing. Insecure
	// applies to each mirror on loopback. A mirror that is not a host is
	// an error matching ErrBadImageRef and ErrInvalidOption. Nil: the
	// registry alone.
	Mirrors map[string][]string
	// PullTimeout bounds the whole pull, on top of Run's ctx. A pull
	// that runs out fails Run with an error matching ErrImageTimeout and
	// leaves nothing in the store. Zero: DefaultPullTimeout (10 minutes).
	PullTimeout time.Duration
	// Pull says when the registry is asked for an image the store holds
	// already, as Kubernetes' imagePullPolicy: PullMissing (the zero
	// value) runs the stored image of Ref with no request, even with the
	// registry down, and pulls only what is missing; PullAlways asks the
	// registry for the tag's manifest at each Sandbox's first Run;
	// PullNever runs only a stored image, and fails with an error
	// matching ErrImageNotFound when there is none. A stored image is run
	// without asking the registry whether Credentials may still read it:
	// where a store is shared by callers with different credentials, use
	// PullAlways (as Kubernetes' AlwaysPullImages does).
	Pull PullPolicy
}

// PullPolicy is Image.Pull: when a registry is asked for an image.
type PullPolicy = image.PullPolicy

// The pull policies (see Image.Pull).
const (
	PullMissing = image.PullMissing
	PullAlways  = image.PullAlways
	PullNever   = image.PullNever
)

// ImageProgress is a pull's progress in fetching one layer of an image.
type ImageProgress struct {
	Ref string
	// Layer is the layer's digest; Index counts from 0 to Count-1.
	Layer        string
	Index, Count int
	// Done and Total are compressed bytes; Total is -1 when unknown.
	Done, Total int64
}

// Errors a pull of an *Image root wraps, for errors.Is; each error also
// names the image and the problem. They are distinct from ErrNotFound
// (the program to run) and ErrInvalidOption (a wrong field): a missing
// image is a fact about the registry or the disk, not a wrong option.
var (
	// ErrImageNotFound: the registry, repository, tag, digest, directory
	// or archive does not exist.
	ErrImageNotFound = image.ErrNotFound
	// ErrImageNotStored: the image is not in the store and Image.Pull is
	// PullNever. It matches ErrImageNotFound too.
	ErrImageNotStored = image.ErrNotStored
	// ErrBadImageRef: a reference in none of the accepted forms, a
	// platform that cannot be parsed, or Insecure with a registry off
	// loopback (which also matches ErrImageInsecure).
	ErrBadImageRef = image.ErrBadReference
	// ErrBadImage: the image is corrupt, truncated, does not match its
	// digests, or has a layer that tries to write outside its root.
	ErrBadImage = image.ErrBadImage
	// ErrImagePlatform: the image has no variant for the platform asked
	// for (Image.Platform, or this machine's).
	ErrImagePlatform = image.ErrPlatform
	// ErrImageTooLarge: the image exceeds Image.MaxBytes.
	ErrImageTooLarge = image.ErrTooLarge
	// ErrImageInsecure: plain HTTP was asked for, or offered, where it is
	// not allowed.
	ErrImageInsecure = image.ErrInsecure
	// ErrImageTransfer: the connection to the registry broke mid-pull
	// (reset, or closed before a blob's end). The image is not known to
	// be bad, and never matches ErrBadImage; nothing of it was stored,
	// and a Run tried again pulls it again.
	ErrImageTransfer = image.ErrTransfer
)

// ImageStoreDir is the image store's directory when Image.Store is empty:
// $XDG_CACHE_HOME/fumehood-sandbox/images when XDG_CACHE_HOME is set, else
// /var/cache/fumehood-sandbox/images for root and
// ~/.cache/fumehood-sandbox/images for anyone else.
func ImageStoreDir() (string, error) { return image.DefaultDir() }

// credentials adapts Image.Credentials to go-containerregistry's Keychain.
type credentials func(registry string) (string, string, error)

func (c credentials) Resolve(r authn.Resource) (authn.Authenticator, error) {
	user, pass, err := c(r.RegistryStr())
	if err != nil {
		return nil, fmt.Errorf("credentials for %s: %w", r.RegistryStr(), err)
	}
	if user == "" && pass == "" {
		return authn.Anonymous, nil
	}
	return authn.FromConfig(authn.AuthConfig{Username: user, Password: pass}), nil
}

// pullOptions are im's options as the store takes them.
func (im *Image) pullOptions() image.PullOptions {
	o := image.PullOptions{Platform: im.Platform, Insecure: im.Insecure, MaxBytes: im.MaxBytes, Policy: im.Pull}
	if im.Credentials != nil {
		o.Keychain = credentials(im.Credentials)
	}
	im.registryOptions(&o)
	if f := im.Progress; f != nil {
		ref := im.Ref
		o.Progress = func(p image.Progress) {
			f(ImageProgress{Ref: ref, Layer: p.Layer, Index: p.Index, Count: p.Count, Done: p.Done, Total: p.Total})
		}
	}
	return o
}

// imageRoot is a Sandbox's image once pulled, and the lease that keeps its
// root from Prune until Close.
type imageRoot struct {
	mu     sync.Mutex
	img    *image.Image
	view   *rootView // what runs need of img, found once it is pulled
	lease  *image.Lease
	closed bool
	// ctx is the pool's pulls' context (fillPool has no caller's):
	// Close cancels it first, since it waits for the pool's filling.
	ctx    context.Context
	cancel context.CancelFunc
}

func newImageRoot() *imageRoot {
	r := &imageRoot{}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r
}

// resolveImage pulls (or finds) the *Image root on the first call and takes
// a lease on its root; later calls return at once. A failed pull is not
// remembered: the next call tries again, as a registry may be back.
func (s *Sandbox) resolveImage(ctx context.Context) error {
	im := s.cfg.Image
	if im == nil {
		return nil
	}
	r := s.image
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.img != nil {
		return nil
	}
	if r.closed {
		return fmt.Errorf("sandbox: %w", ErrClosed)
	}
	dir := im.Store
	if dir == "" {
		var err error
		if dir, err = image.DefaultDir(); err != nil {
			return fmt.Errorf("sandbox: image %s (Options.Root): %w", im.Ref, err)
		}
	}
	st, err := image.Open(dir)
	if err != nil {
		return fmt.Errorf("sandbox: image %s (Options.Root): %w", im.Ref, err)
	}
	defer st.Close()
	img, err := st.Pull(ctx, im.Ref, im.pullOptions())
	if err != nil {
		return fmt.Errorf("sandbox: %w", im.pullTimedOut(err))
	}
	uid, gid := s.cfg.HostIDs()
	if err := checkImageReachable(im.Ref, img.Root, uid, gid); err != nil {
		return err
	}
	lease, err := st.Use(ctx, img)
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	r.img, r.lease = img, lease
	r.view = newRootView(&s.cfg, "", img)
	return nil
}

// stopImagePulls cancels a pull of the pool's, so that Close, which waits
// for the pool's filling, does not wait for a registry.
func (s *Sandbox) stopImagePulls() {
	if s.image != nil {
		s.image.cancel()
	}
}

// closeImage lets go of the image's root, once no run uses it.
func (s *Sandbox) closeImage() {
	if s.image == nil {
		return
	}
	s.image.cancel()
	s.image.mu.Lock()
	defer s.image.mu.Unlock()
	s.image.closed = true
	s.image.lease.Close()
}

// nameImageRoot makes an error of the init's about the root's source
// name the image the caller set, not the RootDir it stands for.
func (v *rootView) nameImageRoot(se *wire.SetupError) {
	if v != nil && v.ref != "" && se != nil {
		se.Op = strings.ReplaceAll(se.Op, "(Options.Root)", "(the root of the image "+v.ref+", Options.Root)")
	}
}

package image

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// CheckMirrors says whether m is a valid PullOptions.Mirrors: every key a
// registry host, every mirror HOST[:PORT][/PATH] without a scheme. Its
// errors wrap ErrBadReference and name the string at fault.
func CheckMirrors(m map[string][]string) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the same error for the same map
	seen := map[string]string{}
	for _, reg := range keys {
		r, err := parseRegistryHost(reg)
		if err != nil {
			return fmt.Errorf("registry %q of Mirrors: %v (want a registry host such as docker.io or localhost:5000): %w", reg, err, ErrBadReference)
		}
		// docker.io and index.docker.io are one registry: which list
		// would apply is not for a map's order to decide.
		if other, ok := seen[r.RegistryStr()]; ok {
			return fmt.Errorf("registry %q of Mirrors: the same registry as %q; give its mirrors once: %w", reg, other, ErrBadReference)
		}
		seen[r.RegistryStr()] = reg
		for _, mirror := range m[reg] {
			if _, err := mirrorRepository(mirror, "library/x", false); err != nil {
				return fmt.Errorf("mirror %q of registry %s: %v (want HOST[:PORT][/PATH], e.g. mirror.example:5000; no scheme: "+
					"it is reached by HTTPS, or plain HTTP on loopback with Insecure): %w", mirror, reg, err, ErrBadReference)
			}
		}
	}
	return nil
}

// parseRegistryHost reads a registry host, as a reference names it.
func parseRegistryHost(host string) (name.Registry, error) {
	if host == "" {
		return name.Registry{}, errors.New("empty")
	}
	if strings.Contains(host, "://") {
		return name.Registry{}, errors.New("a URL, not a host")
	}
	if strings.ContainsAny(host, "/@ ") {
		return name.Registry{}, errors.New("not a host[:port]")
	}
	return name.NewRegistry(host, name.StrictValidation)
}

// mirrorRepository is the repository repo (e.g. "library/python") at
// mirror, HOST[:PORT][/PATH].
func mirrorRepository(mirror, repo string, insecure bool) (name.Repository, error) {
	if strings.Contains(mirror, "://") {
		return name.Repository{}, errors.New("a URL, not a host")
	}
	host, path, _ := strings.Cut(mirror, "/")
	if _, err := parseRegistryHost(host); err != nil {
		return name.Repository{}, err
	}
	if strings.HasSuffix(mirror, "/") {
		return name.Repository{}, errors.New("ends with /")
	}
	full := host + "/" + repo
	if path != "" {
		full = host + "/" + path + "/" + repo
	}
	opts := []name.Option{name.StrictValidation}
	if insecure {
		opts = append(opts, name.Insecure)
	}
	return name.NewRepository(full, opts...)
}

// mirrorsOf is the mirrors of ref's registry, as given.
func (o PullOptions) mirrorsOf(ref name.Reference) []string {
	want := ref.Context().RegistryStr()
	for reg, mirrors := range o.Mirrors {
		// docker.io is index.docker.io in a parsed reference.
		if r, err := parseRegistryHost(reg); err == nil && r.RegistryStr() == want {
			return mirrors
		}
	}
	return nil
}

// anyOnLoopback says whether ref's registry or one of its mirrors is on
// loopback: where Insecure can apply.
func (o PullOptions) anyOnLoopback(ref name.Reference) bool {
	if isLoopback(ref.Context().RegistryStr()) {
		return true
	}
	for _, m := range o.mirrorsOf(ref) {
		host, _, _ := strings.Cut(m, "/")
		if isLoopback(host) {
			return true
		}
	}
	return false
}

// source is one place to ask for a registry's image: a mirror, or the
// registry itself.
type source struct {
	mirror string // empty for the registry itself
	ref    name.Reference
}

func (src source) String() string {
	if src.mirror == "" {
		return "the registry " + src.ref.Context().RegistryStr()
	}
	return "mirror " + src.mirror
}

// sourcesOf is where to ask for ref, in order: its registry's mirrors, then
// the registry. Each is marked insecure (plain HTTP allowed) only when
// Insecure is set and it is on loopback.
func (o PullOptions) sourcesOf(ref name.Reference) ([]source, error) {
	var out []source
	repo := ref.Context().RepositoryStr()
	for _, m := range o.mirrorsOf(ref) {
		host, _, _ := strings.Cut(m, "/")
		r, err := mirrorRepository(m, repo, o.Insecure && isLoopback(host))
		if err != nil {
			return nil, fmt.Errorf("mirror %q: %w: %w", m, ErrBadReference, err)
		}
		var mr name.Reference = r.Tag(ref.Identifier())
		if d, ok := ref.(name.Digest); ok {
			mr = r.Digest(d.DigestStr())
		}
		out = append(out, source{mirror: m, ref: mr})
	}
	self := ref
	if o.Insecure && !isLoopback(ref.Context().RegistryStr()) {
		// Parsed as insecure for a loopback mirror: the registry itself
		// is reached by HTTPS alone.
		var err error
		if self, err = name.ParseReference(ref.String(), name.StrictValidation); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadReference, err)
		}
	}
	return append(out, source{ref: self}), nil
}

// getManifest fetches the manifest (or index) r names from the first of
// its sources that has it.
func getManifest(ctx context.Context, r reference, o PullOptions) (*remote.Descriptor, error) {
	srcs, err := o.sourcesOf(r.remote)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", r.raw, err)
	}
	var passed []string
	for i, src := range srcs {
		desc, err := remote.Get(src.ref,
			remote.WithContext(ctx),
			remote.WithAuthFromKeychain(o.Keychain),
			remote.WithTransport(newTransport(o.Insecure)),
			remote.WithUserAgent("fumehood-sandbox"))
		if err == nil {
			return desc, nil
		}
		if src.mirror != "" && ctx.Err() == nil && isDigestMismatch(err) {
			return nil, fmt.Errorf("image %s: %s served a manifest that is not %s: %w: %w", r.raw, src, r.remote.Identifier(), ErrBadImage, err)
		}
		if i == len(srcs)-1 || !passOn(ctx, err) {
			at := r.raw
			if src.mirror != "" {
				at += ", at " + src.String()
			}
			err = remoteError(ctx, at, err)
			if len(passed) > 0 {
				err = fmt.Errorf("%w (tried first: %s)", err, strings.Join(passed, "; "))
			}
			return nil, err
		}
		passed = append(passed, fmt.Sprintf("%s: %v", src, err))
	}
	return nil, fmt.Errorf("image %s: no registry to ask: %w", r.raw, ErrBadReference) // sourcesOf ends with the registry
}

// passOn says whether a source's failure lets the next one be asked: it
// had no answer for us, as opposed to a wrong one.
func passOn(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, ErrInsecure) {
		return false
	}
	var te *transport.Error
	if errors.As(err, &te) {
		return true // any HTTP status but success
	}
	var ue *url.Error
	var oe *net.OpError
	var de *net.DNSError
	return errors.As(err, &ue) || errors.As(err, &oe) || errors.As(err, &de)
}

// isDigestMismatch says whether err is go-containerregistry's refusal of a
// manifest whose digest is not the one asked for. It has no type of its
// own; the mirror tests fail if its words change.
func isDigestMismatch(err error) bool {
	return strings.Contains(err.Error(), "does not match requested digest")
}

package image

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// kind is the transport a reference names, in the words skopeo and podman
// use for them.
type kind int

const (
	kindRegistry      kind = iota // docker.io/library/python:3.12, localhost:5000/x@sha256:...
	kindOCI                       // oci:DIR[:TAG]
	kindOCIArchive                // oci-archive:FILE[:TAG]
	kindDockerArchive             // docker-archive:FILE[:REF]
)

// reference is a parsed image reference.
type reference struct {
	raw  string
	kind kind
	// path is the directory or file of a local transport.
	path string
	// tag selects an image in an OCI layout (its ref.name annotation) or a
	// docker archive (one of its RepoTags); empty when the source holds one
	// image.
	tag string
	// remote is the registry reference.
	remote name.Reference
}

const acceptedForms = "accepted: a registry reference (docker.io/library/python:3.12-slim, localhost:5000/x:tag, name@sha256:...), " +
	"oci:DIR[:TAG], oci-archive:FILE[:TAG], docker-archive:FILE[:REF]"

// parseReference reads ref. As in skopeo, the path of a local transport ends
// at its first colon, so paths with colons cannot be named.
func parseReference(ref string, insecure bool) (reference, error) {
	r := reference{raw: ref}
	bad := func(why string) (reference, error) {
		return reference{}, fmt.Errorf("image %q: %s (%s): %w", ref, why, acceptedForms, ErrBadReference)
	}
	if ref == "" {
		return bad("empty reference")
	}
	prefixes := []struct {
		p string
		k kind
	}{{"oci:", kindOCI}, {"oci-archive:", kindOCIArchive}, {"docker-archive:", kindDockerArchive}}
	for _, p := range prefixes {
		rest, ok := strings.CutPrefix(ref, p.p)
		if !ok {
			continue
		}
		r.kind = p.k
		r.path, r.tag, _ = strings.Cut(rest, ":")
		if r.path == "" {
			return bad("no path after " + p.p)
		}
		if r.kind == kindDockerArchive && r.tag != "" {
			if _, err := name.NewTag(r.tag); err != nil {
				return bad(fmt.Sprintf("reference %q in the archive: %v", r.tag, err))
			}
		}
		return r, nil
	}
	if i := strings.Index(ref, ":"); i > 0 && !strings.ContainsAny(ref[:i], "./") && strings.HasPrefix(ref[i:], "://") {
		return bad("a URL is not a reference")
	}
	if t, _, ok := strings.Cut(ref, ":"); ok && (t == "docker" || t == "containers-storage" || t == "dir" || t == "docker-daemon") {
		return bad("transport " + t + ": not supported")
	}
	// Without a tag, a reference means :latest, as docker pull does.
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	nr, err := name.ParseReference(ref, opts...)
	if err != nil {
		return bad(err.Error())
	}
	r.kind = kindRegistry
	r.remote = nr
	return r, nil
}

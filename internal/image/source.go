package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// found is an image a reference named, before its config and layers are
// read.
type found struct {
	img    v1.Image
	digest v1.Hash // the manifest's; for a docker archive, the config's
	// docker is set for a docker archive, which has no manifest of its own
	// (go-containerregistry would make one by compressing every layer).
	docker bool
	// remote is set for an image read from a registry (or a mirror),
	// whose connection may break mid-read.
	remote bool
}

// refNameAnnotation tags an image in an OCI layout's index.
const refNameAnnotation = "org.opencontainers.image.ref.name"

// find looks up the image r names for platform want. An OCI archive is
// unpacked into work/archive first.
func (s *Store) find(ctx context.Context, r reference, want v1.Platform, o PullOptions, work string) (found, error) {
	switch r.kind {
	case kindRegistry:
		desc, err := getManifest(ctx, r, o)
		if err != nil {
			return found{}, err
		}
		if desc.MediaType.IsIndex() {
			idx, err := desc.ImageIndex()
			if err != nil {
				return found{}, remoteError(ctx, r.raw, err)
			}
			f, err := selectImage(ctx, r.raw, idx, want, "", false)
			f.remote = true
			return f, err
		}
		if !desc.MediaType.IsImage() {
			return found{}, fmt.Errorf("image %s: manifest of type %s is not an image: %w", r.raw, desc.MediaType, ErrBadImage)
		}
		img, err := desc.Image()
		if err != nil {
			return found{}, remoteError(ctx, r.raw, err)
		}
		return found{img: img, digest: desc.Digest, remote: true}, nil
	case kindOCI, kindOCIArchive:
		dir := r.path
		if r.kind == kindOCIArchive {
			tmp := work + "/archive"
			if err := s.extractArchive(ctx, r, tmp, o.MaxBytes); err != nil {
				return found{}, err
			}
			dir = s.dir + "/" + tmp
		}
		if _, err := os.Stat(dir + "/index.json"); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return found{}, fmt.Errorf("image %s: %s has no index.json, so it is not an OCI image layout: %w", r.raw, r.path, ErrNotFound)
			}
			return found{}, fmt.Errorf("image %s: %w", r.raw, err)
		}
		p, err := layout.FromPath(dir)
		if err != nil {
			return found{}, fmt.Errorf("image %s: %w: %w", r.raw, ErrBadImage, err)
		}
		idx, err := p.ImageIndex()
		if err != nil {
			return found{}, fmt.Errorf("image %s: %w: %w", r.raw, ErrBadImage, err)
		}
		return selectImage(ctx, r.raw, idx, want, r.tag, true)
	case kindDockerArchive:
		if _, err := os.Stat(r.path); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return found{}, fmt.Errorf("image %s: %w: %w", r.raw, ErrNotFound, err)
			}
			return found{}, fmt.Errorf("image %s: %w", r.raw, err)
		}
		var tag *name.Tag
		if r.tag != "" {
			t, err := name.NewTag(r.tag)
			if err != nil {
				return found{}, fmt.Errorf("image %s: %w: %w", r.raw, ErrBadReference, err)
			}
			tag = &t
		}
		m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(r.path) })
		if err != nil {
			return found{}, fmt.Errorf("image %s: not a docker archive: %w: %w", r.raw, ErrBadImage, err)
		}
		if err := checkDockerTag(r, m); err != nil {
			return found{}, err
		}
		img, err := tarball.ImageFromPath(r.path, tag)
		if err != nil {
			return found{}, fmt.Errorf("image %s: %w: %w", r.raw, ErrBadImage, err)
		}
		digest, err := img.ConfigName()
		if err != nil {
			return found{}, fmt.Errorf("image %s: %w: %w", r.raw, ErrBadImage, err)
		}
		return found{img: img, digest: digest, docker: true}, nil
	}
	return found{}, fmt.Errorf("image %s: %w", r.raw, ErrBadReference)
}

// checkDockerTag makes a docker archive's errors say what it holds.
func checkDockerTag(r reference, m tarball.Manifest) error {
	var tags []string
	for _, d := range m {
		tags = append(tags, d.RepoTags...)
	}
	if r.tag == "" {
		if len(m) != 1 {
			return fmt.Errorf("image %s: the archive holds %d images, name one with :REF (it has %s): %w",
				r.raw, len(m), strings.Join(tags, ", "), ErrBadReference)
		}
		return nil
	}
	want, err := name.NewTag(r.tag)
	if err != nil {
		return fmt.Errorf("image %s: %w: %w", r.raw, ErrBadReference, err)
	}
	for _, t := range tags {
		if got, err := name.NewTag(t); err == nil && got.Name() == want.Name() {
			return nil
		}
	}
	return fmt.Errorf("image %s: no %s in the archive (it has %s): %w", r.raw, r.tag, strings.Join(tags, ", "), ErrNotFound)
}

// selectImage picks from idx the image for platform want; in an OCI
// layout's top index (top), first the one tagged tag.
func selectImage(ctx context.Context, ref string, idx v1.ImageIndex, want v1.Platform, tag string, top bool) (found, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return found{}, remoteError(ctx, ref, err)
	}
	cands := im.Manifests
	if top {
		var tags []string
		var tagged []v1.Descriptor
		for _, d := range cands {
			t := d.Annotations[refNameAnnotation]
			if t != "" {
				tags = append(tags, t)
			}
			if tag != "" && t == tag {
				tagged = append(tagged, d)
			}
		}
		switch {
		case tag != "" && len(tagged) == 0:
			return found{}, fmt.Errorf("image %s: no tag %q in the layout (tags: %s): %w", ref, tag, strings.Join(tags, ", "), ErrNotFound)
		case tag != "":
			cands = tagged
		case len(cands) == 0:
			return found{}, fmt.Errorf("image %s: the layout holds no image: %w", ref, ErrNotFound)
		case len(cands) > 1:
			return found{}, fmt.Errorf("image %s: the layout holds %d images, name one with :TAG (tags: %s): %w",
				ref, len(cands), strings.Join(tags, ", "), ErrBadReference)
		}
	}
	var seen []string
	for _, d := range cands {
		switch {
		case d.MediaType.IsIndex():
			child, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return found{}, remoteError(ctx, ref, err)
			}
			f, err := selectImage(ctx, ref, child, want, "", false)
			if err == nil || !errors.Is(err, ErrPlatform) {
				return f, err
			}
			seen = append(seen, platformsIn(err)...)
		case d.MediaType.IsImage():
			if d.Platform != nil {
				seen = append(seen, d.Platform.String())
				if !platformMatches(want, *d.Platform) {
					continue
				}
			}
			img, err := idx.Image(d.Digest)
			if err != nil {
				return found{}, remoteError(ctx, ref, err)
			}
			got, err := img.Digest()
			if err != nil {
				return found{}, remoteError(ctx, ref, err)
			}
			if got != d.Digest {
				return found{}, fmt.Errorf("image %s: manifest %s has digest %s: %w", ref, d.Digest, got, ErrBadImage)
			}
			if d.Platform == nil {
				// Layouts often leave the platform to the config.
				cf, err := img.ConfigFile()
				if err != nil {
					return found{}, remoteError(ctx, ref, err)
				}
				p := configPlatform(cf)
				seen = append(seen, p.String())
				if !platformMatches(want, p) {
					continue
				}
			}
			return found{img: img, digest: d.Digest}, nil
		}
	}
	return found{}, &platformError{ref: ref, want: want.String(), have: seen}
}

// platformError is ErrPlatform naming the platforms the image has.
type platformError struct {
	ref, want string
	have      []string
}

func (e *platformError) Error() string {
	have := append([]string(nil), e.have...)
	sort.Strings(have)
	return fmt.Sprintf("image %s: no variant for %s (it has %s): %v", e.ref, e.want, strings.Join(have, ", "), ErrPlatform)
}

func (e *platformError) Unwrap() error { return ErrPlatform }

func platformsIn(err error) []string {
	var pe *platformError
	if errors.As(err, &pe) {
		return pe.have
	}
	return nil
}

// configPlatform is the platform an image's config declares.
func configPlatform(cf *v1.ConfigFile) v1.Platform {
	return v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}
}

// platformMatches says whether an image for have runs on want. A variant
// matters only when asked for. An image that declares no platform at all
// (hand-made ones often do not) is taken as it is.
func platformMatches(want, have v1.Platform) bool {
	if have.OS == "" && have.Architecture == "" {
		return true
	}
	return want.OS == have.OS && want.Architecture == have.Architecture &&
		(want.Variant == "" || want.Variant == have.Variant)
}

// remoteError classifies an error from go-containerregistry: a missing
// repository, tag or blob is ErrNotFound.
func remoteError(ctx context.Context, ref string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("image %s: %w", ref, ctxErr)
	}
	var te *transport.Error
	if errors.As(err, &te) {
		if te.StatusCode == http.StatusNotFound {
			return fmt.Errorf("image %s: %w: %w", ref, ErrNotFound, err)
		}
		for _, d := range te.Errors {
			switch d.Code {
			case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode, transport.BlobUnknownErrorCode:
				return fmt.Errorf("image %s: %w: %w", ref, ErrNotFound, err)
			}
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("image %s: %w: %w", ref, ErrNotFound, err)
	}
	if brokenTransfer(err) {
		return fmt.Errorf("image %s: %w", ref, transferError(err))
	}
	return fmt.Errorf("image %s: %w", ref, err)
}

// extractArchive unpacks the OCI archive r names into tmp, so that it can be
// read as a layout. It is a tar from outside, read as carefully as a layer.
func (s *Store) extractArchive(ctx context.Context, r reference, tmp string, maxBytes int64) error {
	f, err := os.Open(r.path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("image %s: %w: %w", r.raw, ErrNotFound, err)
	}
	if err != nil {
		return fmt.Errorf("image %s: %w", r.raw, err)
	}
	defer f.Close()
	if err := s.root.Mkdir(tmp, 0o700); err != nil {
		return fmt.Errorf("image %s: %w", r.raw, err)
	}
	dst, err := s.root.OpenRoot(tmp)
	if err != nil {
		return fmt.Errorf("image %s: %w", r.raw, err)
	}
	defer dst.Close()
	c := &counter{r: f, limit: maxBytes, what: "archive", ctx: ctx}
	if err := unpackTar(ctx, tar.NewReader(c), dst, formNone); err != nil {
		return fmt.Errorf("image %s: archive %s: %w", r.raw, r.path, readError(ctx, err))
	}
	return nil
}

// verifyConfig reads the image's config and checks it against the digest
// the manifest gives it: a layout on disk is not checked by
// go-containerregistry.
func verifyConfig(ref string, f found) (*v1.ConfigFile, error) {
	raw, err := f.img.RawConfigFile()
	if err != nil && f.remote && brokenTransfer(err) {
		return nil, fmt.Errorf("image %s: config: %w", ref, transferError(err))
	}
	if err != nil {
		return nil, fmt.Errorf("image %s: config: %w: %w", ref, ErrBadImage, err)
	}
	var want v1.Hash
	if f.docker {
		want = f.digest
	} else {
		m, err := f.img.Manifest()
		if err != nil {
			return nil, fmt.Errorf("image %s: manifest: %w: %w", ref, ErrBadImage, err)
		}
		want = m.Config.Digest
	}
	got, _, err := v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	if got != want {
		return nil, fmt.Errorf("image %s: config has digest %s, the manifest says %s: %w", ref, got, want, ErrBadImage)
	}
	cf, err := v1.ParseConfigFile(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("image %s: config: %w: %w", ref, ErrBadImage, err)
	}
	return cf, nil
}

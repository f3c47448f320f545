package image

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Image is a stored image.
type Image struct {
	// Ref is the reference it was pulled by.
	Ref string
	// Digest is the digest of its manifest; for a docker archive, which
	// has none, of its config (docker's image ID).
	Digest string
	// Platform is the platform it was pulled for, "os/arch[/variant]".
	Platform string
	// Root is a directory holding the image's filesystem. It shares its
	// files with other images of the store: use it read-only, and hold a
	// Lease (Store.Use) while using it.
	Root string
	// Env, WorkingDir, User, Entrypoint and Cmd are from the image's
	// config.
	Env        []string
	WorkingDir string
	User       string
	Entrypoint []string
	Cmd        []string
	// Size is the size of its layers unpacked, in bytes.
	Size int64
	// Layers are the host directories of the image's layers, top first,
	// when every one is stored in overlay form: a read-only overlay of
	// them (lowerdir, with userxattr) is the same tree as Root. Nil when
	// one is not; Root is the image's tree either way.
	Layers []string

	chainID string
	diffIDs []string
}

// Progress is a pull's progress in fetching one layer.
type Progress struct {
	// Layer is the layer's digest; Index counts from 0 to Count-1.
	Layer        string
	Index, Count int
	// Done and Total are compressed bytes; Total is -1 when unknown.
	Done, Total int64
}

// PullOptions says how to pull. The zero value pulls for this machine's
// architecture with docker's credentials and the default size limits.
type PullOptions struct {
	// Platform is "os/arch[/variant]", e.g. "linux/arm64/v8". Zero:
	// linux and this machine's architecture.
	Platform string
	// Keychain gives credentials for registries. Zero:
	// authn.DefaultKeychain (docker's config.json and its helpers).
	Keychain authn.Keychain
	// Insecure allows plain HTTP to a registry on a loopback address or
	// localhost (a test registry); with any other registry or reference it
	// is an error, since plain HTTP can be read and changed on the way.
	// Zero: HTTPS only, for every registry.
	Insecure bool
	// MaxBytes bounds the compressed bytes a pull reads, in bytes. Zero:
	// DefaultMaxBytes.
	MaxBytes int64
	// MaxUnpackedBytes bounds the bytes of the layers once decompressed,
	// in bytes, so that a decompression bomb is an error and not a full
	// disk. Zero: 4 * MaxBytes.
	MaxUnpackedBytes int64
	// Progress, when set, is called as layers are fetched, from the
	// goroutine that called Pull.
	Progress func(Progress)

	// Mirrors gives, per registry host ("docker.io", "ghcr.io",
	// "localhost:5000"), mirrors to fetch its images from, each
	// "HOST[:PORT][/PATH]", tried in order before the registry itself
	// (see Registry mirrors in the package doc for what a mirror
	// is trusted with and when the next is asked). Zero: the
	// registry alone.
	Mirrors map[string][]string
	// Timeout bounds the whole pull, on top of ctx's deadline. Zero or
	// less: DefaultTimeout.
	Timeout time.Duration
	// Policy says when the registry is asked. Zero: PullMissing.
	Policy PullPolicy
}

// PullPolicy says when a pull asks the registry for an image the store
// may hold already, as Kubernetes' imagePullPolicy and docker's --pull.
// It applies to registry references by tag; a reference by digest names
// the same bytes for ever and is asked for only if missing, and oci: and
// archive references are read from their files, which costs no network,
// unless the policy is PullNever.
type PullPolicy int

const (
	// PullMissing uses the image the store holds for the reference and
	// platform, with no request to the registry, and pulls it only if
	// the store has none (Kubernetes' IfNotPresent). A tag moved on the
	// registry is not seen until a pull with PullAlways.
	PullMissing PullPolicy = iota
	// PullAlways asks the registry for the tag's manifest on every pull,
	// and fetches what the store does not hold of it.
	PullAlways
	// PullNever uses only what the store holds, and fails with
	// ErrNotFound when it holds nothing for the reference.
	PullNever
)

// String is the policy as the CLI's --pull takes it.
func (p PullPolicy) String() string {
	switch p {
	case PullMissing:
		return "missing"
	case PullAlways:
		return "always"
	case PullNever:
		return "never"
	}
	return fmt.Sprintf("PullPolicy(%d)", int(p))
}

// ParsePullPolicy is the policy named by s, as String gives it.
func ParsePullPolicy(s string) (PullPolicy, error) {
	for _, p := range []PullPolicy{PullMissing, PullAlways, PullNever} {
		if s == p.String() {
			return p, nil
		}
	}
	return 0, fmt.Errorf("pull policy %q: want missing, always or never", s)
}

// DefaultMaxBytes is PullOptions.MaxBytes's default, 4 GiB.
const DefaultMaxBytes = 4 << 30

func (o PullOptions) withDefaults() PullOptions {
	if o.Platform == "" {
		o.Platform = "linux/" + runtime.GOARCH
	}
	if o.Keychain == nil {
		o.Keychain = authn.DefaultKeychain
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxUnpackedBytes <= 0 {
		o.MaxUnpackedBytes = 4 * o.MaxBytes
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	return o
}

// Pull stores the image ref names and returns it; what the store already
// holds is not fetched again, and o.Policy says whether a registry is
// asked for an image the store holds under ref. ref is a registry reference
// (docker.io/library/python:3.12-slim, localhost:5000/x:tag,
// name@sha256:...), oci:DIR[:TAG] (an OCI image layout; the tag may be
// omitted when it holds one image), oci-archive:FILE[:TAG] (a tar of one)
// or docker-archive:FILE[:REF] (what docker save writes). Pull honours
// ctx's deadline and o.Timeout. If it fails or is cancelled, the store
// holds nothing of the image (unless its root could not be built from its
// stored layers, which Prune then removes); if its process dies, what it
// left in the store's tmp/ is removed by the next Open or Prune.
func (s *Store) Pull(ctx context.Context, ref string, o PullOptions) (*Image, error) {
	o = o.withDefaults()
	return s.pullWithin(ctx, ref, o, s.pull)
}

// pull is Pull without its timeout.
func (s *Store) pull(ctx context.Context, ref string, o PullOptions) (*Image, error) {
	r, err := parseReference(ref, o.Insecure)
	if err != nil {
		return nil, err
	}
	if o.Policy < PullMissing || o.Policy > PullNever {
		return nil, fmt.Errorf("image %s: %v is not a pull policy: %w", ref, o.Policy, ErrBadReference)
	}
	if err := CheckMirrors(o.Mirrors); err != nil {
		return nil, fmt.Errorf("image %s: %w", ref, err)
	}
	if o.Insecure && (r.kind != kindRegistry || !o.anyOnLoopback(r.remote)) {
		return nil, fmt.Errorf("image %s: Insecure (plain HTTP) is allowed only for a registry (or a mirror of it) on a loopback address, where no one can read or change it on the way: %w", ref, ErrInsecure)
	}
	wantp, err := v1.ParsePlatform(o.Platform)
	if err != nil {
		return nil, fmt.Errorf("image %s: platform %q: %w: %w", ref, o.Platform, ErrBadReference, err)
	}
	want := *wantp
	platform := want.String()

	lk, err := s.lockStore(ctx, false)
	if err != nil {
		return nil, err
	}
	defer lk.Close()

	if d, ok := r.remote.(name.Digest); ok {
		// A digest names the same bytes for ever: no need to ask. (An
		// index's digest is not stored, so its images are asked for.)
		if rec, ok := s.byDigest(d.DigestStr(), platform); ok {
			return s.keepRecord(ref, rec)
		}
	}
	if o.Policy == PullNever || o.Policy == PullMissing && r.kind == kindRegistry {
		if rec, ok := s.stored(ref, platform); ok {
			return s.keepRecord(ref, rec)
		}
	}
	if o.Policy == PullNever {
		return nil, fmt.Errorf("image %s: not in the store for %s, and the pull policy is never: pull it first, or let the policy pull missing images: %w: %w",
			ref, platform, ErrNotStored, ErrNotFound)
	}

	tmp, err := s.mkTemp()
	if err != nil {
		return nil, err
	}
	defer s.root.RemoveAll(tmp)

	f, err := s.find(ctx, r, want, o, tmp)
	if err != nil {
		return nil, err
	}
	// This manifest may be stored already, by this or another reference.
	if rec, ok := s.byDigest(f.digest.String(), platform); ok {
		return s.keepRecord(ref, rec)
	}

	cf, err := verifyConfig(ref, f)
	if err != nil {
		return nil, err
	}
	if have := configPlatform(cf); !platformMatches(want, have) {
		return nil, &platformError{ref: ref, want: platform, have: []string{have.String()}}
	}
	layers, err := layerSources(ref, f, cf)
	if err != nil {
		return nil, err
	}
	var declared int64
	for _, l := range layers {
		if l.size > 0 && !s.exists(s.layerRel(l.diffID.String())) {
			declared += l.size
		}
	}
	if declared > o.MaxBytes {
		return nil, fmt.Errorf("image %s: its layers are %d bytes compressed, more than MaxBytes (%d): %w", ref, declared, o.MaxBytes, ErrTooLarge)
	}

	// Layers are unpacked into tmp and moved into place only when all are,
	// so that a pull that fails leaves nothing of its image.
	budget := budget{fetched: o.MaxBytes, unpacked: o.MaxUnpackedBytes}
	var size int64
	diffIDs := make([]string, len(layers))
	var staged []string
	sizes := map[string]int64{} // an image may repeat a layer
	for i, l := range layers {
		diffIDs[i] = l.diffID.String()
		n, ok := sizes[diffIDs[i]]
		if !ok {
			var done bool
			n, done, err = s.unpackLayer(ctx, ref, i, len(layers), l, &budget, o.Progress, tmp)
			if err != nil {
				return nil, err
			}
			sizes[diffIDs[i]] = n
			if done {
				staged = append(staged, diffIDs[i])
			}
		}
		size += n
	}
	for _, d := range staged {
		if err := s.root.Rename(tmp+"/"+hexOf(d), s.layerRel(d)); err != nil && !s.exists(s.layerRel(d)+"/"+layerMeta) {
			// Unless another pull stored the same layer first.
			return nil, fmt.Errorf("image %s: storing layer %s: %w", ref, d, err)
		}
	}
	chain := chainID(diffIDs)
	if err := s.buildRoot(chain, diffIDs, tmp); err != nil {
		return nil, fmt.Errorf("image %s: %w", ref, err)
	}
	c := cf.Config
	rec := record{
		Ref: ref, Digest: f.digest.String(), Platform: platform,
		ChainID: chain, DiffIDs: diffIDs,
		Env: c.Env, WorkingDir: c.WorkingDir, User: c.User,
		Entrypoint: c.Entrypoint, Cmd: c.Cmd, Size: size,
	}
	if err := s.writeRecord(rec); err != nil {
		return nil, err
	}
	img := s.image(rec)
	img.Layers = s.overlayLayers(diffIDs)
	return &img, nil
}

// byDigest finds the record of a stored manifest for platform whose root is
// in place.
func (s *Store) byDigest(digest, platform string) (record, bool) {
	recs, err := s.records()
	if err != nil {
		return record{}, false
	}
	for _, r := range recs {
		if r.Digest == digest && r.Platform == platform && s.exists(s.rootRel(r.ChainID)) {
			return r, true
		}
	}
	return record{}, false
}

// stored finds the record of ref pulled for platform whose root is in
// place.
func (s *Store) stored(ref, platform string) (record, bool) {
	r, err := s.readRecord(recordKey(ref, platform))
	if err != nil || r.Ref != ref || r.Platform != platform || !s.exists(s.rootRel(r.ChainID)) {
		return record{}, false
	}
	return r, true
}

// keepRecord stores rec, a stored image, as pulled by ref too.
func (s *Store) keepRecord(ref string, rec record) (*Image, error) {
	if rec.Ref != ref {
		rec.Ref = ref
		if err := s.writeRecord(rec); err != nil {
			return nil, err
		}
	}
	img := s.image(rec)
	img.Layers = s.overlayLayers(rec.DiffIDs)
	return &img, nil
}

// layerSource is one layer to read.
type layerSource struct {
	diffID v1.Hash
	// digest is what the stream open returns must hash to, and size its
	// length; zero and -1 when the source gives none (a docker archive,
	// whose layers are checked by diffID alone).
	digest v1.Hash
	size   int64
	open   func() (io.ReadCloser, error)
}

func layerSources(ref string, f found, cf *v1.ConfigFile) ([]layerSource, error) {
	diffIDs := cf.RootFS.DiffIDs
	if f.docker {
		out := make([]layerSource, len(diffIDs))
		for i, d := range diffIDs {
			out[i] = layerSource{diffID: d, size: -1, open: func() (io.ReadCloser, error) {
				l, err := f.img.LayerByDiffID(d)
				if err != nil {
					return nil, err
				}
				return l.Uncompressed()
			}}
		}
		return out, nil
	}
	m, err := f.img.Manifest()
	if err != nil {
		return nil, fmt.Errorf("image %s: manifest: %w: %w", ref, ErrBadImage, err)
	}
	if len(m.Layers) != len(diffIDs) {
		return nil, fmt.Errorf("image %s: the manifest has %d layers, the config %d: %w", ref, len(m.Layers), len(diffIDs), ErrBadImage)
	}
	out := make([]layerSource, len(diffIDs))
	for i, desc := range m.Layers {
		out[i] = layerSource{diffID: diffIDs[i], digest: desc.Digest, size: desc.Size, open: func() (io.ReadCloser, error) {
			l, err := f.img.LayerByDigest(desc.Digest)
			if err != nil {
				return nil, err
			}
			rc, err := l.Compressed()
			if err != nil || !f.remote {
				return rc, err
			}
			return remoteStream{rc}, nil
		}}
	}
	return out, nil
}

// budget is what a pull may still read.
type budget struct{ fetched, unpacked int64 }

// layerMetadata is stored next to an unpacked layer.
type layerMetadata struct {
	Size int64     `json:"size"` // of the uncompressed tar
	Form layerForm `json:"form,omitempty"`
}

// unpackLayer unpacks layer i of n into work/<diffID hex> unless the store
// has it, and returns its unpacked size and whether it did. The compressed
// stream is checked against its digest and the uncompressed one against
// its diff ID as they are read; the caller moves the layer into place only
// if both match, so the store never holds a layer that is not the one
// named.
func (s *Store) unpackLayer(ctx context.Context, ref string, i, n int, l layerSource, b *budget, progress func(Progress), work string) (int64, bool, error) {
	if meta, err := s.root.ReadFile(s.layerRel(l.diffID.String()) + "/" + layerMeta); err == nil {
		var m layerMetadata
		if json.Unmarshal(meta, &m) == nil {
			return m.Size, false, nil
		}
	}
	name := l.digest.String()
	if l.digest == (v1.Hash{}) {
		name = l.diffID.String()
	}
	fail := func(err error) (int64, bool, error) {
		return 0, false, fmt.Errorf("image %s: layer %d of %d (%s): %w", ref, i+1, n, name, err)
	}
	if l.diffID.Algorithm != "sha256" {
		return fail(fmt.Errorf("diff ID %q: %w", l.diffID, ErrBadImage))
	}

	tmp := work + "/" + l.diffID.Hex
	if err := s.root.Mkdir(tmp, 0o700); err != nil {
		return fail(err)
	}
	// Searchable by all, as roots/ is: an overlay of the layer is
	// mounted by the sandbox's user.
	if err := s.root.Chmod(tmp, 0o711); err != nil {
		return fail(err)
	}
	if err := s.root.Mkdir(tmp+"/"+layerFS, 0o755); err != nil {
		return fail(err)
	}
	dst, err := s.root.OpenRoot(tmp + "/" + layerFS)
	if err != nil {
		return fail(err)
	}
	defer dst.Close()
	form := formFor(dst)

	rc, err := l.open()
	if err != nil {
		return fail(remoteError(ctx, ref, err))
	}
	defer rc.Close()
	fetched := &counter{r: rc, limit: b.fetched, what: "compressed layers", ctx: ctx}
	if l.digest != (v1.Hash{}) {
		fetched.h = newSHA256()
	}
	if progress != nil {
		progress(Progress{Layer: name, Index: i, Count: n, Done: 0, Total: l.size})
		fetched.progress = func(done int64) {
			progress(Progress{Layer: name, Index: i, Count: n, Done: done, Total: l.size})
		}
	}
	dr, closeDR, err := decompress(fetched)
	if err != nil {
		return fail(readError(ctx, err))
	}
	defer closeDR()
	unpacked := &counter{r: dr, limit: b.unpacked, what: "unpacked layers", ctx: ctx, h: newSHA256()}
	if err := unpackTar(ctx, tar.NewReader(unpacked), dst, form); err != nil {
		return fail(readError(ctx, err))
	}
	// What follows the tar's end still counts towards both digests.
	if _, err := io.Copy(io.Discard, unpacked); err != nil {
		return fail(readError(ctx, err))
	}
	if _, err := io.Copy(io.Discard, fetched); err != nil {
		return fail(readError(ctx, err))
	}
	if fetched.h != nil {
		if got := "sha256:" + hex.EncodeToString(fetched.h.Sum(nil)); got != l.digest.String() {
			return fail(fmt.Errorf("%w: digest is %s", ErrBadImage, got))
		}
		if l.size >= 0 && fetched.n != l.size {
			return fail(fmt.Errorf("%w: %d bytes, the manifest says %d", ErrBadImage, fetched.n, l.size))
		}
	}
	if got := "sha256:" + hex.EncodeToString(unpacked.h.Sum(nil)); got != l.diffID.String() {
		return fail(fmt.Errorf("%w: unpacked, its digest is %s, the config says %s", ErrBadImage, got, l.diffID))
	}
	b.fetched -= fetched.n
	b.unpacked -= unpacked.n

	meta, _ := json.Marshal(layerMetadata{Size: unpacked.n, Form: form})
	if err := s.root.WriteFile(tmp+"/"+layerMeta, meta, recordMode); err != nil {
		return fail(err)
	}
	s.unpacked.Add(1)
	return unpacked.n, true, nil
}

// chainID is the OCI chain ID of a stack of layers: it names the stack, as
// a diff ID names one layer.
func chainID(diffIDs []string) string {
	if len(diffIDs) == 0 {
		return "sha256:" + hex.EncodeToString(newSHA256().Sum(nil))
	}
	c := diffIDs[0]
	for _, d := range diffIDs[1:] {
		h := newSHA256()
		h.Write([]byte(c + " " + d))
		c = "sha256:" + hex.EncodeToString(h.Sum(nil))
	}
	return c
}

// randomSuffix names a temporary file.
func randomSuffix() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
)

// Store is a directory on the host holding pulled images: their unpacked
// layers and one read-only root per stack of layers. It is safe for
// concurrent use by goroutines and by processes sharing the directory.
type Store struct {
	dir  string
	root *os.Root // dir, through which every path inside is reached

	// unpacked counts layers unpacked by this Store, for tests.
	unpacked atomic.Int64
}

// The store's layout, relative to its directory.
const (
	lockName   = "lock"
	tmpDir     = "tmp"    // work in progress, renamed into place when done
	layersDir  = "layers" // layers/<diffID hex>/{fs/,meta.json}
	rootsDir   = "roots"  // roots/<chainID hex>/: an image's filesystem
	imagesDir  = "images" // images/<key>.json: one record per reference and platform
	layerFS    = "fs"
	layerMeta  = "meta.json"
	recordMode = 0o600
)

// DefaultDir is the store's directory when the caller names none:
// $XDG_CACHE_HOME/fumehood-sandbox/images when XDG_CACHE_HOME is set, else
// /var/cache/fumehood-sandbox/images for root and
// ~/.cache/fumehood-sandbox/images for anyone else.
func DefaultDir() (string, error) {
	if x := os.Getenv("XDG_CACHE_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "fumehood-sandbox", "images"), nil
	}
	if os.Geteuid() == 0 {
		return "/var/cache/fumehood-sandbox/images", nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("image store: no default directory: %w", err)
	}
	return filepath.Join(home, ".cache", "fumehood-sandbox", "images"), nil
}

// Open opens the store in dir, creating it and its missing parents if
// needed, and removes what an interrupted pull left in it when no other
// user of the store is active. Close releases it.
//
// The store's directory, and every parent Open creates, is searchable but
// not listable by others (mode 0711): a sandbox whose host user is not
// the caller (root's sandboxes run as nobody) opens its image's root by
// its path, and must be able to pass through each directory above it.
// Parents that exist already are left as they are, since they are not
// the store's (a user's ~/.cache, often 0700): one that keeps the
// sandbox's user out is reported by the sandbox when it runs the image.
func Open(dir string) (*Store, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("image store %s: %w", dir, err)
	}
	if err := mkdirSearchable(dir); err != nil {
		return nil, fmt.Errorf("image store %s: %w", dir, err)
	}
	// Searchable, not listable: a sandbox whose user is not the store's
	// owner opens its root by name.
	if err := chmodSearchable(dir); err != nil {
		return nil, fmt.Errorf("image store %s: %w", dir, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("image store %s: %w", dir, err)
	}
	s := &Store{dir: dir, root: root}
	for _, d := range []string{tmpDir, layersDir, rootsDir, imagesDir} {
		if err := root.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			root.Close()
			return nil, fmt.Errorf("image store %s: %w", dir, err)
		}
	}
	if err := root.Chmod(rootsDir, 0o711); err != nil {
		root.Close()
		return nil, fmt.Errorf("image store %s: %w", dir, err)
	}
	// Layers too: an overlay of an image's layers is mounted by the
	// sandbox's user, who reaches each by name.
	if err := root.Chmod(layersDir, 0o711); err != nil {
		root.Close()
		return nil, fmt.Errorf("image store %s: %w", dir, err)
	}
	// Temporary directories are made only under the shared lock: holding
	// it exclusively means none is in use.
	lk, err := s.tryLockStore(true)
	if err != nil {
		root.Close()
		return nil, err
	}
	if lk != nil {
		err = s.removeTemps()
		lk.Close()
		if err != nil {
			root.Close()
			return nil, err
		}
	}
	return s, nil
}

// lockStore takes the store's lock: shared by pulls and Use, exclusive for
// Prune and the cleanup in Open. Closing the file releases it. Each holder
// opens the file anew, because an flock belongs to an open file and two
// goroutines sharing one would release each other's.
func (s *Store) lockStore(ctx context.Context, exclusive bool) (*os.File, error) {
	f, err := s.root.OpenFile(lockName, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("image store %s: %w", s.dir, err)
	}
	if err := lockFile(ctx, f, exclusive); err != nil {
		f.Close()
		return nil, fmt.Errorf("image store %s: waiting for its lock: %w", s.dir, err)
	}
	return f, nil
}

// Close releases the store's files. Images in use stay usable until their
// Lease is closed.
func (s *Store) Close() error {
	return s.root.Close()
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// removeTemps removes every temporary directory; the caller holds the
// store's lock exclusively.
func (s *Store) removeTemps() error {
	ents, err := fs.ReadDir(s.root.FS(), tmpDir)
	if err != nil {
		return fmt.Errorf("image store %s: %w", s.dir, err)
	}
	for _, e := range ents {
		if err := s.root.RemoveAll(tmpDir + "/" + e.Name()); err != nil {
			return fmt.Errorf("image store %s: removing a leftover: %w", s.dir, err)
		}
	}
	return nil
}

// tryLockStore is lockStore without waiting: a nil file means another
// holder has the lock.
func (s *Store) tryLockStore(exclusive bool) (*os.File, error) {
	f, err := s.root.OpenFile(lockName, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("image store %s: %w", s.dir, err)
	}
	ok, err := tryLockFile(f, exclusive)
	if err != nil || !ok {
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("image store %s: %w", s.dir, err)
		}
		return nil, nil
	}
	return f, nil
}

// mkTemp makes a new temporary directory and returns its path relative to
// the store. The caller holds the store's lock, shared or exclusive.
func (s *Store) mkTemp() (string, error) {
	d, err := os.MkdirTemp(filepath.Join(s.dir, tmpDir), "work-")
	if err != nil {
		return "", fmt.Errorf("image store %s: %w", s.dir, err)
	}
	return tmpDir + "/" + filepath.Base(d), nil
}

// record is what the store keeps of a pulled image, in images/.
type record struct {
	Ref        string   `json:"ref"`
	Digest     string   `json:"digest"`
	Platform   string   `json:"platform"`
	ChainID    string   `json:"chain_id"`
	DiffIDs    []string `json:"diff_ids"`
	Env        []string `json:"env,omitempty"`
	WorkingDir string   `json:"working_dir,omitempty"`
	User       string   `json:"user,omitempty"`
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
	Size       int64    `json:"size"`
}

// recordKey names the record of ref pulled for platform.
func recordKey(ref, platform string) string {
	h := sha256.Sum256([]byte(ref + "\x00" + platform))
	return hex.EncodeToString(h[:]) + ".json"
}

// hexOf is the hex part of a "sha256:..." digest.
func hexOf(digest string) string {
	_, h, _ := strings.Cut(digest, ":")
	return h
}

func (s *Store) rootRel(chainID string) string { return rootsDir + "/" + hexOf(chainID) }

func (s *Store) layerRel(diffID string) string { return layersDir + "/" + hexOf(diffID) }

// image is the Image a record describes.
func (s *Store) image(r record) Image {
	return Image{
		Ref: r.Ref, Digest: r.Digest, Platform: r.Platform,
		Root: filepath.Join(s.dir, rootsDir, hexOf(r.ChainID)),
		Env:  r.Env, WorkingDir: r.WorkingDir, User: r.User,
		Entrypoint: r.Entrypoint, Cmd: r.Cmd, Size: r.Size,
		chainID: r.ChainID, diffIDs: r.DiffIDs,
	}
}

// writeRecord stores r atomically: a reader sees the old record or the new.
func (s *Store) writeRecord(r record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	key := recordKey(r.Ref, r.Platform)
	tmp := tmpDir + "/" + key + "." + randomSuffix()
	if err := s.root.WriteFile(tmp, b, recordMode); err != nil {
		return fmt.Errorf("image store %s: %w", s.dir, err)
	}
	if err := s.root.Rename(tmp, imagesDir+"/"+key); err != nil {
		s.root.Remove(tmp)
		return fmt.Errorf("image store %s: %w", s.dir, err)
	}
	return nil
}

// readRecord reads the record named key; a missing one is fs.ErrNotExist.
func (s *Store) readRecord(key string) (record, error) {
	var r record
	b, err := s.root.ReadFile(imagesDir + "/" + key)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("image store %s: record %s: %w", s.dir, key, err)
	}
	return r, nil
}

// records reads every record, keyed by file name.
func (s *Store) records() (map[string]record, error) {
	ents, err := fs.ReadDir(s.root.FS(), imagesDir)
	if err != nil {
		return nil, fmt.Errorf("image store %s: %w", s.dir, err)
	}
	m := make(map[string]record, len(ents))
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		r, err := s.readRecord(e.Name())
		if errors.Is(err, fs.ErrNotExist) {
			continue // replaced or pruned meanwhile
		}
		if err != nil {
			return nil, err
		}
		m[e.Name()] = r
	}
	return m, nil
}

// List returns the stored images, sorted by reference then platform.
func (s *Store) List() ([]Image, error) {
	recs, err := s.records()
	if err != nil {
		return nil, err
	}
	out := make([]Image, 0, len(recs))
	for _, r := range recs {
		out = append(out, s.image(r))
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Ref != out[j].Ref {
			return out[i].Ref < out[j].Ref
		}
		return out[i].Platform < out[j].Platform
	})
	return out, nil
}

// exists says whether rel exists in the store.
func (s *Store) exists(rel string) bool {
	_, err := s.root.Lstat(rel)
	return err == nil
}

// Lease keeps an image's root from being pruned while it is in use.
type Lease struct {
	f *os.File
}

// Close ends the lease. It may be called more than once.
func (l *Lease) Close() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// Use marks img's root as in use until the Lease is closed: Prune leaves it
// alone, whatever keep says. The mark is a shared flock on the root's
// directory, so it ends with the process that holds it even if the process
// dies without closing it. Use fails with ErrNotFound if the root was
// pruned since img was returned.
func (s *Store) Use(ctx context.Context, img *Image) (*Lease, error) {
	lk, err := s.lockStore(ctx, false)
	if err != nil {
		return nil, err
	}
	defer lk.Close()
	f, err := s.root.Open(s.rootRel(img.chainID))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("image %s: root %s was pruned: %w", img.Ref, img.Root, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", img.Ref, err)
	}
	if err := lockFile(ctx, f, false); err != nil {
		f.Close()
		return nil, fmt.Errorf("image %s: %w", img.Ref, err)
	}
	return &Lease{f: f}, nil
}

// mkdirSearchable makes dir and each of its missing parents with mode
// 0711, whatever the umask; directories that exist are left alone.
func mkdirSearchable(dir string) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := mkdirSearchable(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o711); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil // made meanwhile by another Open
		}
		return err
	}
	return os.Chmod(dir, 0o711)
}

// chmodSearchable adds search permission for everyone to dir, whose other
// bits stay as they are; a directory its caller does not own is left
// alone (a shared store made by another user).
func chmodSearchable(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o011 == 0o011 {
		return nil
	}
	if err := os.Chmod(dir, fi.Mode().Perm()|0o011); err != nil && !errors.Is(err, fs.ErrPermission) {
		return err
	}
	return nil
}

package access

import (
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// reloaded is a value read from files, read again when one of them
// changes. A Kubernetes Secret volume renews a file by swapping a
// symlink, so the path is stat'ed through the link, and a change of
// inode counts as much as one of size or time.
type reloaded[T any] struct {
	what  string   // the flag, for the log
	files []string // the files load reads
	load  func() (T, error)
	log   *slog.Logger

	mu   sync.Mutex // one reload at a time
	seen []fileSig
	cur  atomic.Pointer[T]
}

// fileSig is what says that a file changed.
type fileSig struct {
	ino, size int64
	mtime     time.Time
}

func newReloaded[T any](what string, files []string, load func() (T, error), log *slog.Logger) (*reloaded[T], error) {
	r := &reloaded[T]{what: what, files: files, load: load, log: log}
	r.seen = r.sigs()
	v, err := load()
	if err != nil {
		return nil, err
	}
	r.cur.Store(&v)
	return r, nil
}

func (r *reloaded[T]) get() T { return *r.cur.Load() }

func (r *reloaded[T]) sigs() []fileSig {
	s := make([]fileSig, len(r.files))
	for i, f := range r.files {
		if fi, err := os.Stat(f); err == nil {
			s[i] = fileSig{size: fi.Size(), mtime: fi.ModTime()}
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				s[i].ino = int64(st.Ino)
			}
		}
	}
	return s
}

// check reloads when a file changed, or always with force (SIGHUP). A
// load that fails keeps the value there was, and says so in the log.
func (r *reloaded[T]) check(force bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.sigs()
	changed := force
	for i := range now {
		changed = changed || now[i] != r.seen[i]
	}
	if !changed {
		return
	}
	r.seen = now
	v, err := r.load()
	if err != nil {
		r.log.Error("access: reload failed, the previous one stays in force", "flag", r.what, "err", err)
		return
	}
	r.cur.Store(&v)
	r.log.Info("access: reloaded", "flag", r.what)
}

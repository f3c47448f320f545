package service

import "sync"

// tailBuffer keeps the last max bytes written to it, and counts them all:
// a background process's output, bounded however much it writes.
type tailBuffer struct {
	mu    sync.Mutex
	buf   []byte // a ring once full
	start int    // where the oldest byte is, once full
	max   int
	total int64
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total += int64(len(p))
	n := len(p)
	if len(p) > t.max {
		p = p[len(p)-t.max:]
	}
	for len(p) > 0 {
		if len(t.buf) < t.max {
			k := min(len(p), t.max-len(t.buf))
			t.buf = append(t.buf, p[:k]...)
			p = p[k:]
			continue
		}
		k := copy(t.buf[t.start:], p)
		t.start = (t.start + k) % t.max
		p = p[k:]
	}
	return n, nil
}

// bytes returns a copy of what is kept, oldest first.
func (t *tailBuffer) bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]byte, 0, len(t.buf))
	return append(append(out, t.buf[t.start:]...), t.buf[:t.start]...)
}

// truncated reports whether more was written than is kept.
func (t *tailBuffer) truncated() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total > int64(len(t.buf))
}

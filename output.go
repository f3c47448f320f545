package sandbox

import (
	"fmt"
	"io"
)

// cappedBuffer keeps the first and last halves of at most limit bytes of a
// stream and counts the rest, so a flood costs the host bounded memory while
// the pipe is still drained. Like os/exec's prefixSuffixSaver.
type cappedBuffer struct {
	limit  int64
	prefix []byte
	suffix []byte // ring buffer of the last limit/2 bytes once prefix is full
	pos    int    // next write position in suffix once it is full
	total  int64
}

func newCappedBuffer(limit int64) *cappedBuffer { return &cappedBuffer{limit: limit} }

func (b *cappedBuffer) Write(p []byte) (int, error) {
	n := len(p)
	b.total += int64(n)
	half := int(b.limit / 2)
	if room := int(b.limit) - half - len(b.prefix); room > 0 {
		k := min(room, len(p))
		b.prefix = append(b.prefix, p[:k]...)
		p = p[k:]
	}
	if half == 0 || len(p) == 0 {
		return n, nil
	}
	if len(p) >= half {
		b.suffix = append(b.suffix[:0], p[len(p)-half:]...)
		b.pos = 0
		return n, nil
	}
	if len(b.suffix) < half {
		k := min(half-len(b.suffix), len(p))
		b.suffix = append(b.suffix, p[:k]...)
		p = p[k:]
	}
	for len(p) > 0 {
		k := copy(b.suffix[b.pos:], p)
		p = p[k:]
		b.pos = (b.pos + k) % half
	}
	return n, nil
}

// truncated reports whether bytes were dropped.
func (b *cappedBuffer) truncated() bool { return b.total > b.limit }

// bytes returns the kept output; when bytes were dropped, an elision marker
// that says how many stands between prefix and suffix.
func (b *cappedBuffer) bytes() []byte {
	if len(b.suffix) == 0 && !b.truncated() {
		// Everything fit in the first half: the buffer is the output,
		// with no second copy for the Result. Callers take it once,
		// when the stream has ended.
		return b.prefix
	}
	out := append([]byte(nil), b.prefix...)
	if b.truncated() {
		kept := int64(len(b.prefix) + len(b.suffix))
		out = fmt.Appendf(out, "\n... omitting %d bytes ...\n", b.total-kept)
	}
	out = append(out, b.suffix[b.pos:]...)
	return append(out, b.suffix[:b.pos]...)
}

// countingWriter passes writes through to a caller's writer and counts them.
// After the writer fails, it keeps counting and drops the data so the
// program is never blocked on a full pipe.
type countingWriter struct {
	w     io.Writer
	total int64
	err   error
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.total += int64(len(p))
	if c.err == nil {
		_, c.err = c.w.Write(p)
	}
	return len(p), nil
}

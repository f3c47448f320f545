package egress

import (
	"context"
	"sync"
)

// bufSize is the size of every buffer the proxy reads into: a request or
// response header, or one piece of a body or a tunnel's data.
const bufSize = 32 << 10

// bufPool holds buffers no proxy is using; the collector frees what stays
// unused, so a finished run leaves none behind.
var bufPool = sync.Pool{New: func() any { b := make([]byte, bufSize); return &b }}

// bufferBudget bounds the buffers one Proxy holds at once. A connection takes a
// buffer only to read into it, and gives it back as soon as what it read
// was passed on; one that finds none free waits (its peer's writes then
// wait in the kernel's socket buffers), so no traffic makes the proxy hold
// more than maxBuffers of them. A goroutine never waits for a buffer while
// it holds one, so waiting cannot deadlock.
type bufferBudget struct {
	tokens chan struct{}
}

func newBufferBudget(n int) *bufferBudget {
	return &bufferBudget{tokens: make(chan struct{}, n)}
}

// get takes a buffer, waiting until one is free or ctx ends.
func (b *bufferBudget) get(ctx context.Context) (*[]byte, error) {
	select {
	case b.tokens <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return bufPool.Get().(*[]byte), nil
}

// put gives back a buffer from get.
func (b *bufferBudget) put(buf *[]byte) {
	bufPool.Put(buf)
	<-b.tokens
}

// inUse is how many buffers are taken.
func (b *bufferBudget) inUse() int { return len(b.tokens) }

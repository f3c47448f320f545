package forkplan

import (
	"sync"
	"sync/atomic"
)

// A sandbox's plan holds some 130 KiB of steps, which every run would
// otherwise allocate anew and leave to the collector: the spawner's heap,
// and with it the page tables a copying clone duplicates, grows with what
// runs leave behind between collections. A released plan's memory goes to
// the next New.

// buffers is a plan's memory, as the next plan takes it over.
type buffers struct {
	ops   []op
	where []Where
	slots []uintptr
	keep  []any
}

var released = sync.Pool{New: func() any { return new(buffers) }}

// refs counts the holders of a plan: its maker, until Release, and each
// Start in progress.
type refs struct{ n atomic.Int32 }

// take adds a holder.
func (r *refs) take() { r.n.Add(1) }

// Release says the plan's maker is done with it: no step will be added,
// no Start made and no failure parsed. Its memory goes to another plan
// once every Start of it has returned (a Shared child has exec'd or
// exited by then; a copying one has its own copy). A plan that is never
// released is collected as any memory is.
func (p *Plan) Release() {
	if p.refs.n.Add(-1) != 0 {
		return
	}
	b := p.buf
	if b == nil {
		return
	}
	clear(p.ops)
	clear(p.where)
	clear(p.keep)
	b.ops, b.where, b.slots, b.keep = p.ops[:0], p.where[:0], p.slots[:0], p.keep[:0]
	p.ops, p.where, p.slots, p.keep, p.buf = nil, nil, nil, nil, nil
	released.Put(b)
}

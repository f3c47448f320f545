//go:build linux

package recipe

import (
	"strings"
	"unsafe"

	"github.com/fumehood/sandbox/internal/execshim"
	"github.com/fumehood/sandbox/internal/wire"
)

// A prepared init (a pooled sandbox) learns its program from a
// ProgramBlock: once the program is known, the launcher lays it out for
// the child's copy of the block and sends it, as one message of the size
// it takes (SOCK_SEQPACKET keeps it whole), on the sync socket, with the
// program's stdio (and the workspace mount) as SCM_RIGHTS. A copying child receives it into its own copy, at the
// address the launcher planned for; a child that shares the launcher's
// memory receives it into the block itself. Either way the addresses in it
// hold, and the plan loads them from the header: the working directory,
// up to blockCandidates places to try the program, argv and envp.
//
// A program that does not fit (too long, more places on PATH, a NUL in a
// string) runs cold instead.

// BlockBytes is the size of a prepared init's block: a program whose
// directory, places, argv and environment take more runs cold.
const BlockBytes = 64 << 10

const (
	blockCandidates = 8

	// The header's words.
	hdrDir        = 0
	hdrCandidates = 1
	hdrArgv       = hdrCandidates + blockCandidates
	hdrEnv        = hdrArgv + 1
	hdrWords      = hdrEnv + 1
)

// ProgramBlock is the child's block.
type ProgramBlock struct {
	words []uintptr

	// shimStep, when set, is the step the exec shim reports failures
	// as: argv is then the shim's, with the places and the program's argv.
	shimStep int
}

func newProgramBlock() *ProgramBlock {
	return &ProgramBlock{words: make([]uintptr, BlockBytes/unsafe.Sizeof(uintptr(0)))}
}

// bytes is the block as the child's recvmsg fills it.
func (b *ProgramBlock) bytes() []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&b.words[0])), BlockBytes)
}

// header returns the address of header word i, for the plan's loads.
func (b *ProgramBlock) header(i int) *uintptr { return &b.words[i] }

// encode lays p out as the child will find it, in a new message of the
// size it takes; ok is false when p does not fit the block.
func (b *ProgramBlock) Encode(p wire.Program) (msg []byte, ok bool) {
	candidates := shimPlaces(p)
	if len(candidates) > blockCandidates || len(candidates) == 0 && !p.Hold || p.Hold && b.shimStep == 0 {
		return nil, false
	}
	args := p.Args
	if b.shimStep > 0 {
		args = execshim.Args(b.shimStep, candidates, p.Args)
	}
	const word = int(unsafe.Sizeof(uintptr(0)))
	// The size: the header, each string with its NUL, and the two
	// arrays, each aligned and NULL-terminated.
	need := hdrWords*word + len(p.Dir) + 1 + 1 + 2*word + (len(args)+len(p.Env)+2)*word
	for _, ss := range [][]string{candidates, args, p.Env} {
		for _, s := range ss {
			need += len(s) + 1
		}
	}
	if need > BlockBytes {
		return nil, false
	}
	words := make([]uintptr, (need+word-1)/word)
	size := len(words) * word
	out := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), size)
	base := uintptr(unsafe.Pointer(&b.words[0]))
	off := hdrWords * word
	fits := true
	// str copies s with its NUL and returns its address in the child.
	str := func(s string) uintptr {
		if strings.IndexByte(s, 0) >= 0 || off+len(s)+1 > size {
			fits = false
			return 0
		}
		at := base + uintptr(off)
		off += copy(out[off:], s)
		out[off] = 0
		off++
		return at
	}
	// array writes the NULL-terminated array of ss and returns its address.
	array := func(ss []string) uintptr {
		ptrs := make([]uintptr, len(ss)+1)
		for i, s := range ss {
			ptrs[i] = str(s)
		}
		off = (off + word - 1) &^ (word - 1)
		if !fits || off+len(ptrs)*word > size {
			fits = false
			return 0
		}
		at := off / word
		copy(words[at:], ptrs)
		off += len(ptrs) * word
		return base + uintptr(at*word)
	}
	words[hdrDir] = str(p.Dir)
	empty := str("") // an unused place: execve("") fails with ENOENT
	for i := range blockCandidates {
		words[hdrCandidates+i] = empty
		if i < len(candidates) {
			words[hdrCandidates+i] = str(candidates[i])
		}
	}
	words[hdrArgv] = array(args)
	words[hdrEnv] = array(p.Env)
	if !fits {
		return nil, false
	}
	return out[:off], true
}

// NameProgram fills in what a prepared plan could not name when it was
// made: the program and its working directory, in a failure of the steps
// that use them.
func NameProgram(se *wire.SetupError, p *wire.Program) {
	if se == nil || p == nil || se.Path != "" {
		return
	}
	switch se.Stage {
	case "exec":
		se.Path = p.Path
	case "chdir":
		se.Path = p.Dir
	}
}

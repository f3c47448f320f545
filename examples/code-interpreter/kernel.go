package main

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"syscall"

	"github.com/fumehood/sandbox"
)

// kernelSource is the Python program the sandbox runs as the kernel.
//
//go:embed kernel.py
var kernelSource string

// maxReply bounds one cell's reply line as the host holds it: a cell that
// prints more is reported as a failed cell, and the host's memory stays
// bounded whatever the untrusted code prints.
const maxReply = 1 << 20

// kernel is the host's handle on a Python kernel running in a live
// sandbox: it writes cells to the kernel's stdin and reads one reply line
// per cell from its stdout, in order.
type kernel struct {
	proc    *sandbox.Process
	cells   io.WriteCloser // the kernel's stdin
	replies chan []byte    // its reply lines; closed when its stdout ends
	readErr error          // why the replies ended early, set before they close
	done    chan struct{}  // closed by release: the host reads no more replies
}

// reply is a kernel's answer to one cell: what the cell printed, and the
// traceback of what it raised, if it raised.
type reply struct {
	Output string `json:"output"`
	Error  string `json:"error"`
}

// startKernel starts the kernel in sb, a live Sandbox. ctx bounds the
// kernel's whole life, not only its start: its end kills the kernel.
func startKernel(ctx context.Context, sb *sandbox.Sandbox) (*kernel, error) {
	cmd := sandbox.Command("python3", "-c", kernelSource)
	cells, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// The sandbox writes the kernel's stdout into the pipe as it comes,
	// uncapped; the reader below bounds what the host holds of it.
	out, stdout := io.Pipe()
	cmd.Stdout = stdout
	proc, err := sb.Start(ctx, cmd)
	if err != nil {
		return nil, err
	}
	k := &kernel{proc: proc, cells: cells, replies: make(chan []byte), done: make(chan struct{})}
	go k.read(out)
	go func() {
		// Wait returns once the kernel's output is all written: its
		// stdout ends there.
		proc.Wait()
		stdout.Close()
	}()
	return k, nil
}

// read passes the kernel's reply lines on until its stdout ends, or a line
// is longer than maxReply. Once the host reads no more (release), it
// drops them: the sandbox's copy of the kernel's output, which Wait and
// Close wait for, must never wait on the host.
func (k *kernel) read(out *io.PipeReader) {
	defer close(k.replies)
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 0, 64<<10), maxReply)
	for sc.Scan() {
		select {
		case k.replies <- append([]byte(nil), sc.Bytes()...):
		case <-k.done:
		}
	}
	if err := sc.Err(); err != nil {
		k.readErr = fmt.Errorf("the kernel's reply: %w", err)
		// The kernel's further output then has nowhere to go.
		out.CloseWithError(err)
	}
}

// send gives the kernel a cell to run; wait reads its reply.
func (k *kernel) send(code string) error {
	line, err := json.Marshal(map[string]string{"code": code})
	if err != nil {
		return err
	}
	if _, err := k.cells.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("send a cell to the kernel: %w", err)
	}
	return nil
}

// wait returns the reply to the cell sent last, once the kernel has run it.
// A kernel that ended, or sent something else than a reply, is an error.
func (k *kernel) wait(ctx context.Context) (reply, error) {
	select {
	case line, ok := <-k.replies:
		if !ok {
			if k.readErr != nil {
				return reply{}, k.readErr
			}
			return reply{}, k.ended()
		}
		var r reply
		if err := json.Unmarshal(line, &r); err != nil {
			return reply{}, fmt.Errorf("the kernel sent %.80q, not a reply: %w", line, err)
		}
		return r, nil
	case <-ctx.Done():
		return reply{}, fmt.Errorf("waiting for the kernel: %w", ctx.Err())
	}
}

// run runs one cell: send, then wait.
func (k *kernel) run(ctx context.Context, code string) (reply, error) {
	if err := k.send(code); err != nil {
		return reply{}, err
	}
	return k.wait(ctx)
}

// interrupt sends the kernel SIGINT, as Ctrl-C in a notebook does: the
// cell it runs raises KeyboardInterrupt, and the kernel goes on.
func (k *kernel) interrupt() error { return k.proc.Signal(syscall.SIGINT) }

// release says the host reads no more replies. It leaves the kernel
// running: closing the Sandbox ends it.
func (k *kernel) release() { close(k.done) }

// ended says how the kernel ended, for a cell that got no reply.
func (k *kernel) ended() error {
	res, err := k.proc.Wait()
	if err != nil {
		return fmt.Errorf("the kernel ended: %w", err)
	}
	return fmt.Errorf("the kernel ended (%s, exit code %d): %s", res.Outcome, res.ExitCode, res.Stderr)
}

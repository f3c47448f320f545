// The workspace keeper process runs this file: its request loop, which
// serves the caller one request at a time until the caller's end closes.

package keeper

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/fumehood/sandbox/internal/sysutil"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// connFd is the keeper's end of its socket with the caller: the first of
// the files the caller's exec.Cmd hands on (ExtraFiles[0]).
const connFd = 3

// Main is the keeper process: it reads its wire.KeeperConfig, makes the
// workspace, and serves wire.KeeperRequests until the caller's end of the
// socket closes. It never returns.
func Main() {
	buf := make([]byte, 64<<10)
	var cfg wire.KeeperConfig
	n, err := readMsg(connFd, buf)
	if err == nil {
		err = json.Unmarshal(buf[:n], &cfg)
	}
	if err != nil {
		os.Exit(2)
	}
	k, err := start(cfg)
	if err != nil {
		send(errorReply(err), -1)
		os.Exit(1)
	}
	send(wire.KeeperReply{}, -1)
	for {
		n, err := readMsg(connFd, buf)
		if err != nil || n == 0 {
			os.Exit(0) // the caller is gone; the namespace and its mounts go with us
		}
		var req wire.KeeperRequest
		if err := json.Unmarshal(buf[:n], &req); err != nil {
			send(wire.KeeperReply{Err: "malformed request"}, -1)
			continue
		}
		rep, fd, err := k.handle(req)
		if err != nil {
			rep = errorReply(err)
		}
		send(rep, fd)
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// handle serves req, and returns the fd its reply carries, or -1.
func (k *keeper) handle(req wire.KeeperRequest) (wire.KeeperReply, int, error) {
	switch req.Op {
	case wire.KeeperMount:
		// A detached copy of the workspace mount, for one run's init.
		fd, err := unix.OpenTree(unix.AT_FDCWD, "ws", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		return wire.KeeperReply{}, fd, err
	case wire.KeeperRoot:
		fd, err := unix.Open("ws", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return wire.KeeperReply{}, fd, err
	case wire.KeeperSnapshot:
		id, err := k.snapshot()
		return wire.KeeperReply{ID: id}, -1, err
	case wire.KeeperRestore:
		return wire.KeeperReply{}, -1, k.restore(req.ID)
	case wire.KeeperDrop:
		if req.ID != 0 {
			delete(k.snaps, req.ID)
			k.collect()
		}
		return wire.KeeperReply{}, -1, nil
	case wire.KeeperMark:
		id, err := k.mark()
		return wire.KeeperReply{ID: id}, -1, err
	case wire.KeeperRunChanges:
		fd, err := k.runChanges(req.ID, req.Limit)
		return wire.KeeperReply{}, fd, err
	case wire.KeeperChangesSince:
		fd, err := k.changesSince(req.ID, req.Limit)
		return wire.KeeperReply{}, fd, err
	}
	return wire.KeeperReply{}, -1, fmt.Errorf("unknown request %q", req.Op)
}

// errorReply is the reply that carries err to the caller: its text, its
// errno and whether it is a refusal (unsupportedError).
func errorReply(err error) wire.KeeperReply {
	var ue unsupportedError
	return wire.KeeperReply{Err: err.Error(), Errno: sysutil.ErrnoOf(err), Unsupported: errors.As(err, &ue)}
}

// unsupportedError is a request the workspace cannot serve however often
// it is asked, which the caller reports as ErrNotSupported.
type unsupportedError struct{ error }

func (e unsupportedError) Unwrap() error { return e.error }

// unsupported makes an unsupportedError, formatted as fmt.Errorf does.
func unsupported(format string, a ...any) error {
	return unsupportedError{fmt.Errorf(format, a...)}
}

func readMsg(fd int, buf []byte) (int, error) {
	for {
		n, err := unix.Read(fd, buf)
		if err != unix.EINTR {
			return n, err
		}
	}
}

// send sends rep, with fd if it is not -1. A reply the socket refuses is
// lost: the caller is gone, and the next read ends the keeper.
func send(rep wire.KeeperReply, fd int) {
	msg, _ := json.Marshal(rep)
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	for unix.Sendmsg(connFd, msg, oob, nil, 0) == unix.EINTR {
	}
}

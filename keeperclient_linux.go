//go:build linux

package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/fumehood/sandbox/internal/sysutil"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// keeperClient is the caller's end of a session's workspace keeper
// process; internal/wire's KeeperConfig says what they exchange.
type keeperClient struct {
	mu     sync.Mutex // one request at a time
	conn   *os.File
	proc   *os.Process
	reaped chan struct{}
}

// startKeeperProcess starts a keeper for a workspace of size bytes owned by
// the host ids uid/gid, holding from's content ("" for none) to begin with;
// flat asks for one tmpfs and copies even where overlays work.
func startKeeperProcess(size int64, uid, gid int, from string, flat bool) (*keeperClient, error) {
	exe, err := selfExe()
	if err != nil {
		return nil, err
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox: workspace keeper: socketpair: %w", err)
	}
	conn, child := os.NewFile(uintptr(fds[0]), "keeper"), os.NewFile(uintptr(fds[1]), "keeper-child")
	defer child.Close()
	cfg := wire.KeeperConfig{Size: size, UID: uid, GID: gid, From: from, Flat: flat}
	attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS, Setsid: true}
	switch {
	case os.Geteuid() != 0:
		// Only in a user namespace of its own can it mount; it maps
		// just the caller's ids, which are also the runs' (validate
		// allows no other), as its root.
		cfg.UserNS, cfg.UID, cfg.GID = true, 0, 0
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
		attr.Credential = &syscall.Credential{NoSetGroups: true}
	case !hasCaps(unix.CAP_SYS_ADMIN):
		// Root without CAP_SYS_ADMIN (a container's root, with the
		// runtime's default capabilities) mounts only in a user
		// namespace of its own too. There it maps root and the runs'
		// ids each to itself, so that the caller (writing files in as
		// root) and the runs (as their ids) can both own files in it.
		// That takes CAP_SETUID, CAP_SETGID and, for root,
		// CAP_SETFCAP, which runtimes grant by default.
		cfg.UserNS = true
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings, attr.GidMappings = identityMaps(uid), identityMaps(gid)
	}
	msg, err := json.Marshal(cfg)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if _, err := conn.Write(msg); err != nil {
		conn.Close()
		return nil, fmt.Errorf("sandbox: workspace keeper: %w", err)
	}
	cmd := &exec.Cmd{
		Path:        exe,
		Args:        []string{"sandbox-workspace"},
		Env:         roleEnviron(roleKeeper, "GOMAXPROCS=1"),
		ExtraFiles:  []*os.File{child},
		SysProcAttr: attr,
	}
	if err := startChild(cmd); err != nil {
		conn.Close()
		if me := idMapUnsupported(err); me != nil {
			return nil, me
		}
		return nil, fmt.Errorf("sandbox: start workspace keeper: %w", err)
	}
	c := &keeperClient{conn: conn, proc: cmd.Process, reaped: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(c.reaped)
	}()
	rep, f, err := c.receive()
	if err == nil && rep.Err != "" {
		err = keeperError(rep)
	}
	if f != nil {
		f.Close()
	}
	if err != nil {
		c.close()
		return nil, fmt.Errorf("sandbox: start workspace: %w", err)
	}
	return c, nil
}

// call sends req and returns the reply and the fd it carried, if any.
func (c *keeperClient) call(req wire.KeeperRequest) (wire.KeeperReply, *os.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	msg, _ := json.Marshal(req)
	if _, err := c.conn.Write(msg); err != nil {
		return wire.KeeperReply{}, nil, fmt.Errorf("workspace keeper: %w: %w", ErrSpawner, err)
	}
	rep, f, err := c.receive()
	if err == nil && rep.Err != "" {
		err = keeperError(rep)
	}
	if err != nil && f != nil {
		f.Close()
		f = nil
	}
	return rep, f, err
}

// keeperError is the error a failed request's reply carries, with the
// identity the keeper gave it.
func keeperError(rep wire.KeeperReply) error {
	switch {
	case rep.Unsupported:
		return fmt.Errorf("%s: %w", rep.Err, ErrNotSupported)
	case rep.Errno != 0:
		return fmt.Errorf("%s: %w", rep.Err, syscall.Errno(rep.Errno))
	}
	return errors.New(rep.Err)
}

func (c *keeperClient) receive() (wire.KeeperReply, *os.File, error) {
	buf, oob := make([]byte, 4096), make([]byte, unix.CmsgSpace(4))
	var n, oobn int
	err := rawRead(c.conn, func(fd int) (err error) {
		n, oobn, _, _, err = unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
		return err
	})
	var rep wire.KeeperReply
	if err == nil && n == 0 {
		err = errors.New("the session's workspace keeper exited, and the workspace with it; Close this Sandbox and start another")
	}
	if err != nil {
		return rep, nil, fmt.Errorf("workspace keeper: %w: %w", ErrSpawner, err)
	}
	var f *os.File
	if files := sysutil.ReceivedFiles(oob[:oobn]); len(files) > 0 {
		f = files[0]
		sysutil.CloseFiles(files[1:])
	}
	if err := json.Unmarshal(buf[:n], &rep); err != nil {
		if f != nil {
			f.Close()
		}
		return rep, nil, fmt.Errorf("workspace keeper: %w: %w", ErrSpawner, err)
	}
	return rep, f, nil
}

// rawRead runs read on the conn's fd until it is not EAGAIN or EINTR.
func rawRead(conn *os.File, read func(fd int) error) error {
	rc, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		rerr = read(int(fd))
		return rerr != unix.EAGAIN && rerr != unix.EINTR
	})
	if err != nil {
		return err
	}
	return rerr
}

// close ends the keeper, and with it the workspace and its snapshots.
func (c *keeperClient) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.conn.Close()
	select {
	case <-c.reaped:
	case <-time.After(5 * time.Second):
		c.proc.Kill()
		<-c.reaped
	}
}

// identityMaps maps root and id (if it is not root) each to itself.
func identityMaps(id int) []syscall.SysProcIDMap {
	m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}}
	if id != 0 {
		m = append(m, syscall.SysProcIDMap{ContainerID: id, HostID: id, Size: 1})
	}
	return m
}

package keeper

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// keeperEnv makes this test binary, re-executed, the keeper process.
const keeperEnv = "_KEEPER_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(keeperEnv) != "" {
		Main()
	}
	os.Exit(m.Run())
}

// testKeeper is a keeper process this test started, and its socket.
type testKeeper struct {
	t    *testing.T
	conn int
	cmd  *exec.Cmd
}

// startTestKeeper starts this binary as a keeper in a mount namespace of
// its own (and a user namespace where the test is not root), sends it cfg
// and returns it once it has answered.
func startTestKeeper(t *testing.T, cfg wire.KeeperConfig) (*testKeeper, wire.KeeperReply) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	child := os.NewFile(uintptr(fds[1]), "keeper-child")
	defer child.Close()
	attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS, Setsid: true}
	if os.Geteuid() != 0 {
		cfg.UserNS, cfg.UID, cfg.GID = true, 0, 0
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
		attr.Credential = &syscall.Credential{NoSetGroups: true}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := &exec.Cmd{Path: exe, Args: []string{"keeper-test"}, Env: []string{keeperEnv + "=1"},
		ExtraFiles: []*os.File{child}, SysProcAttr: attr, Stderr: os.Stderr}
	k := &testKeeper{t: t, conn: fds[0], cmd: cmd}
	k.send(cfg)
	if err := cmd.Start(); err != nil {
		unix.Close(k.conn)
		t.Skipf("cannot start a keeper in namespaces of its own here: %v", err)
	}
	t.Cleanup(func() {
		if k.conn >= 0 {
			unix.Close(k.conn)
			cmd.Wait()
		}
	})
	rep, fd := k.receive()
	if fd >= 0 {
		unix.Close(fd)
		t.Error("the keeper's first reply carries an fd")
	}
	return k, rep
}

func (k *testKeeper) send(msg any) {
	k.t.Helper()
	b, err := json.Marshal(msg)
	if err != nil {
		k.t.Fatal(err)
	}
	if _, err := unix.Write(k.conn, b); err != nil {
		k.t.Fatal(err)
	}
}

// receive reads a reply and the fd it carries, or -1.
func (k *testKeeper) receive() (wire.KeeperReply, int) {
	k.t.Helper()
	buf, oob := make([]byte, 4096), make([]byte, unix.CmsgSpace(8))
	n, oobn, _, _, err := unix.Recvmsg(k.conn, buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil || n == 0 {
		k.t.Fatalf("the keeper sent no reply (%d bytes, %v)", n, err)
	}
	fd := -1
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil && len(msgs) > 0 {
		if fds, err := unix.ParseUnixRights(&msgs[0]); err == nil && len(fds) > 0 {
			fd = fds[0]
			for _, extra := range fds[1:] {
				unix.Close(extra)
				k.t.Error("a reply carries more than one fd")
			}
		}
	}
	var rep wire.KeeperReply
	if err := json.Unmarshal(buf[:n], &rep); err != nil {
		k.t.Fatal(err)
	}
	return rep, fd
}

// call sends req and returns the reply, failing the test if it carries an
// fd where fd is false, or none where it is true.
func (k *testKeeper) call(req wire.KeeperRequest, wantFd bool) (wire.KeeperReply, int) {
	k.t.Helper()
	k.send(req)
	rep, fd := k.receive()
	if (fd >= 0) != wantFd {
		k.t.Errorf("%s: reply %+v with fd %d, want an fd: %v", req.Op, rep, fd, wantFd)
	}
	return rep, fd
}

// root asks for the workspace directory, failing the test if it gets none.
func (k *testKeeper) root() int {
	k.t.Helper()
	rep, fd := k.call(wire.KeeperRequest{Op: wire.KeeperRoot}, true)
	if rep.Err != "" || fd < 0 {
		k.t.Fatalf("root: %+v", rep)
	}
	return fd
}

// exists says whether the workspace holds name.
func (k *testKeeper) exists(name string) bool {
	k.t.Helper()
	root := k.root()
	defer unix.Close(root)
	var st unix.Stat_t
	err := unix.Fstatat(root, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err != nil && err != unix.ENOENT {
		k.t.Fatal(err)
	}
	return err == nil
}

// TestKeeperProtocol drives a keeper through every request of
// wire.KeeperRequest, in both layouts, as the caller's side does: which
// replies carry an fd, snapshots and restores, the refusal of a dropped
// snapshot, and the keeper's exit when its socket closes.
func TestKeeperProtocol(t *testing.T) {
	for _, flat := range []bool{false, true} {
		t.Run(map[bool]string{false: "layered", true: "flat"}[flat], func(t *testing.T) {
			k, rep := startTestKeeper(t, wire.KeeperConfig{Size: 8 << 20, Flat: flat})
			if rep.Err != "" {
				t.Fatalf("the keeper did not start: %s (errno %d)", rep.Err, rep.Errno)
			}

			rep, fd := k.call(wire.KeeperRequest{Op: wire.KeeperMount}, true)
			if rep.Err != "" {
				t.Fatalf("mount: %+v", rep)
			}
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
				t.Errorf("the workspace mount is not a directory (mode %o, %v)", st.Mode, err)
			}
			unix.Close(fd)

			root := k.root()
			file, err := unix.Openat(root, "a", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
			unix.Close(root)
			if err != nil {
				t.Fatalf("create a file in the workspace: %v", err)
			}
			unix.Close(file)

			rep, _ = k.call(wire.KeeperRequest{Op: wire.KeeperSnapshot}, false)
			if rep.Err != "" || rep.ID == 0 {
				t.Fatalf("snapshot: %+v, want a snapshot other than 0", rep)
			}
			snap := rep.ID
			if rep, _ = k.call(wire.KeeperRequest{Op: wire.KeeperRestore}, false); rep.Err != "" {
				t.Fatalf("restore 0: %+v", rep)
			}
			if k.exists("a") {
				t.Error("the initial (empty) workspace holds the file made after it")
			}
			if rep, _ = k.call(wire.KeeperRequest{Op: wire.KeeperRestore, ID: snap}, false); rep.Err != "" {
				t.Fatalf("restore %d: %+v", snap, rep)
			}
			if !k.exists("a") {
				t.Error("the restored snapshot lacks the file made before it")
			}

			if rep, _ = k.call(wire.KeeperRequest{Op: wire.KeeperDrop, ID: snap}, false); rep.Err != "" {
				t.Fatalf("drop %d: %+v", snap, rep)
			}
			rep, _ = k.call(wire.KeeperRequest{Op: wire.KeeperRestore, ID: snap}, false)
			if !rep.Unsupported || !strings.Contains(rep.Err, "dropped") {
				t.Errorf("restore of a dropped snapshot = %+v, want a refusal marked Unsupported", rep)
			}
			if !k.exists("a") {
				t.Error("a refused restore changed the workspace")
			}
			if rep, _ = k.call(wire.KeeperRequest{Op: "chmod"}, false); rep.Err == "" || rep.Unsupported {
				t.Errorf("an unknown request = %+v, want an error", rep)
			}

			unix.Close(k.conn)
			k.conn = -1
			if err := k.cmd.Wait(); err != nil {
				t.Errorf("the keeper, its socket closed: %v, want exit 0", err)
			}
		})
	}
}

// TestKeeperStartFails: a keeper that cannot make the workspace says why
// in its first reply, with the errno, and exits.
func TestKeeperStartFails(t *testing.T) {
	k, rep := startTestKeeper(t, wire.KeeperConfig{Size: 1 << 20, From: "/nonexistent-keeper-source"})
	if rep.Err == "" || rep.Errno != int(unix.ENOENT) {
		t.Errorf("first reply = %+v, want an error with ENOENT", rep)
	}
	var ee *exec.ExitError
	if err := k.cmd.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("the keeper that could not start: %v, want exit 1", err)
	}
	unix.Close(k.conn)
	k.conn = -1
}

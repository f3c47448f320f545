package sandbox

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// layouts runs fn for both ways a keeper can hold a workspace: overlay
// layers where the kernel has them, and one flat tmpfs with copies.
func layouts(t *testing.T, fn func(t *testing.T, newSession func(Options) *Sandbox)) {
	for _, flat := range []bool{false, true} {
		name := "layered"
		if flat {
			name = "flat"
		}
		t.Run(name, func(t *testing.T) {
			requireSandbox(t)
			fn(t, func(o Options) *Sandbox {
				s := newTest(t, o)
				if flat {
					keepFlat(s)
				}
				t.Cleanup(func() {
					if layered, known := keeperLayered(s); flat && known && layered {
						t.Error("the keeper holds the workspace in layers where the test asked for one flat tmpfs")
					}
				})
				return s
			})
		})
	}
}

// keeperPid is the pid of the workspace keeper of s, or 0 while it has
// none.
func keeperPid(s *Sandbox) int {
	s.ws.start.Lock()
	defer s.ws.start.Unlock()
	if s.ws.kc == nil {
		return 0
	}
	return s.ws.kc.proc.Pid
}

// keeperLayered says whether the keeper of s holds the workspace in
// overlay layers, as its mount table shows: an overlay is mounted on its
// workspace directory (ws in its scratch tmpfs at /tmp) only then. known
// is false while s has no keeper, and once it is gone.
func keeperLayered(s *Sandbox) (layered, known bool) {
	pid := keeperPid(s)
	if pid == 0 {
		return false, false
	}
	mounts, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		return false, false
	}
	for line := range strings.Lines(string(mounts)) {
		// The mount point is the fifth field, the type the first after "-".
		f := strings.Fields(line)
		if sep := slices.Index(f, "-"); len(f) > 4 && f[4] == "/tmp/ws" && sep >= 0 && sep+1 < len(f) {
			return f[sep+1] == "overlay", true
		}
	}
	return false, false
}

// turn runs a shell script in the session s and fails the test unless it
// exits 0.
func turn(t *testing.T, s *Sandbox, script string) string {
	t.Helper()
	res, err := s.Run(context.Background(), Command("sh", "-c", script))
	if err != nil {
		t.Fatalf("%s: %v", script, err)
	}
	if !res.Success() {
		t.Fatalf("%s: %s\nstdout: %s\nstderr: %s", script, res.Outcome, res.Stdout, res.Stderr)
	}
	return string(res.Stdout)
}

// listing describes the workspace tree as the host's tar of it shows it:
// one line per entry with its type, mode, size, content digest or target.
func listing(t *testing.T, s *Sandbox) string {
	t.Helper()
	var buf bytes.Buffer
	if err := s.WriteTar(&buf, "."); err != nil {
		t.Fatalf("WriteTar: %v", err)
	}
	var lines []string
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		lines = append(lines, fmt.Sprintf("%s %c %o %q %q %d", h.Name, h.Typeflag, h.Mode, data, h.Linkname, h.ModTime.Unix()))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// seedDir makes a host tree with files of several modes, a nested
// directory and a symlink, owned so the sandbox can read it.
func seedDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "src/pkg"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "src/main.py"), []byte("print('hello')\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "src/pkg/run.sh"), []byte("#!/bin/sh\necho run\n"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "secret.key"), []byte("k"), 0o600))
	must(os.Mkdir(filepath.Join(dir, "private"), 0o700))
	must(os.Symlink("src/main.py", filepath.Join(dir, "main")))
	return dir
}

func TestSessionTurns(t *testing.T) {
	layouts(t, func(t *testing.T, newSession func(Options) *Sandbox) {
		s := newSession(Options{})
		// Turn 1: a file, a /tmp file, and a process that outlives the
		// program unless the run's end kills it.
		turn(t, s, `echo turn1 > /workspace/notes.txt
			echo tmp > /tmp/scratch
			(sleep 1; echo survived > /workspace/late) >/dev/null 2>&1 &
			setsid sh -c 'sleep 1; echo survived > /workspace/late2' >/dev/null 2>&1 &
			true`)
		time.Sleep(1500 * time.Millisecond)
		// Turn 2 sees the file, not the process's work, nor /tmp.
		out := turn(t, s, `cat /workspace/notes.txt
			ls /workspace
			test -e /tmp/scratch && echo tmp-carried
			ps -e -o comm= | grep -c sleep || true`)
		if want := "turn1\nnotes.txt\n0\n"; out != want {
			t.Errorf("turn 2 saw:\n%s\nwant:\n%s", out, want)
		}
		// Host and program exchange files both ways.
		if err := s.WriteFile("/workspace/in/data.txt", []byte("from host\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out = turn(t, s, `cat in/data.txt; echo appended >> in/data.txt; printf '%s' "$(id -u)" > out.txt`)
		if out != "from host\n" {
			t.Errorf("program read %q", out)
		}
		if b, err := s.ReadFile("in/data.txt"); err != nil || string(b) != "from host\nappended\n" {
			t.Errorf("ReadFile in/data.txt = %q, %v", b, err)
		}
		if b, err := s.ReadFile("out.txt"); err != nil || string(b) != fmt.Sprint(SandboxUID) {
			t.Errorf("ReadFile out.txt = %q, %v", b, err)
		}
		es, err := s.ReadDir(".")
		var names []string
		for _, e := range es {
			names = append(names, e.Name)
		}
		if err != nil || strings.Join(names, " ") != "in notes.txt out.txt" {
			t.Errorf("ReadDir = %v, %v", names, err)
		}
		if e, err := s.Stat("in/data.txt"); err != nil || e.Size != 19 || e.Mode != 0o644 {
			t.Errorf("Stat = %+v, %v", e, err)
		}
		// A tree out and back in, elsewhere.
		var tarball bytes.Buffer
		if err := s.WriteTar(&tarball, "in"); err != nil {
			t.Fatal(err)
		}
		if err := s.ExtractTar(t.Context(), &tarball, "copy"); err != nil {
			t.Fatal(err)
		}
		if out := turn(t, s, "cat copy/data.txt"); out != "from host\nappended\n" {
			t.Errorf("extracted copy: %q", out)
		}
		if err := s.RemoveAll("copy"); err != nil {
			t.Fatal(err)
		}
		if out := turn(t, s, "ls"); out != "in\nnotes.txt\nout.txt\n" {
			t.Errorf("after RemoveAll: %q", out)
		}
	})
}

func TestSessionReset(t *testing.T) {
	layouts(t, func(t *testing.T, newSession func(Options) *Sandbox) {
		s := newSession(Options{Workspace: SessionWorkspace{From: seedDir(t)}})
		initial := listing(t, s)
		if !strings.Contains(initial, `secret.key 0 600 "k"`) || !strings.Contains(initial, `main 2 777 "" "src/main.py"`) {
			t.Fatalf("the seed did not arrive with its modes:\n%s", initial)
		}
		if out := turn(t, s, "./src/pkg/run.sh; cat main"); out != "run\nprint('hello')\n" {
			t.Fatalf("seed inside: %q", out)
		}
		for round := range 3 {
			turn(t, s, `rm -rf src/pkg; echo changed > src/main.py; chmod 666 secret.key
				mkdir -p new/deep; echo x > new/deep/f; ln -sf /etc/passwd main; rmdir private`)
			if err := s.WriteFile("host.txt", []byte("h"), 0o600); err != nil {
				t.Fatal(err)
			}
			if listing(t, s) == initial {
				t.Fatal("the changes did not show")
			}
			if err := s.Reset(); err != nil {
				t.Fatal(err)
			}
			if got := listing(t, s); got != initial {
				t.Fatalf("round %d: after Reset:\n%s\nwant:\n%s", round, got, initial)
			}
			if out := turn(t, s, "./src/pkg/run.sh; ls -a private; stat -c '%a %U' secret.key"); out != "run\n.\n..\n600 sandbox\n" {
				t.Errorf("round %d: after Reset, inside: %q", round, out)
			}
		}
	})
}

func TestSessionSnapshotRestore(t *testing.T) {
	layouts(t, func(t *testing.T, newSession func(Options) *Sandbox) {
		s := newSession(Options{})
		turn(t, s, "mkdir -p a/b && echo one > a/b/f && chmod 750 a && ln -s a/b/f link && echo keep > k")
		state1 := listing(t, s)
		snap1, err := s.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		turn(t, s, "echo two > a/b/f; rm k; mkdir c; echo c > c/x; chmod 700 a")
		state2 := listing(t, s)
		snap2, err := s.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		// A snapshot of an unchanged workspace is the same content.
		snap2b, err := s.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		turn(t, s, "rm -rf /workspace/* && echo broken > x")
		for i, c := range []struct {
			snap *Snapshot
			want string
		}{{snap1, state1}, {snap2, state2}, {snap1, state1}, {snap2b, state2}} {
			if err := s.Restore(c.snap); err != nil {
				t.Fatal(err)
			}
			if got := listing(t, s); got != c.want {
				t.Fatalf("restore %d:\n%s\nwant:\n%s", i, got, c.want)
			}
			// Changing the restored workspace leaves the snapshot be.
			turn(t, s, "echo scribble >> a/b/f; rm -f link")
		}
		if out := turn(t, s, "cat a/b/f"); out != "two\nscribble\n" {
			t.Errorf("workspace after the last restore and a change: %q", out)
		}
		if err := snap1.Release(); err != nil {
			t.Fatal(err)
		}
		if err := s.Restore(snap1); !errors.Is(err, ErrNotSupported) {
			t.Errorf("Restore of a released snapshot = %v, want ErrNotSupported", err)
		}
		if err := s.Restore(snap2); err != nil || listing(t, s) != state2 {
			t.Errorf("Restore(snap2) after releasing snap1: %v", err)
		}
		other := newSession(Options{})
		if err := other.Restore(snap2); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("Restore of another Sandbox's snapshot = %v, want ErrInvalidOption", err)
		}
	})
}

func TestSessionSizeCap(t *testing.T) {
	layouts(t, func(t *testing.T, newSession func(Options) *Sandbox) {
		s := newSession(Options{Workspace: SessionWorkspace{Size: 8 << 20}})
		// write reports whether a 3 MiB file could be written whole. A
		// failed one is left shorter; the tools' messages differ
		// (coreutils says ENOSPC, BusyBox "I/O error"), sizes do not.
		write := func(name string) (bool, string) {
			res, err := s.Run(context.Background(), Command("sh", "-c",
				"head -c 3145728 /dev/zero > "+name+"; s=$?; wc -c < "+name+"; exit $s"))
			if err != nil {
				t.Fatal(err)
			}
			size := strings.TrimSpace(string(res.Stdout))
			if res.Success() != (size == "3145728") {
				t.Fatalf("writing %s: %s with %s bytes written; stderr %q", name, res.Outcome, size, res.Stderr)
			}
			return res.Success(), string(res.Stderr)
		}
		for _, f := range []string{"a", "b"} {
			if ok, stderr := write(f); !ok {
				t.Fatalf("3 MiB %s of 8: %s", f, stderr)
			}
		}
		// 9 MiB in three turns: the third fails, the cap holds across turns.
		if ok, _ := write("c"); ok {
			t.Error("a third 3 MiB file fit in 8 MiB")
		}
		if err := s.WriteFile("d", make([]byte, 3<<20), 0o644); err == nil {
			t.Error("the host wrote past the cap")
		}
		// Layered, a snapshot's files still count while the workspace
		// stands on it, even once removed from the workspace; flat, the
		// snapshot is a copy beside it and removing frees the space.
		turn(t, s, "rm -f c")
		if _, err := s.Snapshot(); err != nil {
			t.Fatal(err)
		}
		turn(t, s, "rm a b")
		layered, known := keeperLayered(s)
		if !known {
			t.Fatal("the keeper's mount table cannot be read")
		}
		if ok, _ := write("c"); ok == layered {
			t.Errorf("layered=%v: after a snapshot of 6 MiB and removing it all, a 3 MiB file fit=%v in 8 MiB", layered, ok)
		}
		// Reset starts from the initial (empty) workspace with the whole
		// cap.
		if err := s.Reset(); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"a", "b"} {
			if ok, stderr := write(f); !ok {
				t.Fatalf("after Reset, 3 MiB %s: %s", f, stderr)
			}
		}
	})
}

// TestSessionFileEscapes: whatever the program plants, the host's file
// operations stay inside the workspace, and the host file is untouched.
func TestSessionFileEscapes(t *testing.T) {
	layouts(t, func(t *testing.T, newSession func(Options) *Sandbox) {
		hostDir := t.TempDir()
		os.Chmod(hostDir, 0o755)
		secret := filepath.Join(hostDir, "secret")
		if err := os.WriteFile(secret, []byte("host secret\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		s := newSession(Options{})
		turn(t, s, fmt.Sprintf(`ln -s %[1]s abs; ln -s %[2]s absdir
			ln -s ../../../../../../../%[1]s rel; ln -s .. up; mkdir d; ln -s ../../.. d/up3
			ln -s /proc/self/root procroot; ln -s abs chain; mkfifo fifo`, secret, hostDir))
		untouched := func(when string) {
			t.Helper()
			b, err := os.ReadFile(secret)
			if err != nil || string(b) != "host secret\n" {
				t.Fatalf("%s: host secret is now %q, %v", when, b, err)
			}
			if es, _ := os.ReadDir(hostDir); len(es) != 1 {
				t.Fatalf("%s: host dir has %d entries", when, len(es))
			}
		}
		for _, name := range []string{"abs", "rel", "chain", "absdir/secret", "up/up/secret", "d/up3/" + secret, "procroot" + secret} {
			if b, err := s.ReadFile(name); err == nil {
				t.Errorf("ReadFile(%s) read %q", name, b)
			}
			s.WriteFile(name, []byte("pwned\n"), 0o644)
			s.WriteFile(name+"/new", []byte("pwned\n"), 0o644)
			s.MkdirAll(name + "/dir")
			s.RemoveAll(name)
			untouched(name)
		}
		// Writing over a planted symlink replaces the link itself.
		turn(t, s, "ln -s "+secret+" target")
		if err := s.WriteFile("target", []byte("mine\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if out := turn(t, s, "test -L target || cat target"); out != "mine\n" {
			t.Errorf("target after WriteFile: %q", out)
		}
		for _, name := range []string{"../x", "a/../../x", "/etc/passwd", "/workspace/../etc/passwd"} {
			if err := s.WriteFile(name, []byte("x"), 0o644); !errors.Is(err, ErrOutsideWorkspace) {
				t.Errorf("WriteFile(%s) = %v, want ErrOutsideWorkspace", name, err)
			}
			if _, err := s.ReadFile(name); !errors.Is(err, ErrOutsideWorkspace) {
				t.Errorf("ReadFile(%s) = %v, want ErrOutsideWorkspace", name, err)
			}
		}
		// A FIFO cannot hang a read; a tar through symlinked
		// directories does not leave the workspace.
		done := make(chan error, 1)
		go func() { _, err := s.ReadFile("fifo"); done <- err }()
		select {
		case err := <-done:
			if err == nil {
				t.Error("ReadFile(fifo) succeeded")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("ReadFile(fifo) hangs")
		}
		var buf bytes.Buffer
		if err := s.WriteTar(&buf, "."); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(buf.String(), "host secret") {
			t.Error("the workspace's tar holds the host secret")
		}
		for _, dir := range []string{"absdir", "up", "procroot"} {
			buf.Reset()
			s.WriteTar(&buf, dir)
			if strings.Contains(buf.String(), "host secret") {
				t.Errorf("WriteTar(%s) holds the host secret", dir)
			}
		}
		evil := tarOf(t, map[string]string{"../evil": "x", "absdir/secret": "pwned"})
		s.ExtractTar(t.Context(), bytes.NewReader(evil), ".")
		untouched("ExtractTar")
		// The program swaps a directory for a symlink to the host dir as
		// fast as it can while the host writes into it.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		flipping := make(chan struct{})
		go func() {
			defer close(flipping)
			s.Run(ctx, Command("sh", "-c", fmt.Sprintf(
				`while :; do mkdir -p real; mv real flip 2>/dev/null; mv flip real 2>/dev/null; ln -sfn %s flip; rm -f flip; done`, hostDir)))
		}()
		for !fileExists(s, "real") {
			time.Sleep(time.Millisecond)
		}
		for i := range 1000 {
			s.WriteFile(fmt.Sprintf("flip/f%d", i), []byte("pwned\n"), 0o644)
			s.ReadFile("flip/secret")
		}
		cancel()
		<-flipping
		untouched("symlink race")
	})
}

func tarOf(t *testing.T, files map[string]string) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, data := range files {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg})
		tw.Write([]byte(data))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestSessionConcurrent: Runs, file operations and reshaping on one
// Sandbox at once (run with -race).
func TestSessionConcurrent(t *testing.T) {
	layouts(t, func(t *testing.T, newSession func(Options) *Sandbox) {
		s := newSession(Options{})
		var wg sync.WaitGroup
		errs := make(chan error, 100)
		for i := range 6 {
			wg.Add(2)
			go func() {
				defer wg.Done()
				res, err := s.Run(context.Background(), Command("sh", "-c", fmt.Sprintf("echo %d > run%d", i, i)))
				if err == nil && !res.Success() {
					err = fmt.Errorf("run %d: %s %s", i, res.Outcome, res.Stderr)
				}
				errs <- err
			}()
			go func() {
				defer wg.Done()
				errs <- s.WriteFile(fmt.Sprintf("host%d", i), []byte("h"), 0o644)
			}()
		}
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := s.Snapshot()
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
		es, err := s.ReadDir(".")
		if err != nil || len(es) != 12 {
			t.Fatalf("ReadDir: %d entries, %v; want 12", len(es), err)
		}
		// Reshaping waits for a Run in flight, which sees one workspace
		// from start to end.
		started := make(chan struct{})
		var out string
		go func() {
			defer close(started)
			res, err := s.Run(context.Background(), Command("sh", "-c", "echo go > /workspace/go; sleep 0.5; cat /workspace/go; ls /workspace | wc -l"))
			if err != nil {
				t.Error(err)
				return
			}
			out = string(res.Stdout)
		}()
		for !fileExists(s, "go") {
			time.Sleep(5 * time.Millisecond)
		}
		if err := s.Reset(); err != nil {
			t.Fatal(err)
		}
		<-started
		if out != "go\n13\n" {
			t.Errorf("the run in flight saw %q", out)
		}
		if es, _ := s.ReadDir("."); len(es) != 0 {
			t.Errorf("after Reset: %d entries", len(es))
		}
	})
}

func fileExists(s *Sandbox, name string) bool {
	_, err := s.Stat(name)
	return err == nil
}

// TestSessionCloseLeavesNothing: Close ends the keeper, and the host has
// the fds, mounts, processes and temp files it had before the session.
func TestSessionCloseLeavesNothing(t *testing.T) {
	layouts(t, func(t *testing.T, newSession func(Options) *Sandbox) {
		warm := newTest(t, Options{})
		if _, err := warm.Run(context.Background(), Command("true")); err != nil { // the spawner
			t.Fatal(err)
		}
		warm.Close()
		t.Setenv("TMPDIR", t.TempDir())
		before := takeSnapshot(t)
		fdsBefore := openFds()
		keepers := len(ownProcesses("sandbox-workspace"))
		s := newSession(Options{Workspace: SessionWorkspace{From: seedDir(t)}})
		turn(t, s, "head -c 1048576 /dev/zero > big; mkdir -p d && echo x > d/f")
		if _, err := s.Snapshot(); err != nil {
			t.Fatal(err)
		}
		if err := s.WriteFile("h", []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if n := len(ownProcesses("sandbox-workspace")); n != keepers+1 {
			t.Fatalf("%d keepers during the session, want %d", n, keepers+1)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if n := len(ownProcesses("sandbox-workspace")); n != keepers {
			t.Errorf("%d keepers after Close, want %d", n, keepers)
		}
		if after := takeSnapshot(t); after != before {
			t.Errorf("after Close: %+v\nbefore:      %+v\nopen before: %s\nopen now:    %s", after, before, fdsBefore, openFds())
		}
		if _, err := s.Run(context.Background(), Command("true")); !errors.Is(err, ErrClosed) {
			t.Errorf("Run after Close = %v, want ErrClosed", err)
		}
		for name, err := range map[string]error{
			"WriteFile": s.WriteFile("x", nil, 0o644), "Reset": s.Reset(), "Close": s.Close(),
		} {
			if name == "Close" {
				if err != nil {
					t.Errorf("second Close = %v", err)
				}
			} else if !errors.Is(err, ErrClosed) {
				t.Errorf("%s after Close = %v, want ErrClosed", name, err)
			}
		}
	})
}

// TestSessionWorkspaceKinds: a host directory is shared by Runs and the
// file operations but cannot be reset; FreshWorkspace shares nothing.
func TestSessionWorkspaceKinds(t *testing.T) {
	requireSandbox(t)
	dir := sharedTempDir(t)
	uid, gid := (&Options{}).HostIDs()
	os.Chown(dir, uid, gid)
	host := newTest(t, Options{Workspace: HostWorkspace{Dir: dir}})
	defer host.Close()
	turn(t, host, "echo one > f")
	if err := host.WriteFile("g", []byte("two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := turn(t, host, "cat f g; echo three >> g"); out != "one\ntwo\n" {
		t.Errorf("host workspace: %q", out)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "g")); string(b) != "two\nthree\n" {
		t.Errorf("host file g = %q", b)
	}
	if err := host.Reset(); !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "Options.Workspace") {
		t.Errorf("Reset of a host workspace = %v, want ErrNotSupported naming Options.Workspace", err)
	}
	host.Close()
	if es, _ := os.ReadDir(dir); len(es) != 2 {
		t.Errorf("Close changed the host workspace: %d entries", len(es))
	}

	fresh := newTest(t, Options{Workspace: FreshWorkspace{}})
	defer fresh.Close()
	turn(t, fresh, "echo one > f")
	if out := turn(t, fresh, "ls /workspace"); out != "" {
		t.Errorf("a fresh workspace held %q", out)
	}
	if err := fresh.WriteFile("f", nil, 0o644); !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "Options.Workspace (FreshWorkspace)") {
		t.Errorf("WriteFile with FreshWorkspace = %v", err)
	}
	if _, err := fresh.Snapshot(); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("Snapshot with FreshWorkspace = %v", err)
	}
	if n := len(ownProcesses("sandbox-workspace")); n != 0 {
		t.Errorf("%d keepers run without a session workspace", n)
	}

	for _, c := range []struct {
		o      Options
		option string
	}{
		{Options{Workspace: SessionWorkspace{From: "rel/dir"}}, "Options.Workspace (SessionWorkspace.From)"},
		{Options{Workspace: SessionWorkspace{From: "/nonexistent/dir"}}, "Options.Workspace (SessionWorkspace.From)"},
	} {
		err := New(c.o).Err()
		var oe *OptionError
		if !errors.As(err, &oe) || oe.Option != c.option {
			t.Errorf("%+v: %v, want an OptionError naming %s", c.o, err, c.option)
		}
	}
}

// openFds lists this process's open fds and what they are, for messages.
func openFds() string {
	des, _ := os.ReadDir("/proc/self/fd")
	var out []string
	for _, de := range des {
		l, _ := os.Readlink("/proc/self/fd/" + de.Name())
		out = append(out, de.Name()+"="+l)
	}
	return strings.Join(out, " ")
}

// TestSessionKeeperKilled: a session whose keeper dies fails its later
// calls with ErrSpawner, runs nothing without its workspace, and closes.
func TestSessionKeeperKilled(t *testing.T) {
	requireSandbox(t)
	s := newTest(t, Options{})
	turn(t, s, "echo x > f")
	s.ws.start.Lock()
	pid := s.ws.kc.proc.Pid
	s.ws.start.Unlock()
	waitSpare(t, s)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Dead: reaped. A Run racing with the death may still get the
	// workspace mount fetched before it, as one that asked the keeper
	// just before it would.
	<-s.ws.kc.reaped
	fds := countDir("/proc/self/fd")
	res, err := s.Run(context.Background(), Command("sh", "-c", "echo ran"))
	if !errors.Is(err, ErrSpawner) || res != nil {
		t.Errorf("Run after the keeper died = %v, %v; want ErrSpawner and no run", res, err)
	}
	// The failed Run closed the pipes it had made for the program.
	if n := countDir("/proc/self/fd"); n > fds {
		t.Errorf("the failed Run left %d fds open: %s", n-fds, openFds())
	}
	if _, err := s.ReadFile("f"); !errors.Is(err, ErrSpawner) {
		t.Errorf("ReadFile after the keeper died = %v, want ErrSpawner", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
}

// waitSpare waits until s holds a workspace mount fetched ahead for its
// next Run, as it does shortly after each Run.
func waitSpare(t *testing.T, s *Sandbox) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.ws.start.Lock()
		have := s.ws.spare != nil
		s.ws.start.Unlock()
		if have {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no workspace mount was fetched ahead for the next Run within 5s of one")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSessionSpareFollowsReshape: the workspace mount a session fetches
// ahead after each Run is dropped by Snapshot, Restore and Reset, which
// replace the keeper's mount: the Run after one works in the workspace it
// left, and a snapshot stays as it was taken (a Run writing through a mount
// fetched before a layered Snapshot would write into the frozen layer).
func TestSessionSpareFollowsReshape(t *testing.T) {
	layouts(t, func(t *testing.T, newSession func(Options) *Sandbox) {
		s := newSession(Options{})
		turn(t, s, "echo one > f")
		waitSpare(t, s)
		snap, err := s.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		turn(t, s, "echo two > f")
		waitSpare(t, s)
		if err := s.Restore(snap); err != nil {
			t.Fatal(err)
		}
		if out := turn(t, s, "cat f"); out != "one\n" {
			t.Errorf("a Run after Restore read %q, want the snapshot's %q", out, "one\n")
		}
		waitSpare(t, s)
		if err := s.Reset(); err != nil {
			t.Fatal(err)
		}
		if out := turn(t, s, "ls -A"); out != "" {
			t.Errorf("a Run after Reset listed %q, want an empty workspace", out)
		}
	})
}

// TestRemoveAllRoot: RemoveAll of the workspace itself empties it and
// keeps it, in a session's layered workspace (its first layer's files
// too, from a restored snapshot) and in a host directory, where Reset
// is not supported; the empty name and names above it remove nothing.
func TestRemoveAllRoot(t *testing.T) {
	requireSandbox(t)
	dir := sharedTempDir(t)
	uid, gid := (&Options{}).HostIDs()
	os.Chown(dir, uid, gid)
	for _, c := range []struct {
		kind string
		opts Options
	}{{"session", Options{}}, {"host", Options{Workspace: HostWorkspace{Dir: dir}}}} {
		t.Run(c.kind, func(t *testing.T) {
			s := newTest(t, c.opts)
			fill := func() {
				turn(t, s, "mkdir -p d/e && echo x > d/e/f && echo y > .hidden && ln -s /etc top && mkfifo p")
			}
			fill()
			if c.kind == "session" {
				// Files of a lower layer as well as the upper one.
				snap, err := s.Snapshot()
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Restore(snap); err != nil {
					t.Fatal(err)
				}
				turn(t, s, "echo z > upper")
			}
			for _, name := range []string{"", "..", "d/../..", "/workspace/.."} {
				if err := s.RemoveAll(name); err == nil {
					t.Errorf("RemoveAll(%q) = nil, want it refused", name)
				}
			}
			if err := s.RemoveAll(""); !errors.Is(err, fs.ErrInvalid) {
				t.Errorf("RemoveAll(\"\") = %v, want fs.ErrInvalid", err)
			}
			if out := turn(t, s, "ls -A | wc -l"); strings.TrimSpace(out) == "0" {
				t.Fatal("a refused RemoveAll emptied the workspace")
			}
			for _, name := range []string{".", "/workspace", "d/..", "/workspace/"} {
				if err := s.RemoveAll(name); err != nil {
					t.Fatalf("RemoveAll(%q) = %v, want the workspace emptied", name, err)
				}
				if out := turn(t, s, "pwd; ls -A; touch new && ls"); out != "/workspace\nnew\n" {
					t.Errorf("after RemoveAll(%q), from inside:\n%s", name, out)
				}
				if es, err := s.ReadDir("."); err != nil || len(es) != 1 {
					t.Errorf("after RemoveAll(%q), ReadDir: %v, %v", name, es, err)
				}
				fill()
			}
			if c.kind == "host" {
				if es, err := os.ReadDir(dir); err != nil || len(es) == 0 {
					t.Errorf("the host workspace after the test's last fill: %v, %v", es, err)
				}
				if err := s.RemoveAll("."); err != nil {
					t.Fatal(err)
				}
				if es, err := os.ReadDir(dir); err != nil || len(es) != 0 {
					t.Errorf("the host directory after RemoveAll(\".\"): %v, %v; want it there and empty", es, err)
				}
			}
		})
	}
}

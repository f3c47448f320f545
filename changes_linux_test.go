package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
)

// changeLines describes changes one a line, "kind path mode size", in
// their order; skip leaves out the paths whose change a test does not
// decide.
func changeLines(cs []Change, skip ...string) string {
	var lines []string
outer:
	for _, c := range cs {
		for _, s := range skip {
			if c.Path == s {
				continue outer
			}
		}
		size := fmt.Sprint(c.Size)
		if c.Mode.IsDir() {
			size = "-" // a directory's size is the file system's business
		}
		lines = append(lines, fmt.Sprintf("%s %s %s %s", c.Kind, c.Path, c.Mode, size))
	}
	return strings.Join(lines, "\n")
}

// runChanges runs script in s, which must exit 0, and returns its Result.
func runChanges(t *testing.T, s *Sandbox, script string) *Result {
	t.Helper()
	res, err := s.Run(context.Background(), Command("sh", "-c", script))
	if err != nil {
		t.Fatalf("%s: %v", script, err)
	}
	if !res.Success() {
		t.Fatalf("%s: %s\nstdout: %s\nstderr: %s", script, res.Outcome, res.Stdout, res.Stderr)
	}
	return res
}

// seedChanges writes, from the host, what the change tests' programs
// then change.
func seedChanges(t *testing.T, s *Sandbox) {
	t.Helper()
	for _, f := range []struct {
		name string
		data string
		perm fs.FileMode
	}{
		{"keep.txt", "kept", 0o644}, {"mod.txt", "old", 0o644}, {"del.txt", "gone", 0o644},
		{"ren.txt", "moved", 0o644}, {"run.sh", "echo", 0o644}, {"hard.txt", "one inode", 0o644},
		{"old/inner.txt", "inner", 0o644}, {"sub/stay.txt", "stay", 0o644}, {"again/gone.txt", "gone", 0o644},
	} {
		if err := s.WriteFile(f.name, []byte(f.data), f.perm); err != nil {
			t.Fatal(err)
		}
	}
}

// TestChangesRun: a Run's Result lists, sorted by path, what the program
// (sh in the sandbox) added, modified and deleted, in both workspace
// layouts, with the files it changes in the layer that takes changes or
// (after a Snapshot) beneath it; what it left alone is not listed, nor
// what a removed directory held, and a directory removed and made again
// is modified, with what it held deleted.
func TestChangesRun(t *testing.T) {
	layouts(t, func(t *testing.T, newSession func(Options) *Sandbox) {
		for _, snapshot := range []bool{false, true} {
			t.Run(fmt.Sprintf("snapshot=%v", snapshot), func(t *testing.T) {
				s := newSession(Options{Workspace: SessionWorkspace{TrackChanges: true}})
				seedChanges(t, s)
				if snapshot {
					if _, err := s.Snapshot(); err != nil {
						t.Fatal(err)
					}
				}
				res := runChanges(t, s, `cd /workspace
					echo new > add.txt
					echo changed and longer > mod.txt
					rm del.txt
					mv ren.txt renamed.txt
					chmod 755 run.sh
					ln -s add.txt sym
					ln hard.txt hard2.txt
					mkdir -p newdir && echo f > newdir/f
					rm -r old
					echo more > sub/new.txt
					rm -r again && mkdir -p again/deeper
					cat keep.txt again/deeper/.. >/dev/null 2>&1; true`)
				// hard.txt's ctime moved with its link count; whether
				// that shows depends on the clock's tick, so it is not
				// decided here.
				got := changeLines(res.Changes, "hard.txt")
				want := strings.Join([]string{
					"added add.txt -rw-r--r-- 4",
					"modified again drwxr-xr-x -",
					"added again/deeper drwxr-xr-x -",
					"deleted again/gone.txt -rw-r--r-- 4",
					"deleted del.txt -rw-r--r-- 4",
					"added hard2.txt -rw-r--r-- 9",
					"modified mod.txt -rw-r--r-- 19",
					"added newdir drwxr-xr-x -",
					"added newdir/f -rw-r--r-- 2",
					"deleted old drwxr-xr-x -",
					"deleted ren.txt -rw-r--r-- 5",
					"added renamed.txt -rw-r--r-- 5",
					"modified run.sh -rwxr-xr-x 4",
					"added sub/new.txt -rw-r--r-- 5",
					"added sym Lrwxrwxrwx 7",
				}, "\n")
				if got != want {
					t.Errorf("Result.Changes:\n%s\nwant:\n%s", got, want)
				}
				if res.ChangesDropped != 0 {
					t.Errorf("ChangesDropped = %d, want 0", res.ChangesDropped)
				}

				// The next Run starts from what this one left: it sees
				// only its own change, a file replaced by a directory.
				res = runChanges(t, s, `cd /workspace && rm add.txt && mkdir add.txt && cat keep.txt >/dev/null`)
				if got, want := changeLines(res.Changes), "modified add.txt drwxr-xr-x -"; got != want {
					t.Errorf("second Run's Changes:\n%s\nwant:\n%s", got, want)
				}
			})
		}
	})
}

// TestChangesRunNothing: a Run that reads the workspace and changes
// nothing lists nothing, though its files were written just before it
// (within the clock tick that makes a ctime ambiguous); a Run without
// SessionWorkspace.TrackChanges lists nothing either.
func TestChangesRunNothing(t *testing.T) {
	layouts(t, func(t *testing.T, newSession func(Options) *Sandbox) {
		s := newSession(Options{Workspace: SessionWorkspace{TrackChanges: true}})
		seedChanges(t, s)
		res := runChanges(t, s, `cd /workspace && cat keep.txt mod.txt >/dev/null && ls -R >/dev/null && echo tmp > /tmp/x`)
		if len(res.Changes) != 0 || res.ChangesDropped != 0 {
			t.Errorf("a Run that changed nothing listed %d changes (%d dropped):\n%s", len(res.Changes), res.ChangesDropped, changeLines(res.Changes))
		}
		u := newSession(Options{})
		res = runChanges(t, u, `echo x > /workspace/x`)
		if len(res.Changes) != 0 || res.ChangesDropped != 0 {
			t.Errorf("a Run without TrackChanges listed %v", res.Changes)
		}
	})
}

// TestChangesSince: Sandbox.Changes compares a snapshot (or the initial
// content) with the workspace by content: a file rewritten with the same
// size and modification time is found, one changed and changed back is
// not, and after Restore nothing differs.
func TestChangesSince(t *testing.T) {
	layouts(t, func(t *testing.T, newSession func(Options) *Sandbox) {
		s := newSession(Options{Workspace: SessionWorkspace{From: seedDir(t)}})
		turn(t, s, `cd /workspace && printf AAA > same && touch -d @1000000000 same && echo x > back && echo k > kept`)
		snap, err := s.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		turn(t, s, `cd /workspace
			printf BBB > same && touch -d @1000000000 same
			echo y > back && echo x > back
			rm src/main.py && chmod 700 src/pkg/run.sh && ln -sf other main
			mkdir d && echo n > d/n`)
		cs, dropped, err := s.Changes(snap)
		if err != nil {
			t.Fatal(err)
		}
		// back was changed and changed back: its mtime moved, which
		// counts without a read.
		want := strings.Join([]string{
			"modified back -rw-r--r-- 2",
			"added d drwxr-xr-x -",
			"added d/n -rw-r--r-- 2",
			"modified main Lrwxrwxrwx 5",
			"modified same -rw-r--r-- 3",
			"deleted src/main.py -rw-r--r-- 15",
			"modified src/pkg/run.sh -rwx------ 19",
		}, "\n")
		if got := changeLines(cs); got != want || dropped != 0 {
			t.Errorf("Changes(snapshot) (%d dropped):\n%s\nwant:\n%s", dropped, got, want)
		}

		// Since the initial content (WorkspaceFrom's copy): also what
		// the first turn added.
		cs, _, err = s.Changes(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"added back", "added same", "added kept", "deleted src/main.py"} {
			if !strings.Contains(changeLines(cs)+"\n", "\n"+p+" ") && !strings.HasPrefix(changeLines(cs), p+" ") {
				t.Errorf("Changes(nil) lacks %q:\n%s", p, changeLines(cs))
			}
		}

		if err := s.Restore(snap); err != nil {
			t.Fatal(err)
		}
		if cs, dropped, err := s.Changes(snap); err != nil || len(cs) != 0 || dropped != 0 {
			t.Errorf("after Restore, Changes(snapshot) = %d changes, %d dropped, %v:\n%s", len(cs), dropped, err, changeLines(cs))
		}
		if err := s.Reset(); err != nil {
			t.Fatal(err)
		}
		if cs, _, err := s.Changes(nil); err != nil || len(cs) != 0 {
			t.Errorf("after Reset, Changes(nil) = %v, %v", changeLines(cs), err)
		}
	})
}

// TestChangesCap: a program that makes thousands of files gets the first
// MaxChanges of them, in order, and the rest counted.
func TestChangesCap(t *testing.T) {
	requirePrograms(t, "python3")
	layouts(t, func(t *testing.T, newSession func(Options) *Sandbox) {
		s := newSession(Options{Workspace: SessionWorkspace{TrackChanges: true}})
		const files = 3000
		res, err := s.Run(context.Background(), Command("python3", "-c", fmt.Sprintf(
			"for i in range(%d): open('/workspace/f%%05d' %% i, 'w').close()", files)))
		if err != nil || !res.Success() {
			t.Fatalf("flood: %v %v %s", err, res.Outcome, res.Stderr)
		}
		if len(res.Changes) != MaxChanges || res.ChangesDropped != files-MaxChanges {
			t.Fatalf("%d changes listed and %d dropped, want %d and %d", len(res.Changes), res.ChangesDropped, MaxChanges, files-MaxChanges)
		}
		if first, last := res.Changes[0].Path, res.Changes[MaxChanges-1].Path; first != "f00000" || last != fmt.Sprintf("f%05d", MaxChanges-1) {
			t.Errorf("listed %s to %s, want the first %d by path", first, last, MaxChanges)
		}
		cs, dropped, err := s.Changes(nil)
		if err != nil || len(cs) != MaxChanges || dropped != files-MaxChanges {
			t.Errorf("Changes(nil): %d listed, %d dropped, %v", len(cs), dropped, err)
		}
	})
}

// TestChangesOptions: what has no session workspace to compare refuses
// with an error that says so.
func TestChangesOptions(t *testing.T) {
	dir := sharedTempDir(t)
	for _, o := range []Options{{Workspace: SessionWorkspace{TrackChanges: true}, Live: &Live{}}} {
		if err := New(o).Err(); !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "TrackChanges") {
			t.Errorf("New(%+v): %v, want an OptionError naming TrackChanges", o, err)
		}
	}
	s := New(Options{Workspace: HostWorkspace{Dir: dir}})
	defer s.Close()
	if _, _, err := s.Changes(nil); !errors.Is(err, ErrNotSupported) {
		t.Errorf("Changes with Options.Workspace: %v, want ErrNotSupported", err)
	}
	f := New(Options{Workspace: FreshWorkspace{}})
	defer f.Close()
	if _, _, err := f.Changes(nil); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("Changes with a FreshWorkspace: %v, want ErrInvalidOption", err)
	}
}

// TestChangesConcurrent: Runs of one session share its workspace, so a
// Run's Changes are what changed while it ran, whoever changed it: the
// file another Run wrote meanwhile is in both lists, one the host wrote
// meanwhile in the long Run's, and one the host wrote before the first
// started in neither.
func TestChangesConcurrent(t *testing.T) {
	layouts(t, func(t *testing.T, newSession func(Options) *Sandbox) {
		s := newSession(Options{Workspace: SessionWorkspace{TrackChanges: true}})
		if err := s.WriteFile("before.txt", []byte("b"), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		cmd := Command("sh", "-c", "while [ ! -e /workspace/go.txt ]; do sleep 0.02; done; echo mine > /workspace/mine.txt")
		p, err := s.Start(ctx, cmd)
		if err != nil {
			t.Fatal(err)
		}
		other := runChanges(t, s, "echo other > /workspace/other.txt")
		// Only once the short Run's list is made does the long one go on.
		if err := s.WriteFile("go.txt", nil, 0o644); err != nil {
			t.Fatal(err)
		}
		long, err := p.Wait()
		if err != nil || !long.Success() {
			t.Fatalf("%v %v %s", err, long.Outcome, long.Stderr)
		}
		if got, want := changeLines(long.Changes), "added go.txt -rw-r--r-- 0\nadded mine.txt -rw-r--r-- 5\nadded other.txt -rw-r--r-- 6"; got != want {
			t.Errorf("the long Run's Changes:\n%s\nwant:\n%s", got, want)
		}
		if got, want := changeLines(other.Changes), "added other.txt -rw-r--r-- 6"; got != want {
			t.Errorf("the short Run's Changes:\n%s\nwant:\n%s", got, want)
		}
	})
}

// TestChangesTooLarge: a chain of directories whose paths add up to more
// than the keeper records (9,000 levels: 80 MB of paths) costs the
// caller no list: the Run succeeds with ChangesDropped -1, the next Run
// too, and Sandbox.Changes says why it has no list; once the chain is
// gone, lists come back.
func TestChangesTooLarge(t *testing.T) {
	requirePrograms(t, "python3")
	layouts(t, func(t *testing.T, newSession func(Options) *Sandbox) {
		s := newSession(Options{Workspace: SessionWorkspace{TrackChanges: true}})
		res, err := s.Run(context.Background(), Command("python3", "-c", `
import os
os.chdir("/workspace")
for i in range(9000):
    os.mkdir("d")
    os.chdir("d")
`))
		if err != nil || !res.Success() {
			t.Fatalf("chain: %v %v %s", err, res.Outcome, res.Stderr)
		}
		if len(res.Changes) != 0 || res.ChangesDropped != -1 {
			t.Errorf("the chain's Run: %d changes, %d dropped; want none and -1", len(res.Changes), res.ChangesDropped)
		}
		res = runChanges(t, s, "echo x > /workspace/x")
		if len(res.Changes) != 0 || res.ChangesDropped != -1 {
			t.Errorf("the next Run: %d changes, %d dropped; want none and -1", len(res.Changes), res.ChangesDropped)
		}
		if _, _, err := s.Changes(nil); err == nil || !strings.Contains(err.Error(), "too large") {
			t.Errorf("Changes(nil) = %v, want an error saying the workspace is too large to record", err)
		}
		if err := s.RemoveAll("d"); err != nil {
			t.Fatal(err)
		}
		res = runChanges(t, s, "rm /workspace/x")
		if got, want := changeLines(res.Changes), "deleted x -rw-r--r-- 2"; got != want || res.ChangesDropped != 0 {
			t.Errorf("once the chain is gone: %q (%d dropped), want %q", got, res.ChangesDropped, want)
		}
	})
}

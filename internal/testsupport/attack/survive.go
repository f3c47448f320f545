//go:build linux

package attack

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// survive tries to outlive the sandbox: a daemon made the classic way
// (a child in a new session forks a grandchild and exits, so the
// grandchild belongs to no parent the runtime waits for), which ignores
// SIGTERM and SIGHUP, tries to move itself into another cgroup and out of
// the PID namespace, and then keeps writing a file in a directory the host
// can see. Runtimes that waited only for their direct child left such
// daemons running on the host (the reason runc kills the whole cgroup,
// and systemd's KillMode=control-group).
//
// args[0] is the mode, args[1] a marker the host finds the processes by,
// args[2] the shared directory:
//
//	exit   start the daemon, wait until it writes, then exit at once
//	stay   start the daemon, then wait forever (the run's deadline ends it)
//	look   report whether an earlier run's daemon is still seen (a later
//	       Run of the same session)
//
// The daemon's own attempts go to <dir>/daemon.json.
func survive(r *Report, args []string) {
	if len(args) < 3 {
		r.See("usage", "survive exit|stay|look|daemon|grandchild marker dir")
		return
	}
	mode, marker, dir := args[0], args[1], args[2]
	alive := filepath.Join(dir, "alive")
	switch mode {
	case "exit", "stay":
		os.Remove(alive)
		cmd := exec.Command("/proc/self/exe", "survive", "daemon", marker, dir)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if !r.Try("start a daemon in a new session", cmd.Start()) {
			return
		}
		cmd.Wait() // the daemon's first process exits once it has forked
		started := false
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(alive); err == nil {
				started = true
				break
			}
		}
		r.See("daemon writing", "%v", started)
		if mode == "stay" {
			fmt.Println("staying", started)
			for {
				time.Sleep(time.Hour)
			}
		}
	case "daemon":
		signal.Ignore(syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
		cmd := exec.Command("/proc/self/exe", "survive", "grandchild", marker, dir)
		cmd.Start()
		os.Exit(0) // orphan the grandchild
	case "grandchild":
		grandchild(marker, dir)
	case "look":
		look(r, alive)
	}
}

// grandchild is the daemon that tries to stay: it writes its attempts to
// dir, then touches dir/alive every 100 ms forever.
func grandchild(marker, dir string) {
	signal.Ignore(syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT, syscall.SIGPIPE)
	r := &Report{Attack: "survive grandchild"}
	r.See("marker", "%s", marker)
	r.See("pid", "%d", os.Getpid())
	r.See("sid", "%d", mustSid())
	pid := []byte(strconv.Itoa(os.Getpid()))
	for _, p := range cgroupFiles() {
		r.Try("move into "+p, os.WriteFile(p, pid, 0))
	}
	os.MkdirAll("/tmp/sbxtest-cg", 0o755)
	r.Try("mount cgroup2", unix.Mount("none", "/tmp/sbxtest-cg", "cgroup2", 0, ""))
	r.Try("mount cgroup v1 pids", unix.Mount("none", "/tmp/sbxtest-cg", "cgroup", 0, "pids"))
	r.Try("unshare pid namespace", unix.Unshare(unix.CLONE_NEWPID))
	if f, err := os.Open("/proc/self/ns/pid"); err == nil {
		r.Try("setns pid namespace", unix.Setns(int(f.Fd()), unix.CLONE_NEWPID))
		f.Close()
	}
	// A negative nice and OOM score would make it the last to go under
	// load; both need a capability.
	r.Try("setpriority -20", unix.Setpriority(unix.PRIO_PROCESS, 0, -20))
	r.Try("oom_score_adj -1000", os.WriteFile("/proc/self/oom_score_adj", []byte("-1000"), 0))
	if b, err := json.Marshal(r); err == nil {
		os.WriteFile(filepath.Join(dir, "daemon.json"), b, 0o644)
	}
	alive := filepath.Join(dir, "alive")
	for n := 0; ; n++ {
		os.WriteFile(alive, []byte(strconv.Itoa(n)), 0o644)
		time.Sleep(100 * time.Millisecond)
	}
}

// cgroupFiles lists the files that move a process between cgroups, in
// the usual places and wherever mountinfo shows a cgroup mount.
func cgroupFiles() []string {
	files := []string{"/sys/fs/cgroup/cgroup.procs", "/sys/fs/cgroup/unified/cgroup.procs"}
	for _, c := range []string{"pids", "memory", "cpu", "cpu,cpuacct", "freezer", "systemd"} {
		files = append(files, "/sys/fs/cgroup/"+c+"/cgroup.procs", "/sys/fs/cgroup/"+c+"/tasks")
	}
	if f, err := os.Open("/proc/self/mountinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			for i, fl := range fields {
				if fl == "-" && i+1 < len(fields) && strings.HasPrefix(fields[i+1], "cgroup") {
					files = append(files, filepath.Join(fields[4], "cgroup.procs"))
				}
			}
		}
		f.Close()
	}
	return files
}

// look reports whether an earlier run's daemon is still there: as a
// process this run can see, or as writes to the shared file.
func look(r *Report, alive string) {
	var seen []string
	for _, p := range procPids() {
		b, _ := os.ReadFile("/proc/" + p + "/cmdline")
		if strings.Contains(string(b), "grandchild") {
			seen = append(seen, p)
		}
	}
	var err error
	if len(seen) == 0 {
		err = errors.New("no daemon process")
	}
	r.Try("see an earlier run's daemon", err)
	before, _ := os.ReadFile(alive)
	time.Sleep(500 * time.Millisecond)
	after, _ := os.ReadFile(alive)
	err = nil
	if string(before) == string(after) {
		err = fmt.Errorf("alive unchanged at %q", after)
	}
	r.Try("an earlier run's daemon still writes", err)
}

// mustSid is the process's session id.
func mustSid() int {
	sid, _ := unix.Getsid(0)
	return sid
}

func init() { register("survive", survive) }

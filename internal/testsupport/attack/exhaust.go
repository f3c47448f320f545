//go:build linux

package attack

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// exhaust tries to take the machine's resources from everyone else, one
// kind per run, named by args[0]; the other args (a marker the test finds
// the run's processes by) are ignored. None of these is a kernel bug: they
// are the denial-of-service attacks every shared host meets (fork bombs,
// the OOM killer picking a host process, a full /tmp stopping the host's
// services, an output flood filling the caller's memory), and the
// sandbox's cgroup, tmpfs caps, rlimits, output cap and deadline are what
// stop them. Most never print a report: how the run ended is the result.
func exhaust(r *Report, args []string) {
	if len(args) == 0 {
		r.See("usage", "exhaust forkbomb|execbomb|membomb|diskfill|inodes|fdexhaust|flood|spin [marker]")
		return
	}
	kinds := map[string]func(*Report, []string){
		"forkbomb": forkBomb, "execbomb": execBomb, "membomb": memBomb, "diskfill": diskFill,
		"inodes": inodeFill, "fdexhaust": fdExhaust, "flood": flood, "spin": spin,
	}
	k := kinds[args[0]]
	if k == nil {
		r.See("usage", "no kind %q", args[0])
		return
	}
	k(r, args[1:])
}

// forkLimit bounds the fork bombs, so that a sandbox without a pids limit
// shows up as a count at the bound rather than as a host brought down.
const forkLimit = 2000

// forkBomb forks copies of itself that pause forever, until fork fails.
// The children are raw copies of a Go process without its threads; they
// run nothing but pause.
func forkBomb(r *Report, _ []string) {
	n := 0
	var err error
	for n < forkLimit {
		pid, _, errno := unix.RawSyscall6(unix.SYS_CLONE, uintptr(unix.SIGCHLD), 0, 0, 0, 0, 0)
		if errno != 0 {
			err = errno
			break
		}
		if pid == 0 {
			for { // ppoll of nothing, no timeout: pause(2), which arm64 lacks
				unix.RawSyscall6(unix.SYS_PPOLL, 0, 0, 0, 0, 0, 0)
			}
		}
		n++
	}
	r.See("forks", "%d", n)
	r.Try(fmt.Sprintf("fork %d processes", forkLimit), err)
	// The children die with this process, the PID namespace's init.
}

// execBomb starts copies of the whole program, each of which starts more,
// until the pids limit stops them. The first one reports how many it
// started itself, after a second of the others trying.
func execBomb(r *Report, args []string) {
	started := 0
	var err error
	for started < 64 {
		cmd := exec.Command("/proc/self/exe", append([]string{"exhaust", "execbomb"}, args...)...)
		if err = cmd.Start(); err != nil {
			break
		}
		started++
	}
	if os.Getpid() != 1 {
		time.Sleep(time.Hour) // hold the slot; the run's end kills it
	}
	time.Sleep(time.Second)
	r.See("started", "%d", started)
	r.Try("start 64 copies of the program", err)
}

// memBomb maps and touches anonymous memory 16 MiB at a time, up to
// 4 GiB, saying how far it got after each step.
func memBomb(r *Report, _ []string) {
	const chunk = 16 << 20
	got := 0
	var err error
	for got < 4<<30 {
		var b []byte
		b, err = unix.Mmap(-1, 0, chunk, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
		if err != nil {
			break
		}
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		got += chunk
		fmt.Printf("mapped %d MiB\n", got>>20)
	}
	r.See("mapped", "%d", got)
	r.Try("map 4 GiB", err)
}

// diskFill writes 1 MiB files into each writable tmpfs until a write
// fails, and reports how much each took and how it refused.
func diskFill(r *Report, _ []string) {
	buf := make([]byte, 1<<20)
	for _, dir := range []string{"/tmp", "/workspace", "/dev/shm"} {
		total := 0
		var err error
		for i := 0; err == nil && total < 4<<30; i++ {
			var f *os.File
			if f, err = os.Create(filepath.Join(dir, fmt.Sprintf("fill%d", i))); err != nil {
				break
			}
			var n int
			n, err = f.Write(buf)
			total += n
			f.Close()
		}
		r.See(dir+" bytes", "%d", total)
		r.See(dir+" err", "%s", errName(err))
		r.Try("fill "+dir+" with 4 GiB", err)
	}
}

// inodeFill creates empty files in a directory (args[1], /tmp if not
// given), which cost the kernel memory but no tmpfs blocks, up to a bound.
func inodeFill(r *Report, args []string) {
	const bound = 300000
	dir := "/tmp"
	if len(args) > 1 {
		dir = args[1]
	}
	// Names unique across runs, for a directory that outlives the run.
	prefix := filepath.Join(dir, fmt.Sprintf("i%d-", time.Now().UnixNano()))
	n := 0
	var err error
	for ; n < bound; n++ {
		var fd int
		if fd, err = unix.Open(prefix+strconv.Itoa(n), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644); err != nil {
			break
		}
		unix.Close(fd)
	}
	r.See("files", "%d", n)
	r.Try(fmt.Sprintf("create %d empty files", bound), err)
}

// fdExhaust opens /dev/null until open fails, then tries to raise its own
// limit.
func fdExhaust(r *Report, _ []string) {
	n := 0
	var err error
	for n < 1<<20 {
		if _, err = unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
			break
		}
		n++
	}
	r.See("opened", "%d", n)
	r.See("open err", "%s", errName(err))
	var lim unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_NOFILE, &lim)
	r.See("nofile", "%d %d", lim.Cur, lim.Max)
	r.Try("raise RLIMIT_NOFILE", unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: lim.Max + 1024, Max: lim.Max + 1024}))
	// The fds stay open: the report needs none, and exit closes them.
}

// flood writes to standard output and standard error without end.
func flood(_ *Report, _ []string) {
	buf := make([]byte, 64<<10)
	for i := range buf {
		buf[i] = 'A' + byte(i%26)
	}
	go func() {
		for {
			if _, err := os.Stderr.Write(buf); err != nil {
				return
			}
		}
	}()
	for {
		if _, err := os.Stdout.Write(buf); err != nil {
			os.Exit(3)
		}
	}
}

// spin keeps every CPU busy without end.
func spin(_ *Report, _ []string) {
	runtime.GOMAXPROCS(runtime.NumCPU())
	for range runtime.NumCPU() {
		go func() {
			for n := 0; ; n++ {
				_ = n
			}
		}()
	}
	// The goroutines never yield; this one only waits.
	for {
		time.Sleep(time.Hour)
	}
}

func init() { register("exhaust", exhaust) }

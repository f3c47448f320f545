//go:build linux

package recipe

import (
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// What a sandbox is, as tables the planner builds it from: the host
// directories it binds, its /dev, the parts of /proc it hides, its
// generated /etc, its rlimits.

// stagingDir is where the new root is attached before pivot_root. Every
// source is opened before that, so what it hides does not matter.
const stagingDir = "/tmp"

// HostSystemDirs are the host directories bound read-only (or recreated as
// symlinks, on merged-/usr systems) when no Rootfs is given.
var HostSystemDirs = []string{"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"}

// rootfsSkip are top-level entries of a caller's rootfs that the sandbox
// provides itself or leaves out.
var rootfsSkip = map[string]bool{"proc": true, "dev": true, "sys": true, "tmp": true, "run": true,
	"etc": true, "workspace": true, "lost+found": true}

// devices are the host device nodes bound into /dev.
var devices = []string{"null", "zero", "full", "random", "urandom", "tty"}

// MaxPtys is how many ptys one sandbox may hold open at once.
const MaxPtys = 64

// devFS is a filesystem mounted in /dev.
type devFS struct {
	name, fstype string
	attrs        int // MOUNT_ATTR_* of its mount
	opts         []string
}

// devFilesystems are /dev's own filesystems, in the order they are
// mounted: a private devpts and a tmpfs /dev/shm.
//
// The devpts is a new instance, the sandbox's own: its ptys are the only
// ones reachable, and /dev/ptmx (a link to pts/ptmx) opens them. Its mount
// must allow device nodes (no nodev), or opening ptmx fails with EACCES; a
// devpts made in a user namespace may hold only its own pty nodes (the
// kernel clears SB_I_NODEV for devpts alone), so no other device becomes
// reachable. Without gid=, a pty's slave gets the group of the process
// that opened it: the sandbox's own group, which /etc/group names. The
// host's ptys are one pool (kernel.pty.max, of which kernel.pty.reserve
// stays for the host's own devpts): MaxPtys keeps one sandbox from taking
// what the others need.
func devFilesystems(cfg *wire.Config) []devFS {
	return []devFS{
		{"pts", "devpts", unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NOEXEC, []string{"ptmxmode=0666", "mode=0620", fmt.Sprintf("max=%d", MaxPtys)}},
		{"shm", "tmpfs", unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC,
			[]string{"mode=1777", fmt.Sprintf("size=%d", cfg.TmpSize), fmt.Sprintf("nr_inodes=%d", TmpfsInodes(cfg.TmpSize))}},
	}
}

// devLinks are the symlinks of /dev.
var devLinks = map[string]string{"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
	"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"}

// Paths in /proc hidden the way runc hides them: files behind /dev/null,
// directories behind an empty read-only tmpfs, and trees made read-only.
var (
	procMaskedFiles = []string{"kcore", "keys", "latency_stats", "timer_list", "timer_stats", "sched_debug"}
	procMaskedDirs  = []string{"acpi", "asound", "scsi"}
	procReadOnly    = []string{"bus", "fs", "irq", "sys", "sysrq-trigger"}
)

const (
	roAttrs = unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
	rwAttrs = unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
)

// entry is one of the host's system directories: a directory to bind, or
// a symlink recreated as is (merged-/usr systems).
type entry struct {
	name string
	link string
}

// TmpfsInodes is how many files a writable tmpfs of size bytes may hold:
// one per page of its size, and at least 4096. The size counts pages of
// content only, and an empty file or a directory takes none, yet each
// costs the kernel about 1 KiB; without this bound a program could fill
// kernel memory with empty files, beyond its memory limit once its cgroup
// is gone (a session's workspace outlives its runs). A file with content
// takes a page of the size anyway, so only trees of empty files meet
// this bound before the size.
func TmpfsInodes(size int64) int64 {
	return max(size/4096, 4096)
}

// etcFile is one file of the generated /etc.
type etcFile struct{ name, content string }

// etcFiles are the files of the minimal /etc: the sandbox user, loopback
// names, and the files-only name service.
func etcFiles(cfg *wire.Config) []etcFile {
	nsswitch := "passwd: files\ngroup: files\nshadow: files\nhosts: files\nnetworks: files\nprotocols: files\nservices: files\n"
	files := []etcFile{
		{"passwd", fmt.Sprintf("root:x:0:0:root:/root:/bin/sh\nsandbox:x:%d:%d:sandbox:%s:/bin/sh\n"+
			"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n", wire.SandboxUID, wire.SandboxGID, wire.DefaultDir)},
		{"group", fmt.Sprintf("root:x:0:\nsandbox:x:%d:\nnogroup:x:65534:\n", wire.SandboxGID)},
		{"hosts", "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t" + cfg.Hostname + "\n"},
		{"hostname", cfg.Hostname + "\n"},
	}
	// Only the host's network has a resolver to name; elsewhere a
	// resolv.conf would invite queries that cannot be answered.
	if cfg.HostNetwork {
		nsswitch = strings.Replace(nsswitch, "hosts: files", "hosts: files dns", 1)
		if conf, err := os.ReadFile("/etc/resolv.conf"); err == nil {
			files = append(files, etcFile{"resolv.conf", string(conf)})
		}
	}
	return append(files, etcFile{"nsswitch.conf", nsswitch})
}

type rlimit struct {
	name     string
	resource int
	value    uint64
}

// rlimitsOf lists the limits to set: no core files, then what cfg limits,
// RLIMIT_NOFILE last.
func rlimitsOf(cfg *wire.Config) []rlimit {
	l := []rlimit{{"RLIMIT_CORE", unix.RLIMIT_CORE, 0}}
	for _, r := range []rlimit{
		{"RLIMIT_FSIZE (Options.Limits.FileSize)", unix.RLIMIT_FSIZE, uint64(cfg.MaxFileSize)},
		{"RLIMIT_DATA (Options.Limits.Memory, best effort)", unix.RLIMIT_DATA, cfg.RlimitData},
		{"RLIMIT_NPROC (Options.Limits.Pids, best effort)", unix.RLIMIT_NPROC, cfg.RlimitNproc},
	} {
		if r.value != 0 { // 0: not limited
			l = append(l, r)
		}
	}
	return append(l, rlimit{"RLIMIT_NOFILE (Options.Limits.OpenFiles)", unix.RLIMIT_NOFILE, cfg.NoFile})
}

// ignoredSignals start ignored in the program, and an ignored signal stays
// ignored across execve. SIGXFSZ: a write past RLIMIT_FSIZE then fails
// with EFBIG, which a program reports, instead of killing it without a
// word.
var ignoredSignals = []unix.Signal{unix.SIGXFSZ}

// programCandidates are the paths where name may be found: name itself
// if it has a slash, else name in each directory of env's PATH.
func programCandidates(name string, env []string) []string {
	if strings.Contains(name, "/") {
		return []string{name}
	}
	var candidates []string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, dir := range strings.Split(v, ":") {
				if dir == "" {
					dir = "."
				}
				candidates = append(candidates, path.Join(dir, name))
			}
		}
	}
	return candidates
}

// lastCap is the highest capability number this kernel knows.
func lastCap() (int, error) {
	const p = "/proc/sys/kernel/cap_last_cap"
	b, err := os.ReadFile(p)
	if err == nil {
		var n int
		if n, err = strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			return n, nil
		}
	}
	return 0, fmt.Errorf("read %s: %w", p, err)
}

// trustName is the name, in the new root, of the nth extended bundle
// while it is bound into place; it is unlinked right after.
func trustName(n int) string { return fmt.Sprintf(".trusted-ca-%d", n) }

// ptmxPath is the sandbox's own devpts instance's multiplexer: a pty made
// there has nothing to do with the host's ptys.
const ptmxPath = "/dev/pts/ptmx"

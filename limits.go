package sandbox

// Limits bound each run's resources, Options.Limits. The zero value is the
// defaults named on each field.
type Limits struct {
	// Memory caps the run's memory (its processes' RAM, page cache and
	// kernel memory charged to its cgroup; tmpfs files count too), in
	// bytes. Swap is turned off for the run. Zero means DefaultMemory; a
	// negative value means no limit; New refuses a limit below
	// MinMemory. When the kernel OOM-kills inside the run, the Result's
	// Outcome is OutOfMemory. On cgroup v2 an OOM kill
	// ends the whole run (memory.oom.group); on v1 it kills the largest
	// process. In a live sandbox (Options.Live) it kills one process on
	// both, the calls' processes before the sandbox's init.
	Memory int64
	// CPUs caps CPU time as a number of CPUs: 0.25 is a quarter of one
	// CPU, 2 is two whole CPUs (cgroup CPU quota over a 100 ms period).
	// Zero means DefaultCPUs; a negative value means no limit. With an
	// *Egress Network it also sets the egress proxy's CPU budget for the
	// run (see Egress).
	CPUs float64
	// Pids caps the run's processes and threads together. Zero means
	// DefaultPids; a negative value means no limit. Result.PidsLimitHit
	// says when a fork failed at the limit.
	Pids int64
	// IOReadBPS and IOWriteBPS cap, in bytes per second, what the run
	// reads from and writes to the disks under a HostWorkspace and the
	// writable Binds (cgroup v2 io.max, v1 blkio throttling; on v1 only
	// direct IO is throttled, as page-cache writeback is not charged to a
	// v1 cgroup). Zero means no cap. The sandbox's own /tmp and tmpfs
	// /workspace are in memory and bounded by Memory instead. Where no
	// disk backs those paths, Result.Limits says io is not limited.
	IOReadBPS, IOWriteBPS int64
	// FileSize caps the size of any one file the program writes
	// (RLIMIT_FSIZE), in bytes: it is what bounds files in a
	// HostWorkspace and writable Binds, while /tmp and the tmpfs
	// /workspace are bounded by their sizes first. Zero means
	// DefaultMaxFileSize, or the larger of TmpSize and the workspace's
	// size where that is larger, so that a tmpfs is filled before the cap
	// applies; a negative value means no limit. A write past it fails
	// with EFBIG ("File too large"), and one past a tmpfs's size with
	// ENOSPC: the program starts with SIGXFSZ ignored, so neither kills
	// it.
	FileSize int64
	// OpenFiles is the program's RLIMIT_NOFILE, a number of descriptors.
	// Zero means DefaultMaxOpenFiles.
	OpenFiles uint64
	// TmpSize caps /tmp and /dev/shm each, in bytes, and their files as
	// SessionWorkspace.Size does. Zero means DefaultTmpSize.
	TmpSize int64
	// Output caps each captured stream (Result.Stdout, Result.Stderr),
	// in bytes. Zero means DefaultOutputLimit. Streams given to Cmd.Stdout
	// or Cmd.Stderr are passed through uncapped.
	Output int64
	// CgroupParent is the cgroup (a path as /proc/self/cgroup shows it)
	// beneath which each run's cgroup is made. Empty means the cgroup of
	// the process that starts sandboxes (the spawner's, which is the
	// caller's). On cgroup v2, a parent holding processes cannot offer
	// controllers to its children; its processes are then moved to a
	// "sandbox-host" leaf beneath it, once, before the first run.
	CgroupParent string
	// Policy says what Run does where no writable cgroup exists (an
	// unprivileged caller without a delegated cgroup, or on a cgroup v1
	// host): the zero value, EnforceLimits, makes Run refuse with an error
	// matching ErrNotSupported; BestEffortLimits runs anyway with rlimits
	// standing in (RLIMIT_DATA for memory, RLIMIT_NPROC for pids; CPU is
	// then not limited) and Result.Limits says what was enforced and how.
	Policy LimitPolicy
}

// LimitPolicy says what to do when the resource limits cannot be put in
// place with a cgroup. The zero value is EnforceLimits.
type LimitPolicy int

const (
	// EnforceLimits refuses to run without a cgroup for the limits.
	EnforceLimits LimitPolicy = iota
	// BestEffortLimits runs with rlimits standing in, and reports in
	// Result.Limits which limits were enforced and how.
	BestEffortLimits
)

//go:build linux

package launch

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fumehood/sandbox/internal/report"
	"github.com/fumehood/sandbox/internal/sysutil"

	"github.com/fumehood/sandbox/internal/cgroup"
	"github.com/fumehood/sandbox/internal/wire"
)

// runSeq numbers this process's runs, for unique cgroup names.
var runSeq atomic.Uint64

// sweepStale removes, once per process, run cgroups left by a spawner or
// caller that was killed before it could remove them.
var sweepStale sync.Once

// applyLimits makes the run's cgroup with cfg's limits. Where no writable
// cgroup exists it fails, unless cfg allows best effort: then it sets the
// rlimit stand-ins in cfg for the init. It returns the cgroup (nil when
// there is none) and what was enforced, and how.
func applyLimits(cfg *wire.Config) (cgroup.Group, []report.Limit, *wire.SetupError) {
	var disks []cgroup.Device
	if cfg.IOReadBPS > 0 || cfg.IOWriteBPS > 0 {
		paths := []string{cfg.Workspace}
		for _, b := range cfg.Binds {
			if b.Writable {
				paths = append(paths, b.Source)
			}
		}
		disks = cgroup.BlockDevices(paths...)
	}
	wanted := []report.Limit{
		{Name: "memory", Value: fmt.Sprintf("%d bytes", cfg.Memory), Enforced: cfg.Memory > 0},
		{Name: "cpu", Value: fmt.Sprintf("%d/%d µs", cfg.CPUQuota, cfg.CPUPeriod), Enforced: cfg.CPUQuota > 0},
		{Name: "pids", Value: fmt.Sprint(cfg.Pids), Enforced: cfg.Pids > 0},
		{Name: "io", Value: fmt.Sprintf("read %d, write %d bytes/s on %v", cfg.IOReadBPS, cfg.IOWriteBPS, disks), Enforced: len(disks) > 0},
	}
	limited := false
	for i := range wanted {
		if !wanted[i].Enforced {
			wanted[i].Value, wanted[i].By = "none", "not limited (Options)"
		}
		limited = limited || wanted[i].Enforced
	}
	if io := &wanted[3]; !io.Enforced && (cfg.IOReadBPS > 0 || cfg.IOWriteBPS > 0) {
		io.By = "not limited: no disk under Workspace or a writable bind (tmpfs is bounded by memory)"
	}
	if !limited {
		return nil, wanted, nil
	}
	// A maker killed a moment ago may leave a cgroup whose processes
	// are still being reaped: those get a quarter second.
	sweepStale.Do(func() { cgroup.RemoveStale(cfg.CgroupParent, 250*time.Millisecond) })
	name := fmt.Sprintf("%s%d-%d", cgroup.NamePrefix, os.Getpid(), runSeq.Add(1))
	grp, err := cgroup.New(cfg.CgroupParent, name, cgroup.Limits{
		Memory: cfg.Memory, CPUQuota: cfg.CPUQuota, CPUPeriod: cfg.CPUPeriod, Pids: cfg.Pids,
		IOReadBPS: cfg.IOReadBPS, IOWriteBPS: cfg.IOWriteBPS, IODevices: disks,
	})
	switch {
	case err == nil:
		for i := range wanted {
			if wanted[i].Enforced {
				wanted[i].By = "cgroup " + cgroup.Detect().String()
			}
		}
		return grp, wanted, nil
	case !errors.Is(err, cgroup.ErrNoCgroup):
		return nil, nil, &wire.SetupError{Stage: "cgroup", Op: "create", Text: err.Error(), Errno: sysutil.ErrnoOf(err)}
	case !cfg.BestEffort:
		return nil, nil, &wire.SetupError{Stage: "cgroup", Op: wire.OpNoCgroup, Text: err.Error()}
	}
	// Best effort: rlimits per process where they can stand in.
	for i := range wanted {
		l := &wanted[i]
		switch {
		case !l.Enforced:
		case l.Name == "memory":
			cfg.RlimitData, l.By = uint64(cfg.Memory), "RLIMIT_DATA (per process; no writable cgroup)"
		case l.Name == "pids":
			cfg.RlimitNproc, l.By = uint64(cfg.Pids), "RLIMIT_NPROC (no writable cgroup)"
		default:
			l.Enforced, l.By = false, "no writable cgroup, and no rlimit limits "+l.Name
		}
	}
	return nil, wanted, nil
}

// usageOf adds what the run's cgroup measured to exit.
func usageOf(grp cgroup.Group, exit *wire.Exit) {
	if u, err := grp.Usage(); err == nil {
		exit.CgroupCPUNS, exit.MemoryPeak = u.CPU.Nanoseconds(), u.MemoryPeak
		exit.OOMKills, exit.PidsMax = u.OOMKills, u.PidsMax
	}
}

package sandbox

// Start is how a Sandbox's sandboxes are started, Options.Start: Pool or
// InProcess. Only those implement it. Nil means cold, each by the shared
// spawner process when a Run asks for it.
type Start interface{ isStart() }

// Pool keeps sandboxes of the Sandbox prepared ahead in the spawner:
// namespaces made, root built and pivoted into, cgroup made and limits set,
// waiting only for the program. A Run takes one, hands it the program and
// its stdio, and starts the program in it; each prepared sandbox serves
// exactly one Run and is destroyed with it, as a cold one is, and a new one
// is prepared in the background. A pooled Run is as isolated as a cold one;
// it only starts sooner. When the pool is empty a Run starts cold. The
// prepared sandboxes hold their cgroup's memory and pids until used or
// until Close. Not with an *Egress Network (each run's proxy is made at its
// start) or a Bind beneath the session's /workspace (which a run is given
// only at its start).
type Pool struct {
	// Size is how many sandboxes are kept prepared, 1 to 64. Zero means
	// none: Runs start cold.
	Size int
}

// InProcess starts each sandbox directly from the calling process instead
// of through the shared spawner process. It saves a process start for
// small short-lived programs such as the command-line tool. The sandbox is
// built the same way either way; on amd64 its init shares the caller's
// memory until it execs, so a large caller costs no more, while elsewhere
// the kernel copies the caller's page tables for each start, which services
// should avoid. The sandbox is killed when the OS thread that started it
// exits, as with os/exec's Pdeathsig: do not call Run from a goroutine that
// locked its thread and then returns. A caller killed outright (SIGKILL)
// takes its sandboxes with it, but leaves their emptied run cgroups, which
// the next process on the host to start a sandbox removes; through the
// spawner, the spawner removes them itself. Not with Options.Live (the
// running sandbox is held by the spawner).
type InProcess struct{}

func (Pool) isStart()      {}
func (InProcess) isStart() {}

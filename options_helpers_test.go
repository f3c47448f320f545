package sandbox

// Tests that run one case both through the spawner and in process, or
// with and without a choice, pick the group's value with these.

// inProcessIf is InProcess{} when in, else nil: cold starts by the spawner.
func inProcessIf(in bool) Start {
	if in {
		return InProcess{}
	}
	return nil
}

// killOnRefusal is a copy of p that kills at a refusal when kill is set.
func killOnRefusal(p *SeccompPolicy, kill bool) *SeccompPolicy {
	c := *p
	c.KillOnRefusal = kill
	return &c
}

// liveIf is l when live, else nil: a sandbox of its own for every Run.
func liveIf(live bool, l Live) *Live {
	if live {
		return &l
	}
	return nil
}

// poolSize is o's Pool.Size, 0 without a Pool.
func poolSize(o Options) int {
	p, _ := o.Start.(Pool)
	return p.Size
}

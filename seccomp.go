package sandbox

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"syscall"

	"github.com/fumehood/sandbox/internal/seccomp"
)

// SeccompPolicy is the syscall filter of a run: what the kernel does when
// the program, or anything it starts, makes a system call. It is a plain
// value: start from DefaultSeccompPolicy and amend it, or build one from an
// OCI or Docker profile (package seccompprofile).
//
// A syscall's rules are tried in order; the first whose Args all hold
// decides. A syscall that no rule names, or whose rules all fail, gets
// Default. So a rule put in front of a syscall's unconditional rule
// overrides it, and the overridden rule is dropped; a conditional rule
// behind an unconditional one could never apply, and New refuses it. A syscall number this architecture's table has no name for (one
// newer than this build, say) gets Unknown; ENOSYS there lets programs fall
// back as they would on an older kernel. Syscalls of another architecture,
// and the x32 ABI on amd64, always kill the process.
//
// So that the pure-Go and libseccomp compilers decide alike, the rules of
// one syscall take a fixed shape: conditional rules (with Args) all carry
// the same action, and an unconditional rule, if there is one, comes last
// as the syscall's fallback. Each argument is compared at most once per
// rule. New reports a policy that breaks this, naming the rule.
type SeccompPolicy struct {
	Default SeccompAction
	Unknown SeccompAction
	Rules   []SyscallRule
	// KillOnRefusal ends the run at the first syscall the policy refuses
	// with an ActNotify action (every refusal of the default policy):
	// the Result's Outcome is SeccompKilled and Violation names the
	// syscall. False: a refused syscall fails with its errno and the run
	// goes on; Result.Denials counts the refusals either way. Set it on
	// a copy of DefaultSeccompPolicy() to kill with the default rules.
	KillOnRefusal bool
}

// Seccomp is the syscall filter of every run, Options.Seccomp:
// *SeccompPolicy or Unconfined. Only those implement it. Nil means
// DefaultSeccompPolicy(). New compiles it once, and refuses a policy that
// would stop the sandbox's init after it is loaded: the init then closes
// its fds, execs the exec shim (execveat), which marks its report fd
// close-on-exec (fcntl) and execs the program (execve), and a policy that
// notifies also needs sendmsg.
type Seccomp interface{ isSeccomp() }

// Unconfined runs without any syscall filter, leaving the whole kernel
// interface to the program. Only for programs you trust.
type Unconfined struct{}

func (*SeccompPolicy) isSeccomp() {}
func (Unconfined) isSeccomp()     {}

// SyscallRule applies Action to the named syscalls when every one of Args
// holds.
type SyscallRule struct {
	Names  []string // syscall names as the kernel spells them: "openat", "clone3"
	Action SeccompAction
	Args   []ArgCond
}

// ArgCond compares one syscall argument, as an unsigned 64-bit value.
type ArgCond struct {
	Index int // 0 to 5
	Op    ArgOp
	Value uint64
	Mask  uint64 // for ArgMaskedEq: the argument ANDed with Mask must equal Value
}

// ArgOp is the comparison of an ArgCond.
type ArgOp int

// The comparisons.
const (
	ArgEq ArgOp = iota + 1
	ArgNe
	ArgGt
	ArgGe
	ArgLt
	ArgLe
	ArgMaskedEq
)

var argOpNames = map[ArgOp]string{ArgEq: "==", ArgNe: "!=", ArgGt: ">", ArgGe: ">=", ArgLt: "<", ArgLe: "<=", ArgMaskedEq: "&mask =="}

// String returns the comparison as an operator, e.g. "==".
func (o ArgOp) String() string {
	if s, ok := argOpNames[o]; ok {
		return s
	}
	return fmt.Sprintf("ArgOp(%d)", int(o))
}

// SeccompAction is what the filter does with a syscall. The zero value is
// not an action.
type SeccompAction uint32

// The actions without an errno.
const (
	// ActAllow lets the syscall run.
	ActAllow = SeccompAction(seccomp.Allow)
	// ActKill kills the whole process at once (SIGSYS).
	ActKill = SeccompAction(seccomp.KillProcess)
	// ActLog lets the syscall run and logs it to the kernel's audit log.
	ActLog = SeccompAction(seccomp.Log)
)

// ActErrno fails the syscall with e, in the kernel, without a report.
// Meant for expected probes a program falls back from, such as clone3
// returning ENOSYS.
func ActErrno(e syscall.Errno) SeccompAction { return SeccompAction(seccomp.Errno(e)) }

// ActNotify fails the syscall with e and reports it: Result.Denials counts
// it, and with SeccompPolicy.KillOnRefusal it ends the run. The kernel stops the
// syscall and hands it to a supervisor in the host process, which answers
// with e and never lets the syscall run.
func ActNotify(e syscall.Errno) SeccompAction { return SeccompAction(seccomp.Notify(e)) }

// Errno returns the error of an ActErrno or ActNotify action, else 0.
func (a SeccompAction) Errno() syscall.Errno {
	if a.isErrno() || a.isNotify() {
		return syscall.Errno(a & 0xffff)
	}
	return 0
}

func (a SeccompAction) isErrno() bool {
	return seccomp.Action(a)&^0xffff == seccomp.Errno(0)
}

func (a SeccompAction) isNotify() bool {
	return seccomp.Action(a)&^0xffff == seccomp.UserNotif
}

// String names the action: "allow", "kill", "log", "errno(EPERM)",
// "notify(ENOSYS)".
func (a SeccompAction) String() string {
	switch {
	case a == ActAllow:
		return "allow"
	case a == ActKill:
		return "kill"
	case a == ActLog:
		return "log"
	case a.isErrno():
		return "errno(" + errnoName(a.Errno()) + ")"
	case a.isNotify():
		return "notify(" + errnoName(a.Errno()) + ")"
	}
	return fmt.Sprintf("SeccompAction(%#x)", uint32(a))
}

// DefaultSeccompPolicy returns the policy every run gets unless
// Options.Seccomp says otherwise: an allowlist of what shells, coreutils,
// interpreters, compilers and package managers use. Everything else a
// program may ask for is refused with EPERM and reported (ActNotify), and
// unknown syscall numbers fail with ENOSYS, also reported. See
// defaultAllowed and defaultConditional for what is allowed and why the
// rest is not.
func DefaultSeccompPolicy() *SeccompPolicy {
	p := &SeccompPolicy{Default: ActNotify(syscall.EPERM), Unknown: ActNotify(syscall.ENOSYS)}
	var allowed []string
	for _, name := range defaultAllowed {
		if _, ok := seccomp.Number(name); ok {
			allowed = append(allowed, name)
		}
	}
	p.Rules = append(p.Rules, SyscallRule{Names: allowed, Action: ActAllow})
	for _, r := range defaultConditional() {
		if _, ok := seccomp.Number(r.Names[0]); ok {
			p.Rules = append(p.Rules, r)
		}
	}
	return p
}

// Clone returns a deep copy of p, to amend without touching p.
func (p *SeccompPolicy) Clone() *SeccompPolicy {
	c := &SeccompPolicy{Default: p.Default, Unknown: p.Unknown, Rules: make([]SyscallRule, len(p.Rules))}
	for i, r := range p.Rules {
		c.Rules[i] = SyscallRule{Names: append([]string(nil), r.Names...), Action: r.Action, Args: append([]ArgCond(nil), r.Args...)}
	}
	return c
}

// filter resolves p's names to this architecture's numbers. option is the
// field p came from, for errors.
func (p *SeccompPolicy) filter(option string) (seccomp.Filter, error) {
	f := seccomp.Filter{
		Arch:    seccomp.NativeArch,
		MaxNr:   seccomp.MaxNr,
		Default: seccomp.Action(p.Default),
		Unknown: seccomp.Action(p.Unknown),
		NoX32:   runtime.GOARCH == "amd64",
	}
	if f.Arch == 0 {
		return f, &UnsupportedError{Feature: "seccomp", Reason: "no syscall table for " + runtime.GOARCH,
			Hint: "run on amd64 or arm64, or set Options.Seccomp to Unconfined{}"}
	}
	for _, d := range []struct {
		name string
		a    SeccompAction
	}{{"Default", p.Default}, {"Unknown", p.Unknown}} {
		if err := d.a.check(); err != nil {
			return f, optionErr(option+"."+d.name, d.a.String(), "%v", err)
		}
	}
	origin := make([]int, 0, len(p.Rules)) // the policy rule of each of f.Rules
	closed := make(map[uint32]bool, 512)
	f.Rules = make([]seccomp.Rule, 0, len(p.Rules))
	for i, r := range p.Rules {
		// The rule's name, for its errors only: formatting it for every
		// rule was a fifth of the default policy's compile.
		field := func() string { return fmt.Sprintf("%s.Rules[%d]", option, i) }
		if err := r.Action.check(); err != nil {
			return f, optionErr(field()+".Action", r.Action.String(), "%v", err)
		}
		if len(r.Names) == 0 {
			return f, optionErr(field()+".Names", "", "names no syscall")
		}
		conds := make([]seccomp.Cond, len(r.Args))
		for j, c := range r.Args {
			if c.Index < 0 || c.Index > 5 {
				return f, optionErr(fmt.Sprintf("%s.Args[%d].Index", field(), j), fmt.Sprint(c.Index), "must be 0 to 5")
			}
			if _, ok := argOpNames[c.Op]; !ok {
				return f, optionErr(fmt.Sprintf("%s.Args[%d].Op", field(), j), c.Op.String(), "is not one of ArgEq ... ArgMaskedEq")
			}
			if c.Op == ArgMaskedEq && c.Value&^c.Mask != 0 {
				return f, optionErr(fmt.Sprintf("%s.Args[%d].Value", field(), j), fmt.Sprintf("%#x", c.Value),
					"has bits outside Mask %#x, so the rule could never match", c.Mask)
			}
			conds[j] = seccomp.Cond{Arg: c.Index, Op: seccomp.Op(c.Op - ArgEq), Value: c.Value, Mask: c.Mask}
		}
		for j, name := range r.Names {
			nr, ok := seccomp.Number(name)
			if !ok {
				return f, optionErr(fmt.Sprintf("%s.Names[%d]", field(), j), name, "is not a syscall on %s", runtime.GOARCH)
			}
			// Rules after a syscall's unconditional rule never apply
			// (first match wins). An unconditional one is dropped, so
			// that a caller overrides the default by putting a rule in
			// front; a conditional one is refused, as it looks like a
			// refusal (say, TIOCSTI) that would silently not happen.
			if closed[nr] && len(conds) > 0 {
				return f, optionErr(fmt.Sprintf("%s.Names[%d]", field(), j), name,
					"this conditional rule never applies: an earlier rule decides every %s call", name)
			}
			if closed[nr] {
				continue
			}
			closed[nr] = len(conds) == 0
			f.Rules = append(f.Rules, seccomp.Rule{Nr: nr, Conds: conds, Action: seccomp.Action(r.Action)})
			origin = append(origin, i)
		}
	}
	if err := f.Check(); err != nil {
		var re *seccomp.RuleError
		if errors.As(err, &re) && re.Rule >= 0 {
			return f, optionErr(fmt.Sprintf("%s.Rules[%d]", option, origin[re.Rule]), seccomp.Name(re.Nr), "%s", re.Reason)
		}
		return f, optionErr(option, "", "%v", err)
	}
	return f, nil
}

// check accepts the actions a policy may use.
func (a SeccompAction) check() error {
	switch {
	case a == ActAllow, a == ActKill, a == ActLog:
		return nil
	case a.isErrno() || a.isNotify():
		if a.Errno() == 0 {
			return fmt.Errorf("errno 0 would make the syscall appear to succeed")
		}
		if a.isNotify() && a.Errno() == seccomp.ContinueErrno {
			// The supervisor would let such a syscall run.
			return fmt.Errorf("errno %d is reserved: the supervisor reads it as a syscall to record and let run (Options.Audit.Exec)", int(a.Errno()))
		}
		if a.Errno() >= seccomp.MaxErrno {
			// libseccomp refuses MAX_ERRNO itself; keep both compilers alike.
			return fmt.Errorf("errno %d is not below the kernel's MAX_ERRNO %d", int(a.Errno()), seccomp.MaxErrno)
		}
		return nil
	}
	return fmt.Errorf("not an action; use ActAllow, ActKill, ActLog, ActErrno or ActNotify")
}

// compiledFilter is a policy ready for the init: the kernel's bytes, and
// what the sandbox must do around it.
type compiledFilter struct {
	prog   []byte
	notify bool // some action reports: the init hands over a listener
}

// compile checks and compiles p.
func (p *SeccompPolicy) compile(option string) (*compiledFilter, error) {
	return p.compileFor(option, false)
}

// compileFor is compile; with auditExec, the filter notifies execve and
// execveat for the supervisor to record (auditExecs).
func (p *SeccompPolicy) compileFor(option string, auditExec bool) (*compiledFilter, error) {
	f, err := p.filter(option)
	if err != nil {
		return nil, err
	}
	if auditExec {
		if err := auditExecs(&f, option); err != nil {
			return nil, err
		}
	}
	prog, err := seccomp.CompileForBuild(f)
	if err != nil {
		return nil, optionErr(option, "", "%v", err)
	}
	b, err := seccomp.Encode(prog)
	if err != nil {
		return nil, optionErr(option, "", "%v", err)
	}
	cf := &compiledFilter{prog: b, notify: auditExec || p.Default.isNotify() || p.Unknown.isNotify()}
	for _, r := range p.Rules {
		cf.notify = cf.notify || r.Action.isNotify()
	}
	if err := cf.runsInit(option); err != nil {
		return nil, err
	}
	return cf, nil
}

// runsInit checks that the filter lets the init finish once it is loaded:
// hand the listener over (sendmsg), close it, keep its report fd for the
// exec shim (fcntl), exec the shim (execveat), which execs the program
// (execve).
func (cf *compiledFilter) runsInit(option string) error {
	need := []syscallOn{{"execve", initConnFdArg}, {"execveat", initConnFdArg}, {"fcntl", initConnFdArg}, {"close", initConnFdArg}}
	if cf.notify {
		need = append(need, syscallOn{"sendmsg", initConnFdArg})
	}
	return cf.allows(option, need, "which the sandbox's init makes after loading the filter")
}

// syscallOn is a syscall by name, with its first argument.
type syscallOn struct {
	name string
	arg0 uint64
}

// holdsLive checks that the filter lets a live sandbox's init, the exec
// shim in its hold mode, do what it does: ignore SIGCHLD (rt_sigaction)
// and wait (ppoll). Refused, the init would fail at its start, or wait in
// a busy loop.
func (cf *compiledFilter) holdsLive(option string) error {
	const sigchld = 17
	return cf.allows(option, []syscallOn{{"rt_sigaction", sigchld}, {"ppoll", 0}}, "which a live sandbox's init makes to wait (Options.Live)")
}

// allows checks that the filter allows each of the syscalls calls.
func (cf *compiledFilter) allows(option string, calls []syscallOn, why string) error {
	ev, err := seccomp.NewEvaluator(cf.prog)
	if err != nil {
		return optionErr(option, "", "%v", err)
	}
	for _, c := range calls {
		nr, ok := seccomp.Number(c.name)
		if !ok {
			continue // not a syscall of this architecture
		}
		a, err := ev.Decide(seccomp.Data{Nr: nr, Arch: seccomp.NativeArch, Args: [6]uint64{c.arg0}})
		// An audited exec runs once the supervisor has recorded it.
		if err == nil && a != seccomp.Allow && a != seccomp.Log && a != seccomp.NotifyContinue() {
			err = fmt.Errorf("refuses %s (%s), %s; allow it", c.name, SeccompAction(a), why)
		}
		if err != nil {
			return optionErr(option, "", "%v", err)
		}
	}
	return nil
}

// initConnFdArg is the fd the init's last syscalls name (its parent
// socket), as the filter sees it.
const initConnFdArg = 3

// defaultFilter is the default policy, compiled once per process, or the
// program compiled from it when the module was built (defaultProg), where
// there is one: a process that makes one run, as "sandbox run" is, would
// spend as much on the compile as on its own initialisers. Tests run the
// same program; TestDefaultProg holds it to what the policy compiles to,
// and a change to the policy is followed by go generate.
var defaultFilter = sync.OnceValues(func() (*compiledFilter, error) {
	if defaultProg != nil {
		return &compiledFilter{prog: defaultProg, notify: defaultProgNotify}, nil
	}
	return DefaultSeccompPolicy().compile("DefaultSeccompPolicy()")
})

//go:generate go test -run ^TestDefaultProg$ -update-default-prog .

// defaultAuditFilter is the default policy with its execs audited
// (Options.Audit.Exec), compiled once per process.
var defaultAuditFilter = sync.OnceValues(func() (*compiledFilter, error) {
	return DefaultSeccompPolicy().compileFor("DefaultSeccompPolicy()", true)
})

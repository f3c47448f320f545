package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fumehood/sandbox"
	"golang.org/x/sys/unix"
)

// runFlags are the flags of "sandbox run".
type runFlags struct {
	fs        *flag.FlagSet
	timeout   time.Duration
	binds     bindList
	workspace absDir
	rootfs    absDir
	env       envList
	dir       string
	json      bool
	verbose   bool

	// Resource limits, left zero (the library's defaults) unless given.
	memory, pids, tmpSize, workspaceSize int64
	maxFileSize                          int64
	cpus                                 float64
	bestEffort                           bool

	seccomp     seccompFlag
	seccompKill bool

	net netFlag

	tty, noTTY bool
	image      imageFlags
	caCerts    pemFile
	secrets    secretFlag
}

// limitFlags are the flags whose values runConfig.given keeps as typed, for
// messages about them.
var limitFlags = []string{"memory", "cpus", "pids", "tmp-size", "workspace-size", "max-file-size"}

func newRunFlags() *runFlags {
	f := &runFlags{fs: flag.NewFlagSet("run", flag.ContinueOnError), seccomp: seccompFlag{value: "default"}}
	// Errors and usage are printed by runMain, once.
	f.fs.SetOutput(io.Discard)
	f.fs.Usage = func() {}
	f.fs.DurationVar(&f.timeout, "timeout", 0, "kill the sandbox after `DUR` (e.g. 5s); 0 means no limit")
	f.fs.Var(&bindFlag{list: &f.binds, name: "ro-bind"}, "ro-bind",
		"bind host path SRC read-only at DST (default: SRC) in the sandbox; `SRC[:DST]`, repeatable")
	f.fs.Var(&bindFlag{list: &f.binds, name: "bind", writable: true}, "bind",
		"like --ro-bind, but writable; `SRC[:DST]`, repeatable")
	f.fs.Var(&f.workspace, "workspace",
		"bind host `DIR` read-write at /workspace instead of a tmpfs, keeping its files for\n"+
			"the next run; it must exist and be writable by the sandbox's host uid (65534 when\n"+
			"run as root, else your own), as the library requires: it is never made")
	f.fs.Var(&f.rootfs, "rootfs", "use host `DIR` (an extracted image) instead of the host's /usr, /bin, /lib*")
	f.image.add(f.fs, true)
	f.fs.Var(&f.env, "env", "set `K=V` in the program's environment, repeatable")
	f.fs.StringVar(&f.dir, "dir", "", "working `DIR` inside the sandbox (default /workspace, or --image's own)")
	f.fs.BoolVar(&f.json, "json", false, "capture output and print the result as one JSON object on stdout")
	f.fs.BoolVar(&f.verbose, "verbose", false, "also report on stderr the syscalls the seccomp filter refused\n"+
		"(harmless probes, mostly; --json always lists them in \"denials\")")
	f.fs.BoolVar(&f.verbose, "v", false, "")
	f.fs.Var(&sizeFlag{v: &f.memory, unlimited: true}, "memory",
		"cap the run's memory (RAM, page cache, files in /tmp and /workspace; no swap)\n"+
			"at `SIZE`: bytes, or with K, M or G (powers of 1024; \"i\", \"iB\" or \"B\" may\n"+
			"follow), e.g. 512M, 1GiB; 0 or \"unlimited\" for no limit (default "+formatSize(sandbox.DefaultMemory)+")")
	f.fs.Var(&cpusFlag{v: &f.cpus}, "cpus",
		"cap CPU time at `N` CPUs' worth, e.g. 0.5 or 2; 0 or \"unlimited\" for no limit\n"+
			"(default "+strconv.FormatFloat(sandbox.DefaultCPUs, 'f', -1, 64)+")")
	f.fs.Var(&pidsFlag{v: &f.pids}, "pids",
		"cap the run's processes and threads at `N`; 0 or \"unlimited\" for no limit\n"+
			"(default "+strconv.Itoa(sandbox.DefaultPids)+")")
	f.fs.Var(&sizeFlag{v: &f.tmpSize}, "tmp-size",
		"size of the tmpfs /tmp, `SIZE` in the units of --memory (default "+formatSize(sandbox.DefaultTmpSize)+")")
	f.fs.Var(&sizeFlag{v: &f.workspaceSize}, "workspace-size",
		"size of the tmpfs /workspace, `SIZE` in the units of --memory (default "+formatSize(sandbox.DefaultWorkspaceSize)+")")
	f.fs.Var(&sizeFlag{v: &f.maxFileSize, unlimited: true}, "max-file-size",
		"cap each file the program writes at `SIZE` in the units of --memory; a write past\n"+
			"it fails with \"File too large\". It bounds files in --workspace and --bind\n"+
			"directories on the host's disk (the tmpfs sizes bound the rest); 0 or\n"+
			"\"unlimited\" for no limit (default "+formatSize(sandbox.DefaultMaxFileSize)+")")
	f.fs.BoolVar(&f.bestEffort, "best-effort", false,
		"where no writable cgroup exists (an unprivileged user without a delegated\n"+
			"cgroup, a cgroup v1 host), run anyway with rlimits standing in for the limits:\n"+
			"RLIMIT_DATA per process for --memory, RLIMIT_NPROC for --pids, and no CPU limit;\n"+
			"without it such a run is refused (--json \"limits\" says what was enforced)")
	f.fs.Var(&f.seccomp, "seccomp",
		"the syscall filter: \"default\" (the library's policy; see sandbox policy export),\n"+
			"a Docker or OCI seccomp profile `FILE.json`, or \"unconfined\" for none")
	f.fs.BoolVar(&f.seccompKill, "seccomp-kill", false,
		"end the run at the first syscall the filter refuses (exit status 159)\n"+
			"instead of failing that syscall with its errno")
	f.fs.Var(&f.net, "net",
		"the network: \"none\" (loopback only), \"allow:`LIST`\" (only the comma-separated\n"+
			"hosts, through an HTTP proxy the tool runs: NAME, *.SUFFIX, NAME:PORT,\n"+
			"CIDR[:PORT]; the program sees HTTP(S)_PROXY and has no DNS), or \"host\"\n"+
			"(the host's network: UNSAFE, for trusted code only)")
	f.fs.BoolVar(&f.tty, "tty", false,
		"run the program on a terminal of its own even when stdin and stdout are not\n"+
			"terminals (by default it gets one when both are, without --json): an interactive\n"+
			"shell with job control, where Ctrl-C reaches the foreground job; the tool's\n"+
			"terminal is raw meanwhile, passes on window size changes, and is put back as it\n"+
			"was; the program's stderr goes to the same terminal")
	f.fs.BoolVar(&f.tty, "t", false, "")
	f.fs.BoolVar(&f.noTTY, "no-tty", false, "never give the program a terminal: stdin, stdout and stderr are pipes")
	f.fs.Var(&f.caCerts, "ca-certs",
		"trust the PEM certificates in `FILE` (a corporate or test CA) besides the\n"+
			"host's CA store: every CA bundle in the sandbox's /etc lists them too")
	f.fs.Var(&f.secrets, "secret",
		"give the program a placeholder in the environment variable `NAME=HOST[,HOST...]`,\n"+
			"which the --net allow proxy replaces with the value of this tool's own\n"+
			"environment variable NAME in the request headers it sends to HOSTs (names\n"+
			"--net allows; HTTPS to them is terminated by the proxy): the program never\n"+
			"holds the value; repeatable")
	return f
}

// ttyMode says whether a run gets a terminal.
type ttyMode int

const (
	ttyAuto  ttyMode = iota // when stdin and stdout are terminals, without --json
	ttyForce                // -t, --tty
	ttyNone                 // --no-tty
)

// shortFlags are the one-letter names of flags, listed with them.
var shortFlags = map[string]string{"tty": "t", "verbose": "v"}

// runConfig is a parsed "sandbox run" command line.
type runConfig struct {
	opts    sandbox.Options
	args    []string // the program and its arguments
	env     []string
	dir     string
	timeout time.Duration
	json    bool
	verbose bool
	binds   []bindSpec        // the specs behind opts.Binds, for error messages
	given   map[string]string // the limitFlags given, by name, as typed
	seccomp seccompFlag
	tty     ttyMode
}

// parseRun parses the arguments of "sandbox run". Errors name the flag at
// fault; flag.ErrHelp means -h was given.
func parseRun(args []string) (*runConfig, error) {
	f := newRunFlags()
	if err := f.fs.Parse(args); err != nil {
		return nil, err
	}
	if f.timeout < 0 {
		return nil, fmt.Errorf("invalid value %q for flag -timeout: must not be negative", f.timeout)
	}
	if f.fs.NArg() == 0 {
		return nil, errors.New("no command given: want sandbox run [flags] -- COMMAND [ARG...]")
	}
	tty := ttyAuto
	switch {
	case f.tty && f.noTTY:
		return nil, errors.New("flags --tty and --no-tty contradict each other: give one")
	case f.tty:
		tty = ttyForce
	case f.noTTY:
		tty = ttyNone
	}
	opts, err := f.options()
	if err != nil {
		return nil, err
	}
	// One invocation is one run: without --workspace there is no state
	// to keep for a next one.
	if f.workspace == "" {
		opts.Workspace = sandbox.FreshWorkspace{Size: f.workspaceSize}
	}
	opts.Start = sandbox.InProcess{} // a small, short-lived process: no spawner needed
	return &runConfig{
		opts:    opts,
		args:    f.fs.Args(),
		env:     f.env,
		dir:     f.dir,
		timeout: f.timeout,
		json:    f.json,
		verbose: f.verbose,
		binds:   f.binds.specs,
		given:   givenFlags(f.fs),
		seccomp: f.seccomp,
		tty:     tty,
	}, nil
}

// options are the sandbox.Options the flags set. "sandbox run" and
// "sandbox mcp" both build theirs here, so that a flag for an option
// serves both commands; each then sets what is its own (Start, Workspace,
// Live, TrackChanges). The error is of flags that rule each other out.
func (f *runFlags) options() (sandbox.Options, error) {
	opts := sandbox.Options{
		Binds:      f.binds.binds(),
		TrustedCAs: f.caCerts.data,
		Limits: sandbox.Limits{TmpSize: f.tmpSize, FileSize: f.maxFileSize, Memory: f.memory, CPUs: f.cpus, Pids: f.pids,
			Policy: sandbox.EnforceLimits},
	}
	if f.bestEffort {
		opts.Limits.Policy = sandbox.BestEffortLimits
	}
	switch im := f.image.image(nil); {
	case im != nil && f.rootfs != "":
		return opts, fmt.Errorf("--rootfs %s and --image %s both give the root; pass one", f.rootfs, im.Ref)
	case im != nil:
		opts.Root = im
	case f.rootfs != "":
		opts.Root = sandbox.RootDir(f.rootfs)
	}
	if f.workspace != "" {
		opts.Workspace = sandbox.HostWorkspace{Dir: string(f.workspace)}
	} else {
		opts.Workspace = sandbox.SessionWorkspace{Size: f.workspaceSize}
	}
	switch {
	case f.seccomp.unconfined() && f.seccompKill:
		return opts, fmt.Errorf("--seccomp-kill needs a filter, and --seccomp unconfined turns it off")
	case f.seccomp.unconfined():
		opts.Seccomp = sandbox.Unconfined{}
	case f.seccompKill:
		p := f.seccomp.policy
		if p == nil {
			p = sandbox.DefaultSeccompPolicy()
		}
		p.KillOnRefusal = true
		opts.Seccomp = p
	case f.seccomp.policy != nil:
		opts.Seccomp = f.seccomp.policy
	}
	var err error
	opts.Network, err = f.net.network(f.secrets.secrets)
	return opts, err
}

// givenFlags returns the limit flags and --ca-certs set in fs as they
// were typed, by name, for messages about them.
func givenFlags(fs *flag.FlagSet) map[string]string {
	given := map[string]string{}
	fs.Visit(func(fl *flag.Flag) {
		if slices.Contains(limitFlags, fl.Name) || fl.Name == "ca-certs" {
			given[fl.Name] = fl.Value.String()
		}
	})
	return given
}

// printRunUsage prints the synopsis and flags of "sandbox run".
func printRunUsage(w io.Writer, f *runFlags) {
	fmt.Fprint(w, "Usage: sandbox run [flags] -- COMMAND [ARG...]\n\n"+
		"When stdin and stdout are terminals, COMMAND runs on a terminal of its own (a pty\n"+
		"made in the sandbox), so that \"sandbox run -- bash\" is an interactive shell with\n"+
		"job control; otherwise its stdin, stdout and stderr are pipes. Either way it holds\n"+
		"no descriptor of yours, and your terminal is as it was afterwards.\n\nFlags:\n")
	printFlags(w, f.fs)
}

// printFlags lists a FlagSet's flags with two dashes, as they are usually
// written (the flag package accepts both), with their one-letter names.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	short := map[string]bool{}
	for _, s := range shortFlags {
		short[s] = true
	}
	fs.VisitAll(func(fl *flag.Flag) {
		if short[fl.Name] {
			return // listed with its long name
		}
		name, help := flag.UnquoteUsage(fl)
		line := "  --" + fl.Name
		if s := shortFlags[fl.Name]; s != "" {
			line = "  -" + s + ", --" + fl.Name
		}
		if name != "" {
			line += " " + name
		}
		fmt.Fprintf(w, "%s\n    \t%s\n", line, strings.ReplaceAll(help, "\n", "\n    \t"))
	})
}

func runMain(args []string, s streams) int {
	cfg, err := parseRun(args)
	if errors.Is(err, flag.ErrHelp) {
		printRunUsage(s.stdout, newRunFlags())
		return 0
	}
	if err != nil {
		fmt.Fprintf(s.stderr, "sandbox: run: %v\n%s", err, seeHelp("run"))
		return exitFailure
	}
	if im, ok := cfg.opts.Root.(*sandbox.Image); ok && isTerminal(2) && !cfg.json {
		// A pull shows its progress where someone watches; in a script,
		// its stderr stays the program's own.
		im.Progress = newPullProgress(s.stderr).show
	}
	sb := sandbox.New(cfg.opts)
	defer sb.Close()
	if err := sb.Err(); err != nil {
		return cfg.fail(s, cfg.explain(err))
	}
	cfg.seccomp.warnUnknown(s)

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var raw atomic.Pointer[ttySaved] // the tool's terminal as it was, while it is raw
	caught := catchSignals(func() {
		// A second signal would kill the tool before its deferred
		// restore: the terminal is put back at the first.
		if saved := raw.Load(); saved != nil {
			saved.restore()
		}
		stop()
	})
	if cfg.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.timeout)
		defer cancel()
	}

	cmd := sandbox.Command(cfg.args[0], cfg.args[1:]...)
	cmd.Env, cmd.Dir = cfg.env, cfg.dir
	cmd.Stdin = stdinOf(s.stdin)
	if !cfg.json {
		cmd.Stdout, cmd.Stderr = s.stdout, s.stderr
	}
	if cfg.wantsTerminal(s) {
		cmd.Terminal = &sandbox.Terminal{}
		cmd.Terminal.Rows, cmd.Terminal.Cols = windowSize()
		if term := os.Getenv("TERM"); term != "" && !slices.ContainsFunc(cfg.env, func(kv string) bool { return strings.HasPrefix(kv, "TERM=") }) {
			cmd.Env = append([]string{"TERM=" + term}, cmd.Env...)
		}
		if isTerminal(0) {
			saved, err := makeRaw()
			if err != nil {
				return cfg.fail(s, fmt.Errorf("sandbox: run: put the terminal in raw mode: %w", err))
			}
			raw.Store(saved)
			defer saved.restore()
		}
		defer relayResizes(cmd)()
	}
	res, err := sb.Run(ctx, cmd)
	if saved := raw.Load(); saved != nil {
		saved.restore() // before anything is printed
	}
	if err != nil {
		err = withImageHint(cfg.explain(err))
	}
	if cgroupRefused(err) && cfg.opts.Limits.Policy != sandbox.BestEffortLimits {
		err = &cgroupRefusal{err: err}
	}
	status := exitStatus(res, err, caught())
	if cfg.json {
		out := jsonOutput{Result: res}
		if err != nil {
			out.Error = err.Error()
		}
		enc := json.NewEncoder(s.stdout)
		enc.SetEscapeHTML(false)
		if werr := enc.Encode(out); werr != nil {
			fmt.Fprintf(s.stderr, "sandbox: write result: %v\n", werr)
			return exitFailure
		}
	}
	switch {
	case res != nil && res.Outcome == sandbox.Timeout:
		fmt.Fprintf(s.stderr, "sandbox: %s: killed after --timeout %s\n", cfg.args[0], cfg.timeout)
	case res != nil && res.Outcome == sandbox.Canceled:
		fmt.Fprintf(s.stderr, "sandbox: %s: killed on signal\n", cfg.args[0])
	case res != nil && res.Outcome == sandbox.OutOfMemory && !cfg.json:
		fmt.Fprintf(s.stderr, "sandbox: %s: out of memory (--memory %s)\n", cfg.args[0], cfg.memoryLimit())
	case res != nil && res.Outcome == sandbox.SeccompKilled && !cfg.json:
		fmt.Fprintf(s.stderr, "sandbox: %s: killed at syscall %s, which the seccomp policy refuses (--seccomp-kill)\n", cfg.args[0], res.Violation)
	case err != nil:
		fmt.Fprintln(s.stderr, errorLine(err))
	}
	// A refused syscall is mostly a harmless probe: reported on request.
	if res != nil && res.Outcome != sandbox.SeccompKilled && len(res.Denials) > 0 && !cfg.json && cfg.verbose {
		fmt.Fprintf(s.stderr, "sandbox: %s: the seccomp policy refused: %s\n", cfg.args[0], denialList(res.Denials))
	}
	if res != nil && !cfg.json {
		printConnections(s.stderr, cfg.args[0], res)
	}
	return status
}

// memoryLimit is the memory limit of the run as --memory takes it.
func (cfg *runConfig) memoryLimit() string {
	if v, ok := cfg.given["memory"]; ok {
		return v
	}
	return formatSize(sandbox.DefaultMemory)
}

// optionFlags names the flag behind each Options or Cmd field it sets.
var optionFlags = map[string]string{
	"Options.Root (RootDir)": "--rootfs", "Options.Root (Image.Ref)": "--image",
	"Options.Root (Image.Mirrors)": "--registry-mirror", "Options.Root (Image.PullTimeout)": "--pull-timeout", "Options.Root (Image.Pull)": "--pull",
	"Options.Root (Image.Store)": "--image-store", "Options.Workspace (HostWorkspace.Dir)": "--workspace", "Cmd.Dir": "--dir",
	"Options.Limits.Memory": "--memory", "Options.Limits.CPUs": "--cpus", "Options.Limits.Pids": "--pids",
	"Options.Limits.TmpSize": "--tmp-size", "Options.Workspace (SessionWorkspace.Size)": "--workspace-size",
	"Options.Workspace (FreshWorkspace.Size)": "--workspace-size", "Options.Limits.FileSize": "--max-file-size",
	"Options.Seccomp": "--seccomp", "Options.Network (Egress.Allow)": "--net",
	"Options.TrustedCAs": "--ca-certs",
}

// denialList is Result.Denials as "ptrace (EPERM) x2, bpf (EPERM)".
func denialList(ds []sandbox.Denial) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = fmt.Sprintf("%s (%s)", d.Syscall, unix.ErrnoName(d.Errno))
		if d.Count > 1 {
			parts[i] += fmt.Sprintf(" x%d", d.Count)
		}
	}
	return strings.Join(parts, ", ")
}

// cgroupRefused reports whether err is Run's refusal to run without a
// writable cgroup for the limits.
func cgroupRefused(err error) bool { return errors.Is(err, sandbox.ErrNoCgroup) }

// cgroupRefusal is Run's refusal to run without a writable cgroup, told
// with the tool's fixes first and the library's reason after them.
type cgroupRefusal struct{ err error }

func (r *cgroupRefusal) Error() string {
	why := r.err.Error()
	if ue, ok := errors.AsType[*sandbox.UnsupportedError](r.err); ok {
		why = ue.Feature + " not available: " + ue.Reason
	}
	return "sandbox: pass --best-effort to run with rlimits standing in for the limits, or delegate a cgroup v2 subtree " +
		"to this user (systemd Delegate=yes), or run without limits (--memory unlimited --cpus unlimited --pids unlimited) (" + why + ")"
}

// Unwrap returns the library's refusal, which matches sandbox.ErrNoCgroup.
func (r *cgroupRefusal) Unwrap() error { return r.err }

// fail reports an error that kept the sandbox from running and returns 125.
func (cfg *runConfig) fail(s streams, err error) int {
	if cfg.json {
		enc := json.NewEncoder(s.stdout)
		enc.SetEscapeHTML(false)
		enc.Encode(jsonOutput{Error: err.Error()})
	}
	fmt.Fprintln(s.stderr, errorLine(err))
	return exitFailure
}

// errorLine is err as one "sandbox: ..." line.
func errorLine(err error) string {
	msg := err.Error()
	if !strings.HasPrefix(msg, "sandbox: ") {
		msg = "sandbox: " + msg
	}
	return msg
}

// exitStatus maps how a run ended to the tool's exit status. sig is the
// signal that made the tool cancel the run, if any.
func exitStatus(res *sandbox.Result, err error, sig os.Signal) int {
	if res == nil {
		return exitFailure
	}
	switch {
	case res.Outcome == sandbox.Timeout:
		return exitTimeout
	case res.Outcome == sandbox.Canceled:
		if s, ok := sig.(syscall.Signal); ok {
			return 128 + int(s)
		}
		return 128 + int(syscall.SIGINT)
	case err != nil && res.Outcome == sandbox.Exited && (res.ExitCode == 126 || res.ExitCode == exitNotFound):
		// Not executable or not found; the Result says which.
		return res.ExitCode
	case errors.Is(err, sandbox.ErrNotFound):
		return exitNotFound
	case err != nil:
		return exitFailure
	case res.Outcome == sandbox.Exited:
		return res.ExitCode
	case res.Outcome == sandbox.Signaled:
		return 128 + int(res.Signal)
	case res.Outcome == sandbox.OutOfMemory:
		// The OOM killer's SIGKILL, reported as a shell would.
		return 128 + int(syscall.SIGKILL)
	case res.Outcome == sandbox.SeccompKilled:
		return exitSeccomp
	}
	return exitFailure
}

// catchSignals cancels the run on SIGINT, SIGTERM or SIGHUP, so that the
// sandbox is killed and reported rather than orphaned. A second signal
// kills the tool as usual. The returned function reports the signal caught.
func catchSignals(cancel context.CancelFunc) func() os.Signal {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	got := make(chan os.Signal, 1)
	go func() {
		sig := <-ch
		signal.Stop(ch)
		got <- sig
		cancel()
	}()
	return func() os.Signal {
		select {
		case sig := <-got:
			return sig
		default:
			return nil
		}
	}
}

// wantsTerminal says whether the program runs on a terminal of its own:
// with --tty, or by default when the tool's stdin and stdout are
// terminals (and its output is not --json's).
func (cfg *runConfig) wantsTerminal(s streams) bool {
	switch cfg.tty {
	case ttyForce:
		return true
	case ttyNone:
		return false
	}
	return !cfg.json && s.stdin == os.Stdin && s.stdout == io.Writer(os.Stdout) && isTerminal(0) && isTerminal(1)
}

// stdinOf returns f as the program's stdin, or nil (/dev/null) when the
// tool has no usable stdin. The library reads it and passes it on through
// a pipe (or the program's terminal), never handing over the descriptor.
func stdinOf(f *os.File) io.Reader {
	if f == nil {
		return nil
	}
	if _, err := f.Stat(); err != nil {
		return nil // fd 0 closed
	}
	return f
}

// bindIndex returns the N of an OptionError's field Options.Binds[N]...,
// which comes from the Nth --bind or --ro-bind, and whether it is one.
func bindIndex(option string) (string, bool) {
	rest, ok := strings.CutPrefix(option, "Options.Binds[")
	if !ok {
		return "", false
	}
	n, _, ok := strings.Cut(rest, "]")
	if !ok || n == "" || strings.Trim(n, "0123456789") != "" {
		return "", false
	}
	return n, true
}

// explain rewrites an *sandbox.OptionError about a field the tool set from
// a flag so that it names the flag instead of the field.
func (cfg *runConfig) explain(err error) error {
	var oe *sandbox.OptionError
	if !errors.As(err, &oe) {
		return err
	}
	flagName, value := "", oe.Value
	switch {
	case optionFlags[oe.Option] != "":
		flagName = optionFlags[oe.Option]
	case strings.HasPrefix(oe.Option, "Options.Seccomp."):
		flagName, value = "--seccomp", cfg.seccomp.value+": "+strings.TrimPrefix(oe.Option, "Options.Seccomp.")+" "+strconv.Quote(oe.Value)
	case strings.HasPrefix(oe.Option, "Options.Network (Egress.Allow["):
		flagName = "--net"
	case strings.HasPrefix(oe.Option, "Options.Network (Egress.Secrets"):
		// The Value of a secret's error is never its value.
		flagName, value = "--secret", strings.TrimSuffix(strings.TrimPrefix(oe.Option, "Options.Network (Egress."), ")")+" "+strconv.Quote(oe.Value)
	case strings.HasPrefix(oe.Option, "Cmd.Env"):
		flagName = "--env"
	case oe.Option == "Cmd.Path" || strings.HasPrefix(oe.Option, "Cmd.Args"):
		flagName = "COMMAND"
	default:
		if n, ok := bindIndex(oe.Option); ok {
			if i, _ := strconv.Atoi(n); i < len(cfg.binds) {
				flagName, value = "--"+cfg.binds[i].flag, cfg.binds[i].spec
			}
		}
	}
	if flagName == "" {
		return err
	}
	if v, ok := cfg.given[strings.TrimPrefix(flagName, "--")]; ok {
		value = v
	}
	return &flagError{flag: flagName, value: value, err: oe}
}

// flagError is an *sandbox.OptionError told in terms of the command line.
type flagError struct {
	flag, value string
	err         *sandbox.OptionError
}

func (e *flagError) Error() string {
	return fmt.Sprintf("sandbox: %s %q: %s", e.flag, e.value, e.err.Reason)
}

// Unwrap returns the library's error, which matches sandbox.ErrInvalidOption.
func (e *flagError) Unwrap() error { return e.err }

// jsonOutput is the object --json prints: the result's fields, when there
// is a Result, and the error Run returned, if any.
type jsonOutput struct {
	*sandbox.Result
	Error string `json:"error,omitempty"`
}

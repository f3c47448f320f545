package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/fumehood/sandbox/internal/recipe"
	"github.com/fumehood/sandbox/internal/wire"
)

// defaultEnv fills in what neither Options.Env nor Cmd.Env set.
var defaultEnv = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=" + DefaultDir,
	"LANG=C.UTF-8",
}

// reservedTargets are provided by the sandbox itself; binding over them
// would remove a protection. /etc is reserved itself, and for the files
// it generates (generatedEtc).
var reservedTargets = []string{"/", "/proc", "/dev"}

func optionErr(option, value, format string, a ...any) error {
	return &OptionError{Option: option, Value: value, Reason: fmt.Sprintf(format, a...)}
}

// maxPool bounds Pool.Size: each prepared sandbox is a process with its
// namespaces and mounts held while it waits.
const maxPool = 64

// validate reports the first wrong field. The group types rule out most
// conflicts; what is left here is checks of one value, and the few rules
// that join two groups.
func (o *resolved) validate() error {
	if o.invalid != nil {
		return o.invalid
	}
	if o.Image != nil {
		switch {
		case o.Image.Ref == "" || strings.ContainsRune(o.Image.Ref, 0):
			return optionErr("Options.Root (Image.Ref)", o.Image.Ref, "must name an image (a registry reference, oci:DIR, oci-archive:FILE or docker-archive:FILE)")
		case o.Image.MaxBytes < 0:
			return optionErr("Options.Root (Image.MaxBytes)", fmt.Sprint(o.Image.MaxBytes), "must not be negative")
		case o.Image.Store != "" && !path.IsAbs(o.Image.Store):
			return optionErr("Options.Root (Image.Store)", o.Image.Store, "must be an absolute host path")
		}
		if err := o.Image.checkRegistry(); err != nil {
			return err
		}
	}
	if o.Rootfs != "" {
		if err := checkHostDir("Options.Root (RootDir)", o.Rootfs); err != nil {
			return err
		}
	}
	if o.Workspace != "" {
		if err := checkWorkspace(o); err != nil {
			return err
		}
	}
	if o.WorkspaceFrom != "" {
		if err := checkHostDir("Options.Workspace (SessionWorkspace.From)", o.WorkspaceFrom); err != nil {
			return err
		}
	}
	switch {
	case o.Pool < 0:
		return optionErr("Options.Start (Pool.Size)", fmt.Sprint(o.Pool), "must not be negative")
	case o.Pool > maxPool:
		return optionErr("Options.Start (Pool.Size)", fmt.Sprint(o.Pool), "is more than the %d prepared sandboxes a Sandbox may hold", maxPool)
	case o.Pool > 0 && o.Network == netAllow:
		return optionErr("Options.Start (Pool.Size)", fmt.Sprint(o.Pool), "cannot prepare sandboxes with an *Egress Network, whose proxy is made for each run")
	case o.Pool > 0 && o.bindsInWorkspace():
		return optionErr("Options.Start (Pool.Size)", fmt.Sprint(o.Pool), "cannot prepare sandboxes with a Bind beneath the session's /workspace, which each run is given only at its start")
	case o.Live && o.InProcess:
		return optionErr("Options.Live", "set", "needs the spawner, which holds the running sandbox, and Options.Start is InProcess{}, which asks for none")
	case o.MaxLifetime < 0:
		return optionErr("Options.Live.MaxLifetime", o.MaxLifetime.String(), "must not be negative (0: no limit)")
	case o.TrackChanges && o.Live:
		return optionErr("Options.Workspace (SessionWorkspace.TrackChanges)", "true", "is not available with Options.Live, whose calls share a workspace with the processes they leave running")
	}
	wsSize := "Options.Workspace (SessionWorkspace.Size)"
	if o.FreshWorkspace {
		wsSize = "Options.Workspace (FreshWorkspace.Size)"
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{wsSize, o.WorkspaceSize}, {"Options.Limits.TmpSize", o.Limits.TmpSize}, {"Options.Limits.Output", o.Limits.Output},
		{"Options.HostUID", int64(o.HostUID)}, {"Options.HostGID", int64(o.HostGID)},
		{"Options.Limits.IOReadBPS", o.Limits.IOReadBPS}, {"Options.Limits.IOWriteBPS", o.Limits.IOWriteBPS}} {
		if f.v < 0 {
			return optionErr(f.name, fmt.Sprint(f.v), "must not be negative")
		}
	}
	for i, b := range o.Binds {
		name := fmt.Sprintf("Options.Binds[%d]", i)
		if !path.IsAbs(b.Source) {
			return optionErr(name+".Source", b.Source, "must be an absolute host path")
		}
		if _, err := os.Stat(b.Source); err != nil {
			return &OptionError{Option: name + ".Source", Value: b.Source, Reason: err.Error()}
		}
		if err := checkTarget(name+".Target", b.target()); err != nil {
			return err
		}
		if b.Writable {
			uid, gid := o.HostIDs()
			if err := checkWritableBy(name+".Source", b.Source, uid, gid); err != nil {
				return err
			}
		}
	}
	if o.Limits.Memory > 0 && o.Limits.Memory < MinMemory {
		return optionErr("Options.Limits.Memory", fmt.Sprint(o.Limits.Memory), "is below the %d bytes (%d MiB) a sandbox needs to start (MinMemory); give at least that",
			MinMemory, MinMemory>>20)
	}
	if o.Limits.CPUs != o.Limits.CPUs || o.Limits.CPUs > 1024 {
		return optionErr("Options.Limits.CPUs", fmt.Sprint(o.Limits.CPUs), "must be a number of CPUs up to 1024")
	}
	if o.Limits.CPUs > 0 && o.Limits.CPUs*cpuPeriod < 1000 {
		return optionErr("Options.Limits.CPUs", fmt.Sprint(o.Limits.CPUs), "must be at least 0.01")
	}
	if o.Limits.CgroupParent != "" && (!path.IsAbs(o.Limits.CgroupParent) || path.Clean(o.Limits.CgroupParent) != o.Limits.CgroupParent) {
		return optionErr("Options.Limits.CgroupParent", o.Limits.CgroupParent, "must be a clean absolute cgroup path, as /proc/self/cgroup shows")
	}
	if o.Limits.Policy != EnforceLimits && o.Limits.Policy != BestEffortLimits {
		return optionErr("Options.Limits.Policy", fmt.Sprint(int(o.Limits.Policy)), "must be EnforceLimits or BestEffortLimits")
	}
	if err := checkEnv("Options.Env", o.Env); err != nil {
		return err
	}
	if n, err := checkStrings("Options.Env", o.Env); err != nil {
		return err
	} else if n > MaxCommandLine {
		return optionErr("Options.Env", fmt.Sprintf("%d strings, %d bytes", len(o.Env), n),
			"is more than the %d bytes (MaxCommandLine) of a run's whole command line", MaxCommandLine)
	}
	if o.TrustedCAs != nil {
		cas, err := parseTrustedCAs(o.TrustedCAs)
		if err != nil {
			return err
		}
		o.TrustedCAs = cas
	}
	if len(o.Hostname) > 64 || strings.ContainsAny(o.Hostname, "/ \x00") {
		return optionErr("Options.Hostname", o.Hostname, "must be at most 64 characters without '/', space or NUL")
	}
	if uid := os.Getuid(); uid != 0 {
		if o.HostUID != 0 && o.HostUID != uid {
			return optionErr("Options.HostUID", fmt.Sprint(o.HostUID), "a caller that is not root (uid %d) can map only its own uid", uid)
		}
		if gid := os.Getgid(); o.HostGID != 0 && o.HostGID != gid {
			return optionErr("Options.HostGID", fmt.Sprint(o.HostGID), "a caller that is not root (gid %d) can map only its own gid", gid)
		}
	}
	return nil
}

// bindsInWorkspace says whether a Bind's target lies beneath the session
// workspace, which a prepared sandbox is given only with its program.
func (o *resolved) bindsInWorkspace() bool {
	if o.Workspace != "" || o.FreshWorkspace {
		return false
	}
	for _, b := range o.Binds {
		if t := path.Clean(b.target()); t == DefaultDir || strings.HasPrefix(t, DefaultDir+"/") {
			return true
		}
	}
	return false
}

func (b Bind) target() string {
	if b.Target == "" {
		return b.Source
	}
	return b.Target
}

func checkHostDir(option, dir string) error {
	if !path.IsAbs(dir) {
		return optionErr(option, dir, "must be an absolute host path")
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return &OptionError{Option: option, Value: dir, Reason: err.Error()}
	}
	if !fi.IsDir() {
		return optionErr(option, dir, "is not a directory")
	}
	return nil
}

// checkWorkspace checks a host Workspace: it is used as it is, never made,
// and the sandbox's host ids must be able to write it.
func checkWorkspace(o *resolved) error {
	uid, gid := o.HostIDs()
	if _, err := os.Stat(o.Workspace); errors.Is(err, fs.ErrNotExist) && path.IsAbs(o.Workspace) {
		return optionErr("Options.Workspace (HostWorkspace.Dir)", o.Workspace, "does not exist: a host workspace is used as it is, never made; "+
			"create it, writable by the sandbox's host uid %d (mkdir %s, and as root chown %d:%d %s)", uid, o.Workspace, uid, gid, o.Workspace)
	}
	if err := checkHostDir("Options.Workspace (HostWorkspace.Dir)", o.Workspace); err != nil {
		return err
	}
	return checkWritableBy("Options.Workspace (HostWorkspace.Dir)", o.Workspace, uid, gid)
}

func checkTarget(option, t string) error {
	if !path.IsAbs(t) || path.Clean(t) != t {
		return optionErr(option, t, "must be a clean absolute path inside the sandbox")
	}
	for _, r := range reservedTargets {
		if t == r || (r != "/" && strings.HasPrefix(t, r+"/")) {
			return optionErr(option, t, "lies in %s, which the sandbox provides itself", r)
		}
	}
	if t == "/etc" {
		return optionErr(option, t, "is the sandbox's own /etc; bind a file or directory inside it instead")
	}
	if why := recipe.EtcGenerated(t); why != "" {
		return optionErr(option, t, "%s", why)
	}
	return nil
}

func checkEnv(option string, env []string) error {
	for i, kv := range env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" || strings.ContainsRune(kv, 0) {
			return optionErr(fmt.Sprintf("%s[%d]", option, i), kv, "must have the form KEY=value without NUL")
		}
	}
	return nil
}

func (c *Cmd) validate() error {
	switch {
	case c == nil:
		return optionErr("Cmd", "<nil>", "is nil")
	case c.used:
		return optionErr("Cmd", c.Path, "was already run; a Cmd cannot be reused")
	case c.Path == "" || strings.ContainsRune(c.Path, 0):
		return optionErr("Cmd.Path", c.Path, "must name a program")
	case c.stdinPipe != nil && c.Stdin != nil:
		return optionErr("Cmd.Stdin", fmt.Sprint(c.Stdin), "is set along with StdinPipe; use one of them")
	case c.Dir != "" && !path.IsAbs(c.Dir):
		return optionErr("Cmd.Dir", c.Dir, "must be an absolute path inside the sandbox")
	}
	for i, a := range c.Args {
		if strings.ContainsRune(a, 0) {
			return optionErr(fmt.Sprintf("Cmd.Args[%d]", i), a, "contains NUL")
		}
	}
	return checkEnv("Cmd.Env", c.Env)
}

// mergeEnv returns base overlaid with over, later keys winning, then the
// defaults for keys neither set. The order of first appearance is kept.
func mergeEnv(base, over, defaults []string) []string {
	var keys []string
	vals := map[string]string{}
	for _, kv := range append(append([]string(nil), base...), over...) {
		k, _, _ := strings.Cut(kv, "=")
		if _, seen := vals[k]; !seen {
			keys = append(keys, k)
		}
		vals[k] = kv
	}
	for _, kv := range defaults {
		k, _, _ := strings.Cut(kv, "=")
		if _, seen := vals[k]; !seen {
			keys = append(keys, k)
			vals[k] = kv
		}
	}
	env := make([]string, len(keys))
	for i, k := range keys {
		env[i] = vals[k]
	}
	return env
}

// config is the wire form of one run of cmd under o on root: the sandbox
// o describes, and cmd's program in it.
func (o *resolved) config(cmd *Cmd, f *compiledFilter, root *rootView) *wire.Config {
	return &wire.Config{Spec: o.spec(f, root), Program: o.program(cmd, root)}
}

// spec is the sandbox o describes on root, with f as its syscall filter:
// what every run of a Sandbox shares, and what its pool prepares ahead.
func (o *resolved) spec(f *compiledFilter, root *rootView) wire.Spec {
	sp := wire.Spec{
		Hostname:      orDefault(o.Hostname, DefaultHostname),
		Rootfs:        root.dir,
		RootfsLayers:  root.layers,
		Workspace:     o.Workspace,
		WorkspaceSize: orDefault(o.WorkspaceSize, DefaultWorkspaceSize),
		TmpSize:       orDefault(o.Limits.TmpSize, DefaultTmpSize),
		NoFile:        orDefault(o.Limits.OpenFiles, DefaultMaxOpenFiles),
		Memory:        limit(o.Limits.Memory, DefaultMemory),
		Pids:          limit(o.Limits.Pids, DefaultPids),
		CgroupParent:  o.Limits.CgroupParent,
		BestEffort:    o.Limits.Policy == BestEffortLimits,
		IOReadBPS:     o.Limits.IOReadBPS,
		IOWriteBPS:    o.Limits.IOWriteBPS,
		TrustedCAs:    o.TrustedCAs,
	}
	sp.HostUID, sp.HostGID = o.HostIDs()
	if cpus := orDefault(o.Limits.CPUs, DefaultCPUs); cpus > 0 {
		sp.CPUQuota, sp.CPUPeriod = int64(cpus*cpuPeriod), cpuPeriod
	}
	sp.MaxFileSize = limit(o.Limits.FileSize, max(DefaultMaxFileSize, sp.TmpSize, sp.WorkspaceSize))
	if f != nil {
		sp.Seccomp, sp.SeccompListen, sp.SeccompKill = f.prog, f.notify, o.SeccompKill
		// The audit trail lists each refusal (Options.Audit).
		sp.SeccompEvents = f.notify && o.Audit != nil
	}
	switch o.Network {
	case netAllow:
		sp.ProxyPort = proxyPort
	case netHost:
		sp.HostNetwork = true
	}
	for _, b := range o.Binds {
		sp.Binds = append(sp.Binds, wire.Bind{Source: b.Source, Target: b.target(), Writable: b.Writable})
	}
	return sp
}

// program is cmd as it runs under o on root: its arguments, and its
// environment over o's, the image's and the defaults.
func (o *resolved) program(cmd *Cmd, root *rootView) wire.Program {
	args := cmd.Args
	if len(args) == 0 {
		args = []string{cmd.Path}
	}
	defaults := defaultEnv
	// Node trusts only the certificates built into it; this points it at
	// the store's bundle too.
	if root.bundle != "" {
		defaults = append(slices.Clip(defaults), "NODE_EXTRA_CA_CERTS="+root.bundle)
	}
	if o.Network == netAllow {
		defaults = append(proxyEnv(), defaults...)
	}
	return wire.Program{
		Path: cmd.Path,
		Args: args,
		Env:  mergeEnv(append(slices.Clip(root.env), o.Env...), cmd.Env, defaults),
		Dir:  orDefault(cmd.Dir, root.workDir),
	}
}

// HostIDs returns the host uid and gid the sandbox user maps to under o:
// HostUID and HostGID, or their defaults. A host directory given as
// Workspace or a writable Bind must be writable by them.
func (o *Options) HostIDs() (uid, gid int) { return hostIDs(o.HostUID, o.HostGID) }

// HostIDs is Options.HostIDs.
func (o *resolved) HostIDs() (uid, gid int) { return hostIDs(o.HostUID, o.HostGID) }

func hostIDs(uid, gid int) (int, int) {
	if uid == 0 {
		uid = hostID(os.Getuid())
	}
	if gid == 0 {
		gid = hostID(os.Getgid())
	}
	return uid, gid
}

// seccompOption names the filter's option, for its errors.
func (o *resolved) seccompOption() string {
	if o.Seccomp == nil {
		return "DefaultSeccompPolicy()"
	}
	return "Options.Seccomp"
}

// seccompFilter compiles the run's syscall filter: the default policy's
// at most once per process (defaultFilter), a caller's once per Sandbox.
func (o *resolved) seccompFilter() (*compiledFilter, error) {
	switch {
	case o.AuditExec && o.NoSeccomp:
		return nil, optionErr("Options.Audit.Exec", "true", "needs a filter, which tells of each exec, and Options.Seccomp is Unconfined{}")
	case o.NoSeccomp:
		return nil, nil
	case o.Seccomp == nil && o.AuditExec:
		return defaultAuditFilter()
	case o.Seccomp == nil:
		return defaultFilter()
	}
	return o.Seccomp.compileFor("Options.Seccomp", o.AuditExec)
}

// limit applies a default to zero and turns negative ("no limit") into 0.
func limit(v, def int64) int64 {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// hostID is the host id the sandbox maps to by default for own, the
// caller's uid or gid. A root caller's 0 becomes nobody, so that sandboxed
// code never owns host root's files. Any other caller keeps its own id, 0
// included: the kernel lets a process that is not root map exactly one uid
// and one gid into a user namespace, its own, so a caller whose primary
// group is 0 (a container given a uid but no gid, as Kubernetes' runAsUser
// without runAsGroup and OpenShift's arbitrary uids are) can only map gid 0.
// That gives the sandbox nothing its caller lacks: the caller already holds
// group 0, the sandbox runs as the caller's own uid besides, setgroups stays
// denied (so no group can be added or dropped), and what the sandbox sees
// of the host is still only its read-only system directories and the binds
// and workspace the options name. Those are what a caller whose group is 0
// should check: a file there that group 0 may write, the sandbox may write.
func hostID(own int) int {
	if own == 0 && os.Getuid() == 0 {
		return nobodyID
	}
	return own
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

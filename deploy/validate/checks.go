package validate

import (
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The server's endpoints and the gauges an autoscaler may use, as
// "sandbox serve" has them.
const (
	healthPath    = "/healthz"
	readyPath     = "/readyz"
	inFlightGauge = "sandbox_serve_runs_in_flight"
	queuedGauge   = "sandbox_serve_runs_queued"
	// defaultGrace is Kubernetes' terminationGracePeriodSeconds when unset.
	defaultGrace = 30 * time.Second
)

// Check compares the files of b with each other and with what the
// toolserver needs, and returns every problem it finds.
func Check(b *Bundle) []Problem {
	c := &checker{b: b}
	c.dockerfile()
	c.deployment()
	c.services()
	c.hpas()
	c.pdbs()
	c.networkPolicies()
	c.kustomization()
	c.agentSandbox()
	return c.probs
}

// checker holds what one check learns for the next: the image's facts
// from the Dockerfile, the server's port and flags from the workload.
type checker struct {
	b     *Bundle
	probs []Problem

	// From the Dockerfile; zero where it did not say.
	exposed  []int
	uid, gid *int64
	entry    string

	// From the workload (the StatefulSet); dep is nil when there is not
	// exactly one.
	dep     *workload
	ctr     *corev1.Container
	ctrPath string
	args    *serverArgs
	port    int
}

func (c *checker) add(file, field, format string, a ...any) {
	c.probs = append(c.probs, Problem{File: file, Field: field, Msg: fmt.Sprintf(format, a...)})
}

// dockerField names a Dockerfile instruction as a Problem's field.
func dockerField(in *Instr) string { return fmt.Sprintf("%s (line %d)", in.Cmd, in.Line) }

func (c *checker) dockerfile() {
	d, file := c.b.Dockerfile, c.b.DockerfileFile
	if d == nil {
		return // Load reported why
	}
	final := d.Final()
	if len(d.Stages) < 2 {
		c.add(file, fmt.Sprintf("FROM (line %d)", final.Line), "want a build stage and a runtime stage, have %d stage(s)", len(d.Stages))
	}

	if u := final.Last("USER"); u == nil {
		c.add(file, "USER", "the final stage has no USER: the image would run as root")
	} else {
		uid, gid, err := numericUser(u.Args)
		switch {
		case err != nil:
			c.add(file, dockerField(u), "%v: use a numeric uid[:gid], which Kubernetes' runAsNonRoot can check without the image's /etc/passwd", err)
		case *uid == 0:
			c.add(file, dockerField(u), "uid 0: the server must not run as root")
		default:
			c.uid, c.gid = uid, gid
		}
	}

	for _, e := range final.All("EXPOSE") {
		for _, w := range strings.Fields(e.Args) {
			p, proto, _ := strings.Cut(w, "/")
			n, err := strconv.Atoi(p)
			if err != nil || n < 1 || n > 65535 || (proto != "" && !strings.EqualFold(proto, "tcp")) {
				c.add(file, dockerField(&e), "%q is not a TCP port", w)
				continue
			}
			c.exposed = append(c.exposed, n)
		}
	}
	if len(c.exposed) == 0 {
		c.add(file, "EXPOSE", "the final stage exposes no port")
	}

	ep := final.Last("ENTRYPOINT")
	if ep == nil {
		c.add(file, "ENTRYPOINT", "the final stage has no ENTRYPOINT")
	} else if argv, ok := execForm(ep.Args); !ok || len(argv) == 0 {
		c.add(file, dockerField(ep), "use the exec form [\"/path\", ...]: the shell form runs the server under /bin/sh -c, which does not pass SIGTERM on, and graceful shutdown never starts")
	} else {
		c.entry = argv[0]
	}

	if cmd := final.Last("CMD"); cmd != nil {
		argv, ok := execForm(cmd.Args)
		if !ok {
			c.add(file, dockerField(cmd), "use the exec form [\"-flag=value\", ...]: in the shell form the arguments become a /bin/sh -c command line")
		} else {
			sa, aps := parseServeArgs(argv)
			for _, ap := range aps {
				c.add(file, dockerField(cmd), "argument %d: %s", ap.i, ap.msg)
			}
			if msg := authProblem(sa); msg != "" && len(aps) == 0 {
				c.add(file, dockerField(cmd), "%s", msg)
			}
			if _, set := sa.set["addr"]; set && !slices.Contains(c.exposed, sa.port()) {
				c.add(file, dockerField(cmd), "-addr's port %d is not EXPOSEd (%v)", sa.port(), c.exposed)
			}
		}
	}

	if c.entry != "" {
		c.builtBinary(d, final)
	}
}

// builtBinary checks that the ENTRYPOINT is a binary copied from a build
// stage that builds it from a package of this repository, statically.
func (c *checker) builtBinary(d *Dockerfile, final *Stage) {
	file := c.b.DockerfileFile
	var cp *Instr
	var from, src string
	for _, in := range final.All("COPY") {
		f, srcs, dest, err := copyArgs(in.Args)
		if err != nil {
			c.add(file, dockerField(&in), "%v", err)
			continue
		}
		if f == "" || len(srcs) != 1 {
			continue
		}
		if dest == c.entry || (strings.HasSuffix(dest, "/") && path.Join(dest, path.Base(srcs[0])) == c.entry) {
			cp, from, src = &in, f, srcs[0]
		}
	}
	if cp == nil {
		c.add(file, "ENTRYPOINT", "%s is not copied into the final stage from a build stage (COPY --from=...)", c.entry)
		return
	}
	st := d.Stage(from)
	if st == nil {
		if i, err := strconv.Atoi(from); err == nil && i >= 0 && i < len(d.Stages)-1 {
			st = &d.Stages[i]
		}
	}
	if st == nil {
		c.add(file, dockerField(cp), "--from=%s names no earlier stage", from)
		return
	}
	var gb *goBuild
	var run *Instr
	for _, in := range st.All("RUN") {
		b, err := findGoBuild(strings.TrimSpace(stripRunFlags(in.Args)))
		if err != nil {
			c.add(file, dockerField(&in), "%v", err)
			continue
		}
		if b != nil && path.Clean(b.Output) == path.Clean(src) {
			gb, run = b, &in
		}
	}
	if gb == nil {
		c.add(file, dockerField(cp), "no RUN in stage %q builds %s with go build -o", from, src)
		return
	}
	if gb.Env["CGO_ENABLED"] != "0" {
		c.add(file, dockerField(run), "build with CGO_ENABLED=0: a static binary runs on any runtime image, whatever its libc")
	}
	if !strings.HasPrefix(gb.Package, "./") {
		c.add(file, dockerField(run), "package %q: want a path in this module, as ./cmd/sandbox", gb.Package)
		return
	}
	if err := isMainPackage(filepath.Join(c.b.RepoRoot, filepath.FromSlash(gb.Package))); err != nil {
		c.add(file, dockerField(run), "go build %s: %v", gb.Package, err)
	}
}

// stripRunFlags removes RUN's own flags (--mount=..., --network=...).
func stripRunFlags(args string) string {
	for strings.HasPrefix(args, "--") {
		_, rest, _ := strings.Cut(args, " ")
		args = strings.TrimSpace(rest)
	}
	return args
}

// isMainPackage reports whether dir holds a Go package main.
func isMainPackage(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("no such package in the repository: %w", err)
	}
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		src, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(src), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "package" {
				if f[1] == "main" {
					return nil
				}
				return fmt.Errorf("%s is package %s, not a command", n, f[1])
			}
		}
	}
	return fmt.Errorf("%s holds no Go file", dir)
}

// numericUser parses USER's "uid[:gid]", both numbers.
func numericUser(s string) (uid, gid *int64, err error) {
	u, g, hasG := strings.Cut(strings.TrimSpace(s), ":")
	n, err := strconv.ParseInt(u, 10, 64)
	if err != nil || n < 0 {
		return nil, nil, fmt.Errorf("USER %q is not a numeric uid", s)
	}
	uid = &n
	if hasG {
		m, err := strconv.ParseInt(g, 10, 64)
		if err != nil || m < 0 {
			return nil, nil, fmt.Errorf("USER %q: group is not a numeric gid", s)
		}
		gid = &m
	}
	return uid, gid, nil
}

func (c *checker) deployment() {
	ws := c.b.workloads()
	if len(ws) != 1 {
		c.add("kubernetes", "", "want exactly one StatefulSet (or Deployment) running the toolserver, have %d", len(ws))
		return
	}
	c.dep = &ws[0]
	if !c.pod() {
		return
	}
	file, dep := c.dep.File, c.dep

	if dep.Selector == nil {
		c.add(file, "spec.selector", "missing")
	} else if sel, err := metav1.LabelSelectorAsSelector(dep.Selector); err != nil {
		c.add(file, "spec.selector", "%v", err)
	} else if sel.Empty() || !sel.Matches(labels.Set(dep.Template.Labels)) {
		c.add(file, "spec.selector", "%s does not select the pod template's labels %v", sel, dep.Template.Labels)
	}
	if dep.Replicas != nil && c.scaledByHPA() {
		c.add(file, "spec.replicas", "set while a HorizontalPodAutoscaler scales this %s: every kubectl apply would reset the replicas to %d", dep.Kind, *dep.Replicas)
	}
	c.sessions()
}

// pod checks the workload c.dep's pod template: its one container, the
// server's flags, and what the sandboxes need of the pod. It reports
// false when there is no container to check further.
func (c *checker) pod() bool {
	file, dep := c.dep.File, c.dep
	pod := &dep.Template.Spec
	podPath := dep.PodPath

	if len(pod.Containers) != 1 {
		c.add(file, podPath+".containers", "want one container (the toolserver), have %d", len(pod.Containers))
		if len(pod.Containers) == 0 {
			return false
		}
	}
	c.ctr, c.ctrPath = &pod.Containers[0], podPath+".containers[0]"
	ctr, cp := c.ctr, c.ctrPath
	if ctr.Image == "" {
		c.add(file, cp+".image", "empty")
	}
	if len(ctr.Command) > 0 && !(len(ctr.Command) == 1 && ctr.Command[0] == c.entry) {
		c.add(file, cp+".command", "%q replaces the image's ENTRYPOINT %q; set args only", ctr.Command, c.entry)
	}

	var aps []argProblem
	c.args, aps = parseServeArgs(ctr.Args)
	for _, ap := range aps {
		c.add(file, fmt.Sprintf("%s.args[%d]", cp, ap.i), "%s", ap.msg)
	}
	if c.args.int("max-concurrent") <= 0 {
		c.add(file, cp+".args", "set -max-concurrent to what the pod's CPU limit allows: its default, runtime.NumCPU(), counts the node's CPUs")
	}
	if c.args.duration("default-timeout") > c.args.duration("max-timeout") {
		c.add(file, c.argField("default-timeout"), "-default-timeout %s is above -max-timeout %s", c.args.value("default-timeout"), c.args.value("max-timeout"))
	}
	c.port = c.args.port()
	c.access()

	found := false
	for i, p := range ctr.Ports {
		if int(p.ContainerPort) == c.port {
			found = true
			if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
				c.add(file, fmt.Sprintf("%s.ports[%d].protocol", cp, i), "%s: the server speaks HTTP over TCP", p.Protocol)
			}
		}
	}
	if !found {
		c.add(file, cp+".ports", "no containerPort is -addr's port %d", c.port)
	}
	if c.b.Dockerfile != nil && len(c.exposed) > 0 && !slices.Contains(c.exposed, c.port) {
		c.add(c.b.DockerfileFile, "EXPOSE", "exposes %v, but the %s's -addr listens on %d", c.exposed, c.dep.Kind, c.port)
	}

	c.probe(cp+".livenessProbe", ctr.LivenessProbe, healthPath, true)
	c.probe(cp+".readinessProbe", ctr.ReadinessProbe, readyPath, true)
	c.probe(cp+".startupProbe", ctr.StartupProbe, healthPath, false)

	c.grace(pod)
	c.security(pod)
	c.resources()

	return true
}

// argField names the container argument that set flag, or the args list
// when it is left at its default.
func (c *checker) argField(flag string) string {
	if i, ok := c.args.at[flag]; ok {
		return fmt.Sprintf("%s.args[%d]", c.ctrPath, i)
	}
	return c.ctrPath + ".args"
}

// scaledByHPA reports whether an autoscaler names the workload.
func (c *checker) scaledByHPA() bool {
	for _, h := range c.b.HPAs {
		if h.Obj.Spec.ScaleTargetRef.Kind == c.dep.Kind && h.Obj.Spec.ScaleTargetRef.Name == c.dep.Name {
			return true
		}
	}
	return false
}

// resolvePort returns the container port v means: a number, or the name
// of one of the container's ports.
func (c *checker) resolvePort(v intstr.IntOrString) (int, bool) {
	if v.Type == intstr.Int {
		return int(v.IntVal), v.IntVal != 0
	}
	for _, p := range c.ctr.Ports {
		if p.Name == v.StrVal {
			return int(p.ContainerPort), true
		}
	}
	return 0, false
}

func (c *checker) probe(field string, p *corev1.Probe, wantPath string, required bool) {
	file := c.dep.File
	if p == nil {
		if required {
			c.add(file, field, "missing: the server answers %s for it", wantPath)
		}
		return
	}
	if p.HTTPGet == nil {
		c.add(file, field+".httpGet", "want an HTTP GET of %s", wantPath)
		return
	}
	if p.HTTPGet.Path != wantPath {
		c.add(file, field+".httpGet.path", "%q, want %q", p.HTTPGet.Path, wantPath)
	}
	if n, ok := c.resolvePort(p.HTTPGet.Port); !ok || n != c.port {
		c.add(file, field+".httpGet.port", "%s is not the server's port %d", p.HTTPGet.Port.String(), c.port)
	}
	if s := p.HTTPGet.Scheme; s != "" && s != corev1.URISchemeHTTP {
		c.add(file, field+".httpGet.scheme", "%s: the server speaks plain HTTP", s)
	}
}

// grace checks that the pod gets to finish its shutdown: the preStop
// sleep, then -shutdown-timeout, must end before the kubelet's SIGKILL.
func (c *checker) grace(pod *corev1.PodSpec) {
	grace := defaultGrace
	if pod.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
	}
	var sleep time.Duration
	if l := c.ctr.Lifecycle; l != nil && l.PreStop != nil && l.PreStop.Sleep != nil {
		sleep = time.Duration(l.PreStop.Sleep.Seconds) * time.Second
	}
	need := c.args.duration("shutdown-timeout") + sleep
	if grace <= need {
		c.add(c.dep.File, c.dep.PodPath+".terminationGracePeriodSeconds",
			"%s is not above the preStop sleep (%s) plus -shutdown-timeout (%s): the kubelet would SIGKILL the server before it has killed its runs and closed its sandboxes",
			grace, sleep, c.args.value("shutdown-timeout"))
	}
}

// security checks the pod and container fields the sandboxes need (see
// deploy/README.md for why each is needed).
func (c *checker) security(pod *corev1.PodSpec) {
	file := c.dep.File
	podSC := c.dep.PodPath + ".securityContext"
	csc := c.ctrPath + ".securityContext"
	psc := pod.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	sc := c.ctr.SecurityContext
	if sc == nil {
		c.add(file, csc, "missing")
		sc = &corev1.SecurityContext{}
	}

	if pod.HostUsers == nil || *pod.HostUsers {
		c.add(file, c.dep.PodPath+".hostUsers", "must be false: the pod needs a user namespace of its own for procMount Unmasked, and its uids must not be the node's")
	}
	if sc.ProcMount == nil || *sc.ProcMount != corev1.UnmaskedProcMount {
		c.add(file, csc+".procMount", "must be Unmasked: with the runtime's masks over /proc the kernel refuses the fresh proc mount every sandbox needs")
	}
	if pod.HostPID || pod.HostNetwork || pod.HostIPC {
		c.add(file, c.dep.PodPath, "hostPID, hostNetwork and hostIPC must stay false")
	}

	// Container fields override the pod's.
	seccomp, seccompField := sc.SeccompProfile, csc+".seccompProfile"
	if seccomp == nil {
		seccomp, seccompField = psc.SeccompProfile, podSC+".seccompProfile"
	}
	switch {
	case seccomp == nil:
		c.add(file, podSC+".seccompProfile", "unset: where the kubelet defaults to RuntimeDefault, that profile refuses unshare, mount and pivot_root; say Unconfined or Localhost")
	case seccomp.Type == corev1.SeccompProfileTypeRuntimeDefault:
		c.add(file, seccompField+".type", "RuntimeDefault refuses unshare, mount and pivot_root to a process without CAP_SYS_ADMIN; use Unconfined or a Localhost profile that allows them")
	case seccomp.Type == corev1.SeccompProfileTypeLocalhost && (seccomp.LocalhostProfile == nil || *seccomp.LocalhostProfile == ""):
		c.add(file, seccompField+".localhostProfile", "Localhost needs the profile's path")
	}
	apparmor, apparmorField := sc.AppArmorProfile, csc+".appArmorProfile"
	if apparmor == nil {
		apparmor, apparmorField = psc.AppArmorProfile, podSC+".appArmorProfile"
	}
	switch {
	case apparmor == nil:
		c.add(file, podSC+".appArmorProfile", "unset: on AppArmor nodes the runtime's default profile applies, and it denies mount; say Unconfined or Localhost")
	case apparmor.Type == corev1.AppArmorProfileTypeRuntimeDefault:
		c.add(file, apparmorField+".type", "RuntimeDefault denies mount; use Unconfined or a Localhost profile that allows userns and mount")
	case apparmor.Type == corev1.AppArmorProfileTypeLocalhost && (apparmor.LocalhostProfile == nil || *apparmor.LocalhostProfile == ""):
		c.add(file, apparmorField+".localhostProfile", "Localhost needs the profile's name")
	}

	nonRoot, nonRootField := sc.RunAsNonRoot, csc+".runAsNonRoot"
	if nonRoot == nil {
		nonRoot, nonRootField = psc.RunAsNonRoot, podSC+".runAsNonRoot"
	}
	if nonRoot == nil || !*nonRoot {
		c.add(file, nonRootField, "must be true: the server needs no root, and the kubelet then refuses an image that would run as root")
	}
	c.sameID(file, "runAsUser", sc.RunAsUser, psc.RunAsUser, csc, podSC, c.uid, "uid")
	c.sameID(file, "runAsGroup", sc.RunAsGroup, psc.RunAsGroup, csc, podSC, c.gid, "gid")

	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		c.add(file, csc+".allowPrivilegeEscalation", "must be false (no_new_privs): the sandboxes need no privilege from the server")
	}
	if sc.Privileged != nil && *sc.Privileged {
		c.add(file, csc+".privileged", "must not be true: a privileged container is the node's root, and hostUsers: false forbids it")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		c.add(file, csc+".readOnlyRootFilesystem", "must be true: the image's /usr and /lib are every sandbox's root, and nothing may change them")
	}
	if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		c.add(file, csc+".capabilities.drop", "must drop ALL: the server needs no capability, the sandboxes get theirs inside their own user namespaces")
	} else if len(sc.Capabilities.Add) > 0 {
		c.add(file, csc+".capabilities.add", "%v: add nothing", sc.Capabilities.Add)
	}
}

// sameID checks that a runAsUser or runAsGroup, if set (the container's
// over the pod's), is the id the image's USER names.
func (c *checker) sameID(file, name string, ctrID, podID *int64, csc, podSC string, image *int64, what string) {
	id, field := ctrID, csc+"."+name
	if id == nil {
		id, field = podID, podSC+"."+name
	}
	switch {
	case id != nil && *id == 0:
		c.add(file, field, "0: the server must not run as root")
	case id != nil && image != nil && *id != *image:
		c.add(file, field, "%d, but the image's USER has %s %d (Dockerfile)", *id, what, *image)
	}
}

// resources checks that requests and limits are set and that the limits
// hold -max-concurrent runs at their own maxima: a pod whose limit is
// below the sum meets its limit first, and the kernel then kills in the
// whole pod, the server included, rather than in one run.
func (c *checker) resources() {
	file := c.dep.File
	rf := c.ctrPath + ".resources"
	r := c.ctr.Resources
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := r.Requests[name]; !ok {
			c.add(file, rf+".requests."+string(name), "missing: the scheduler would place the pod without room for its runs")
		}
		if _, ok := r.Limits[name]; !ok {
			c.add(file, rf+".limits."+string(name), "missing")
		}
	}
	n := c.args.int("max-concurrent")
	// A session's sandbox holds up to -max-memory for its whole life, its
	// runs included, beside the one-shot runs.
	sandboxes := n + c.args.int("max-sessions")
	if mem, ok := r.Limits[corev1.ResourceMemory]; ok && n > 0 {
		per := c.args.size("max-memory")
		if per > 0 && (per > math.MaxInt64/sandboxes || mem.Value() < sandboxes*per) {
			c.add(file, rf+".limits.memory", "%s is below (-max-concurrent (%d) + -max-sessions (%d)) × -max-memory (%s)",
				mem.String(), n, c.args.int("max-sessions"), c.args.value("max-memory"))
		}
	}
	if cpu, ok := r.Limits[corev1.ResourceCPU]; ok && n > 0 {
		need := resource.NewMilliQuantity(int64(math.Ceil(float64(n)*c.args.float("max-cpus")*1000)), resource.DecimalSI)
		if cpu.Cmp(*need) < 0 {
			c.add(file, rf+".limits.cpu", "%s is below -max-concurrent (%d) × -max-cpus (%s): runs would be throttled below their own limit", cpu.String(), n, c.args.value("max-cpus"))
		}
	}
}

// podLabels are the workload's pod template labels.
func (c *checker) podLabels() labels.Set {
	return labels.Set(c.dep.Template.Labels)
}

func (c *checker) services() {
	if !slices.ContainsFunc(c.b.Services, func(s Object[corev1.Service]) bool { return s.Obj.Spec.ClusterIP != corev1.ClusterIPNone }) {
		c.add("kubernetes", "", "no Service with a cluster IP: clients have no stable address")
	}
	if c.dep == nil || c.ctr == nil {
		return
	}
	for _, s := range c.b.Services {
		spec := s.Obj.Spec
		if len(spec.Selector) == 0 {
			c.add(s.File, "spec.selector", "empty: the Service would have no endpoints")
		} else if !labels.SelectorFromSet(spec.Selector).Matches(c.podLabels()) {
			c.add(s.File, "spec.selector", "%v does not select the toolserver's pods %v", spec.Selector, c.podLabels())
		}
		if len(spec.Ports) == 0 {
			c.add(s.File, "spec.ports", "empty")
		}
		for i, p := range spec.Ports {
			target := p.TargetPort
			if target.Type == intstr.Int && target.IntVal == 0 {
				target = intstr.FromInt32(p.Port) // Kubernetes' default
			}
			if n, ok := c.resolvePort(target); !ok || n != c.port {
				c.add(s.File, fmt.Sprintf("spec.ports[%d].targetPort", i), "%s is not the toolserver's port %d (-addr, containerPort)", target.String(), c.port)
			}
		}
	}
}

func (c *checker) hpas() {
	if len(c.b.HPAs) == 0 {
		c.add("kubernetes", "", "no HorizontalPodAutoscaler on %s", inFlightGauge)
		return
	}
	for _, h := range c.b.HPAs {
		spec := h.Obj.Spec
		ref := spec.ScaleTargetRef
		if c.dep != nil && (ref.APIVersion != "apps/v1" || ref.Kind != c.dep.Kind || ref.Name != c.dep.Name) {
			c.add(h.File, "spec.scaleTargetRef", "%s %s %q, want apps/v1 %s %q", ref.APIVersion, ref.Kind, ref.Name, c.dep.Kind, c.dep.Name)
		}
		minR := int32(1)
		if spec.MinReplicas != nil {
			minR = *spec.MinReplicas
		}
		if minR < 1 || minR > spec.MaxReplicas {
			c.add(h.File, "spec.minReplicas", "%d is not from 1 to maxReplicas %d", minR, spec.MaxReplicas)
		}
		found := false
		for i, m := range spec.Metrics {
			if m.Type != autoscalingv2.PodsMetricSourceType || m.Pods == nil {
				continue
			}
			field := fmt.Sprintf("spec.metrics[%d].pods", i)
			name := m.Pods.Metric.Name
			if strings.HasPrefix(name, "sandbox_serve_") && name != inFlightGauge && name != queuedGauge && name != sessionsGauge {
				c.add(h.File, field+".metric.name", "%q is not a toolserver gauge (%s, %s, %s)", name, inFlightGauge, queuedGauge, sessionsGauge)
			}
			if name == sessionsGauge && c.args != nil {
				t := m.Pods.Target
				if n := c.args.int("max-sessions"); t.AverageValue != nil && t.AverageValue.Cmp(*resource.NewQuantity(n, resource.DecimalSI)) > 0 {
					c.add(h.File, field+".target.averageValue", "%s can never be reached: a pod holds at most -max-sessions=%d", t.AverageValue.String(), n)
				}
			}
			if name != inFlightGauge {
				continue
			}
			found = true
			t := m.Pods.Target
			if t.Type != autoscalingv2.AverageValueMetricType || t.AverageValue == nil || t.AverageValue.Sign() <= 0 {
				c.add(h.File, field+".target", "want type AverageValue with a positive averageValue (runs in flight per pod)")
				continue
			}
			if c.args != nil {
				if n := c.args.int("max-concurrent"); n > 0 && t.AverageValue.Cmp(*resource.NewQuantity(n, resource.DecimalSI)) > 0 {
					c.add(h.File, field+".target.averageValue", "%s can never be reached: a pod runs at most -max-concurrent=%d at once", t.AverageValue.String(), n)
				}
			}
		}
		if !found {
			c.add(h.File, "spec.metrics", "no Pods metric %s", inFlightGauge)
		}
	}
}

// minReplicas is the autoscaler's floor for the workload, or 0.
func (c *checker) minReplicas() int {
	for _, h := range c.b.HPAs {
		if c.dep != nil && h.Obj.Spec.ScaleTargetRef.Name == c.dep.Name {
			if h.Obj.Spec.MinReplicas == nil {
				return 1
			}
			return int(*h.Obj.Spec.MinReplicas)
		}
	}
	return 0
}

func (c *checker) pdbs() {
	if c.dep == nil {
		return
	}
	for _, p := range c.b.PDBs {
		spec := p.Obj.Spec
		if spec.Selector == nil {
			c.add(p.File, "spec.selector", "missing")
		} else if sel, err := metav1.LabelSelectorAsSelector(spec.Selector); err != nil {
			c.add(p.File, "spec.selector", "%v", err)
		} else if sel.Empty() || !sel.Matches(c.podLabels()) {
			c.add(p.File, "spec.selector", "%s does not select the toolserver's pods %v", sel, c.podLabels())
		}
		// At the autoscaler's floor, a drain must still be able to evict
		// one pod, or it waits forever.
		n := c.minReplicas()
		if n == 0 {
			continue
		}
		switch {
		case spec.MaxUnavailable != nil:
			v, err := intstr.GetScaledValueFromIntOrPercent(spec.MaxUnavailable, n, true)
			if err != nil || v < 1 {
				c.add(p.File, "spec.maxUnavailable", "%s allows no eviction at minReplicas %d", spec.MaxUnavailable.String(), n)
			}
		case spec.MinAvailable != nil:
			v, err := intstr.GetScaledValueFromIntOrPercent(spec.MinAvailable, n, true)
			if err != nil || n-v < 1 {
				c.add(p.File, "spec.minAvailable", "%s allows no eviction at minReplicas %d", spec.MinAvailable.String(), n)
			}
		default:
			c.add(p.File, "spec", "neither minAvailable nor maxUnavailable")
		}
	}
}

func (c *checker) networkPolicies() {
	if c.dep == nil || c.ctr == nil {
		return
	}
	for _, np := range c.b.NetworkPolicies {
		spec := np.Obj.Spec
		sel, err := metav1.LabelSelectorAsSelector(&spec.PodSelector)
		if err != nil {
			c.add(np.File, "spec.podSelector", "%v", err)
			continue
		}
		if !sel.Matches(c.podLabels()) {
			c.add(np.File, "spec.podSelector", "%s does not select the toolserver's pods %v", sel, c.podLabels())
			continue
		}
		ingress := len(spec.PolicyTypes) == 0 || slices.Contains(spec.PolicyTypes, "Ingress")
		if ingress {
			open := false
			for _, rule := range spec.Ingress {
				// The toolserver's own pods are its peers, not clients.
				open = open || (c.admitsPort(rule.Ports) && !c.onlyPeers(rule.From))
			}
			if !open {
				c.add(np.File, "spec.ingress", "no rule admits the toolserver's port %d: no client could reach it", c.port)
			}
		}
		c.peerPolicies(&np)
		if slices.Contains(spec.PolicyTypes, "Egress") && !slices.ContainsFunc(spec.Egress, leavesCluster) && c.args.value("egress") != "" {
			c.add(np.File, "spec.egress", "allows nothing out of the cluster, but -egress=%s lets runs ask for those hosts through the server, which dials them from the pod", c.args.value("egress"))
		}
	}
}

func (c *checker) kustomization() {
	k, file := c.b.Kustomization, c.b.KustomizationFile
	if k == nil {
		return
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		c.add(file, "kind", "%s %s, want kustomize.config.k8s.io/v1beta1 Kustomization", k.APIVersion, k.Kind)
	}
	for i, r := range k.Resources {
		if !slices.Contains(c.b.ManifestFiles, r) {
			c.add(file, fmt.Sprintf("resources[%d]", i), "%q is not a manifest in kubernetes/", r)
		}
	}
	for _, f := range c.b.ManifestFiles {
		if !slices.Contains(k.Resources, f) {
			c.add(file, "resources", "leaves out %s", f)
		}
	}
	if c.ctr != nil {
		for i, img := range k.Images {
			if img.Name != imageName(c.ctr.Image) {
				c.add(file, fmt.Sprintf("images[%d].name", i), "%q does not match the container's image %q, so it would change nothing", img.Name, c.ctr.Image)
			}
		}
	}
}

// imageName is an image reference without its tag and digest.
func imageName(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return ref
}

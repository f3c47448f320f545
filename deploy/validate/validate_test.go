package validate

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The deployment files, seen from this directory.
const (
	deployDir = ".."
	repoRoot  = "../.."
)

// TestDeployFiles is the check CI runs: the real files decode strictly and
// agree with each other and with the toolserver.
func TestDeployFiles(t *testing.T) {
	b, probs := Load(deployDir, repoRoot)
	probs = append(probs, Check(b)...)
	for _, p := range probs {
		t.Error(p)
	}
	// The checks above pass vacuously on files that were not read: make
	// sure every kind was.
	counts := map[string]int{
		"StatefulSet":             len(b.StatefulSets),
		"Service":                 len(b.Services),
		"HorizontalPodAutoscaler": len(b.HPAs),
		"PodDisruptionBudget":     len(b.PDBs),
		"NetworkPolicy":           len(b.NetworkPolicies),
	}
	for kind, n := range counts {
		if n == 0 {
			t.Errorf("no %s was loaded from %s/kubernetes", kind, deployDir)
		}
	}
	counts = map[string]int{
		"Sandbox":         len(b.Sandboxes),
		"SandboxTemplate": len(b.SandboxTemplates),
		"SandboxWarmPool": len(b.SandboxWarmPools),
		"NetworkPolicy":   len(b.SessionPolicies),
	}
	for kind, n := range counts {
		if n == 0 {
			t.Errorf("no %s was loaded from %s/%s", kind, deployDir, agentSandboxDir)
		}
	}
	if b.Dockerfile == nil || b.Kustomization == nil {
		t.Errorf("Dockerfile loaded: %v, kustomization.yaml loaded: %v", b.Dockerfile != nil, b.Kustomization != nil)
	}
}

// load reads the real files, which must have no problems: a case could
// not tell the problem its change makes from those, and TestDeployFiles
// fails on them.
func load(t *testing.T) *Bundle {
	t.Helper()
	b, probs := Load(deployDir, repoRoot)
	if b.Dockerfile == nil || len(b.StatefulSets) != 1 || len(b.Services) == 0 || len(b.HPAs) == 0 ||
		len(b.PDBs) == 0 || len(b.NetworkPolicies) == 0 || b.Kustomization == nil ||
		len(b.Sandboxes) != 1 || len(b.SandboxTemplates) != 1 || len(b.SandboxWarmPools) != 1 || len(b.SessionPolicies) == 0 {
		t.Fatalf("the deployment files did not load: %v", probs)
	}
	if probs = append(probs, Check(b)...); len(probs) > 0 {
		t.Skipf("the deployment files have %d problems already (TestDeployFiles lists them)", len(probs))
	}
	return b
}

// want fails unless probs has a problem in file whose field starts with
// field.
func want(t *testing.T, probs []Problem, file, field string) {
	t.Helper()
	for _, p := range probs {
		if p.File == file && strings.HasPrefix(p.Field, field) {
			t.Logf("caught: %s", p)
			return
		}
	}
	t.Errorf("no problem in %s at %q; the problems: %q", file, field, probs)
}

const (
	depFile = "kubernetes/statefulset.yaml"
	ctr0    = "spec.template.spec.containers[0]"
	podSC   = "spec.template.spec.securityContext"
)

func container(b *Bundle) *corev1.Container {
	return &pod(b).Containers[0]
}

// pod is the StatefulSet's pod spec.
func pod(b *Bundle) *corev1.PodSpec { return &b.StatefulSets[0].Obj.Spec.Template.Spec }

// setArg replaces the container argument for flag, or appends it.
func setArg(b *Bundle, flag, arg string) {
	c := container(b)
	for i, a := range c.Args {
		if strings.HasPrefix(a, "-"+flag+"=") || a == "-"+flag {
			c.Args[i] = arg
			return
		}
	}
	c.Args = append(c.Args, arg)
}

// dropArg removes the container argument for flag.
func dropArg(b *Bundle, flag string) {
	c := container(b)
	c.Args = slices.DeleteFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "-"+flag+"=") || a == "-"+flag })
}

const peersFile = "kubernetes/peers-service.yaml"

// peers is the StatefulSet's headless Service, clients the clients'.
func peers(b *Bundle) *corev1.Service   { return service(b, peersFile) }
func clients(b *Bundle) *corev1.Service { return service(b, "kubernetes/service.yaml") }

func service(b *Bundle, file string) *corev1.Service {
	for _, s := range b.Services {
		if s.File == file {
			return s.Obj
		}
	}
	panic("no " + file)
}

func ptr[T any](v T) *T { return &v }

// apiKeysMount is the volumeMount that holds -api-keys, apiKeysVolume its
// volume.
func apiKeysMount(b *Bundle) *corev1.VolumeMount {
	c := container(b)
	for i, m := range c.VolumeMounts {
		if m.MountPath == "/etc/sandbox/api-keys" {
			return &c.VolumeMounts[i]
		}
	}
	panic("no volumeMount at /etc/sandbox/api-keys")
}

func apiKeysVolume(b *Bundle) *corev1.Volume {
	p, name := pod(b), apiKeysMount(b).Name
	for i, v := range p.Volumes {
		if v.Name == name {
			return &p.Volumes[i]
		}
	}
	panic("no volume " + name)
}

// TestAuthenticationAlternatives: each way to authenticate, or to say
// there is none, satisfies the check that an address beyond loopback
// needs one.
func TestAuthenticationAlternatives(t *testing.T) {
	for _, args := range [][]string{
		{"-addr=:8080", "-api-keys=/k"},
		{"-addr=:8080", "-oidc-issuer=https://issuer.example", "-oidc-audience=sandbox"},
		{"-addr=:8080", "-tls-cert=/c", "-tls-key=/k", "-client-ca=/ca"},
		{"-addr=:8080", "-insecure-no-auth"},
		{"-addr=127.0.0.1:8080"},
		{"-addr=[::1]:8080"},
		{"-addr=localhost:8080"},
		{},
	} {
		sa, probs := parseServeArgs(append([]string{"serve"}, args...))
		if len(probs) > 0 {
			t.Fatalf("%q: %v", args, probs)
		}
		if msg := authProblem(sa); msg != "" {
			t.Errorf("%q: %s", args, msg)
		}
	}
	for _, args := range [][]string{
		{"-addr=:8080"}, {"-addr=0.0.0.0:8080"}, {"-addr=10.0.0.1:8080"}, {"-addr=[::]:8080", "-insecure-no-auth=false"},
		{"-addr=:8080", "-tls-cert=/c", "-api-keys=/k"},
	} {
		sa, _ := parseServeArgs(append([]string{"serve"}, args...))
		if msg := authProblem(sa); msg == "" {
			t.Errorf("%q: no problem", args)
		}
	}
}

// TestChecksCatch breaks the loaded manifests one way at a time and
// expects each break to be reported against the file and field at fault.
func TestChecksCatch(t *testing.T) {
	cases := []struct {
		name        string
		mutate      func(b *Bundle)
		file, field string
	}{
		{"service targetPort", func(b *Bundle) {
			clients(b).Spec.Ports[0].TargetPort = intstr.FromInt32(9090)
		}, "kubernetes/service.yaml", "spec.ports[0].targetPort"},
		{"service targetPort name", func(b *Bundle) {
			clients(b).Spec.Ports[0].TargetPort = intstr.FromString("metrics")
		}, "kubernetes/service.yaml", "spec.ports[0].targetPort"},
		{"-addr port", func(b *Bundle) { setArg(b, "addr", "-addr=:9090") }, depFile, ctr0 + ".ports"},
		{"-addr port not exposed", func(b *Bundle) { setArg(b, "addr", "-addr=:9090") }, "Dockerfile", "EXPOSE"},
		{"container port", func(b *Bundle) { container(b).Ports[0].ContainerPort = 8081 }, depFile, ctr0 + ".ports"},
		{"liveness path", func(b *Bundle) { container(b).LivenessProbe.HTTPGet.Path = "/health" }, depFile, ctr0 + ".livenessProbe.httpGet.path"},
		{"readiness path", func(b *Bundle) { container(b).ReadinessProbe.HTTPGet.Path = "/healthz" }, depFile, ctr0 + ".readinessProbe.httpGet.path"},
		{"readiness port", func(b *Bundle) { container(b).ReadinessProbe.HTTPGet.Port = intstr.FromInt32(9999) }, depFile, ctr0 + ".readinessProbe.httpGet.port"},
		{"no readiness probe", func(b *Bundle) { container(b).ReadinessProbe = nil }, depFile, ctr0 + ".readinessProbe"},
		{"grace period", func(b *Bundle) {
			pod(b).TerminationGracePeriodSeconds = ptr(int64(12))
		}, depFile, "spec.template.spec.terminationGracePeriodSeconds"},
		{"shutdown timeout", func(b *Bundle) { setArg(b, "shutdown-timeout", "-shutdown-timeout=40s") }, depFile, "spec.template.spec.terminationGracePeriodSeconds"},
		{"hpa target", func(b *Bundle) { b.HPAs[0].Obj.Spec.ScaleTargetRef.Name = "other" }, "kubernetes/hpa.yaml", "spec.scaleTargetRef"},
		{"hpa metric misspelt", func(b *Bundle) {
			b.HPAs[0].Obj.Spec.Metrics[0].Pods.Metric.Name = "sandbox_serve_run_in_flight"
		}, "kubernetes/hpa.yaml", "spec.metrics[0].pods.metric.name"},
		{"hpa without the in-flight metric", func(b *Bundle) {
			b.HPAs[0].Obj.Spec.Metrics = b.HPAs[0].Obj.Spec.Metrics[1:]
		}, "kubernetes/hpa.yaml", "spec.metrics"},
		{"hpa target unreachable", func(b *Bundle) {
			b.HPAs[0].Obj.Spec.Metrics[0].Pods.Target.AverageValue = ptr(resource.MustParse("10"))
		}, "kubernetes/hpa.yaml", "spec.metrics[0].pods.target.averageValue"},
		{"hostUsers true", func(b *Bundle) { pod(b).HostUsers = ptr(true) }, depFile, "spec.template.spec.hostUsers"},
		{"hostUsers unset", func(b *Bundle) { pod(b).HostUsers = nil }, depFile, "spec.template.spec.hostUsers"},
		{"procMount Default", func(b *Bundle) {
			container(b).SecurityContext.ProcMount = ptr(corev1.DefaultProcMount)
		}, depFile, ctr0 + ".securityContext.procMount"},
		{"seccomp RuntimeDefault", func(b *Bundle) {
			pod(b).SecurityContext.SeccompProfile.Type = corev1.SeccompProfileTypeRuntimeDefault
		}, depFile, podSC + ".seccompProfile.type"},
		{"seccomp RuntimeDefault on the container", func(b *Bundle) {
			container(b).SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
		}, depFile, ctr0 + ".securityContext.seccompProfile.type"},
		{"seccomp unset", func(b *Bundle) {
			pod(b).SecurityContext.SeccompProfile = nil
		}, depFile, podSC + ".seccompProfile"},
		{"apparmor RuntimeDefault", func(b *Bundle) {
			pod(b).SecurityContext.AppArmorProfile.Type = corev1.AppArmorProfileTypeRuntimeDefault
		}, depFile, podSC + ".appArmorProfile.type"},
		{"runAsNonRoot false", func(b *Bundle) {
			pod(b).SecurityContext.RunAsNonRoot = ptr(false)
		}, depFile, podSC + ".runAsNonRoot"},
		{"runAsUser not the image's", func(b *Bundle) {
			pod(b).SecurityContext.RunAsUser = ptr(int64(1000))
		}, depFile, podSC + ".runAsUser"},
		{"capabilities kept", func(b *Bundle) {
			container(b).SecurityContext.Capabilities.Drop = []corev1.Capability{"NET_RAW"}
		}, depFile, ctr0 + ".securityContext.capabilities.drop"},
		{"capability added", func(b *Bundle) {
			container(b).SecurityContext.Capabilities.Add = []corev1.Capability{"SYS_ADMIN"}
		}, depFile, ctr0 + ".securityContext.capabilities.add"},
		{"privilege escalation", func(b *Bundle) {
			container(b).SecurityContext.AllowPrivilegeEscalation = ptr(true)
		}, depFile, ctr0 + ".securityContext.allowPrivilegeEscalation"},
		{"writable root", func(b *Bundle) {
			container(b).SecurityContext.ReadOnlyRootFilesystem = ptr(false)
		}, depFile, ctr0 + ".securityContext.readOnlyRootFilesystem"},
		{"statefulset selector", func(b *Bundle) {
			b.StatefulSets[0].Obj.Spec.Selector.MatchLabels = map[string]string{"app": "other"}
		}, depFile, "spec.selector"},
		{"service selector", func(b *Bundle) {
			clients(b).Spec.Selector = map[string]string{"app": "other"}
		}, "kubernetes/service.yaml", "spec.selector"},
		{"pdb selector", func(b *Bundle) {
			b.PDBs[0].Obj.Spec.Selector.MatchLabels = map[string]string{"app": "other"}
		}, "kubernetes/pdb.yaml", "spec.selector"},
		{"pdb blocks drains", func(b *Bundle) {
			b.PDBs[0].Obj.Spec.MaxUnavailable = ptr(intstr.FromInt32(0))
		}, "kubernetes/pdb.yaml", "spec.maxUnavailable"},
		{"networkpolicy selector", func(b *Bundle) {
			b.NetworkPolicies[0].Obj.Spec.PodSelector.MatchLabels = map[string]string{"app": "other"}
		}, "kubernetes/networkpolicy.yaml", "spec.podSelector"},
		{"networkpolicy port", func(b *Bundle) {
			b.NetworkPolicies[0].Obj.Spec.Ingress[0].Ports[0].Port = ptr(intstr.FromInt32(9090))
		}, "kubernetes/networkpolicy.yaml", "spec.ingress"},
		{"networkpolicy blocks -egress", func(b *Bundle) { setArg(b, "egress", "-egress=pypi.org") }, "kubernetes/networkpolicy.yaml", "spec.egress"},
		{"memory limit", func(b *Bundle) {
			container(b).Resources.Limits[corev1.ResourceMemory] = resource.MustParse("1Gi")
		}, depFile, ctr0 + ".resources.limits.memory"},
		{"cpu limit", func(b *Bundle) {
			container(b).Resources.Limits[corev1.ResourceCPU] = resource.MustParse("1")
		}, depFile, ctr0 + ".resources.limits.cpu"},
		{"no requests", func(b *Bundle) { container(b).Resources.Requests = nil }, depFile, ctr0 + ".resources.requests"},
		{"replicas beside an hpa", func(b *Bundle) { b.StatefulSets[0].Obj.Spec.Replicas = ptr(int32(3)) }, depFile, "spec.replicas"},

		// Sessions across pods.
		{"sessions in a Deployment", func(b *Bundle) {
			ss := b.StatefulSets[0]
			b.Deployments = []Object[appsv1.Deployment]{{File: "kubernetes/deployment.yaml", Obj: &appsv1.Deployment{ObjectMeta: ss.Obj.ObjectMeta,
				Spec: appsv1.DeploymentSpec{Selector: ss.Obj.Spec.Selector, Template: ss.Obj.Spec.Template}}}}
			b.StatefulSets = nil
			b.HPAs[0].Obj.Spec.ScaleTargetRef.Kind = "Deployment"
		}, "kubernetes/deployment.yaml", "kind"},
		{"pods one at a time", func(b *Bundle) { b.StatefulSets[0].Obj.Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement }, depFile, "spec.podManagementPolicy"},
		{"no serviceName", func(b *Bundle) { b.StatefulSets[0].Obj.Spec.ServiceName = "" }, depFile, "spec.serviceName"},
		{"serviceName names nothing", func(b *Bundle) { b.StatefulSets[0].Obj.Spec.ServiceName = "toolserver-peer" }, depFile, "spec.serviceName"},
		{"peers' Service not headless", func(b *Bundle) { peers(b).Spec.ClusterIP = "" }, peersFile, "spec.clusterIP"},
		{"peers' Service hides draining pods", func(b *Bundle) { peers(b).Spec.PublishNotReadyAddresses = false }, peersFile, "spec.publishNotReadyAddresses"},
		{"no -peer-url", func(b *Bundle) { dropArg(b, "peer-url") }, depFile, ctr0 + ".args"},
		{"-peer-url another host", func(b *Bundle) { setArg(b, "peer-url", "-peer-url=http://{replica}.toolserver:8080") }, depFile, ctr0 + ".args["},
		{"-peer-url the Service's port", func(b *Bundle) { setArg(b, "peer-url", "-peer-url=http://{replica}.toolserver-peers") }, depFile, ctr0 + ".args["},
		{"-replica fixed", func(b *Bundle) { setArg(b, "replica", "-replica=toolserver") }, depFile, ctr0 + ".args["},
		{"no POD_NAME", func(b *Bundle) { container(b).Env = nil }, depFile, ctr0 + ".env"},
		{"POD_NAME not the pod's", func(b *Bundle) { container(b).Env[0].ValueFrom.FieldRef.FieldPath = "spec.nodeName" }, depFile, ctr0 + ".env[0]"},
		{"peers not admitted", func(b *Bundle) {
			np := &b.NetworkPolicies[0].Obj.Spec
			np.Ingress = np.Ingress[:1]
		}, "kubernetes/networkpolicy.yaml", "spec.ingress"},
		{"peers not reached", func(b *Bundle) {
			np := &b.NetworkPolicies[0].Obj.Spec
			np.Egress = np.Egress[1:]
		}, "kubernetes/networkpolicy.yaml", "spec.egress"},
		{"no DNS", func(b *Bundle) {
			np := &b.NetworkPolicies[0].Obj.Spec
			np.Egress = np.Egress[:1]
		}, "kubernetes/networkpolicy.yaml", "spec.egress"},
		{"sessions target unreachable", func(b *Bundle) {
			b.HPAs[0].Obj.Spec.Metrics[1].Pods.Target.AverageValue = ptr(resource.MustParse("5"))
		}, "kubernetes/hpa.yaml", "spec.metrics[1].pods.target.averageValue"},
		{"memory for the sessions", func(b *Bundle) { setArg(b, "max-sessions", "-max-sessions=8") }, depFile, ctr0 + ".resources.limits.memory"},
		{"hpa on a Deployment", func(b *Bundle) { b.HPAs[0].Obj.Spec.ScaleTargetRef.Kind = "Deployment" }, "kubernetes/hpa.yaml", "spec.scaleTargetRef"},
		{"no Service for clients", func(b *Bundle) { clients(b).Spec.ClusterIP = corev1.ClusterIPNone }, "kubernetes", ""},
		{"flag misspelt", func(b *Bundle) { setArg(b, "max-concurrent", "-max-concurent=4") }, depFile, ctr0 + ".args["},
		{"flag value", func(b *Bundle) { setArg(b, "max-timeout", "-max-timeout=sixty") }, depFile, ctr0 + ".args["},
		{"no -max-concurrent", func(b *Bundle) {
			c := container(b)
			var args []string
			for _, a := range c.Args {
				if !strings.HasPrefix(a, "-max-concurrent") {
					args = append(args, a)
				}
			}
			c.Args = args
		}, depFile, ctr0 + ".args"},
		{"command replaces the entrypoint", func(b *Bundle) { container(b).Command = []string{"/bin/sh", "-c"} }, depFile, ctr0 + ".command"},
		{"kustomization leaves a file out", func(b *Bundle) {
			b.Kustomization.Resources = b.Kustomization.Resources[1:]
		}, "kubernetes/kustomization.yaml", "resources"},
		{"kustomization image", func(b *Bundle) { b.Kustomization.Images[0].Name = "toolsrv" }, "kubernetes/kustomization.yaml", "images[0].name"},
		{"args without serve", func(b *Bundle) { container(b).Args = container(b).Args[1:] }, depFile, ctr0 + ".args[0]"},
		{"serve not first", func(b *Bundle) {
			c := container(b)
			c.Args = append(c.Args[1:], "serve")
		}, depFile, ctr0 + ".args[0]"},
		{"no authentication", func(b *Bundle) { dropArg(b, "api-keys") }, depFile, ctr0 + ".args[1]"},
		{"no authentication on the default port", func(b *Bundle) {
			dropArg(b, "api-keys")
			setArg(b, "addr", "-addr=0.0.0.0:8080")
		}, depFile, ctr0 + ".args[1]"},
		{"-oidc-issuer without -oidc-audience", func(b *Bundle) {
			dropArg(b, "api-keys")
			setArg(b, "oidc-issuer", "-oidc-issuer=https://issuer.example")
		}, depFile, ctr0 + ".args[1]"},
		{"-client-ca without TLS", func(b *Bundle) {
			dropArg(b, "api-keys")
			setArg(b, "client-ca", "-client-ca=/etc/sandbox/api-keys/ca.pem")
		}, depFile, ctr0 + ".args[1]"},
		{"key file mount writable", func(b *Bundle) { apiKeysMount(b).ReadOnly = false }, depFile, ctr0 + ".args[2]"},
		{"key file outside every mount", func(b *Bundle) {
			setArg(b, "api-keys", "-api-keys=/etc/keys")
		}, depFile, ctr0 + ".args[2]"},
		{"key file a relative path", func(b *Bundle) {
			setArg(b, "api-keys", "-api-keys=keys")
		}, depFile, ctr0 + ".args[2]"},
		{"key file's volume missing", func(b *Bundle) {
			p := pod(b)
			p.Volumes = slices.DeleteFunc(p.Volumes, func(v corev1.Volume) bool { return v.Name == apiKeysMount(b).Name })
		}, depFile, ctr0 + ".args[2]"},
		{"key file not from a Secret", func(b *Bundle) {
			v := apiKeysVolume(b)
			v.Secret, v.EmptyDir = nil, &corev1.EmptyDirVolumeSource{}
		}, depFile, ctr0 + ".args[2]"},
		{"key file not among the Secret's items", func(b *Bundle) {
			apiKeysVolume(b).Secret.Items[0].Path = "api-keys"
		}, depFile, ctr0 + ".args[2]"},
		{"key file unreadable: no fsGroup", func(b *Bundle) { pod(b).SecurityContext.FSGroup = nil }, depFile, ctr0 + ".args[2]"},
		{"key file unreadable: its item's mode", func(b *Bundle) {
			apiKeysVolume(b).Secret.Items[0].Mode = ptr(int32(0o400))
		}, depFile, ctr0 + ".args[2]"},
		{"-tenants outside every mount", func(b *Bundle) {
			setArg(b, "tenants", "-tenants=/etc/tenants.json")
		}, depFile, ctr0 + ".args["},
		{"-tls-key from a writable mount", func(b *Bundle) {
			setArg(b, "tls-cert", "-tls-cert=/tmp/tls.crt")
			setArg(b, "tls-key", "-tls-key=/tmp/tls.key")
		}, depFile, ctr0 + ".args["},
		{"-allow-host without a peer", func(b *Bundle) { b.HPAs[0].Obj.Spec.MaxReplicas = 21 }, depFile, ctr0 + ".args[3]"},
		{"-allow-host in another namespace", func(b *Bundle) { b.Kustomization.Namespace = "tools" }, depFile, ctr0 + ".args[3]"},
		{"no -allow-host", func(b *Bundle) { dropArg(b, "allow-host") }, depFile, ctr0 + ".args"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := load(t)
			tc.mutate(b)
			want(t, Check(b), tc.file, tc.field)
		})
	}
}

// TestDockerfileChecksCatch changes one line of the real Dockerfile at a
// time and expects the change to be reported.
func TestDockerfileChecksCatch(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(deployDir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, old, new string
		file, field    string
	}{
		{"EXPOSE", "EXPOSE 8080", "EXPOSE 9090", "Dockerfile", "EXPOSE"},
		{"USER not the manifests'", "USER 65532:65532", "USER 1000:1000", depFile, podSC + ".runAsUser"},
		{"USER a name", "USER 65532:65532", "USER nonroot", "Dockerfile", "USER"},
		{"USER root", "USER 65532:65532", "USER 0", "Dockerfile", "USER"},
		{"no USER", "USER 65532:65532\n", "\n", "Dockerfile", "USER"},
		{"package missing", "./cmd/sandbox", "./cmd/sandbx", "Dockerfile", "RUN"},
		{"package not a command", "./cmd/sandbox", "./internal/service", "Dockerfile", "RUN"},
		{"cgo", "CGO_ENABLED=0 go build", "CGO_ENABLED=1 go build", "Dockerfile", "RUN"},
		{"shell-form ENTRYPOINT", `ENTRYPOINT ["/sandbox"]`, `ENTRYPOINT /sandbox`, "Dockerfile", "ENTRYPOINT"},
		{"binary copied elsewhere", "COPY --from=build /sandbox /sandbox", "COPY --from=build /sandbox /usr/local/bin/sandbox", "Dockerfile", "ENTRYPOINT"},
		{"built elsewhere", "-o /sandbox ./cmd", "-o /server ./cmd", "Dockerfile", "COPY"},
		{"CMD -addr", `"-addr=:8080"`, `"-addr=:9090"`, "Dockerfile", "CMD"},
		{"CMD flag misspelt", `"-log-format=json"`, `"-logformat=json"`, "Dockerfile", "CMD"},
		{"CMD without serve", `CMD ["serve", `, `CMD [`, "Dockerfile", "CMD"},
		{"CMD without authentication", `"-api-keys=/etc/sandbox/api-keys/keys", `, ``, "Dockerfile", "CMD"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := load(t)
			if n := strings.Count(string(text), tc.old); n != 1 {
				t.Fatalf("the Dockerfile has %q %d times, want once: update this case", tc.old, n)
			}
			d, err := parseDockerfile(strings.Replace(string(text), tc.old, tc.new, 1))
			if err != nil {
				t.Fatal(err)
			}
			b.Dockerfile = d
			want(t, Check(b), tc.file, tc.field)
		})
	}
}

// copyDeploy copies the Dockerfile and the manifests into a temporary
// deploy directory, with edit applied to the file named file.
func copyDeploy(t *testing.T, file string, edit func(string) string) string {
	t.Helper()
	dir := t.TempDir()
	names := []string{"Dockerfile"}
	for _, sub := range []string{"kubernetes", agentSandboxDir} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
		entries, err := os.ReadDir(filepath.Join(deployDir, sub))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			names = append(names, sub+"/"+e.Name())
		}
	}
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(deployDir, n))
		if err != nil {
			t.Fatal(err)
		}
		s := string(data)
		if n == file {
			if s2 := edit(s); s2 == s {
				t.Fatalf("the edit changed nothing in %s: update this case", n)
			} else {
				s = s2
			}
		}
		if err := os.WriteFile(filepath.Join(dir, n), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// replaceOnce returns an edit replacing old, which must occur once.
func replaceOnce(t *testing.T, old, new string) func(string) string {
	return func(s string) string {
		if n := strings.Count(s, old); n != 1 {
			t.Fatalf("%q occurs %d times, want once: update this case", old, n)
		}
		return strings.Replace(s, old, new, 1)
	}
}

// TestStrictDecoding edits the manifests' text and expects Load to refuse
// what the API server would refuse, naming the file and the field.
func TestStrictDecoding(t *testing.T) {
	cases := []struct {
		name, file, old, new string
		wantField            string // "" when the problem concerns the file as a whole
		wantMsg              string
	}{
		{"unknown field", depFile, "procMount: Unmasked", "procMout: Unmasked",
			ctr0 + ".securityContext.procMout", "unknown field"},
		{"field in the wrong case", depFile, "procMount: Unmasked", "ProcMount: Unmasked",
			ctr0 + ".securityContext.ProcMount", "unknown field"},
		{"field at the wrong level", depFile, "      hostUsers: false", "      hostUser: false",
			"spec.template.spec.hostUser", "unknown field"},
		{"unknown kind", "kubernetes/pdb.yaml", "kind: PodDisruptionBudget", "kind: PodDisruptionBudgt",
			"kind", "not a kind"},
		{"old apiVersion", "kubernetes/hpa.yaml", "apiVersion: autoscaling/v2", "apiVersion: autoscaling/v2beta2",
			"kind", "not a kind"},
		{"wrong type", depFile, "containerPort: 8080", `containerPort: "eighty"`,
			"spec.template.spec.containers.ports.containerPort", "wants int32"},
		{"duplicate key", depFile, "      hostUsers: false\n", "      hostUsers: false\n      hostUsers: true\n",
			"", "already set"},
		{"kustomization field", "kubernetes/kustomization.yaml", "resources:", "resource:",
			"resource", "unknown field"},
		{"Sandbox field", sbFile, "  service: true", "  services: true",
			"spec.services", "unknown field"},
		{"Sandbox pod field", sbFile, "procMount: Unmasked", "procMout: Unmasked",
			sbCtr0 + ".securityContext.procMout", "unknown field"},
		{"Sandbox field in the wrong case", sbFile, "  podTemplate:", "  PodTemplate:",
			"spec.PodTemplate", "unknown field"},
		{"Sandbox old apiVersion", sbFile, "apiVersion: agents.x-k8s.io/v1beta1", "apiVersion: agents.x-k8s.io/v1alpha1",
			"kind", "not a kind"},
		{"SandboxTemplate pod field", "agent-sandbox/warm-pool.yaml", "      hostUsers: false", "      hostUser: false",
			"spec.podTemplate.spec.hostUser", "unknown field"},
		{"SandboxWarmPool field", "agent-sandbox/warm-pool.yaml", "  sandboxTemplateRef:", "  templateRef:",
			"spec.templateRef", "unknown field"},
		{"SandboxWarmPool wrong type", "agent-sandbox/warm-pool.yaml", "  replicas: 2", "  replicas: two",
			"spec.replicas", "wants int32"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDeploy(t, tc.file, replaceOnce(t, tc.old, tc.new))
			_, probs := Load(dir, repoRoot)
			for _, p := range probs {
				if strings.HasPrefix(p.File, tc.file) && p.Field == tc.wantField && strings.Contains(p.Msg, tc.wantMsg) {
					t.Logf("caught: %s", p)
					return
				}
			}
			t.Errorf("want a problem in %s at %q saying %q; got %v", tc.file, tc.wantField, tc.wantMsg, probs)
		})
	}
	t.Run("manifest outside the kustomization", func(t *testing.T) {
		dir := copyDeploy(t, "", nil)
		extra := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"
		if err := os.WriteFile(filepath.Join(dir, "kubernetes", "extra.yaml"), []byte(extra), 0o644); err != nil {
			t.Fatal(err)
		}
		b, probs := Load(dir, repoRoot)
		probs = append(probs, Check(b)...)
		var kind, kust bool
		for _, p := range probs {
			kind = kind || (p.File == "kubernetes/extra.yaml" && p.Field == "kind")
			kust = kust || (p.File == "kubernetes/kustomization.yaml" && strings.Contains(p.Msg, "extra.yaml"))
		}
		if !kind || !kust {
			t.Errorf("want the ConfigMap refused (%v) and the kustomization to miss it (%v); got %v", kind, kust, probs)
		}
	})
}

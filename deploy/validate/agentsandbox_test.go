package validate

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The agent-sandbox files, as problems name them.
const (
	sbFile     = "agent-sandbox/sandbox.yaml"
	tmplFile   = "agent-sandbox/warm-pool.yaml (document 1)"
	poolFile   = "agent-sandbox/warm-pool.yaml (document 2)"
	sbPolicy   = "agent-sandbox/networkpolicy.yaml"
	sbPodPath  = "spec.podTemplate.spec"
	sbCtr0     = sbPodPath + ".containers[0]"
	sbPodSC    = sbPodPath + ".securityContext"
	sbPodLabel = "spec.podTemplate.metadata.labels"
)

// sbPod is the Sandbox's pod spec, tmplPod the SandboxTemplate's.
func sbPod(b *Bundle) *corev1.PodSpec   { return &b.Sandboxes[0].Obj.Spec.PodTemplate.Spec }
func tmplPod(b *Bundle) *corev1.PodSpec { return &b.SandboxTemplates[0].Obj.Spec.PodTemplate.Spec }

// setPodArg replaces the argument for flag of pod's container, or
// appends it.
func setPodArg(pod *corev1.PodSpec, flag, arg string) {
	c := &pod.Containers[0]
	for i, a := range c.Args {
		if strings.HasPrefix(a, "-"+flag+"=") || a == "-"+flag {
			c.Args[i] = arg
			return
		}
	}
	c.Args = append(c.Args, arg)
}

// dropPodArg removes the argument for flag of pod's container.
func dropPodArg(pod *corev1.PodSpec, flag string) {
	c := &pod.Containers[0]
	c.Args = slices.DeleteFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "-"+flag+"=") || a == "-"+flag })
}

// dropEnv removes pod's container's env var name.
func dropEnv(pod *corev1.PodSpec, name string) {
	c := &pod.Containers[0]
	c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
}

// TestAgentSandboxChecksCatch breaks the loaded agent-sandbox manifests
// one way at a time and expects each break to be reported against the
// file and field at fault.
func TestAgentSandboxChecksCatch(t *testing.T) {
	cases := []struct {
		name        string
		mutate      func(b *Bundle)
		file, field string
	}{
		// The pod's security, as for the StatefulSet's.
		{"hostUsers true", func(b *Bundle) { sbPod(b).HostUsers = ptr(true) }, sbFile, sbPodPath + ".hostUsers"},
		{"template hostUsers unset", func(b *Bundle) { tmplPod(b).HostUsers = nil }, tmplFile, sbPodPath + ".hostUsers"},
		{"template procMount removed", func(b *Bundle) {
			tmplPod(b).Containers[0].SecurityContext.ProcMount = nil
		}, tmplFile, sbCtr0 + ".securityContext.procMount"},
		{"seccomp RuntimeDefault", func(b *Bundle) {
			sbPod(b).SecurityContext.SeccompProfile.Type = corev1.SeccompProfileTypeRuntimeDefault
		}, sbFile, sbPodSC + ".seccompProfile.type"},
		{"template apparmor unset", func(b *Bundle) { tmplPod(b).SecurityContext.AppArmorProfile = nil }, tmplFile, sbPodSC + ".appArmorProfile"},
		{"runAsUser root", func(b *Bundle) { sbPod(b).SecurityContext.RunAsUser = ptr(int64(0)) }, sbFile, sbPodSC + ".runAsUser"},
		{"runAsNonRoot unset", func(b *Bundle) { tmplPod(b).SecurityContext.RunAsNonRoot = nil }, tmplFile, sbPodSC + ".runAsNonRoot"},
		{"capability added", func(b *Bundle) {
			sbPod(b).Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"SYS_ADMIN"}
		}, sbFile, sbCtr0 + ".securityContext.capabilities.add"},
		{"writable root", func(b *Bundle) {
			tmplPod(b).Containers[0].SecurityContext.ReadOnlyRootFilesystem = nil
		}, tmplFile, sbCtr0 + ".securityContext.readOnlyRootFilesystem"},

		// The server's flags and files.
		{"flag misspelt", func(b *Bundle) { setPodArg(sbPod(b), "max-concurrent", "-max-concurent=2") }, sbFile, sbCtr0 + ".args["},
		{"no authentication", func(b *Bundle) { dropPodArg(tmplPod(b), "api-keys") }, tmplFile, sbCtr0 + ".args[1]"},
		{"fsGroup removed", func(b *Bundle) { sbPod(b).SecurityContext.FSGroup = nil }, sbFile, sbCtr0 + ".args[2]"},
		{"template fsGroup removed", func(b *Bundle) { tmplPod(b).SecurityContext.FSGroup = nil }, tmplFile, sbCtr0 + ".args[2]"},
		{"key file mount writable", func(b *Bundle) { sbPod(b).Containers[0].VolumeMounts[1].ReadOnly = false }, sbFile, sbCtr0 + ".args[2]"},
		{"readiness path", func(b *Bundle) {
			tmplPod(b).Containers[0].ReadinessProbe.HTTPGet.Path = "/healthz"
		}, tmplFile, sbCtr0 + ".readinessProbe.httpGet.path"},
		{"container port", func(b *Bundle) { sbPod(b).Containers[0].Ports[0].ContainerPort = 8081 }, sbFile, sbCtr0 + ".ports"},
		{"grace period", func(b *Bundle) { setPodArg(tmplPod(b), "shutdown-timeout", "-shutdown-timeout=40s") }, tmplFile, sbPodPath + ".terminationGracePeriodSeconds"},
		{"memory for more sessions", func(b *Bundle) { setPodArg(sbPod(b), "max-sessions", "-max-sessions=8") }, sbFile, sbCtr0 + ".resources.limits.memory"},
		{"cpu limit", func(b *Bundle) {
			tmplPod(b).Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("1")
		}, tmplFile, sbCtr0 + ".resources.limits.cpu"},

		// The pod's own Service and Host names.
		{"-allow-host without $(POD_NAME)", func(b *Bundle) {
			setPodArg(tmplPod(b), "allow-host", "-allow-host=toolserver-session,toolserver-session.$(POD_NAMESPACE),toolserver-session.$(POD_NAMESPACE).svc,toolserver-session.$(POD_NAMESPACE).svc.cluster.local")
		}, tmplFile, sbCtr0 + ".args[3]"},
		{"-allow-host without the cluster domain", func(b *Bundle) {
			setPodArg(sbPod(b), "allow-host", "-allow-host=$(POD_NAME),$(POD_NAME).$(POD_NAMESPACE),$(POD_NAME).$(POD_NAMESPACE).svc")
		}, sbFile, sbCtr0 + ".args[3]"},
		{"no -allow-host", func(b *Bundle) { dropPodArg(sbPod(b), "allow-host") }, sbFile, sbCtr0 + ".args"},
		{"-allow-host names an unknown env var", func(b *Bundle) {
			setPodArg(sbPod(b), "allow-host", "-allow-host=$(POD),$(POD_NAME),$(POD_NAME).$(POD_NAMESPACE),$(POD_NAME).$(POD_NAMESPACE).svc,$(POD_NAME).$(POD_NAMESPACE).svc.cluster.local")
		}, sbFile, sbCtr0 + ".args[3]"},
		{"POD_NAME env removed", func(b *Bundle) { dropEnv(sbPod(b), "POD_NAME") }, sbFile, sbCtr0 + ".env"},
		{"POD_NAME env removed: the host", func(b *Bundle) { dropEnv(tmplPod(b), "POD_NAME") }, tmplFile, sbCtr0 + ".args[3]"},
		{"POD_NAMESPACE env removed", func(b *Bundle) { dropEnv(tmplPod(b), "POD_NAMESPACE") }, tmplFile, sbCtr0 + ".env"},
		{"POD_NAMESPACE not the pod's", func(b *Bundle) {
			sbPod(b).Containers[0].Env[1].ValueFrom.FieldRef.FieldPath = "spec.serviceAccountName"
		}, sbFile, sbCtr0 + ".env[1]"},
		{"POD_NAME a fixed value", func(b *Bundle) {
			tmplPod(b).Containers[0].Env[0] = corev1.EnvVar{Name: "POD_NAME", Value: "toolserver-session"}
		}, tmplFile, sbCtr0 + ".env[0]"},
		{"-peer-url", func(b *Bundle) { setPodArg(sbPod(b), "peer-url", "-peer-url=http://{replica}.toolserver-peers:8080") }, sbFile, sbCtr0 + ".args["},
		{"no Service", func(b *Bundle) { b.Sandboxes[0].Obj.Spec.Service = nil }, sbFile, "spec.service"},
		{"template without a Service", func(b *Bundle) { b.SandboxTemplates[0].Obj.Spec.Service = ptr(false) }, tmplFile, "spec.service"},
		{"labels of the StatefulSet's pods", func(b *Bundle) {
			b.Sandboxes[0].Obj.Spec.PodTemplate.Metadata.Labels["app.kubernetes.io/name"] = "toolserver"
		}, sbFile, sbPodLabel},

		// The template, the pool and the NetworkPolicy.
		{"controller's default NetworkPolicy", func(b *Bundle) { b.SandboxTemplates[0].Obj.Spec.NetworkPolicyManagement = "" }, tmplFile, "spec.networkPolicyManagement"},
		{"controller's NetworkPolicy without the port", func(b *Bundle) {
			b.SandboxTemplates[0].Obj.Spec.NetworkPolicyManagement = "Managed"
			b.SandboxTemplates[0].Obj.Spec.NetworkPolicy = &SandboxNetworkPolicy{}
		}, tmplFile, "spec.networkPolicy.ingress"},
		{"pool of no template", func(b *Bundle) { b.SandboxWarmPools[0].Obj.Spec.SandboxTemplateRef.Name = "toolserver" }, poolFile, "spec.sandboxTemplateRef.name"},
		{"networkpolicy selector", func(b *Bundle) {
			b.SessionPolicies[0].Obj.Spec.PodSelector.MatchLabels = map[string]string{"app.kubernetes.io/name": "toolserver"}
		}, sbPolicy, "spec.podSelector"},
		{"pods no networkpolicy selects", func(b *Bundle) {
			b.SessionPolicies[0].Obj.Spec.PodSelector.MatchLabels = map[string]string{"app.kubernetes.io/name": "toolserver"}
		}, tmplFile, sbPodLabel},
		{"networkpolicy port", func(b *Bundle) {
			b.SessionPolicies[0].Obj.Spec.Ingress[0].Ports[0].Port = ptr(intstr.FromInt32(9090))
		}, sbPolicy, "spec.ingress"},
		{"networkpolicy blocks -egress", func(b *Bundle) { setPodArg(sbPod(b), "egress", "-egress=pypi.org") }, sbPolicy, "spec.egress"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := load(t)
			tc.mutate(b)
			want(t, Check(b), tc.file, tc.field)
		})
	}
}

// TestAgentSandboxAllowHost: a Sandbox, whose pod's name is its own, may
// name its Service's hosts literally; the namespace literally only where
// the Sandbox says its namespace.
func TestAgentSandboxAllowHost(t *testing.T) {
	const literal = "-allow-host=toolserver-session-example,toolserver-session-example.tools,toolserver-session-example.tools.svc,toolserver-session-example.tools.svc.cluster.local"
	b := load(t)
	setPodArg(sbPod(b), "allow-host", literal)
	b.Sandboxes[0].Obj.Namespace = "tools"
	if probs := Check(b); len(probs) > 0 {
		t.Errorf("the Sandbox's own name and namespace in -allow-host: %v", probs)
	}
	b.Sandboxes[0].Obj.Namespace = ""
	want(t, Check(b), sbFile, sbCtr0+".args[3]")
}

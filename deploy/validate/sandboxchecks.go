package validate

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The checks of agent-sandbox/: a Sandbox, or a SandboxTemplate's
// Sandboxes, each run the server in a pod of its own for one agent
// session. The pod is checked as the StatefulSet's is (checker.pod);
// what differs is that it has no peers, and that its Service is named
// after the pod, which the template cannot know: the pod learns its name
// and namespace from the downward API.

// sandboxPodPath is where a Sandbox's or SandboxTemplate's pod spec is.
const sandboxPodPath = "spec.podTemplate.spec"

// sandboxLabelsPath is where its pods' labels are.
const sandboxLabelsPath = "spec.podTemplate.metadata.labels"

// sandboxWorkload is a Sandbox's or SandboxTemplate's pod as a workload.
func sandboxWorkload(file, kind string, meta *metav1.ObjectMeta, t *SandboxPodTemplate, service *bool) workload {
	return workload{File: file, Kind: kind, Name: meta.Name, PodPath: sandboxPodPath, Sandbox: true,
		Namespace: meta.Namespace, Service: service,
		Template: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: t.Metadata.Labels, Annotations: t.Metadata.Annotations}, Spec: t.Spec}}
}

// agentSandbox checks the files of agent-sandbox/.
func (c *checker) agentSandbox() {
	var pods []*checker // one per Sandbox and SandboxTemplate with a container
	// Each pod is checked by a checker of its own, which learns its
	// container, flags and port; the Dockerfile's facts are shared.
	check := func(w workload) (*checker, bool) {
		sc := &checker{b: c.b, exposed: c.exposed, uid: c.uid, gid: c.gid, entry: c.entry, dep: &w}
		if !sc.pod() {
			return sc, false
		}
		sc.sandboxPod()
		pods = append(pods, sc)
		return sc, true
	}
	for _, s := range c.b.Sandboxes {
		sc, _ := check(sandboxWorkload(s.File, "Sandbox", &s.Obj.ObjectMeta, &s.Obj.Spec.PodTemplate, s.Obj.Spec.Service))
		c.probs = append(c.probs, sc.probs...)
	}
	for _, t := range c.b.SandboxTemplates {
		spec := &t.Obj.Spec
		sc, ok := check(sandboxWorkload(t.File, "SandboxTemplate", &t.Obj.ObjectMeta, &spec.PodTemplate, spec.Service))
		switch {
		case !ok:
		case spec.NetworkPolicyManagement == "Unmanaged":
		case spec.NetworkPolicy == nil:
			sc.add(t.File, "spec.networkPolicyManagement", "%q (Managed is the default) with no spec.networkPolicy: the controller's own NetworkPolicy admits only its sandbox-router, and no client would reach the server on port %d; say Unmanaged and select the pods with a NetworkPolicy in %s/, or give spec.networkPolicy rules that admit the clients",
				spec.NetworkPolicyManagement, sc.port, agentSandboxDir)
		case !slices.ContainsFunc(spec.NetworkPolicy.Ingress, func(r networkingv1.NetworkPolicyIngressRule) bool { return sc.admitsPort(r.Ports) }):
			sc.add(t.File, "spec.networkPolicy.ingress", "no rule admits the server's port %d: no client could reach it", sc.port)
		}
		c.probs = append(c.probs, sc.probs...)
	}

	for _, p := range c.b.SandboxWarmPools {
		ref := p.Obj.Spec.SandboxTemplateRef.Name
		if !slices.ContainsFunc(c.b.SandboxTemplates, func(t Object[SandboxTemplate]) bool {
			return t.Obj.Name == ref && t.Obj.Namespace == p.Obj.Namespace
		}) {
			c.add(p.File, "spec.sandboxTemplateRef.name", "%q: no SandboxTemplate of that name in %s/, so the pool would start no pod", ref, agentSandboxDir)
		}
	}

	selected := make([]bool, len(pods))
	for _, np := range c.b.SessionPolicies {
		spec := np.Obj.Spec
		sel, err := metav1.LabelSelectorAsSelector(&spec.PodSelector)
		if err != nil {
			c.add(np.File, "spec.podSelector", "%v", err)
			continue
		}
		hit := false
		for i, sc := range pods {
			if !sel.Matches(sc.podLabels()) {
				continue
			}
			hit, selected[i] = true, true
			if len(spec.PolicyTypes) == 0 || slices.Contains(spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
				if !slices.ContainsFunc(spec.Ingress, func(r networkingv1.NetworkPolicyIngressRule) bool { return sc.admitsPort(r.Ports) }) {
					c.add(np.File, "spec.ingress", "no rule admits the server's port %d in the pods of %s: no client could reach them", sc.port, sc.dep.File)
				}
			}
			if slices.Contains(spec.PolicyTypes, networkingv1.PolicyTypeEgress) && !slices.ContainsFunc(spec.Egress, leavesCluster) && sc.args.value("egress") != "" {
				c.add(np.File, "spec.egress", "allows nothing out of the cluster, but %s's -egress=%s lets runs ask for those hosts through the server, which dials them from the pod", sc.dep.File, sc.args.value("egress"))
			}
		}
		if !hit && len(pods) > 0 {
			c.add(np.File, "spec.podSelector", "%s selects none of the session pods (%s's labels %v)", sel, pods[0].dep.File, pods[0].podLabels())
		}
	}
	for i, sc := range pods {
		if !selected[i] {
			c.add(sc.dep.File, sandboxLabelsPath, "%s: no NetworkPolicy in %s/ selects these pods, so every pod of the cluster may call the server and its runs' -egress reaches anywhere; select them with one that admits the clients", sc.podLabels(), agentSandboxDir)
		}
	}
}

// sandboxPod checks what a pod of one agent session needs beyond what
// every pod of the server does.
func (c *checker) sandboxPod() {
	file, w := c.dep.File, c.dep
	if w.Service == nil || !*w.Service {
		c.add(file, "spec.service", "want true: without it the controller makes no Service, and clients have no name to reach the pod by that -allow-host could list")
	}
	if len(w.Template.Labels) == 0 {
		c.add(file, sandboxLabelsPath, "empty: the NetworkPolicy selects the session pods by their labels")
	}
	for _, s := range c.b.Services {
		if len(s.Obj.Spec.Selector) > 0 && selectsAll(s.Obj.Spec.Selector, w.Template.Labels) {
			c.add(file, sandboxLabelsPath, "%s: %s's Service %q selects these pods too, and would send its clients' requests, other agents' sessions among them, here; give the session pods labels of their own", labels.Set(w.Template.Labels), s.File, s.Obj.Name)
		}
	}
	if c.args.value("peer-url") != "" {
		c.add(file, c.argField("peer-url"), "a %s's pod is its session's only one: there are no peers to forward to; remove -peer-url", w.Kind)
	}
}

// envRef is a $(VAR) reference the kubelet expands in args.
var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)`)

// downwardEnv are the env vars -allow-host may use for the pod's name and
// namespace, each with the fieldRef it must come from.
var downwardEnv = map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}

// sandboxHosts checks that -allow-host names the session pod's Service
// in every DNS form: the Service is named after the pod (a Sandbox's
// after the Sandbox, a template's after the Sandbox a warm pool or claim
// generates), and so its names come from $(POD_NAME) and
// $(POD_NAMESPACE), which the kubelet expands from the container's env.
func (c *checker) sandboxHosts() {
	if loopbackAddr(c.args.value("addr")) {
		return
	}
	file, field := c.dep.File, c.argField("allow-host")
	// The values the kubelet would put in place of each reference, as far
	// as they are known here; "\x00..." for those that are not.
	name, ns := "\x00pod", "\x00namespace"
	if c.dep.Kind == "Sandbox" {
		name = c.dep.Name
	}
	if c.dep.Namespace != "" {
		ns = c.dep.Namespace
	}
	fields := map[string]string{"metadata.name": name, "metadata.namespace": ns}
	raw := c.args.value("allow-host")
	values := map[string]string{}
	for _, m := range envRef.FindAllStringSubmatch(raw, -1) {
		v := m[1]
		if _, done := values[v]; done {
			continue
		}
		i := slices.IndexFunc(c.ctr.Env, func(e corev1.EnvVar) bool { return e.Name == v })
		want, downward := downwardEnv[v]
		if i < 0 {
			values[v] = m[0] // left as it is
			if downward {
				c.add(file, c.ctrPath+".env", "no %s (valueFrom.fieldRef.fieldPath: %s): -allow-host's $(%s) would stay as it is, and the server would refuse (403) every request", v, want, v)
			} else {
				c.add(file, field, "$(%s) is no env var of the container: the kubelet would leave it as it is", v)
			}
			continue
		}
		e := c.ctr.Env[i]
		switch {
		case e.ValueFrom == nil:
			values[v] = e.Value
		case e.ValueFrom.FieldRef != nil:
			if val, ok := fields[e.ValueFrom.FieldRef.FieldPath]; ok {
				values[v] = val
			} else {
				values[v] = "\x00" + e.ValueFrom.FieldRef.FieldPath
			}
		default:
			values[v] = "\x00" + v
		}
		if downward && (e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != want) {
			c.add(file, fmt.Sprintf("%s.env[%d]", c.ctrPath, i), "%s must come from valueFrom.fieldRef.fieldPath: %s: -allow-host's $(%s) stands for the pod's %s, which its Service's names are made of", v, want, v, strings.TrimPrefix(want, "metadata."))
		}
	}
	allowed := map[string]bool{}
	for _, h := range strings.Split(envRef.ReplaceAllStringFunc(raw, func(r string) string { return values[r[2:len(r)-1]] }), ",") {
		allowed[strings.ToLower(strings.TrimSpace(h))] = true
	}
	var missing []string
	for _, suffix := range []string{"", ".$(POD_NAMESPACE)", ".$(POD_NAMESPACE).svc", ".$(POD_NAMESPACE).svc.cluster.local"} {
		h := strings.ReplaceAll(name+suffix, "$(POD_NAMESPACE)", ns)
		if !allowed[h] {
			missing = append(missing, "$(POD_NAME)"+suffix)
		}
	}
	if len(missing) > 0 {
		c.add(file, field, "the server would refuse (403) requests for Host %s, the names of the pod's own Service: add them to -allow-host, with POD_NAME and POD_NAMESPACE in env from valueFrom.fieldRef.fieldPath metadata.name and metadata.namespace", strings.Join(missing, ", "))
	}
}

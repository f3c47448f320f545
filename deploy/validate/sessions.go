package validate

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Sessions live in one pod's kernel. With more than one pod, a request
// finds its session's pod by the name the session's id carries: each pod
// needs a stable name that resolves (a StatefulSet's pods behind its
// headless Service), the server its name (-replica, from POD_NAME) and the
// template of its peers' URLs (-peer-url), and the NetworkPolicy must let
// the pods reach each other.

// sessionsGauge is the live sessions a pod holds.
const sessionsGauge = "sandbox_serve_sessions"

// maxReplicas is how many pods the workload may have: the autoscaler's
// ceiling, else its replicas (default 1).
func (c *checker) maxReplicas() int {
	for _, h := range c.b.HPAs {
		if h.Obj.Spec.ScaleTargetRef.Name == c.dep.Name {
			return int(h.Obj.Spec.MaxReplicas)
		}
	}
	if c.dep.Replicas != nil {
		return int(*c.dep.Replicas)
	}
	return 1
}

// sessions checks what makes a session reachable from every pod.
func (c *checker) sessions() {
	file := c.dep.File
	n := c.maxReplicas()
	if c.args.int("max-sessions") == 0 || n <= 1 {
		return
	}
	if c.dep.Kind != "StatefulSet" {
		c.add(file, "kind", "%s: sessions live in one pod, and with up to %d pods a request finds its session's pod by the pod's name; a Deployment's pods have no stable name that resolves: use a StatefulSet with a headless Service (or -max-sessions=0)", c.dep.Kind, n)
		return
	}
	if !c.dep.Parallel {
		c.add(file, "spec.podManagementPolicy", "want Parallel: with OrderedReady the autoscaler's pods start one at a time, each waiting for the one before to be ready, while a burst of tool calls waits")
	}
	headless := c.headlessService()
	if c.args.value("peer-url") == "" {
		c.add(file, c.argField("peer-url"), "missing: with up to %d pods, a request for a session that reaches another pod gets 404; set -peer-url=http://{replica}.%s:%d", n, c.dep.ServiceName, c.port)
	} else if headless != nil {
		c.peerURL(headless)
	}
	c.replicaName()
}

// headlessService checks the StatefulSet's serviceName and returns the
// headless Service it names, or nil.
func (c *checker) headlessService() *Object[corev1.Service] {
	file := c.dep.File
	if c.dep.ServiceName == "" {
		c.add(file, "spec.serviceName", "missing: name the headless Service that gives each pod its DNS name, which -peer-url reaches")
		return nil
	}
	for i, s := range c.b.Services {
		if s.Obj.Name != c.dep.ServiceName {
			continue
		}
		spec := s.Obj.Spec
		if spec.ClusterIP != corev1.ClusterIPNone {
			c.add(s.File, "spec.clusterIP", "%q: the StatefulSet's serviceName must be a headless Service (clusterIP: None), which gives each pod a DNS name", spec.ClusterIP)
		}
		if !spec.PublishNotReadyAddresses {
			c.add(s.File, "spec.publishNotReadyAddresses", "want true: a draining pod is not ready, and its peers must still reach it so that it answers for its sessions (404, ended with the drain) rather than a name that does not resolve")
		}
		return &c.b.Services[i]
	}
	c.add(file, "spec.serviceName", "%q: no Service of that name in kubernetes/", c.dep.ServiceName)
	return nil
}

// peerURL checks that -peer-url reaches a pod by its name through the
// headless Service, on the server's port.
func (c *checker) peerURL(svc *Object[corev1.Service]) {
	field, tmpl := c.argField("peer-url"), c.args.value("peer-url")
	u, err := url.Parse(strings.ReplaceAll(tmpl, "{replica}", "pod-0"))
	if err != nil || u.Scheme != "http" {
		c.add(c.dep.File, field, "%q: want http://{replica}.%s:%d", tmpl, c.dep.ServiceName, c.port)
		return
	}
	host := u.Hostname()
	if rest, ok := strings.CutPrefix(host, "pod-0."+svc.Obj.Name); !ok || (rest != "" && !strings.HasPrefix(rest, ".")) {
		c.add(c.dep.File, field, "%q: the host must be {replica}.%s (a pod's name under the StatefulSet's headless Service), optionally with the namespace and cluster domain after it", tmpl, svc.Obj.Name)
	}
	port := 80
	if p := u.Port(); p != "" {
		port, _ = strconv.Atoi(p)
	}
	// A headless Service does not forward: the port reached is the pod's.
	if port != c.port {
		c.add(c.dep.File, field, "%q: port %d, but the server listens on %d (-addr): a headless Service's name reaches the pod's port itself", tmpl, port, c.port)
	}
}

// replicaName checks that the server names its replica after its pod.
func (c *checker) replicaName() {
	if v, set := c.args.set["replica"]; set && v != "$(POD_NAME)" {
		c.add(c.dep.File, c.argField("replica"), "%q: a fixed name would be every pod's; leave -replica out (the server takes POD_NAME) or give $(POD_NAME)", v)
	}
	for i, e := range c.ctr.Env {
		if e.Name != "POD_NAME" {
			continue
		}
		if e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
			c.add(c.dep.File, fmt.Sprintf("%s.env[%d]", c.ctrPath, i), "POD_NAME must come from fieldRef metadata.name: session ids carry it, and peers reach the pod by it")
		}
		return
	}
	c.add(c.dep.File, c.ctrPath+".env", "no POD_NAME (valueFrom.fieldRef.fieldPath: metadata.name): the server names its replica, and so its sessions' ids, after it")
}

// peerPolicies checks that a NetworkPolicy selecting the pods lets them
// reach each other when sessions are forwarded: ingress from the
// toolserver's own pods, and, if it restricts egress, egress to them and
// to DNS, to resolve the peers' names.
func (c *checker) peerPolicies(np *Object[networkingv1.NetworkPolicy]) {
	if c.args.value("peer-url") == "" {
		return
	}
	spec := np.Obj.Spec
	if len(spec.PolicyTypes) == 0 || slices.Contains(spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
		ok := false
		for _, r := range spec.Ingress {
			ok = ok || (c.admitsPort(r.Ports) && c.peersIn(r.From))
		}
		if !ok {
			c.add(np.File, "spec.ingress", "no rule admits the toolserver's own pods on port %d: with -peer-url, replicas forward requests for sessions to each other", c.port)
		}
	}
	if !slices.Contains(spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
		return
	}
	peers, dns := false, false
	for _, r := range spec.Egress {
		peers = peers || (c.admitsPort(r.Ports) && c.peersIn(r.To))
		for _, p := range r.Ports {
			dns = dns || (p.Port != nil && p.Port.IntValue() == 53 && (p.Protocol == nil || *p.Protocol == corev1.ProtocolUDP))
		}
	}
	if !peers {
		c.add(np.File, "spec.egress", "no rule lets the pods reach each other on port %d: with -peer-url, replicas forward requests for sessions to each other", c.port)
	}
	if !dns {
		c.add(np.File, "spec.egress", "no rule allows DNS (UDP port 53): -peer-url names the pods, and their names must resolve")
	}
}

// admitsPort reports whether ports (of a rule) include the server's port.
func (c *checker) admitsPort(ports []networkingv1.NetworkPolicyPort) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if p.Port == nil {
			return true
		}
		if n, ok := c.resolvePort(*p.Port); ok && n == c.port {
			return true
		}
	}
	return false
}

// peersIn reports whether peers (of a rule) include the toolserver's pods
// in their own namespace.
func (c *checker) peersIn(peers []networkingv1.NetworkPolicyPeer) bool {
	if len(peers) == 0 {
		return true
	}
	for _, p := range peers {
		if p.PodSelector == nil || p.NamespaceSelector != nil || p.IPBlock != nil {
			continue
		}
		if sel, err := metav1.LabelSelectorAsSelector(p.PodSelector); err == nil && sel.Matches(labels.Set(c.podLabels())) {
			return true
		}
	}
	return false
}

// onlyPeers reports whether peers (of a rule) are the toolserver's own
// pods and nothing else.
func (c *checker) onlyPeers(peers []networkingv1.NetworkPolicyPeer) bool {
	if len(peers) == 0 {
		return false
	}
	for _, p := range peers {
		if !c.peersIn([]networkingv1.NetworkPolicyPeer{p}) {
			return false
		}
	}
	return true
}

// leavesCluster reports whether an egress rule lets traffic out of the
// cluster: to anywhere, or to an IP block.
func leavesCluster(r networkingv1.NetworkPolicyEgressRule) bool {
	if len(r.To) == 0 {
		return true
	}
	return slices.ContainsFunc(r.To, func(p networkingv1.NetworkPolicyPeer) bool { return p.IPBlock != nil })
}

package validate

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// agentSandbox runs deploy/agent-sandbox on the cluster c: the
// kubernetes-sigs/agent-sandbox controller, its CRDs installed, makes a
// pod of our server for each Sandbox, one agent session each, and takes
// it away with its Sandbox. The controller is not in the Go module proxy,
// so the test takes it from outside: AGENT_SANDBOX_CONTROLLER, a binary
// built from the project's repository, and AGENT_SANDBOX_CRDS, its
// k8s/crds directory; it skips without them.
func agentSandbox(t *testing.T, c *cluster, ns string, cl *client) {
	bin, crds := os.Getenv("AGENT_SANDBOX_CONTROLLER"), os.Getenv("AGENT_SANDBOX_CRDS")
	if bin == "" || crds == "" {
		t.Skip("AGENT_SANDBOX_CONTROLLER and AGENT_SANDBOX_CRDS are not set: build the controller from github.com/kubernetes-sigs/agent-sandbox (cmd/agent-sandbox-controller) and give its k8s/crds directory")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	kubectl := func(args ...string) string {
		t.Helper()
		out, err := c.kubectl(ctx, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	kubectl("apply", "--server-side", "-f", crds)
	// The CRDs name a conversion webhook of the controller's; with one
	// version in use and the webhook off, nothing needs converting.
	for _, crd := range strings.Fields(kubectl("get", "crd", "-o", "name")) {
		if strings.Contains(crd, "agents.x-k8s.io") {
			kubectl("patch", crd, "--type=merge", "-p", `{"spec":{"conversion":{"strategy":"None","webhook":null}}}`)
		}
	}
	kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
	d := startDaemon(t, c.dir, c.f.cp, "agent-sandbox-controller", bin, "--kubeconfig="+c.admin,
		"--leader-elect=false", "--enable-webhook=false", "--extensions",
		"--metrics-bind-address=127.0.0.1:18080", "--health-probe-bind-address=127.0.0.1:18081")
	plain := &http.Client{Transport: &http.Transport{DialContext: dialer(c.f.cp)}, Timeout: 2 * time.Second}
	c.waitHealthy(t, d, plain, "http://127.0.0.1:18081/readyz", time.Minute)

	// Two agents, two Sandboxes: the manifest as it is, and the same
	// under another name, as a client makes one per session.
	dir := filepath.Join(deployDir, "agent-sandbox")
	text := readFile(t, filepath.Join(dir, "sandbox.yaml"))
	const first = "toolserver-session-example"
	if !strings.Contains(text, "name: "+first+"\n") {
		t.Fatalf("deploy/agent-sandbox/sandbox.yaml names no Sandbox %s", first)
	}
	second := filepath.Join(t.TempDir(), "second.yaml")
	if err := os.WriteFile(second, []byte(strings.Replace(text, "name: "+first+"\n", "name: toolserver-session-second\n", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl("-n", ns, "apply", "--server-side", "-f", filepath.Join(dir, "sandbox.yaml"), "-f", second,
		"-f", filepath.Join(dir, "networkpolicy.yaml"))
	names := []string{first, "toolserver-session-second"}
	pods := c.waitPods(t, ns, "app.kubernetes.io/name=toolserver-session", 3*time.Minute, names...)
	for _, name := range names {
		p := pods[name]
		// The Sandbox's Service, by the name the pod's -allow-host lists.
		own := *cl
		own.t, own.host = t, name+"."+ns+".svc"
		base := fmt.Sprintf("http://%s:8080", p.Status.PodIP)
		id := own.newSession(base)
		if replica(id) != name {
			t.Errorf("a session on the Sandbox %s's pod is named %s", name, id)
		}
		if r, out := own.run(base, id, "echo", name); strings.TrimSpace(out) != name {
			t.Errorf("a run in session %s of the Sandbox %s: %s", id, name, r)
		}
		if r := own.do(http.MethodPost, base, "/v1/sessions", map[string]any{}, false); r.status != http.StatusTooManyRequests {
			t.Errorf("a second session on the Sandbox %s's pod (-max-sessions=1): %s, want 429", name, r)
		}
		t.Logf("Sandbox %s: pod on %s at %s served session %s", name, p.Spec.NodeName, p.Status.PodIP, id)
	}
	if out := kubectl("-n", ns, "get", "service", first, "-o", "jsonpath={.spec.clusterIP}"); out != "None" {
		t.Errorf("the Sandbox %s's Service has clusterIP %q, want a headless one", first, out)
	}

	// A session over: its Sandbox deleted takes its pod, and the other
	// agent's goes on.
	kubectl("-n", ns, "delete", "sandbox", first, "--wait=true", "--timeout=2m")
	left := c.waitPods(t, ns, "app.kubernetes.io/name=toolserver-session", 2*time.Minute, "toolserver-session-second")
	own := *cl
	own.t, own.host = t, "toolserver-session-second."+ns+".svc"
	base := fmt.Sprintf("http://%s:8080", left["toolserver-session-second"].Status.PodIP)
	if r := own.do(http.MethodGet, base, "/healthz", nil, true); r.status != http.StatusOK {
		t.Errorf("the other Sandbox's pod, after %s was deleted: %s", first, r)
	}
	kubectl("-n", ns, "delete", "sandbox", "toolserver-session-second", "--wait=true", "--timeout=2m")
}

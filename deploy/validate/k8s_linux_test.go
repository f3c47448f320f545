package validate

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestKubernetes applies deploy/kubernetes, unchanged, to a real cluster
// (a control plane, CoreDNS and three nodes of kubelet, containerd and
// runc, all started and stopped by this test) and holds the service to
// what deploy/README.md says of it there. make test-k8s runs it.
func TestKubernetes(t *testing.T) {
	b, probs := Load(deployDir, repoRoot)
	if b.Kustomization == nil || len(b.Kustomization.Images) != 1 || len(b.StatefulSets) != 1 {
		t.Fatalf("deploy/kubernetes needs one StatefulSet and one image in kustomization.yaml: %v", probs)
	}
	k := b.Kustomization
	ref := k.Images[0].NewName + ":" + k.Images[0].NewTag
	ns := k.Namespace

	// The images, as a user's registry would hold them: the service's,
	// named as kustomization.yaml names it, and the pods' pause image.
	images := t.TempDir()
	// The Dockerfile's image is a Debian userland; this one has the CLI
	// and what the test runs in sandboxes: true (the server's self-test
	// at start) and bash (its /dev/tcp tries connections).
	root := imageRoot(t)
	for _, p := range []string{"/bin/true", "/bin/bash"} {
		if err := copyProgram(root, p); err != nil {
			t.Skipf("cannot put %s in the image: %v", p, err)
		}
	}
	toolserverImage(t, root, ref, filepath.Join(images, "toolserver.tar"))
	pauseImage(t, filepath.Join(images, "pause.tar"))

	c := startCluster(t, 3, filepath.Join(images, "toolserver.tar"), filepath.Join(images, "pause.tar"))

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	key := rand.Text()
	sum := sha256.Sum256([]byte(key))
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte("k8stest sha256:"+hex.EncodeToString(sum[:])+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"create", "namespace", ns},
		{"-n", ns, "create", "secret", "generic", "sandbox-api-keys", "--from-file=keys=" + keys},
	} {
		if _, err := c.kubectl(ctx, args...); err != nil {
			t.Fatal(err)
		}
	}
	abs, _ := filepath.Abs(filepath.Join(deployDir, "kubernetes"))
	if out, err := c.kubectl(ctx, "apply", "--server-side", "-k", abs); err != nil {
		t.Fatalf("the API server refused deploy/kubernetes: %v", err)
	} else {
		t.Logf("kubectl apply --server-side -k deploy/kubernetes:\n%s", strings.TrimSpace(out))
	}
	const sel = "app.kubernetes.io/name=toolserver"
	applied := time.Now()
	pods := c.waitPods(t, ns, sel, 4*time.Minute, "toolserver-0", "toolserver-1")
	for name, p := range pods {
		t.Logf("%s Running and Ready on %s at %s, %v after the apply", name, p.Spec.NodeName, p.Status.PodIP, time.Since(applied).Round(100*time.Millisecond))
	}
	checkPodSettings(t, pods)

	svcIP, err := c.kubectl(ctx, "-n", ns, "get", "service", "toolserver", "-o", "jsonpath={.spec.clusterIP}:{.spec.ports[0].port}")
	if err != nil {
		t.Fatal(err)
	}
	svc := "http://" + svcIP
	port := b.StatefulSets[0].Obj.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort
	at := func(p podInfo) string { return fmt.Sprintf("http://%s:%d", p.Status.PodIP, port) }
	cl := &client{t: t, key: key, host: "toolserver." + ns + ".svc", http: &http.Client{Timeout: time.Minute,
		Transport: &http.Transport{DialContext: dialer(c.f.nodes[0]), DisableKeepAlives: true}}}

	// kube-proxy routes the Service once it has seen the ready pods'
	// endpoints: until then the node refuses connections to it.
	began := time.Now()
	for {
		resp, err := cl.http.Get(svc + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Since(began) > time.Minute {
			t.Fatalf("the Service %s is not routed from node 1 within a minute: %v", svc, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("the Service %s routed from node 1 %v after its pods were Ready", svc, time.Since(began).Round(100*time.Millisecond))

	// The key from the Secret is what lets a client in.
	if r := cl.do(http.MethodPost, svc, "/v1/sessions", map[string]any{}, true); r.status != http.StatusUnauthorized {
		t.Errorf("POST /v1/sessions through the Service without a key: %s, want 401", r)
	}
	wrong := *cl
	wrong.key = "not-" + key
	if r := wrong.do(http.MethodPost, svc, "/v1/sessions", map[string]any{}, false); r.status != http.StatusUnauthorized {
		t.Errorf("POST /v1/sessions through the Service with a key the Secret lacks: %s, want 401", r)
	}

	// A session made through the Service is reached through either
	// replica: the one that does not hold it forwards.
	sess := cl.newSession(svc)
	owner := replica(sess)
	if _, ok := pods[owner]; !ok {
		t.Fatalf("session %s names no pod of %v", sess, pods)
	}
	token := rand.Text()
	if r, out := cl.run(svc, sess, "sh", "-c", "echo "+token+" >notes.txt && cat notes.txt"); strings.TrimSpace(out) != token {
		t.Fatalf("a run in session %s through the Service: %s", sess, r)
	}
	for name, p := range pods {
		if r, out := cl.run(at(p), sess, "cat", "notes.txt"); strings.TrimSpace(out) != token {
			t.Errorf("session %s (held by %s), sent to %s: %s; want its notes.txt, %q", sess, owner, name, r, token)
		}
	}
	t.Logf("session %s, held by %s, answered through the Service and through each replica", sess, owner)

	// A program in a sandbox reaches none of the cluster: the probe that
	// finds the API server, the kubelet, DNS, the other pod and the
	// Service open from the node finds them all closed from inside.
	other := pods[otherThan(pods, owner)]
	targets := []string{cpIP + "/6443", cpIP + "/53", nodeIP(1) + "/10250", other.Status.PodIP + fmt.Sprintf("/%d", port),
		strings.Replace(svcIP, ":", "/", 1), "10.96.0.1/443"}
	fromNode := nsOK(t, c.f.nodes[0], append([]string{"bash", "-c", probeScript, "probe"}, targets...)...)
	r, fromSandbox := cl.run(svc, sess, append([]string{"bash", "-c", probeScript, "probe"}, targets...)...)
	if r.status != http.StatusOK {
		t.Fatalf("the probe in session %s: %s", sess, r)
	}
	for _, a := range targets {
		if !strings.Contains(fromNode, "open "+a+"\n") {
			t.Errorf("from the node, %s is not open, so the probe shows nothing:\n%s", a, fromNode)
		}
		if !strings.Contains(fromSandbox, "closed "+a+"\n") {
			t.Errorf("a program in a sandbox reached %s:\n%s", a, fromSandbox)
		}
	}
	// The egress allowlist is the only way out, and the manifests give
	// the server none.
	if r := cl.do(http.MethodPost, svc, "/v1/runs", map[string]any{"command": []string{"true"}, "network": "allow",
		"egress": []string{cpIP + ":6443"}}, false); r.status != http.StatusBadRequest || !bytes.Contains(r.body, []byte("egress")) {
		t.Errorf("a run asking for egress to the API server: %s, want 400 naming egress", r)
	}

	// A pod deleted: its sessions end, and a client is told so through
	// the other replica; that replica's sessions and new sessions go on;
	// the StatefulSet brings the pod back, which does not know the old
	// session.
	survivor := other.Metadata.Name
	kept := cl.newSession(at(other))
	keptToken := rand.Text()
	if r, out := cl.run(at(other), kept, "sh", "-c", "echo "+keptToken+" >notes.txt && cat notes.txt"); strings.TrimSpace(out) != keptToken {
		t.Fatalf("a run in session %s: %s", kept, r)
	}
	if _, err := c.kubectl(ctx, "-n", ns, "delete", "pod", owner, "--wait=false"); err != nil {
		t.Fatal(err)
	}
	cl.waitEnded(at(other), sess, 90*time.Second)
	if r, out := cl.run(svc, kept, "cat", "notes.txt"); strings.TrimSpace(out) != keptToken {
		t.Errorf("session %s on %s, while %s is deleted: %s", kept, survivor, owner, r)
	}
	if id := cl.newSession(svc); replica(id) != survivor {
		t.Errorf("a session created through the Service while %s is deleted is on %s, want %s", owner, replica(id), survivor)
	}
	pods2 := c.waitPods(t, ns, sel, 3*time.Minute, "toolserver-0", "toolserver-1")
	if pods2[owner].Metadata.UID == pods[owner].Metadata.UID {
		t.Fatalf("pod %s is the same pod after its deletion", owner)
	}
	for _, p := range pods2 {
		if r, _ := cl.run(at(p), sess, "true"); r.status != http.StatusNotFound || !bytes.Contains(r.body, []byte("create a new session")) {
			t.Errorf("session %s of the deleted %s, sent to %s: %s; want 404 saying to create a new session", sess, owner, p.Metadata.Name, r)
		}
	}
	fresh := cl.newSession(at(pods2[owner]))
	if r, out := cl.runOnceResolved(at(pods2[survivor]), fresh, "echo", "back"); strings.TrimSpace(out) != "back" {
		t.Errorf("a new session on the new %s, through %s: %s", owner, survivor, r)
	}
	t.Logf("%s deleted: its session ended as documented, %s served on, and the new %s serves", owner, survivor, owner)

	// A node drained: the same, and the pod comes back on another node.
	victim := pods2["toolserver-1"]
	stays := pods2["toolserver-0"]
	onVictim := cl.newSession(at(victim))
	onStays := cl.newSession(at(stays))
	began = time.Now()
	if out, err := c.kubectl(ctx, "drain", victim.Spec.NodeName, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=3m"); err != nil {
		t.Fatalf("kubectl drain %s: %v", victim.Spec.NodeName, err)
	} else {
		t.Logf("kubectl drain %s (%v):\n%s", victim.Spec.NodeName, time.Since(began).Round(time.Second), strings.TrimSpace(out))
	}
	cl.waitEnded(at(stays), onVictim, 90*time.Second)
	if r, out := cl.run(svc, onStays, "echo", "still"); strings.TrimSpace(out) != "still" {
		t.Errorf("session %s on %s, after %s was drained: %s", onStays, stays.Metadata.Name, victim.Spec.NodeName, r)
	}
	pods3 := c.waitPods(t, ns, sel, 3*time.Minute, "toolserver-0", "toolserver-1")
	if pods3["toolserver-1"].Spec.NodeName == victim.Spec.NodeName {
		t.Errorf("toolserver-1 came back on the drained node %s", victim.Spec.NodeName)
	}
	fresh = cl.newSession(at(pods3["toolserver-1"]))
	if r, out := cl.runOnceResolved(at(pods3["toolserver-0"]), fresh, "echo", "moved"); strings.TrimSpace(out) != "moved" {
		t.Errorf("a new session on toolserver-1 (now on %s), through toolserver-0: %s", pods3["toolserver-1"].Spec.NodeName, r)
	}
	if _, err := c.kubectl(ctx, "uncordon", victim.Spec.NodeName); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s drained: toolserver-1's session ended as documented, toolserver-0 served on, toolserver-1 serves from %s", victim.Spec.NodeName, pods3["toolserver-1"].Spec.NodeName)

	// Scaled to 3 and back: the new pod's sessions are reached through
	// the others while it lives, and are told ended after.
	if _, err := c.kubectl(ctx, "-n", ns, "scale", "statefulset", "toolserver", "--replicas=3"); err != nil {
		t.Fatal(err)
	}
	pods4 := c.waitPods(t, ns, sel, 3*time.Minute, "toolserver-0", "toolserver-1", "toolserver-2")
	third := cl.newSession(at(pods4["toolserver-2"]))
	if replica(third) != "toolserver-2" {
		t.Fatalf("a session made on toolserver-2 is named %s", third)
	}
	for _, via := range []string{"toolserver-0", "toolserver-1"} {
		if r, out := cl.run(at(pods4[via]), third, "echo", "three"); strings.TrimSpace(out) != "three" {
			t.Errorf("session %s on toolserver-2, through %s: %s", third, via, r)
		}
	}
	onFirst := cl.newSession(at(pods4["toolserver-0"]))
	if _, err := c.kubectl(ctx, "-n", ns, "scale", "statefulset", "toolserver", "--replicas=2"); err != nil {
		t.Fatal(err)
	}
	pods5 := c.waitPods(t, ns, sel, 3*time.Minute, "toolserver-0", "toolserver-1")
	cl.waitEnded(at(pods5["toolserver-1"]), third, 90*time.Second)
	if r, out := cl.run(at(pods5["toolserver-1"]), onFirst, "echo", "two"); strings.TrimSpace(out) != "two" {
		t.Errorf("session %s on toolserver-0, through toolserver-1, after the scale-down: %s", onFirst, r)
	}
	t.Log("scaled 2 -> 3 -> 2: toolserver-2's session was reached through both others, then told ended")

	t.Run("agent-sandbox", func(t *testing.T) { agentSandbox(t, c, ns, cl) })
}

// otherThan is a name among pods' that is not name.
func otherThan(pods map[string]podInfo, name string) string {
	for n := range pods {
		if n != name {
			return n
		}
	}
	return ""
}

// runOnceResolved is run for a session of a pod that came back under
// its old name, sent to another pod: until the cluster's DNS answers for
// the name again (it cached the answer that it had none, for up to its
// negative TTL), the other pod cannot reach it and says the session
// ended. It retries that answer for 30 s and logs how long it lasted.
func (c *client) runOnceResolved(base, id string, argv ...string) (reply, string) {
	c.t.Helper()
	began := time.Now()
	for {
		r, out := c.run(base, id, argv...)
		if r.status != http.StatusNotFound || !bytes.Contains(r.body, []byte("cannot be reached")) || time.Since(began) > 30*time.Second {
			if d := time.Since(began); d > time.Second {
				c.t.Logf("session %s reached through %s after %v: until then its replica's name did not resolve there", id, base, d.Round(100*time.Millisecond))
			}
			return r, out
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitEnded waits until session id, sent to base, is answered 404 with
// the documented advice to create a new session; until then it may
// still answer (its replica is stopping) but nothing else.
func (c *client) waitEnded(base, id string, within time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		r, _ := c.run(base, id, "true")
		switch {
		case r.status == http.StatusNotFound && bytes.Contains(r.body, []byte("create a new session")):
			c.t.Logf("session %s, through %s: %s", id, base, r)
			return
		case r.status != http.StatusOK:
			c.t.Errorf("session %s while its replica stops, through %s: %s; want 200 until it ends, then 404 saying to create a new session", id, base, r)
			return
		case time.Now().After(deadline):
			c.t.Errorf("session %s still answers %v after its replica was told to stop", id, within)
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// client is a client of the service inside the cluster: it connects
// from a node's network namespace, as a pod of another workload would,
// and sends the Service's name as Host and the tenant's key.
type client struct {
	t    *testing.T
	http *http.Client
	key  string
	host string // the Host every request carries
}

// reply is an answer of the service.
type reply struct {
	status int
	body   []byte
	header http.Header
}

func (r reply) String() string { return fmt.Sprintf("%d %s", r.status, bytes.TrimSpace(r.body)) }

// do sends method to base+path with body as JSON (if not nil) and the
// key (unless noKey), and returns the answer; a failure to connect fails
// the test.
func (c *client) do(method, base, path string, body any, noKey bool) reply {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Host = c.host
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if !noKey {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s%s: %v", method, base, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, body: b, header: resp.Header}
}

// newSession creates a session through base and returns its id, which
// names the replica that holds it.
func (c *client) newSession(base string) string {
	c.t.Helper()
	r := c.do(http.MethodPost, base, "/v1/sessions", map[string]any{}, false)
	var s struct{ ID string }
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &s) != nil || !strings.Contains(s.ID, ".") {
		c.t.Fatalf("POST %s/v1/sessions: %s; want 201 and an id", base, r)
	}
	return s.ID
}

// run runs argv in session id through base and returns the answer and
// the run's stdout.
func (c *client) run(base, id string, argv ...string) (reply, string) {
	c.t.Helper()
	r := c.do(http.MethodPost, base, "/v1/sessions/"+id+"/runs", map[string]any{"command": argv}, false)
	var res struct {
		Stdout   string `json:"stdout"`
		ExitCode int    `json:"exit_code"`
	}
	if r.status == http.StatusOK {
		json.Unmarshal(r.body, &res)
	}
	return r, res.Stdout
}

// replica is the pod a session id names.
func replica(id string) string { name, _, _ := strings.Cut(id, "."); return name }

// probeScript tries a TCP connection to each address ("host/port") with
// bash's /dev/tcp, printing "open ADDR" or "closed ADDR" for each.
const probeScript = `for a in "$@"; do if (exec 3<>"/dev/tcp/$a") 2>/dev/null; then echo "open $a"; else echo "closed $a"; fi; done`

// checkPodSettings holds each pod's server to the settings deploy/
// documents, as the node runs it, seen from outside: its own user
// namespace (hostUsers: false), uid 65532 in it and not root's on the
// node, no capabilities, no_new_privs, no seccomp filter of the runtime's
// (Unconfined), and a /proc with no paths masked (procMount: Unmasked).
func checkPodSettings(t *testing.T, pods map[string]podInfo) {
	t.Helper()
	for name, p := range pods {
		if p.Spec.HostUsers == nil || *p.Spec.HostUsers {
			t.Errorf("%s: spec.hostUsers is %v as admitted, want false", name, p.Spec.HostUsers)
		}
		pid := serverProcess(t, p.Metadata.UID)
		if pid == 0 {
			t.Errorf("%s: no process /sandbox serve in a cgroup of pod %s", name, p.Metadata.UID)
			continue
		}
		status := readFile(t, fmt.Sprintf("/proc/%d/status", pid))
		field := func(k string) string {
			for _, l := range strings.Split(status, "\n") {
				if v, ok := strings.CutPrefix(l, k+":"); ok {
					return strings.Fields(v)[0]
				}
			}
			return ""
		}
		uidMap := strings.Fields(readFile(t, fmt.Sprintf("/proc/%d/uid_map", pid)))
		if len(uidMap) < 3 || uidMap[0] != "0" || uidMap[1] == "0" {
			t.Errorf("%s: the server's uid_map is %q: not a user namespace of its own", name, uidMap)
		} else if want := fmt.Sprint(atoi(uidMap[1]) + 65532); field("Uid") != want {
			t.Errorf("%s: the server's uid on the node is %s, want %s (65532 in the pod's namespace)", name, field("Uid"), want)
		}
		for k, want := range map[string]string{"CapEff": "0000000000000000", "CapPrm": "0000000000000000", "NoNewPrivs": "1", "Seccomp": "0"} {
			if got := field(k); got != want {
				t.Errorf("%s: the server's %s is %s, want %s", name, k, got, want)
			}
		}
		for _, l := range strings.Split(readFile(t, fmt.Sprintf("/proc/%d/mountinfo", pid)), "\n") {
			if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], "/proc/") {
				t.Errorf("%s: %s is mounted over in the server's /proc (masked), want procMount Unmasked: %s", name, f[4], l)
			}
		}
		t.Logf("%s: server pid %d on the node, uid %s (map %s), no capabilities, no_new_privs, no runtime filter, /proc unmasked", name, pid, field("Uid"), strings.Join(uidMap, " "))
	}
}

// serverProcess is the pid of the process "/sandbox serve" in a cgroup
// of the pod with uid uid, 0 if there is none.
func serverProcess(t *testing.T, uid string) int {
	des, _ := os.ReadDir("/proc")
	for _, de := range des {
		pid := atoi(de.Name())
		if pid == 0 {
			continue
		}
		cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !bytes.HasPrefix(cmd, []byte("/sandbox\x00serve\x00")) {
			continue
		}
		if cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid)); err == nil && bytes.Contains(cg, []byte("pod"+uid)) {
			return pid
		}
	}
	return 0
}

// atoi is s as a number, 0 if it is not one.
func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0
	}
	return n
}

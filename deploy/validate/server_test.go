package validate

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
)

// TestServerTakesTheManifest builds the sandbox binary and starts "sandbox
// serve", on loopback, with the StatefulSet's arguments and POD_NAME as a
// pod's, and a key file standing in for the Secret: the server must
// accept them, answer the probes the StatefulSet points at without a key
// (the kubelet has none), refuse a request without one, serve every
// metric the autoscaler asks for as a gauge, name its sessions after the
// pod, and exit 0 on SIGTERM. The static checks hold the files to the
// agreed flags and names; this holds them to the real server.
// SANDBOX_BIN names a prebuilt binary to use instead.
func TestServerTakesTheManifest(t *testing.T) {
	b, probs := Load(deployDir, repoRoot)
	if len(b.StatefulSets) != 1 || len(b.StatefulSets[0].Obj.Spec.Template.Spec.Containers) == 0 {
		t.Fatalf("no StatefulSet to take the arguments from: %v", probs)
	}
	ctr := b.StatefulSets[0].Obj.Spec.Template.Spec.Containers[0]

	bin := os.Getenv("SANDBOX_BIN")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "sandbox")
		build := exec.Command("go", "build", "-o", bin, "./cmd/sandbox")
		build.Dir = repoRoot
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build ./cmd/sandbox: %v\n%s", err, out)
		}
	}

	// The key a client of the Service would hold, and the line of the
	// Secret's file that admits it.
	key := rand.Text()
	sum := sha256.Sum256([]byte(key))
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte("deploy-test sha256:"+hex.EncodeToString(sum[:])+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	addr := freeLoopbackAddr(t)
	var args []string
	for _, a := range ctr.Args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case !strings.HasPrefix(a, "-"):
		case name == "addr":
			a = "-addr=" + addr // the same flag, on loopback
		case name == "api-keys":
			a = "-api-keys=" + keys // the Secret's file, here
		case slices.Contains(fileFlags, name):
			t.Fatalf("the StatefulSet gives -%s, a file this test has no stand-in for: add one", name)
		}
		args = append(args, a)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := exec.CommandContext(ctx, bin, args...)
	const podName = "toolserver-0"
	srv.Env = append(srv.Environ(), "POD_NAME="+podName)
	var stderr syncBuffer
	srv.Stderr = &stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	t.Cleanup(func() {
		if srv.ProcessState == nil {
			_ = srv.Process.Kill()
			<-exited
		}
	})

	base := "http://" + addr
	client := &http.Client{Timeout: 5 * time.Second}
	probe := ctr.StartupProbe
	if probe == nil {
		probe = ctr.LivenessProbe
	}
	// Wait for the server as the startup probe would, with room to spare.
	for {
		resp, err := client.Do(probeRequest(t, base, probe))
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-exited:
			log := stderr.String()
			if strings.Contains(log, "flag provided but not defined: -api-keys") {
				t.Skipf("this sandbox serve does not take the access flags (-api-keys) yet, which the StatefulSet needs: %s", lastLine(log))
			}
			if strings.Contains(log, "cannot run sandboxes") {
				t.Skipf("this host cannot run sandboxes, so the server will not start here:\n%s", log)
			}
			t.Fatalf("the server exited (%v) with the StatefulSet's arguments %q:\n%s", err, args, log)
		case <-ctx.Done():
			t.Fatalf("no 200 from %s: %v\n%s", probe.HTTPGet.Path, err, stderr.String())
		case <-time.After(100 * time.Millisecond):
		}
	}

	for _, p := range []struct {
		name  string
		probe *corev1.Probe
	}{{"livenessProbe", ctr.LivenessProbe}, {"readinessProbe", ctr.ReadinessProbe}} {
		resp, err := client.Do(probeRequest(t, base, p.probe))
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: GET %s with headers %v: %s, want 200", p.name, p.probe.HTTPGet.Path, p.probe.HTTPGet.HTTPHeaders, resp.Status)
		}
	}

	// Prometheus scrapes with a key of its own.
	var metrics bytes.Buffer
	if code := get(t, client, base+"/metrics", key, &metrics); code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	for _, h := range b.HPAs {
		for i, m := range h.Obj.Spec.Metrics {
			if m.Type != autoscalingv2.PodsMetricSourceType || m.Pods == nil {
				continue
			}
			name := m.Pods.Metric.Name
			if !strings.Contains(metrics.String(), "# TYPE "+name+" gauge\n") {
				t.Errorf("%s: spec.metrics[%d].pods.metric.name %q: /metrics has no such gauge:\n%s", h.File, i, name, metrics.String())
			}
		}
	}

	// Beyond the probes, a request needs the key.
	resp, err := client.Post(base+"/v1/sessions", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST /v1/sessions without a key: %s, want 401", resp.Status)
	}

	// A session's id names the pod, which its peers reach it by.
	req, err := http.NewRequest(http.MethodPost, base+"/v1/sessions", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var sess struct{ ID string }
	json.NewDecoder(resp.Body).Decode(&sess)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || !strings.HasPrefix(sess.ID, podName+".") {
		t.Errorf("POST /v1/sessions: %s, id %q; want 201 and an id naming the pod %s", resp.Status, sess.ID, podName)
	}

	if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("after SIGTERM the server exited with %v, want 0:\n%s", err, stderr.String())
		}
	case <-ctx.Done():
		t.Fatalf("the server did not exit after SIGTERM:\n%s", stderr.String())
	}
}

// probeRequest is the request the kubelet makes for an httpGet probe,
// sent to base: its path, no key, and as Host the pod's IP (a stand-in,
// which -allow-host cannot list) unless the probe names another.
func probeRequest(t *testing.T, base string, p *corev1.Probe) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+p.HTTPGet.Path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "10.244.0.7:8080"
	for _, h := range p.HTTPGet.HTTPHeaders {
		if http.CanonicalHeaderKey(h.Name) == "Host" {
			req.Host = h.Value
		} else {
			req.Header.Add(h.Name, h.Value)
		}
	}
	return req
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// get fetches url with the API key into body (if not nil) and returns the
// status code.
func get(t *testing.T, c *http.Client, url, key string, body io.Writer) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if body == nil {
		body = io.Discard
	}
	if _, err := io.Copy(body, resp.Body); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode
}

// freeLoopbackAddr returns a loopback address with a port nothing listens
// on at the moment. The server takes its address as a flag, as in the
// Deployment, so the port is chosen here and released for it.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// syncBuffer is a bytes.Buffer that the process's stderr copier and the
// test may use at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

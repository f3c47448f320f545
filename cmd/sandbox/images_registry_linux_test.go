package main

import (
	"bufio"
	"bytes"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fumehood/sandbox/internal/testsupport/imagetest"
	"github.com/google/go-containerregistry/pkg/registry"
)

// TestCLIRegistryOptions: --registry-mirror pulls a registry's image from
// its mirror and keeps the image's name; a bad one is refused naming it;
// --pull-timeout ends a pull from a registry that stalls, saying what to
// do, and leaves nothing in the store.
func TestCLIRegistryOptions(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tool; skipped in -short mode")
	}
	requireSandbox(t)
	bin := cliBinary(t)
	limits := bestEffortHere()
	img := testImage(t)
	dir := sharedDir(t)
	mirror := imagetest.Registry(t)
	imagetest.Push(t, mirror, "team/shell:v1", img)
	ref := "unreachable.test/team/shell:v1"

	store := filepath.Join(dir, "store")
	code, out, errOut := runTool(t, bin, "pull", "--image-store", store, "--insecure-registry", "--registry-mirror", "unreachable.test="+mirror, ref)
	if code != 0 || !strings.HasPrefix(out, ref+" sha256:") {
		t.Errorf("pull %s from its mirror: exit %d\nstdout: %s\nstderr: %s", ref, code, out, errOut)
	}
	args := append([]string{"run", "--image-store", filepath.Join(dir, "store2"), "--insecure-registry",
		"--registry-mirror", "unreachable.test=" + mirror, "--image", ref}, limits...)
	code, out, errOut = runTool(t, bin, append(args, "--", "sh", "-c", "read -r m < marker; echo $m")...)
	if code != 0 || out != "from the image\n" {
		t.Errorf("run --image %s from its mirror: exit %d\nstdout: %q\nstderr: %s", ref, code, out, errOut)
	}
	// The MCP server's sessions pull the same way.
	cs, stderr, _ := connectStdio(t, bin, "--image-store", filepath.Join(dir, "store3"), "--insecure-registry",
		"--registry-mirror", "unreachable.test="+mirror, "--image", ref)
	var res struct {
		Stdout string `json:"stdout"`
	}
	callOK(t, cs, "run", map[string]any{"argv": []string{"sh", "-c", "read -r m < marker; echo $m"}}, &res)
	if res.Stdout != "from the image\n" {
		t.Errorf("mcp --image %s from its mirror: stdout %q; server's stderr:\n%s", ref, res.Stdout, stderr)
	}

	bad := "unreachable.test=http://" + mirror
	code, _, errOut = runTool(t, bin, "pull", "--image-store", store, "--registry-mirror", bad, ref)
	if code != exitFailure || !strings.Contains(errOut, "http://"+mirror) || !strings.Contains(errOut, "registry-mirror") {
		t.Errorf("pull --registry-mirror %s: exit %d, want %d naming the flag and the mirror:\n%s", bad, code, exitFailure, errOut)
	}

	stalled := imagetest.StalledRegistry(t, "stalled/shell:v1", img)
	for _, cmd := range []string{"run", "pull"} {
		t.Run(cmd, func(t *testing.T) {
			empty := filepath.Join(sharedDir(t), "store")
			args := []string{cmd, "--image-store", empty, "--insecure-registry", "--pull-timeout", "500ms"}
			if cmd == "run" {
				args = append(append(append(args, "--image", stalled), limits...), "--", "sh", "-c", "true")
			} else {
				args = append(args, stalled)
			}
			start := time.Now()
			code, _, errOut := runTool(t, bin, args...)
			if code != exitFailure || !strings.Contains(errOut, stalled) || !strings.Contains(errOut, "500ms") ||
				!strings.Contains(errOut, "raise --pull-timeout") {
				t.Errorf("%s from a stalled registry: exit %d, want %d naming the image, the timeout and the flag:\n%s", cmd, code, exitFailure, errOut)
			}
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("%s took %v with --pull-timeout 500ms", cmd, d)
			}
			for _, sub := range []string{"tmp", "layers", "roots", "images"} {
				if ents, _ := os.ReadDir(filepath.Join(empty, sub)); len(ents) > 0 {
					t.Errorf("the store's %s holds %d entries after a pull that timed out", sub, len(ents))
				}
			}
		})
	}
}

// TestCLIImagesInUse: "sandbox images" says an image is in use while a
// "sandbox run" of it runs in another process, and prune keeps it then;
// once the run ends, it is not in use and prune removes it.
func TestCLIImagesInUse(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tool; skipped in -short mode")
	}
	requireSandbox(t)
	bin := cliBinary(t)
	dir := sharedDir(t)
	store := filepath.Join(dir, "store")
	layout := imagetest.WriteLayout(t, filepath.Join(dir, "layout"), testImage(t), "v1")
	images := func(t *testing.T, args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, append([]string{"images"}, append(args, "--image-store", store)...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("images %q: %v\n%s", args, err, out)
		}
		return string(out)
	}
	// inUse is the IN USE column of the image's line, "" when not listed.
	inUse := func(t *testing.T) string {
		t.Helper()
		for _, line := range strings.Split(images(t), "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0] == layout {
				return f[len(f)-1]
			}
		}
		return ""
	}

	args := []string{"run", "--image-store", store, "--image", layout}
	if !canCreateCgroups() {
		args = append(args, "--best-effort")
	}
	run := exec.Command(bin, append(args, "--", "sh", "-c", "echo started; read -r line")...)
	stdin, err := run.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := run.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	run.Stderr = &stderr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if run.ProcessState == nil {
			run.Process.Kill()
			run.Wait()
		}
	}()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "started\n" {
		t.Fatalf("the run did not start: %q %v\n%s", line, err, stderr.String())
	}

	if got := inUse(t); got != "yes" {
		t.Errorf("IN USE while a run of it runs: %q, want yes\n%s", got, images(t))
	}
	images(t, "prune")
	if got := inUse(t); got != "yes" {
		t.Errorf("after prune while a run of it runs, IN USE is %q, want yes (still listed)", got)
	}

	stdin.Write([]byte("done\n"))
	stdin.Close()
	if err := run.Wait(); err != nil {
		t.Fatalf("the run: %v\n%s", err, stderr.String())
	}
	if got := inUse(t); got != "no" {
		t.Errorf("IN USE after the run ended: %q, want no\n%s", got, images(t))
	}
	images(t, "prune")
	if got := inUse(t); got != "" {
		t.Errorf("prune after the run kept the image (IN USE %q)", got)
	}
}

// TestCLIPullPolicy: "sandbox run --image" runs a stored image by its tag
// with no request to the registry, also with the registry gone; --pull
// always asks it; --pull never with nothing stored fails naming the image
// and what to do; an unknown --pull is refused.
func TestCLIPullPolicy(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tool; skipped in -short mode")
	}
	requireSandbox(t)
	bin := cliBinary(t)
	var requests atomic.Int64
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		reg.ServeHTTP(w, r)
	}))
	defer srv.Close()
	ref := imagetest.Push(t, strings.TrimPrefix(srv.URL, "http://"), "shell:v1", testImage(t))
	dir := sharedDir(t)
	run := func(store string, flags ...string) (int, string, string) {
		args := append(append([]string{"run", "--image-store", filepath.Join(dir, store), "--insecure-registry", "--image", ref}, flags...), bestEffortHere()...)
		return runTool(t, bin, append(args, "--", "sh", "-c", "read -r m < marker; echo $m")...)
	}
	requests.Store(0)
	if code, out, errOut := run("store"); code != 0 || out != "from the image\n" {
		t.Fatalf("first run of %s: exit %d\nstdout: %q\nstderr: %s", ref, code, out, errOut)
	}
	t.Logf("first run: %d requests to the registry", requests.Load())
	requests.Store(0)
	if code, out, errOut := run("store"); code != 0 || out != "from the image\n" || requests.Load() != 0 {
		t.Errorf("second run of %s: exit %d, %d requests to the registry (want none)\nstdout: %q\nstderr: %s", ref, code, requests.Load(), out, errOut)
	}
	if code, _, errOut := run("store", "--pull", "always"); code != 0 || requests.Load() == 0 {
		t.Errorf("run --pull always: exit %d, %d requests to the registry (want some)\nstderr: %s", code, requests.Load(), errOut)
	}
	srv.Close()
	if code, out, errOut := run("store"); code != 0 || out != "from the image\n" {
		t.Errorf("run of the stored %s with the registry gone: exit %d\nstdout: %q\nstderr: %s", ref, code, out, errOut)
	}
	code, _, errOut := run("empty", "--pull", "never")
	if code != exitFailure || !strings.Contains(errOut, ref) || !strings.Contains(errOut, "pull policy is never") || !strings.Contains(errOut, "sandbox pull") {
		t.Errorf("run --pull never with nothing stored: exit %d, want %d naming the image, the policy and what to do:\n%s", code, exitFailure, errOut)
	}
	if code, _, errOut := run("store", "--pull", "sometimes"); code == 0 || !strings.Contains(errOut, "sometimes") || !strings.Contains(errOut, "missing, always or never") {
		t.Errorf("run --pull sometimes: exit %d, want a refusal naming the value and the choices:\n%s", code, errOut)
	}
}

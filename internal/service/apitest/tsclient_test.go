package apitest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The npm packages the TypeScript client is made and run with, their major
// versions pinned so that a new major of one cannot break the test unseen.
var tsPackages = []string{"openapi-typescript@7", "openapi-fetch@0", "typescript@5", "tsx@4", "@types/node@20"}

// TestTypeScriptClient: a client generated from the document with
// openapi-typescript, called through openapi-fetch, type-checks against
// the generated types and works against a real server with two tenants'
// keys: alice's session, a run in it, a file put and read back, a tar, a
// page through the port proxy; no key is 401; bob is answered 404 for
// alice's session and leaves it as it was.
func TestTypeScriptClient(t *testing.T) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not installed; the TypeScript client test needs node and npm")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed; the TypeScript client test needs it")
	}
	spec, err := filepath.Abs(specFile)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env := append(os.Environ(), "npm_config_cache="+filepath.Join(dir, "npm-cache"), "npm_config_update_notifier=false")
	run := func(name string, args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir, cmd.Env = dir, env
		return cmd.CombinedOutput()
	}

	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"private": true, "type": "module"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run(npm, append([]string{"install", "--no-audit", "--no-fund"}, tsPackages...)...); err != nil {
		t.Skipf("npm install %s (is the npm registry reachable?): %v\n%s", strings.Join(tsPackages, " "), err, out)
	}
	bin := func(name string) string { return filepath.Join(dir, "node_modules", ".bin", name) }
	if out, err := run(bin("openapi-typescript"), spec, "-o", "schema.d.ts"); err != nil {
		t.Fatalf("openapi-typescript %s: %v\n%s", spec, err, out)
	}
	program, err := os.ReadFile(filepath.Join("testdata", "client.ts"))
	if err != nil {
		t.Fatal(err)
	}
	tsconfig := `{"compilerOptions": {"strict": true, "noEmit": true, "target": "es2022", "module": "nodenext",
  "moduleResolution": "nodenext", "types": ["node"], "skipLibCheck": true}, "files": ["client.ts"]}` + "\n"
	for name, text := range map[string][]byte{"client.ts": program, "tsconfig.json": []byte(tsconfig)} {
		if err := os.WriteFile(filepath.Join(dir, name), text, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := run(bin("tsc"), "-p", "."); err != nil {
		t.Fatalf("the client does not type-check against the generated types: %v\n%s", err, out)
	}

	keys, key := writeKeys(t, "alice", "bob")
	s := startServer(t, "-api-keys", keys)
	nonce := rand.Text()
	port := ""
	if _, err := exec.LookPath("python3"); err == nil {
		port = strconv.Itoa(8000 + int(nonce[0])%1000)
	}
	cmd := exec.CommandContext(ctx, bin("tsx"), "client.ts")
	cmd.Dir = dir
	cmd.Env = append(env, "SANDBOX_URL="+s.url, "ALICE_KEY="+key["alice"], "BOB_KEY="+key["bob"], "NONCE="+nonce, "PORT="+port)
	cmd.Stderr = &strings.Builder{}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tsx client.ts: %v\n%s%s\nthe server's log:\n%s", err, out, cmd.Stderr, s.logText())
	}
	var got struct {
		SessionStatus        int                        `json:"session_status"`
		SessionLocation      string                     `json:"session_location"`
		SessionID            string                     `json:"session_id"`
		RunStatus            int                        `json:"run_status"`
		RunExitCode          *int                       `json:"run_exit_code"`
		RunStdout            string                     `json:"run_stdout"`
		Python3              bool                       `json:"python3"`
		PutStatus            int                        `json:"put_status"`
		GetStatus            int                        `json:"get_status"`
		GetBody              string                     `json:"get_body"`
		TarStatus            int                        `json:"tar_status"`
		TarHasFile           bool                       `json:"tar_has_file"`
		ProcessStatus        int                        `json:"process_status"`
		PortStatus           int                        `json:"port_status"`
		PortBody             *string                    `json:"port_body"`
		NoKeyStatus          int                        `json:"no_key_status"`
		NoKeyWWWAuthenticate string                     `json:"no_key_www_authenticate"`
		NoKeyError           struct{ ID, Error string } `json:"no_key_error"`
		BobGetStatus         int                        `json:"bob_get_status"`
		BobGetError          struct{ ID, Error string } `json:"bob_get_error"`
		BobPutStatus         int                        `json:"bob_put_status"`
		BobDeleteStatus      int                        `json:"bob_delete_status"`
		AfterBobBody         string                     `json:"after_bob_body"`
		DeleteStatus         int                        `json:"delete_status"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the client's summary: %v\n%s", err, out)
	}
	t.Logf("the client's summary: %s", out)
	file := "hello " + nonce + "\n"
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"POST /v1/sessions", got.SessionStatus, 201},
		{"its Location", got.SessionLocation, "/v1/sessions/" + got.SessionID},
		{"POST runs", got.RunStatus, 200},
		{"the run's stdout", got.RunStdout, nonce + "\n"},
		{"PUT files", got.PutStatus, 204},
		{"GET files", got.GetStatus, 200},
		{"the file read back", got.GetBody, file},
		{"GET tar", got.TarStatus, 200},
		{"the tar holds the file", got.TarHasFile, true},
		{"no key", got.NoKeyStatus, 401},
		{"bob's GET of alice's session", got.BobGetStatus, 404},
		{"bob's PUT into alice's session", got.BobPutStatus, 404},
		{"bob's DELETE of alice's session", got.BobDeleteStatus, 404},
		{"alice's file after bob", got.AfterBobBody, file},
		{"DELETE by alice", got.DeleteStatus, 204},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
	if got.RunExitCode == nil || *got.RunExitCode != 0 {
		t.Errorf("the run's exit code: %v, want 0", got.RunExitCode)
	}
	if !strings.HasPrefix(got.NoKeyWWWAuthenticate, "Bearer") || got.NoKeyError.Error == "" {
		t.Errorf("no key: WWW-Authenticate %q, error %+v; want a Bearer challenge and the JSON error", got.NoKeyWWWAuthenticate, got.NoKeyError)
	}
	if got.BobGetError.Error == "" || strings.Contains(got.BobGetError.Error, "alice") {
		t.Errorf("bob's 404: %+v; want the JSON error of a missing session, which names no tenant", got.BobGetError)
	}
	switch {
	case port == "":
		t.Log("python3 is not installed here: the port proxy part is not run")
	case !got.Python3:
		t.Log("the sandbox has no python3: the port proxy part is not run")
	default:
		if got.ProcessStatus != 201 || got.PortStatus != 200 || got.PortBody == nil || *got.PortBody != file {
			t.Errorf("http.server through the port proxy: process %d, GET %d %v; want 201, then 200 and the file", got.ProcessStatus, got.PortStatus, got.PortBody)
		}
	}
}

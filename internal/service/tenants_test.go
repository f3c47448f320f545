package service

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Tenants: with API keys, each request belongs to its key's tenant, which
// sees only its own sessions and is held to its own quotas.

// keyFile writes an -api-keys file of one fresh key per tenant and
// returns its path and the keys by tenant.
func keyFile(t *testing.T, tenants ...string) (string, map[string]string) {
	t.Helper()
	keys := map[string]string{}
	var b strings.Builder
	for _, tenant := range tenants {
		keys[tenant] = rand.Text()
		sum := sha256.Sum256([]byte(keys[tenant]))
		fmt.Fprintf(&b, "%s sha256:%s\n", tenant, hex.EncodeToString(sum[:]))
	}
	path := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, keys
}

// writeFile writes data to a file of the test's and returns its path.
func writeFile(t *testing.T, name, data string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// errorAnswer is a refusal's JSON body.
type errorAnswer struct {
	ID    string `json:"id"`
	Error string `json:"error"`
	Field string `json:"field"`
	Quota string `json:"quota"`
}

// TestAuthRequired: without a key, or with one the file lacks, a request
// gets 401 with WWW-Authenticate and the service's JSON error, and runs
// nothing; the probes answer without one.
func TestAuthRequired(t *testing.T) {
	keys, key := keyFile(t, "alice")
	ts := startServer(t, "-api-keys", keys)
	for _, k := range []string{"", "not-" + key["alice"]} {
		r := ts.callAs(t, k, "POST", "/v1/runs", []byte(`{"command":["true"]}`))
		var e errorAnswer
		r.json(t, &e)
		if r.status != http.StatusUnauthorized || r.header.Get("WWW-Authenticate") == "" || e.ID == "" || e.Error == "" {
			t.Errorf("key %q: %v %v, want 401 with WWW-Authenticate and a JSON error", k, r, r.header)
		}
		if r := ts.callAs(t, k, "GET", "/metrics", nil); r.status != http.StatusUnauthorized {
			t.Errorf("GET /metrics with key %q: %v, want 401", k, r)
		}
	}
	if n := len(ts.events("run")); n != 0 {
		t.Errorf("%d runs logged, want none", n)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if r := ts.call(t, "GET", p, nil); r.status != http.StatusOK {
			t.Errorf("GET %s without a key: %v, want 200", p, r)
		}
	}
	r := ts.callAs(t, key["alice"], "POST", "/v1/runs", []byte(`{"command":["echo","hi"]}`))
	var a answer
	r.json(t, &a)
	if r.status != http.StatusOK || a.Stdout != "hi\n" {
		t.Errorf("with alice's key: %v, want 200 and the run's output", r)
	}
}

// TestTenantsSeeOnlyTheirSessions: tenant bob gets 404 for alice's session
// and for everything in it, with the body of a session that never was;
// alice's session is untouched by his tries.
func TestTenantsSeeOnlyTheirSessions(t *testing.T) {
	keys, key := keyFile(t, "alice", "bob")
	ts := startServer(t, "-api-keys", keys)
	alice, bob := key["alice"], key["bob"]

	r := ts.callAs(t, alice, "POST", "/v1/sessions", []byte(`{}`))
	var s sessionAnswer
	r.json(t, &s)
	if r.status != http.StatusCreated || s.ID == "" {
		t.Fatalf("alice's POST /v1/sessions: %v", r)
	}
	id := s.ID
	if r := ts.callAs(t, alice, "PUT", "/v1/sessions/"+id+"/files?path=/workspace/f", []byte("alice's")); r.status/100 != 2 {
		t.Fatalf("alice puts a file: %v", r)
	}
	r = ts.callAs(t, alice, "POST", "/v1/sessions/"+id+"/snapshots", []byte(`{}`))
	var snap struct {
		Name string `json:"snapshot"`
	}
	r.json(t, &snap)
	if r.status/100 != 2 || snap.Name == "" {
		t.Fatalf("alice takes a snapshot: %v", r)
	}

	r = ts.callAs(t, alice, "POST", "/v1/sessions/"+id+"/processes", []byte(`{"command":["sleep","60"]}`))
	var p struct {
		Pid int `json:"pid"`
	}
	r.json(t, &p)
	if r.status/100 != 2 || p.Pid == 0 {
		t.Fatalf("alice starts a process: %v", r)
	}
	// What a session that never was gets, for comparison.
	missing := ts.replicaOf(id) + "." + rand.Text()
	want := ts.callAs(t, bob, "GET", "/v1/sessions/"+missing, nil)
	if want.status != http.StatusNotFound {
		t.Fatalf("bob's GET of a missing session: %v, want 404", want)
	}
	pid := strconv.Itoa(p.Pid)
	for _, c := range []struct{ method, path, body string }{
		{"GET", "", ""},
		{"POST", "/runs", `{"command":["cat","/workspace/f"]}`},
		{"GET", "/processes", ""},
		{"GET", "/processes/" + pid, ""},
		{"POST", "/processes/" + pid + "/signal", `{"signal":"KILL"}`},
		{"POST", "/processes", `{"command":["true"]}`},
		{"GET", "/files?path=/workspace/f", ""},
		{"PUT", "/files?path=/workspace/g", "bob's"},
		{"GET", "/dir?path=/workspace", ""},
		{"GET", "/tar?path=/workspace", ""},
		{"POST", "/snapshots", `{}`},
		{"DELETE", "/snapshots/" + snap.Name, ""},
		{"POST", "/restore", `{"snapshot":"` + snap.Name + `"}`},
		{"POST", "/reset", `{}`},
		{"GET", "/ports/8000/", ""},
		{"DELETE", "", ""},
	} {
		var body []byte
		if c.body != "" {
			body = []byte(c.body)
		}
		got := ts.callAs(t, bob, c.method, "/v1/sessions/"+id+c.path, body)
		var g, w errorAnswer
		got.json(t, &g)
		miss := ts.callAs(t, bob, c.method, "/v1/sessions/"+missing+c.path, body)
		miss.json(t, &w)
		// The same answer but for the id the message names.
		if got.status != http.StatusNotFound || strings.ReplaceAll(g.Error, id, "ID") != strings.ReplaceAll(w.Error, missing, "ID") || g.Field != w.Field {
			t.Errorf("bob's %s %s: %v\nwant as for a missing session: %v", c.method, c.path, got, miss)
		}
	}

	// Alice's session is as she left it.
	r = ts.callAs(t, alice, "POST", "/v1/sessions/"+id+"/runs", []byte(`{"command":["sh","-c","cat /workspace/f; ls /workspace"]}`))
	var a answer
	r.json(t, &a)
	if r.status != http.StatusOK || a.Stdout != "alice'sf\n" {
		t.Errorf("alice's run after bob's tries: %v, want her file alone", r)
	}
	r = ts.callAs(t, alice, "GET", "/v1/sessions/"+id, nil)
	var info struct {
		Background int      `json:"background_processes"`
		Snapshots  []string `json:"snapshots"`
	}
	r.json(t, &info)
	if r.status != http.StatusOK || info.Background != 1 || len(info.Snapshots) != 1 {
		t.Errorf("alice's session after bob's tries: %v, want her process and snapshot", r)
	}
}

// replicaOf is the replica a session id names.
func (ts *testServer) replicaOf(id string) string {
	r, _, _ := strings.Cut(id, ".")
	return r
}

// TestTenantQuotas: past a tenant's max_sessions, max_runs or
// runs_per_minute, its request gets 429 with Retry-After and "quota"
// naming which, while another tenant still gets through.
func TestTenantQuotas(t *testing.T) {
	keys, key := keyFile(t, "alice", "bob", "carol")
	policies := writeFile(t, "tenants.json", `{"tenants": {
		"alice": {"max_sessions": 1, "max_runs": 1},
		"carol": {"runs_per_minute": 2},
		"*": {"max_sessions": 4}}}`)
	ts := startServer(t, "-api-keys", keys, "-tenants", policies)
	alice, bob, carol := key["alice"], key["bob"], key["carol"]

	quota := func(what string, r reply, want string) {
		t.Helper()
		var e errorAnswer
		r.json(t, &e)
		retry, err := strconv.Atoi(r.header.Get("Retry-After"))
		if r.status != http.StatusTooManyRequests || e.Quota != want || err != nil || retry < 1 || e.Error == "" {
			t.Errorf("%s: %v Retry-After %q, want 429 with quota %q and Retry-After", what, r, r.header.Get("Retry-After"), want)
		}
	}

	// sessions
	r := ts.callAs(t, alice, "POST", "/v1/sessions", []byte(`{}`))
	var s sessionAnswer
	r.json(t, &s)
	if r.status != http.StatusCreated {
		t.Fatalf("alice's first session: %v", r)
	}
	quota("alice's second session", ts.callAs(t, alice, "POST", "/v1/sessions", []byte(`{}`)), "sessions")
	if r := ts.callAs(t, bob, "POST", "/v1/sessions", []byte(`{}`)); r.status != http.StatusCreated {
		t.Errorf("bob's session while alice is at her quota: %v", r)
	}

	// runs at once: a background process holds alice's one run.
	r = ts.callAs(t, alice, "POST", "/v1/sessions/"+s.ID+"/processes", []byte(`{"command":["sleep","60"]}`))
	var p struct {
		Pid int `json:"pid"`
	}
	r.json(t, &p)
	if r.status/100 != 2 {
		t.Fatalf("alice's background process: %v", r)
	}
	quota("alice's run while her process runs", ts.callAs(t, alice, "POST", "/v1/runs", []byte(`{"command":["true"]}`)), "runs")
	quota("alice's second process", ts.callAs(t, alice, "POST", "/v1/sessions/"+s.ID+"/processes", []byte(`{"command":["true"]}`)), "runs")
	if r := ts.callAs(t, bob, "POST", "/v1/runs", []byte(`{"command":["true"]}`)); r.status != http.StatusOK {
		t.Errorf("bob's run while alice is at her quota: %v", r)
	}
	// Once it ends, her run goes through.
	if r := ts.callAs(t, alice, "POST", "/v1/sessions/"+s.ID+"/processes/"+strconv.Itoa(p.Pid)+"/signal", []byte(`{"signal":"KILL"}`)); r.status/100 != 2 {
		t.Fatalf("alice kills her process: %v", r)
	}
	refused := 4 // alice's session, run and process, and carol's below
	for deadline := time.Now().Add(wait); ; time.Sleep(50 * time.Millisecond) {
		r := ts.callAs(t, alice, "POST", "/v1/runs", []byte(`{"command":["true"]}`))
		if r.status == http.StatusOK {
			break
		}
		refused++
		if time.Now().After(deadline) {
			t.Fatalf("alice's run after her process ended: %v", r)
		}
	}
	// A deleted session gives its place back.
	if r := ts.callAs(t, alice, "DELETE", "/v1/sessions/"+s.ID, nil); r.status != http.StatusNoContent {
		t.Fatalf("alice deletes her session: %v", r)
	}
	if r := ts.callAs(t, alice, "POST", "/v1/sessions", []byte(`{}`)); r.status != http.StatusCreated {
		t.Errorf("alice's session after deleting hers: %v", r)
	}

	// rate: a burst of runs_per_minute, then 429 until a token is back.
	for i := range 2 {
		if r := ts.callAs(t, carol, "POST", "/v1/runs", []byte(`{"command":["true"]}`)); r.status != http.StatusOK {
			t.Fatalf("carol's run %d: %v", i, r)
		}
	}
	r = ts.callAs(t, carol, "POST", "/v1/runs", []byte(`{"command":["true"]}`))
	quota("carol's third run in a minute", r, "rate")
	if retry, _ := strconv.Atoi(r.header.Get("Retry-After")); retry > 30 {
		t.Errorf("Retry-After %d for a rate of 2 a minute, want at most 30", retry)
	}

	ts.key = bob
	m := ts.metrics(t)
	if got := m[`sandbox_serve_rejected_total{reason="quota"}`]; got != float64(refused) {
		t.Errorf("sandbox_serve_rejected_total{reason=\"quota\"} %v, want %d", got, refused)
	}
	for series, want := range map[string]float64{
		`sandbox_serve_tenant_rejected_total{tenant="alice",quota="sessions"}`: 1,
		`sandbox_serve_tenant_rejected_total{tenant="alice",quota="runs"}`:     float64(refused - 2),
		`sandbox_serve_tenant_rejected_total{tenant="carol",quota="rate"}`:     1,
		`sandbox_serve_tenant_runs_total{tenant="carol",cause="exited"}`:       2,
		`sandbox_serve_tenant_runs_total{tenant="bob",cause="exited"}`:         1,
		`sandbox_serve_tenant_sessions{tenant="alice"}`:                        1,
		`sandbox_serve_tenant_sessions{tenant="bob"}`:                          1,
	} {
		if got, ok := m[series]; !ok || got != want {
			t.Errorf("%s %v (present: %t), want %v", series, got, ok, want)
		}
	}
}

// TestTenantsFileErrors: a -tenants file the server cannot hold to stops
// it at start, naming the file and the field.
func TestTenantsFileErrors(t *testing.T) {
	if noSandbox != "" {
		t.Skip(noSandbox)
	}
	for _, c := range []struct{ file, want string }{
		{`{"tenants": {"a": {"max_runs": -1}}}`, "tenants.a.max_runs"},
		{`{"tenants": {"a": {"max_disk": "1G"}}}`, "max_disk"},
		{`{"tenants": {"a": {"secrets": [{"name": "K", "hosts": ["a.example"], "env": "SANDBOX_TEST_UNSET_VARIABLE"}]}}}`, "tenants.a.secrets[0] K"},
		{`{"tenants": {"a": {"max_memory": "64G"}}}`, "tenants.a.max_memory"},
		{`{"tenants": {"a": {"egress": ["elsewhere.example"]}}}`, "tenants.a.egress[0]"},
		{`{"tenants": {"a": {"runs_per_minute": 0}}}`, "tenants.a.runs_per_minute"},
		{`[]`, "tenants.json"},
	} {
		path := writeFile(t, "tenants.json", c.file)
		out, err := exec.Command(binary, "serve", "-addr", "127.0.0.1:0", "-tenants", path).CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) || !strings.Contains(string(out), "-tenants") {
			t.Errorf("-tenants %s: %v\n%s\nwant a failure naming -tenants and %q", c.file, err, out, c.want)
		}
	}
}

// TestAuditNamesTenant: with -audit, a tenant's runs' events name the
// tenant, and the trail holds neither its key nor the key's hash.
func TestAuditNamesTenant(t *testing.T) {
	keys, key := keyFile(t, "alice")
	trail := filepath.Join(t.TempDir(), "audit.jsonl")
	ts := startServer(t, "-api-keys", keys, "-audit", trail)
	if r := ts.callAs(t, key["alice"], "POST", "/v1/runs", []byte(`{"command":["echo","audited"]}`)); r.status != http.StatusOK {
		t.Fatalf("alice's run: %v", r)
	}
	if r := ts.callAs(t, key["alice"], "POST", "/v1/sessions", []byte(`{}`)); r.status != http.StatusCreated {
		t.Fatalf("alice's session: %v", r)
	}
	wrong := "wrong-" + rand.Text()
	if r := ts.callAs(t, wrong, "POST", "/v1/runs", []byte(`{"command":["true"]}`)); r.status != http.StatusUnauthorized {
		t.Fatalf("a wrong key: %v", r)
	}
	if err := ts.stop(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(trail)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(key["alice"]))
	for _, secret := range []string{key["alice"], hex.EncodeToString(sum[:]), wrong} {
		if strings.Contains(string(b), secret) {
			t.Errorf("the trail holds %q:\n%s", secret, b)
		}
	}
	starts := 0
	for line := range strings.Lines(string(b)) {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("a line of the trail is not JSON: %v: %s", err, line)
		}
		if argv, _ := ev["argv"].([]any); ev["msg"] == "run start" && len(argv) == 2 && argv[1] == "audited" {
			starts++
			if ev["tenant"] != "alice" {
				t.Errorf("run start without tenant alice: %s", line)
			}
		}
	}
	if starts == 0 {
		t.Errorf("no run start of alice's run in the trail:\n%s", b)
	}
	for _, ev := range ts.events("session created") {
		if ev["tenant"] != "alice" {
			t.Errorf("server log's session created without tenant alice: %v", ev)
		}
	}
}

// TestTenantPolicyLimits: a tenant's policy narrows what its requests may
// ask for: a limit above its maximum is 400 naming the field and the
// tenant's maximum, an omitted one is that maximum, and an egress host or
// image its policy lacks is 400 though the server offers it; another
// tenant keeps the server's maxima.
func TestTenantPolicyLimits(t *testing.T) {
	keys, key := keyFile(t, "alice", "bob")
	const alpine, busybox = "docker.io/library/alpine:3", "docker.io/library/busybox:1"
	value := "sk-" + rand.Text()
	secretFile := writeFile(t, "api-key", value+"\n")
	policies := writeFile(t, "tenants.json", `{"tenants": {"alice": {
		"max_memory": "64M", "max_timeout": "5s", "max_pids": 32,
		"egress": ["a.example"], "images": ["`+busybox+`"],
		"secrets": [{"name": "API_KEY", "hosts": ["a.example:443"], "file": "`+secretFile+`"}]}}}`)
	ts := startServer(t, "-api-keys", keys, "-tenants", policies, "-egress", "a.example,b.example", "-images", alpine+","+busybox)
	alice, bob := key["alice"], key["bob"]

	for _, c := range []struct{ path, body, field, max string }{
		{"/v1/runs", `{"command":["true"],"limits":{"memory":"128M"}}`, "limits.memory", "64M"},
		{"/v1/runs", `{"command":["true"],"limits":{"timeout":"10s"}}`, "limits.timeout", "5s"},
		{"/v1/runs", `{"command":["true"],"limits":{"pids":64}}`, "limits.pids", "32"},
		{"/v1/runs", `{"command":["true"],"network":"allow","egress":["b.example"]}`, "egress[0]", "a.example"},
		{"/v1/sessions", `{"limits":{"memory":"65M"}}`, "limits.memory", "64M"},
		{"/v1/sessions", `{"image":"` + alpine + `"}`, "image", busybox},
	} {
		r := ts.callAs(t, alice, "POST", c.path, []byte(c.body))
		var e errorAnswer
		r.json(t, &e)
		if r.status != http.StatusBadRequest || e.Field != c.field || !strings.Contains(e.Error, `tenant "alice"`) || !strings.Contains(e.Error, c.max) {
			t.Errorf("alice's %s %s: %v, want 400 field %s naming her maximum %s", c.path, c.body, r, c.field, c.max)
		}
		// Within the server's maxima, bob is not held to alice's.
		if c.field == "image" {
			continue // creating it would pull the image
		}
		if r := ts.callAs(t, bob, "POST", c.path, []byte(strings.ReplaceAll(c.body, `"10s"`, `"1s"`))); r.status/100 != 2 {
			t.Errorf("bob's %s %s: %v, want it done", c.path, c.body, r)
		}
	}

	// Secrets: only a tenant's own, by name; inside, a placeholder.
	for _, c := range []struct{ who, body string }{
		{bob, `{"command":["true"],"network":"allow","egress":["a.example"],"secrets":["API_KEY"]}`},
		{alice, `{"command":["true"],"network":"allow","egress":["a.example"],"secrets":["OTHER"]}`},
	} {
		r := ts.callAs(t, c.who, "POST", "/v1/runs", []byte(c.body))
		var e errorAnswer
		r.json(t, &e)
		if r.status != http.StatusBadRequest || e.Field != "secrets" {
			t.Errorf("%s: %v, want 400 field secrets", c.body, r)
		}
	}
	r := ts.callAs(t, alice, "POST", "/v1/sessions", []byte(`{"network":"allow","egress":["a.example"],"secrets":["API_KEY"]}`))
	var withSecret sessionAnswer
	r.json(t, &withSecret)
	if r.status != http.StatusCreated {
		t.Fatalf("alice's session with her secret: %v", r)
	}
	r = ts.callAs(t, alice, "POST", "/v1/sessions/"+withSecret.ID+"/runs", []byte(`{"command":["sh","-c","printf %s \"$API_KEY\""]}`))
	var a answer
	r.json(t, &a)
	if r.status != http.StatusOK || a.Stdout == "" || strings.Contains(string(r.body), value) {
		t.Errorf("$API_KEY inside alice's session: %v, want a placeholder, not the value", r)
	}
	if r := ts.callAs(t, alice, "POST", "/v1/sessions/"+withSecret.ID+"/runs", []byte(`{"command":["true"],"secrets":["API_KEY"]}`)); r.status != http.StatusBadRequest {
		t.Errorf("a run in a session naming secrets: %v, want 400", r)
	}
	if strings.Contains(ts.logText(), value) {
		t.Errorf("the server's log holds the secret's value")
	}

	// Omitted limits are alice's maxima.
	r = ts.callAs(t, alice, "POST", "/v1/sessions", []byte(`{}`))
	var info struct {
		Limits struct {
			Memory int64 `json:"memory"`
			Pids   int64 `json:"pids"`
		} `json:"limits"`
	}
	r.json(t, &info)
	if r.status != http.StatusCreated || info.Limits.Memory != 64<<20 || info.Limits.Pids != 32 {
		t.Errorf("alice's session without limits: %v, want memory 64M and pids 32", r)
	}

}

// TestForeignHostOrigin: a request with a Host the server does not answer
// to, or with a foreign Origin (a web page's, as DNS rebinding sends),
// gets 403 with the service's JSON error, and runs nothing, with a valid
// key too.
func TestForeignHostOrigin(t *testing.T) {
	keys, key := keyFile(t, "alice")
	ts := startServer(t, "-api-keys", keys)
	token := newToken()
	body := `{"command":["sh","-c","echo ` + token + `; sleep 5"]}`
	for _, h := range []struct{ name, value string }{{"Host", "evil.example"}, {"Origin", "http://evil.example"}} {
		req, err := http.NewRequest("POST", ts.url+"/v1/runs", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key["alice"])
		if h.name == "Host" {
			req.Host = h.value
		} else {
			req.Header.Set(h.name, h.value)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e errorAnswer
		err = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || err != nil || e.ID == "" || e.Error == "" {
			t.Errorf("%s: %s: %s %+v (%v), want 403 and a JSON error", h.name, h.value, resp.Status, e, err)
		}
	}
	if pids := withToken(token); len(pids) != 0 || len(ts.events("run")) != 0 {
		t.Errorf("a refused request ran: pids %v, runs logged %d", pids, len(ts.events("run")))
	}
}

// TestNonLoopbackNeedsAuth: an address beyond loopback without any
// authentication is refused at start, naming the flags that would allow
// it, before anything listens.
func TestNonLoopbackNeedsAuth(t *testing.T) {
	if noSandbox != "" {
		t.Skip(noSandbox)
	}
	cmd := exec.Command(binary, "serve", "-addr", "0.0.0.0:0")
	out, err := cmd.CombinedOutput()
	if err == nil || cmd.ProcessState.ExitCode() == 0 || !strings.Contains(string(out), "-api-keys") || !strings.Contains(string(out), "-insecure-no-auth") {
		t.Errorf("serve -addr 0.0.0.0:0: %v\n%s\nwant a failure naming -api-keys and -insecure-no-auth", err, out)
	}
	if strings.Contains(string(out), `"listening"`) {
		t.Errorf("it listened:\n%s", out)
	}
}

// TestHeldBodiesPerTenant: a tenant that holds request bodies open (their
// headers and a byte sent, the rest never) holds at most its share of the
// places for bodies being read: the next of its requests gets 429 with
// quota "queue", and another tenant's run still goes through.
func TestHeldBodiesPerTenant(t *testing.T) {
	keys, key := keyFile(t, "alice", "bob")
	ts := startServer(t, "-api-keys", keys, "-max-concurrent", "2", "-max-queue", "6")
	host := strings.TrimPrefix(ts.url, "http://")
	const places = 2 + 6 // -max-concurrent plus -max-queue
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	refused := 0
	for range places {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "POST /v1/runs HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", host, key["alice"])
	}
	// Those beyond alice's share are answered at once; the others wait
	// for the rest of their bodies.
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			continue
		}
		var e errorAnswer
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || e.Quota != "queue" || resp.Header.Get("Retry-After") == "" {
			t.Errorf("a held body's neighbour: %s %+v, want 429 with quota queue", resp.Status, e)
		}
		refused++
	}
	if refused == 0 || refused == places {
		t.Errorf("%d of alice's %d held bodies refused, want some held and some refused", refused, places)
	}
	r := ts.callAs(t, key["bob"], "POST", "/v1/runs", []byte(`{"command":["echo","bob"]}`))
	var a answer
	r.json(t, &a)
	if r.status != http.StatusOK || a.Stdout != "bob\n" {
		t.Errorf("bob's run while alice holds bodies: %v, want 200", r)
	}
}

// TestForwardAuthenticated: with keys, a request for a session of another
// replica is forwarded with its key, and the owner answers it for the
// key's tenant alone; the owner answers to the Host of -peer-url naming
// it, a name none of its other flags gives.
func TestForwardAuthenticated(t *testing.T) {
	keys, key := keyFile(t, "alice", "bob")
	pa, pb := freePort(t), freePort(t)
	start := func(port int) *testServer {
		// An IPv4-mapped address reaches the loopback listener by a
		// name the Host check does not take by default.
		return startServer(t, "-api-keys", keys, "-addr", "127.0.0.1:"+strconv.Itoa(port), "-replica", strconv.Itoa(port),
			"-peer-url", "http://[::ffff:127.0.0.1]:{replica}")
	}
	a, b := start(pa), start(pb)
	r := a.callAs(t, key["alice"], "POST", "/v1/sessions", []byte(`{}`))
	var s sessionAnswer
	r.json(t, &s)
	if r.status != http.StatusCreated {
		t.Fatalf("alice's session on A: %v", r)
	}
	base := "/v1/sessions/" + s.ID
	if r := b.callAs(t, key["alice"], "POST", base+"/runs", []byte(`{"command":["echo","through B"]}`)); r.status != http.StatusOK || !strings.Contains(string(r.body), "through B") {
		t.Errorf("alice's run through B: %v, want 200 from A", r)
	}
	if r := b.callAs(t, key["bob"], "GET", base, nil); r.status != http.StatusNotFound {
		t.Errorf("bob's GET of alice's session through B: %v, want 404", r)
	}
	if r := b.callAs(t, "", "GET", base, nil); r.status != http.StatusUnauthorized {
		t.Errorf("GET of alice's session through B without a key: %v, want 401", r)
	}
	if n := len(a.events("rejected")); n != 1 {
		t.Errorf("A refused %d requests, want bob's alone:\n%s", n, a.logText())
	}
}

// TestSlowHeadersPerClient: a client that holds -max-conns-per-client
// connections with half a request line each gets no more, while a client
// from another address is served.
func TestSlowHeadersPerClient(t *testing.T) {
	keys, key := keyFile(t, "alice")
	const perClient = 3
	ts := startServer(t, "-api-keys", keys, "-max-conns-per-client", strconv.Itoa(perClient))
	host := strings.TrimPrefix(ts.url, "http://")
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range perClient {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		io.WriteString(c, "POST /v1/ru")
	}
	// One more from 127.0.0.1 is closed without an answer.
	c, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	held = append(held, c)
	io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	// Closed: at its end, or reset; not answered, nor left open.
	var timeout net.Error
	if b, err := io.ReadAll(c); len(b) != 0 || (errors.As(err, &timeout) && timeout.Timeout()) {
		t.Errorf("a connection beyond %d from 127.0.0.1: %q %v, want it closed", perClient, b, err)
	}

	other := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{
		LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}}
	req, err := http.NewRequest("POST", ts.url+"/v1/runs", strings.NewReader(`{"command":["echo","other"]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key["alice"])
	resp, err := other.Do(req)
	if err != nil {
		t.Fatalf("a request from 127.0.0.2: %v", err)
	}
	var a answer
	json.NewDecoder(resp.Body).Decode(&a)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || a.Stdout != "other\n" {
		t.Errorf("a request from 127.0.0.2 while 127.0.0.1 holds its connections: %s %+v, want 200", resp.Status, a.short())
	}
}

// TestInsecureNoAuth: -insecure-no-auth serves without keys, as tenant
// default, and says at start that authentication is off.
func TestInsecureNoAuth(t *testing.T) {
	ts := startServer(t, "-insecure-no-auth")
	if a := ts.run(t, `{"command":["echo","open"]}`); a.Stdout != "open\n" {
		t.Errorf("a run without a key: %+v", a.short())
	}
	warned := false
	ts.mu.Lock()
	logs := ts.logs[:len(ts.logs):len(ts.logs)]
	ts.mu.Unlock()
	for _, ev := range logs {
		if msg, _ := ev["msg"].(string); ev["level"] == "WARN" && strings.Contains(msg, "-insecure-no-auth") {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no warning naming -insecure-no-auth in the log:\n%s", ts.logText())
	}
	// The run's log event is written once its answer is.
	evs := ts.events("run")
	for deadline := time.Now().Add(wait); len(evs) == 0 && time.Now().Before(deadline); evs = ts.events("run") {
		time.Sleep(20 * time.Millisecond)
	}
	if len(evs) != 1 || evs[0]["tenant"] != "default" {
		t.Errorf("the run's log event: %v, want tenant default", evs)
	}
}

// TestTenantsReloadOnHUP: SIGHUP reads the -tenants file anew: a raised
// max_sessions admits the session refused before; a file in error leaves
// the policies as they were.
func TestTenantsReloadOnHUP(t *testing.T) {
	keys, key := keyFile(t, "alice")
	policies := writeFile(t, "tenants.json", `{"tenants": {"alice": {"max_sessions": 1}}}`)
	ts := startServer(t, "-api-keys", keys, "-tenants", policies)
	alice := key["alice"]
	if r := ts.callAs(t, alice, "POST", "/v1/sessions", []byte(`{}`)); r.status != http.StatusCreated {
		t.Fatalf("alice's first session: %v", r)
	}
	if r := ts.callAs(t, alice, "POST", "/v1/sessions", []byte(`{}`)); r.status != http.StatusTooManyRequests {
		t.Fatalf("alice's second session: %v, want 429", r)
	}
	hup := func(content, msg string) {
		t.Helper()
		if err := os.WriteFile(policies, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		before := len(ts.events(msg))
		ts.cmd.Process.Signal(syscall.SIGHUP)
		for deadline := time.Now().Add(wait); len(ts.events(msg)) == before; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in the log after SIGHUP:\n%s", msg, ts.logText())
			}
		}
	}
	hup(`{"tenants": {"alice": {"max_sessions": 2}}}`, "tenants reloaded")
	if r := ts.callAs(t, alice, "POST", "/v1/sessions", []byte(`{}`)); r.status != http.StatusCreated {
		t.Errorf("alice's second session after max_sessions 2: %v, want 201", r)
	}
	hup(`{"tenants": {"alice": {"max_sessions": -1}}}`, "the -tenants file did not reload: the policies stay as they were")
	if r := ts.callAs(t, alice, "POST", "/v1/sessions", []byte(`{}`)); r.status != http.StatusTooManyRequests {
		t.Errorf("alice's third session after a file in error: %v, want 429 from max_sessions 2", r)
	}
}

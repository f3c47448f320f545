package apitest

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fumehood/sandbox"
)

// The tests run the real server: TestMain builds the sandbox binary, and each test
// starts its own on a loopback port and stops it with SIGTERM.

var (
	binary    string // the sandbox binary built by TestMain
	noSandbox string // why this host cannot run sandboxes, if it cannot
	noCgroup  string // why this user has no writable cgroup: servers then run with -best-effort

	// apiKeys is an -api-keys file of one tenant, "apitest", whose key
	// apiKey every call sends unless it says otherwise.
	apiKeys, apiKey string
)

// wait bounds every wait, so that a broken server fails a test instead of
// hanging it. It is not a measure of anything.
const wait = 2 * time.Minute

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	report, err := sandbox.Probe()
	switch {
	case err != nil:
		noSandbox = "sandbox.Probe: " + err.Error()
	case !report.CanRun():
		noSandbox = "this host cannot run sandboxes:\n" + report.String()
	default:
		if l, _ := report.Layer("cgroup"); !l.Available {
			noCgroup = l.Detail
		}
	}
	dir, err := os.MkdirTemp("", "service-apitest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	apiKey = rand.Text()
	sum := sha256.Sum256([]byte(apiKey))
	apiKeys = filepath.Join(dir, "keys")
	if err := os.WriteFile(apiKeys, []byte("apitest sha256:"+hex.EncodeToString(sum[:])+"\n"), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if binary = os.Getenv("SANDBOX_BIN"); binary != "" {
		return m.Run()
	}
	binary = filepath.Join(dir, "sandbox")
	build := exec.Command("go", "build", "-o", binary, "./cmd/sandbox")
	build.Dir = filepath.Join("..", "..", "..") // the library's module, with its go.mod
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "go build the sandbox binary:", err)
		return 1
	}
	return m.Run()
}

// server is a "sandbox serve" process started by a test.
type server struct {
	cmd *exec.Cmd
	url string
	eof chan struct{} // closed when its stderr ends

	mu  sync.Mutex
	log strings.Builder

	stopOnce sync.Once
	exit     error
}

// startServer starts a "sandbox serve" with flags on a loopback port, and stops
// it at the end of the test, failing the test unless it exits 0. Unless flags
// say how to authenticate, it takes the suite's key file.
func startServer(t *testing.T, flags ...string) *server {
	t.Helper()
	if noSandbox != "" {
		t.Skip(noSandbox)
	}
	args := append([]string{"-addr", "127.0.0.1:0", "-log-format", "json"}, flags...)
	if noCgroup != "" {
		args = append(args, "-best-effort")
	}
	if !slices.Contains(flags, "-api-keys") && !slices.Contains(flags, "-insecure-no-auth") {
		args = append(args, "-api-keys", apiKeys)
	}
	s := &server{cmd: exec.Command(binary, append([]string{"serve"}, args...)...), eof: make(chan struct{})}
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		defer close(s.eof)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			s.mu.Lock()
			s.log.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			var ev struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Msg == "listening" {
				addr <- ev.Addr
			}
		}
	}()
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Errorf("server: %v; its log:\n%s", err, s.logText())
		}
	})
	select {
	case a := <-addr:
		s.url = "http://" + a
	case <-s.eof:
		t.Fatalf("the server exited before listening; its log:\n%s", s.logText())
	case <-time.After(wait):
		t.Fatalf("the server did not say where it listens; its log:\n%s", s.logText())
	}
	return s
}

// stop sends SIGTERM and waits for the server to exit; it returns an error
// unless it exited 0.
func (s *server) stop() error {
	s.stopOnce.Do(func() {
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.eof:
		case <-time.After(wait):
			s.cmd.Process.Kill()
			<-s.eof
		}
		if err := s.cmd.Wait(); err != nil {
			s.exit = fmt.Errorf("after SIGTERM: %w", err)
		}
	})
	return s.exit
}

func (s *server) logText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

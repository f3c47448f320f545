package validate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// k8sBinaries is the directory of the Kubernetes binaries the test runs
// (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl
// and the node's), from $K8S_BIN, which make test-k8s sets after
// building them; the test skips without it.
func k8sBinaries(t *testing.T, names ...string) string {
	t.Helper()
	dir := os.Getenv("K8S_BIN")
	if dir == "" {
		t.Skip("K8S_BIN is not set: make test-k8s builds the Kubernetes binaries (deploy/k8stest/build.sh) and sets it")
	}
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			t.Fatalf("K8S_BIN=%s has no %s: %v", dir, n, err)
		}
	}
	return dir
}

// daemon is a process the test started, which it stops at its end: by
// its pid, SIGTERM and then, after grace, SIGKILL.
type daemon struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
	// grace is how long stop waits after SIGTERM before SIGKILL; 0
	// sends SIGKILL at once.
	grace time.Duration
}

// startDaemon starts argv in the network namespace ns, its output in
// dir/name.log, and stops it at the test's end.
func startDaemon(t *testing.T, dir, ns, name string, argv ...string) *daemon {
	t.Helper()
	return startProcess(t, dir, name, inNetns(ns, argv...))
}

// startProcess starts cmd, its output in dir/name.log, and stops it at
// the test's end.
func startProcess(t *testing.T, dir, name string, cmd *exec.Cmd) *daemon {
	t.Helper()
	d := &daemon{name: name, cmd: cmd, log: filepath.Join(dir, name+".log"), done: make(chan struct{}), grace: 10 * time.Second}
	log, err := os.Create(d.log)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	d.cmd.Stdout, d.cmd.Stderr = log, log
	// Its own process group, so that a test killed by a signal to its
	// group does not leave half of the cluster's processes behind
	// unstopped: the cleanup stops each by pid.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { d.err = d.cmd.Wait(); close(d.done) }()
	t.Cleanup(func() { d.stop(t) })
	return d
}

// stop ends the daemon, by its pid, and waits for it.
func (d *daemon) stop(t *testing.T) {
	select {
	case <-d.done:
		return
	default:
	}
	if d.grace == 0 {
		d.cmd.Process.Kill()
		<-d.done
		return
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(d.grace):
		d.cmd.Process.Kill()
		<-d.done
		t.Logf("%s did not end within %v of SIGTERM: killed", d.name, d.grace)
	}
}

// exited says whether the daemon has ended, and how.
func (d *daemon) exited() (bool, error) {
	select {
	case <-d.done:
		return true, d.err
	default:
		return false, nil
	}
}

// logTail is the end of the daemon's output, for a failure's message.
func (d *daemon) logTail() string { return tail(d.log, 25) }

// controlPlane is etcd, the API server, the controller manager and the
// scheduler, in the fabric's control-plane namespace.
type controlPlane struct {
	f      *fabric
	pki    *pki
	bin    string
	dir    string
	server string       // the API server's URL on the fabric
	admin  string       // an admin's kubeconfig
	http   *http.Client // as the admin, through the fabric
}

// startControlPlane starts the control plane and waits until each part
// reports healthy.
func startControlPlane(t *testing.T, f *fabric, bin string) *controlPlane {
	t.Helper()
	dir := t.TempDir()
	p := newPKI(t, dir)
	cp := &controlPlane{f: f, pki: p, bin: bin, dir: dir, server: "https://" + cpIP + ":6443"}
	p.issue(t, "apiserver", "kube-apiserver", nil, cpIP, "127.0.0.1", "10.96.0.1",
		"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")
	p.issue(t, "apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"})
	p.issue(t, "admin", "k8stest-admin", []string{"system:masters"})
	p.issue(t, "kcm", "system:kube-controller-manager", nil)
	p.issue(t, "scheduler", "system:kube-scheduler", nil)
	cp.admin = p.kubeconfig(t, "admin", cp.server)

	etcd := startDaemon(t, dir, f.cp, "etcd", filepath.Join(bin, "etcd"),
		"--name=k8stest", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379",
		"--listen-peer-urls=http://127.0.0.1:2380", "--initial-advertise-peer-urls=http://127.0.0.1:2380",
		"--initial-cluster=k8stest=http://127.0.0.1:2380", "--listen-metrics-urls=http://127.0.0.1:2381")
	plain := &http.Client{Transport: &http.Transport{DialContext: dialer(f.cp)}, Timeout: 2 * time.Second}
	cp.waitHealthy(t, etcd, plain, "http://127.0.0.1:2379/health", 30*time.Second)

	api := startDaemon(t, dir, f.cp, "kube-apiserver", filepath.Join(bin, "kube-apiserver"),
		"--etcd-servers=http://127.0.0.1:2379",
		"--bind-address=0.0.0.0", "--secure-port=6443", "--advertise-address="+cpIP,
		"--service-cluster-ip-range="+serviceSubnet,
		"--client-ca-file="+p.path("ca.crt"),
		"--tls-cert-file="+p.path("apiserver.crt"), "--tls-private-key-file="+p.path("apiserver.key"),
		"--kubelet-client-certificate="+p.path("apiserver-kubelet-client.crt"),
		"--kubelet-client-key="+p.path("apiserver-kubelet-client.key"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+p.path("sa.pub"), "--service-account-signing-key-file="+p.path("sa.key"),
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		"--profiling=false")
	cp.http = cp.adminClient(t)
	cp.waitHealthy(t, api, cp.http, cp.server+"/readyz", 90*time.Second)

	kcm := startDaemon(t, dir, f.cp, "kube-controller-manager", filepath.Join(bin, "kube-controller-manager"),
		"--kubeconfig="+p.kubeconfig(t, "kcm", cp.server),
		"--authentication-kubeconfig="+p.path("kcm.kubeconfig"), "--authorization-kubeconfig="+p.path("kcm.kubeconfig"),
		"--service-account-private-key-file="+p.path("sa.key"), "--root-ca-file="+p.path("ca.crt"),
		"--use-service-account-credentials=true", "--leader-elect=false", "--bind-address=127.0.0.1",
		"--profiling=false")
	sched := startDaemon(t, dir, f.cp, "kube-scheduler", filepath.Join(bin, "kube-scheduler"),
		"--kubeconfig="+p.kubeconfig(t, "scheduler", cp.server),
		"--authentication-kubeconfig="+p.path("scheduler.kubeconfig"), "--authorization-kubeconfig="+p.path("scheduler.kubeconfig"),
		"--leader-elect=false", "--bind-address=127.0.0.1", "--profiling=false")
	insecure := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: dialer(f.cp),
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // their self-signed serving certificates; /healthz only
	cp.waitHealthy(t, kcm, insecure, "https://127.0.0.1:10257/healthz", 60*time.Second)
	cp.waitHealthy(t, sched, insecure, "https://127.0.0.1:10259/healthz", 60*time.Second)
	return cp
}

// adminClient is an HTTP client of the API server as the admin, through
// the fabric.
func (cp *controlPlane) adminClient(t *testing.T) *http.Client {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(cp.pki.path("admin.crt"), cp.pki.path("admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cp.pki.caCert)
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: dialer(cp.f.cp),
		TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}}}
}

// waitHealthy waits until url answers 200, failing the test with d's
// output if d ends first or within is over.
func (cp *controlPlane) waitHealthy(t *testing.T, d *daemon, c *http.Client, url string, within time.Duration) {
	t.Helper()
	began := time.Now()
	var last string
	for time.Since(began) < within {
		if ended, err := d.exited(); ended {
			t.Fatalf("%s ended before it was healthy: %v\n%s", d.name, err, d.logTail())
		}
		resp, err := c.Get(url)
		if err == nil {
			body := make([]byte, 512)
			n, _ := resp.Body.Read(body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Logf("%s healthy after %v", d.name, time.Since(began).Round(time.Millisecond))
				return
			}
			last = fmt.Sprintf("%s: %s", resp.Status, body[:n])
		} else {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s not healthy at %s within %v (last: %s)\n%s", d.name, url, within, last, d.logTail())
}

// kubectl runs kubectl as the admin with args, from the control plane's
// namespace, and returns its output; a failure is returned, not fatal.
func (cp *controlPlane) kubectl(ctx context.Context, args ...string) (string, error) {
	argv := append([]string{"netns", "exec", cp.f.cp, filepath.Join(cp.bin, "kubectl"), "--kubeconfig=" + cp.admin}, args...)
	out, err := exec.CommandContext(ctx, "ip", argv...).CombinedOutput()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), fmt.Errorf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out), err
	}
	return string(out), nil
}

// TestControlPlaneAdmitsDeploy: a real API server (with etcd, the
// controller manager and the scheduler) admits deploy/kubernetes as a
// user applies it, unchanged (kubectl apply --server-side -k), and the
// StatefulSet controller makes its pods.
func TestControlPlaneAdmitsDeploy(t *testing.T) {
	bin := k8sBinaries(t, "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
	f := newFabric(t, 0)
	cp := startControlPlane(t, f, bin)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := cp.kubectl(ctx, "create", "namespace", "toolserver"); err != nil {
		t.Fatal(err)
	} else {
		t.Log(strings.TrimSpace(out))
	}
	abs, _ := filepath.Abs(filepath.Join(deployDir, "kubernetes"))
	out, err := cp.kubectl(ctx, "apply", "--server-side", "-k", abs)
	if err != nil {
		t.Fatalf("the API server refused deploy/kubernetes: %v", err)
	}
	t.Logf("kubectl apply --server-side -k deploy/kubernetes:\n%s", out)
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := cp.kubectl(ctx, "-n", "toolserver", "get", "pods", "-o", "name")
		if err == nil && strings.Contains(out, "pod/toolserver-0") && strings.Contains(out, "pod/toolserver-1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the StatefulSet controller made no pods toolserver-0 and -1 within a minute: %v\n%s", err, out)
		}
		time.Sleep(time.Second)
	}
}

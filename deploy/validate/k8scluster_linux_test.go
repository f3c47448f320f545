package validate

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// pauseRef names the test's pause image, the pods' sandbox container,
// which containerd is told to use and never pulls.
const pauseRef = "k8stest.local/pause:1"

// k8sNodeBinaries is the directory of the node's runtime binaries
// (containerd, its runc shim, runc, the CNI plugins, CoreDNS), from
// $K8S_NODE_BIN, which make test-k8s sets after building them.
func k8sNodeBinaries(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("K8S_NODE_BIN")
	if dir == "" {
		t.Skip("K8S_NODE_BIN is not set: make test-k8s builds the node's runtime (deploy/k8stest/build-node.sh) and sets it")
	}
	for _, n := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "bridge", "host-local", "loopback", "portmap", "coredns"} {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			t.Fatalf("K8S_NODE_BIN=%s has no %s: %v", dir, n, err)
		}
	}
	for _, p := range []string{"nsenter", "unshare", "iptables", "bash", "mount"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s is missing: the test's nodes need it (Debian's util-linux, iptables, bash)", p)
		}
	}
	return dir
}

// cluster is a control plane, its DNS and its nodes, and the images the
// nodes hold.
type cluster struct {
	*controlPlane
	nodes []*node
}

// startCluster starts a control plane, CoreDNS and nodes nodes, puts the
// images (archives at these paths) into every node's containerd, and
// waits until every node is Ready.
func startCluster(t *testing.T, nodes int, images ...string) *cluster {
	t.Helper()
	kbin := k8sBinaries(t, "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kubelet", "kube-proxy")
	nbin := k8sNodeBinaries(t)
	f := newFabric(t, nodes)
	c := &cluster{controlPlane: startControlPlane(t, f, kbin)}
	c.startCoreDNS(t, nbin)
	began := time.Now()
	for n := 1; n <= nodes; n++ {
		c.nodes = append(c.nodes, startNode(t, f, c.controlPlane, n, kbin, nbin))
	}
	for _, nd := range c.nodes {
		nd.importImages(t, nbin, images...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, nd := range c.nodes {
		if out, err := c.kubectlWait(ctx, nd, "wait", "--for=condition=Ready", "node/"+nd.name, "--timeout=150s"); err != nil {
			t.Fatalf("node %s not Ready: %v\n%s\nkubelet:\n%s", nd.name, err, out, tail(filepath.Join(nd.dir, "kubelet.log"), 30))
		}
	}
	t.Logf("%d nodes Ready %v after they started", nodes, time.Since(began).Round(time.Millisecond))
	return c
}

// kubectlWait is kubectl for a wait on node nd: it fails at once,
// with the node's own output, if the node has ended.
func (c *cluster) kubectlWait(ctx context.Context, nd *node, args ...string) (string, error) {
	out, err := c.kubectl(ctx, args...)
	if ended, why := nd.init.exited(); ended {
		return out, fmt.Errorf("node %s ended (%v):\n%s", nd.name, why, nd.init.logTail())
	}
	return out, err
}

// startCoreDNS serves the cluster's names (Services, and the pods under a
// headless Service) at the control plane's address, port 53, which the
// kubelets give pods as their DNS server. Names outside the cluster get
// no answer: there is nowhere to forward them.
func (c *cluster) startCoreDNS(t *testing.T, nbin string) {
	t.Helper()
	corefile := filepath.Join(c.dir, "Corefile")
	text := fmt.Sprintf(`.:53 {
	bind %s
	errors
	ready 127.0.0.1:8181
	kubernetes cluster.local in-addr.arpa ip6.arpa {
		kubeconfig %s
		pods insecure
		fallthrough in-addr.arpa ip6.arpa
	}
	cache 5
}
`, cpIP, c.admin)
	if err := os.WriteFile(corefile, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, c.dir, c.f.cp, "coredns", filepath.Join(nbin, "coredns"), "-conf", corefile)
	plain := &http.Client{Transport: &http.Transport{DialContext: dialer(c.f.cp)}, Timeout: 2 * time.Second}
	c.waitHealthy(t, d, plain, "http://127.0.0.1:8181/ready", 60*time.Second)
}

// importImages puts the image archives into the node's containerd, in
// the namespace the CRI uses.
func (nd *node) importImages(t *testing.T, nbin string, paths ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(nd.sock); err == nil {
			break
		}
		if ended, why := nd.init.exited(); ended || time.Now().After(deadline) {
			t.Fatalf("node %s's containerd made no socket (ended: %v %v):\n%s\ncontainerd:\n%s", nd.name, ended, why,
				nd.init.logTail(), tail(filepath.Join(nd.dir, "containerd.log"), 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, p := range paths {
		out, err := exec.Command(filepath.Join(nbin, "ctr"), "--address", nd.sock, "--namespace", "k8s.io",
			"images", "import", "--no-unpack", p).CombinedOutput()
		if err != nil {
			t.Fatalf("import %s into node %s: %v\n%s", p, nd.name, err, out)
		}
	}
}

// tail is the last n lines of the file at path.
func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// pauseImage writes the pause image's archive to path: the program
// testdata/k8spause, built static, as its entrypoint.
func pauseImage(t *testing.T, path string) {
	t.Helper()
	root := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(root, "pause"), "./testdata/k8spause")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./testdata/k8spause: %v\n%s", err, out)
	}
	imageArchive(t, root, pauseRef, path, v1.Config{Entrypoint: []string{"/pause"}, User: "65535:65535"})
}

// podInfo is what the test reads of a pod.
type podInfo struct {
	Metadata struct {
		Name              string  `json:"name"`
		UID               string  `json:"uid"`
		DeletionTimestamp *string `json:"deletionTimestamp"`
	} `json:"metadata"`
	Spec struct {
		NodeName  string `json:"nodeName"`
		HostUsers *bool  `json:"hostUsers"`
	} `json:"spec"`
	Status struct {
		Phase      string `json:"phase"`
		PodIP      string `json:"podIP"`
		Conditions []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		} `json:"conditions"`
		ContainerStatuses []struct {
			Ready        bool `json:"ready"`
			RestartCount int  `json:"restartCount"`
		} `json:"containerStatuses"`
	} `json:"status"`
}

func (p podInfo) ready() bool {
	for _, c := range p.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status == "True"
		}
	}
	return false
}

// pods lists the pods of namespace ns that match selector.
func (c *cluster) pods(t *testing.T, ns, selector string) []podInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := c.kubectl(ctx, "-n", ns, "get", "pods", "-l", selector, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ Items []podInfo }
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("kubectl get pods -o json: %v\n%s", err, out)
	}
	return list.Items
}

// waitPods waits until the pods of ns matching selector are exactly
// names, each Running and Ready and none being deleted, and returns them
// by name.
func (c *cluster) waitPods(t *testing.T, ns, selector string, within time.Duration, names ...string) map[string]podInfo {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := map[string]podInfo{}
		all, crashing := true, ""
		for _, p := range c.pods(t, ns, selector) {
			got[p.Metadata.Name] = p
			all = all && p.Status.Phase == "Running" && p.ready() && p.Metadata.DeletionTimestamp == nil
			for _, cs := range p.Status.ContainerStatuses {
				if cs.RestartCount >= 2 {
					crashing = p.Metadata.Name
				}
			}
		}
		if all && len(got) == len(names) {
			ok := true
			for _, n := range names {
				_, has := got[n]
				ok = ok && has
			}
			if ok {
				return got
			}
		}
		// A container that has failed twice is failing, not starting.
		if time.Now().After(deadline) || crashing != "" {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			out, _ := c.kubectl(ctx, "-n", ns, "get", "pods,events", "-o", "wide")
			cancel()
			for _, nd := range c.nodes {
				out += fmt.Sprintf("\n--- %s kubelet:\n%s", nd.name, tail(filepath.Join(nd.dir, "kubelet.log"), 15))
				logs, _ := filepath.Glob(filepath.Join(nd.dir, "pod-logs", "*", "*", "*.log"))
				for _, l := range logs {
					out += fmt.Sprintf("\n--- %s:\n%s", strings.TrimPrefix(l, nd.dir), tail(l, 5))
				}
			}
			if crashing != "" {
				t.Fatalf("pods %v: %s's container keeps failing:\n%s", names, crashing, out)
			}
			t.Fatalf("pods %v not all Running and Ready within %v:\n%s", names, within, out)
		}
		time.Sleep(time.Second)
	}
}

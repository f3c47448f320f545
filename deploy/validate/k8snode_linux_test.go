package validate

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// node is one Kubernetes node of the test: containerd (with runc and the
// CNI bridge), the kubelet and kube-proxy, in node n's network namespace
// and in a mount and a PID namespace of their own, which hold every mount
// they make and every process they start (shims and containers
// included); the kubelet's cgroups are beneath the test's own.
type node struct {
	n      int
	name   string   // its Node's name
	ns     string   // its network namespace
	dir    string   // containerd's root and state, the kubelet's root, logs
	cgroup string   // the kubelet's cgroupRoot, the same path in every hierarchy
	made   []string // cgroup directories made for cgroupRoot, outermost first
	init   *daemon  // the namespaces' first process: when it ends, they all do
	sock   string   // containerd's socket
}

// nodeInit is the node's first process, a shell in its new mount and PID
// namespaces. It gives the node its own /run, /var/lib and /var/log (the
// places containerd, the CNI plugins and the kubelet write to by default,
// the host's untouched), a sysfs of its network namespace (the CNI plugins
// and cAdvisor read network devices there) with the cgroup hierarchies
// kept, and the kernel settings the kubelet insists on, then starts the
// three daemons and ends when one of them does.
const nodeInit = `set -eu
mkdir -p "$D/cgroup" "$D/sysctl"
mount --rbind /sys/fs/cgroup "$D/cgroup"
umount -l /sys
mount -t sysfs sysfs /sys
mount --move "$D/cgroup" /sys/fs/cgroup
for d in /run /var/lib /var/log; do mount -t tmpfs -o mode=755 k8stest "$d"; done
# The kubelet (protectKernelDefaults) refuses to start unless these hold
# its values, and would otherwise write them, machine-wide: here files
# holding them are bound over the node's view of them.
for kv in vm/overcommit_memory=1 vm/panic_on_oom=0 kernel/panic=10 kernel/panic_on_oops=1 \
	kernel/keys/root_maxkeys=1000000 kernel/keys/root_maxbytes=25000000; do
	k=${kv%%=*}
	f=$D/sysctl/$(echo "$k" | tr / .)
	echo "${kv#*=}" >"$f"
	mount --bind "$f" "/proc/sys/$k"
done
# Those binds cover parts of /proc, and the kernel lets a user namespace
# (a pod's with hostUsers: false) mount a proc only while some proc in its
# mount namespace is whole: this one is.
mkdir -p "$D/proc"
mount -t proc proc "$D/proc"
containerd --config "$D/containerd.toml" >"$D/containerd.log" 2>&1 &
for i in $(seq 300); do [ -S "$D/containerd.sock" ] && break; sleep 0.1; done
kubelet --config="$D/kubelet.yaml" --kubeconfig="$D/kubelet.kubeconfig" --root-dir="$D/kubelet" \
	--node-ip="$NODE_IP" --hostname-override="$NODE_NAME" >"$D/kubelet.log" 2>&1 &
kube-proxy --config="$D/kube-proxy.yaml" >"$D/kube-proxy.log" 2>&1 &
# The end of this shell ends every process of the node: the kernel kills
# the rest of a PID namespace with its first process.
trap 'exit 0' TERM
set +e
wait -n
echo "k8stest node: a daemon ended with status $?" >&2
exit 1
`

// startNode starts node n (from 1) of the fabric f against the control
// plane cp, with the Kubernetes binaries in kbin and the runtime's in
// nbin, and stops it at the test's end, checking that it left nothing.
func startNode(t *testing.T, f *fabric, cp *controlPlane, n int, kbin, nbin string) *node {
	t.Helper()
	nd := &node{n: n, name: fmt.Sprintf("k8stest-n%d", n), ns: f.nodes[n-1]}
	// Short: a unix socket's path has room for 107 bytes.
	dir, err := os.MkdirTemp("", "k8sn")
	if err != nil {
		t.Fatal(err)
	}
	// The containers' root files are reached by their mapped users
	// (hostUsers: false) through here.
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	nd.dir, nd.sock = dir, filepath.Join(dir, "containerd.sock")
	t.Cleanup(func() { nd.cleanup(t) })
	nd.makeCgroupRoot(t)

	p := cp.pki
	p.issue(t, nd.name, "system:node:"+nd.name, []string{"system:nodes"})
	nd.write(t, "kubelet.kubeconfig", readFile(t, p.kubeconfig(t, nd.name, cp.server)))
	p.issue(t, "kube-proxy", "system:kube-proxy", nil)
	nd.write(t, "kube-proxy.kubeconfig", readFile(t, p.kubeconfig(t, "kube-proxy", cp.server)))
	nd.write(t, "resolv.conf", "")
	nd.write(t, "containerd.toml", nd.containerdConfig(nbin))
	nd.write(t, "cni/10-k8stest.conflist", nd.cniConfig())
	nd.write(t, "kubelet.yaml", nd.kubeletConfig(p.path("ca.crt")))
	nd.write(t, "kube-proxy.yaml", nd.proxyConfig())

	cmd := exec.Command("nsenter", "--net=/run/netns/"+nd.ns, "--",
		"unshare", "--mount", "--propagation", "private", "--pid", "--fork", "--mount-proc", "--kill-child",
		"--", "bash", "-c", nodeInit)
	cmd.Env = append(os.Environ(), "D="+dir, "PATH="+nbin+":"+kbin+":"+os.Getenv("PATH"),
		"NODE_IP="+nodeIP(n), "NODE_NAME="+nd.name)
	nd.init = startProcess(t, dir, "node", cmd)
	// unshare ignores SIGTERM while it waits for its child; killing it
	// kills the child (--kill-child), the PID namespace's first
	// process, and with it every process of the node.
	nd.init.grace = 0
	return nd
}

// write writes a file of the node's directory.
func (nd *node) write(t *testing.T, name, text string) {
	t.Helper()
	path := filepath.Join(nd.dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// containerdConfig is containerd's configuration: everything it keeps
// beneath the node's directory, runc from nbin with cgroupfs (the
// kubelet's driver), the pods' network namespaces under its state
// directory, and the test's own pause image as the pods' sandbox, so that
// no registry is asked.
func (nd *node) containerdConfig(nbin string) string {
	return fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.nri.v1.nri"]
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[debug]
  address = ""
[metrics]
  address = ""
[plugins.'io.containerd.internal.v1.opt']
  path = %[5]q
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %[6]q
[plugins.'io.containerd.cri.v1.runtime']
  enable_selinux = false
  netns_mounts_under_state_dir = true
  # The kubelet gives a pod's sandbox -998; lowering a score needs
  # CAP_SYS_RESOURCE, which these machines withhold even from root.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = %[7]q
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%[8]q]
    conf_dir = %[9]q
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`, filepath.Join(nd.dir, "root"), filepath.Join(nd.dir, "state"), nd.sock,
		filepath.Join(nd.dir, "containerd.ttrpc.sock"), filepath.Join(nd.dir, "opt"),
		pauseRef, filepath.Join(nbin, "runc"), nbin, filepath.Join(nd.dir, "cni"))
}

// cniConfig gives the node's pods addresses of its pod range on a bridge,
// routed (not masqueraded) through the fabric.
func (nd *node) cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "k8stest",
  "plugins": [
    {
      "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}], "dataDir": %q}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, podCIDR(nd.n), filepath.Join(nd.dir, "ipam"))
}

// kubeletConfig is the kubelet's configuration. Beyond the defaults: it
// runs on cgroup v1 (these hosts are hybrid), its cgroups beneath the
// test's; it checks the kernel settings rather than set them; its
// eviction and image collection thresholds are off, for the test's pods
// and images on a shared disk; and the cluster's DNS is CoreDNS on the
// control plane's address.
func (nd *node) kubeletConfig(ca string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[2]q}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
cgroupRoot: %[3]q
failCgroupV1: false
failSwapOn: false
protectKernelDefaults: true
containerRuntimeEndpoint: unix://%[4]s
clusterDomain: cluster.local
clusterDNS: [%[5]q]
resolvConf: %[6]q
podLogsDir: %[7]q
maxPods: 16
evictionHard: {memory.available: 1Mi, nodefs.available: 1%%, nodefs.inodesFree: 1%%, imagefs.available: 1%%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
rotateCertificates: false
nodeStatusUpdateFrequency: 5s
`, nodeIP(nd.n), ca, nd.cgroup, nd.sock, cpIP, filepath.Join(nd.dir, "resolv.conf"), filepath.Join(nd.dir, "pod-logs"))
}

// proxyConfig is kube-proxy's: iptables in the node's network namespace,
// and no conntrack setting, those being the machine's.
func (nd *node) proxyConfig() string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %q}
mode: iptables
hostnameOverride: %s
clusterCIDR: %s.0.0/16
bindAddress: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
`, filepath.Join(nd.dir, "kube-proxy.kubeconfig"), nd.name, podNet, nodeIP(nd.n))
}

// makeCgroupRoot makes the kubelet's cgroupRoot in every hierarchy, as
// one path beneath the test's own cgroup in each: the kubelet takes a
// single path for all. The test's cgroup differs between hierarchies here
// (a memory cgroup of its own, the root in the others), so the path is
// the deepest of them, made in the others too.
func (nd *node) makeCgroupRoot(t *testing.T) {
	t.Helper()
	own := ownCgroups(t)
	deepest := "/"
	for _, c := range own {
		if len(c) > len(deepest) {
			deepest = c
		}
	}
	nd.cgroup = filepath.Join(deepest, fmt.Sprintf("k8stest-%d-%s", os.Getpid(), nd.name))
	for h, c := range own {
		if !strings.HasPrefix(nd.cgroup, strings.TrimSuffix(c, "/")+"/") {
			t.Fatalf("the kubelet's cgroup %s would not be beneath the test's own %s in the %s hierarchy", nd.cgroup, c, h)
		}
		mount := filepath.Join("/sys/fs/cgroup", h)
		// Each directory missing on the way, outermost first; cpuset's
		// need its parent's CPUs and memory nodes before a task may join.
		rel := strings.TrimPrefix(nd.cgroup, "/")
		parts := strings.Split(rel, "/")
		for i := range parts {
			dir := filepath.Join(mount, filepath.Join(parts[:i+1]...))
			if isDir(dir) {
				continue
			}
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatalf("make the kubelet's cgroup: %v", err)
			}
			nd.made = append(nd.made, dir)
			if h == "cpuset" {
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					if b, err := os.ReadFile(filepath.Join(filepath.Dir(dir), f)); err == nil {
						os.WriteFile(filepath.Join(dir, f), b, 0o644)
					}
				}
			}
		}
	}
}

// ownCgroups is this process's cgroup in each hierarchy mounted under
// /sys/fs/cgroup, by the hierarchy's directory name (unified for a hybrid
// host's v2 one).
func ownCgroups(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	byController := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			// A hybrid host's v2 hierarchy, where runc makes each
			// container's cgroup too.
			byController["unified"] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			byController[strings.TrimPrefix(c, "name=")] = parts[2]
		}
	}
	own := map[string]string{}
	mounts, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, m := range mounts {
		if c, ok := byController[filepath.Base(m)]; ok && isDir(m) {
			own[filepath.Base(m)] = c
		}
	}
	if _, v2 := own["unified"]; len(own) == 0 || v2 && len(own) == 1 {
		t.Skip("no cgroup v1 hierarchy under /sys/fs/cgroup: the test's nodes run the kubelet on cgroup v1 (a cgroup v2 host needs its own node setup)")
	}
	return own
}

// cleanup stops the node and checks that it left no process, mount or
// cgroup behind, removing what it can.
func (nd *node) cleanup(t *testing.T) {
	if nd.init != nil {
		nd.init.stop(t)
	}
	var left []int
	for i := 0; i < 100; i++ {
		if left = processesNaming(nd.dir); len(left) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, pid := range left {
		t.Errorf("process %d of node %s outlived it", pid, nd.name)
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil && strings.Contains(string(b), nd.dir) {
		t.Errorf("mounts left beneath %s:\n%s", nd.dir, b)
	}
	if nd.cgroup != "" {
		mounts, _ := filepath.Glob("/sys/fs/cgroup/*")
		for _, m := range mounts {
			dir := filepath.Join(m, nd.cgroup)
			if !isDir(dir) {
				continue
			}
			var err error
			for i := 0; i < 50; i++ {
				if err = removeCgroupTree(dir); err == nil || errors.Is(err, os.ErrNotExist) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("node %s's cgroup %s is left: %v", nd.name, dir, err)
			}
		}
		for i := len(nd.made) - 1; i >= 0; i-- {
			// Only what is still empty: another process may have put a
			// cgroup of its own beside ours in a directory made here.
			if err := syscall.Rmdir(nd.made[i]); err != nil && !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.EBUSY) && !errors.Is(err, syscall.ENOTEMPTY) {
				t.Errorf("remove %s: %v", nd.made[i], err)
			}
		}
	}
	if t.Failed() {
		for _, l := range []string{"node.log", "containerd.log", "kubelet.log", "kube-proxy.log"} {
			t.Logf("node %s's %s ends:\n%s", nd.name, l, tail(filepath.Join(nd.dir, l), 10))
		}
		if os.Getenv("K8S_KEEP") != "" {
			t.Logf("node %s's files are kept in %s (K8S_KEEP)", nd.name, nd.dir)
			return
		}
	}
	if err := os.RemoveAll(nd.dir); err != nil {
		t.Errorf("remove node %s's files: %v", nd.name, err)
	}
}

#!/usr/bin/env bash
# make test-k8s: deploy/kubernetes on a real Kubernetes, started and stopped
# here. Builds (or finds cached) the control plane and kubelet (build.sh) and
# the node's runtime (build-node.sh), runs deploy/validate's cluster tests
# with them (TestFabric, TestToolserverImage, TestControlPlaneAdmitsDeploy,
# TestKubernetes), then the manifest mutants in mutants/ here, each of which
# removes a setting sandboxes need and must make TestKubernetes fail. Prints
# what each step took. As root (network, mount and PID namespaces, cgroups
# and the kubelet); installs Debian's iproute2, iptables and util-linux if
# missing. RUN narrows the tests (a go test -run regex); MUTANTS=0 leaves
# the mutants out.
set -euo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}
export PATH=$PATH:/usr/local/go/bin:/usr/sbin:/sbin
if [ "$(id -u)" -ne 0 ]; then
	echo "test-k8s: run as root: the test's cluster needs network, mount and PID namespaces, cgroups and a kubelet" >&2
	exit 1
fi

times=()
step() {
	local name=$1 began=$SECONDS
	shift
	echo "+ $*"
	"$@"
	times+=("$(printf '%-40s %5ds' "$name" $((SECONDS - began)))")
}

need=()
command -v ip >/dev/null || need+=(iproute2)
command -v iptables >/dev/null || need+=(iptables)
{ command -v nsenter && command -v unshare; } >/dev/null || need+=(util-linux)
if [ ${#need[@]} -gt 0 ]; then
	step "apt-get install ${need[*]}" bash -c "apt-get install -y -q --no-install-recommends ${need[*]} </dev/null || { apt-get update -q && apt-get install -y -q --no-install-recommends ${need[*]} </dev/null; }"
fi

step "control plane and kubelet (build.sh)" bash deploy/k8stest/build.sh </dev/null
step "node runtime (build-node.sh)" bash deploy/k8stest/build-node.sh </dev/null
K8S_BIN=$(bash deploy/k8stest/build.sh -print)
K8S_NODE_BIN=$(bash deploy/k8stest/build-node.sh -print)
export K8S_BIN K8S_NODE_BIN

run=${RUN:-^(TestFabric|TestToolserverImage|TestControlPlaneAdmitsDeploy|TestKubernetes)$}
step "deploy/validate: go test -run '$run'" \
	bash -c "cd deploy/validate && $GO test -count=1 -v -timeout 30m -run '$run' ."
if [ "${MUTANTS:-1}" != 0 ]; then
	step "manifest mutants (mutants/run.sh)" env GO="$GO" mutants/run.sh deploy/k8stest/mutants/*.patch
fi

echo "test-k8s: passed; what each step took:"
printf '  %s\n' "${times[@]}"

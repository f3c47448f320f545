#!/usr/bin/env bash
# Builds the Kubernetes control plane for make test-k8s: etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
# kube-proxy and kubectl, all from the Go module proxy (GitHub is not
# needed). The Kubernetes binaries are k8s.io/kubernetes' own cmd/ packages,
# built by import path inside the wrapper module ./kube, whose replaces
# point each staging module at its published version; etcd is
# go.etcd.io/etcd/server/v3's etcdmain, through the one-line main in the
# wrapper module ./etcd. Versions are the ones in those go.mod files.
#
# Binaries go to ${K8S_CACHE:-/var/cache/fumehood-k8s}/cp-<key>/bin, where
# <key> is a sha256 of the Go version, this script and the wrappers'
# go.mod, go.sum and Go files; when that directory is complete the build is
# skipped. A build goes to a temporary directory renamed into place at the
# end, so an interrupted build is never taken for a complete one.
#
# Cold, it takes about 20 minutes on 2 cores and about 5 GB of disk
# (module cache plus Go build cache) plus about 0.8 GB of binaries; warm, a
# second or so. Static (CGO_ENABLED=0), -trimpath. Needs no stdin; runs as
# root in CI (CI=true) with the default cache directory. Usage:
# build.sh [-print]; -print prints the bin directory and exits 0 if it is
# complete, 1 if not.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
go=${GO:-go}
start=$(date +%s)

kube_cmds=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
etcd_cmds=(etcd)

key=$(
	cd "$here"
	{
		"$go" env GOVERSION GOOS GOARCH
		sha256sum build.sh kube/go.mod kube/go.sum kube/*.go \
			etcd/go.mod etcd/go.sum etcd/cmd/*/*.go
	} </dev/null | sha256sum | cut -c1-16
)
out=${K8S_CACHE:-/var/cache/fumehood-k8s}/cp-$key
bin=$out/bin

complete() {
	[ -f "$bin/.complete" ] || return 1
	for c in "${kube_cmds[@]}" "${etcd_cmds[@]}"; do
		[ -x "$bin/$c" ] || return 1
	done
}

if [[ "${1:-}" == -print ]]; then
	echo "$bin"
	complete
	exit
fi

if complete; then
	echo "k8stest: binaries up to date in $bin (checked in $(($(date +%s) - start))s)"
	exit 0
fi

mkdir -p "$out"
tmp=$(mktemp -d "$out/bin.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

export CGO_ENABLED=0 GOFLAGS=-mod=readonly

# The version the components report (kubectl version, /version, the
# version skew checks), stamped as Kubernetes' own release build does.
kver=$(cd "$here/kube" && "$go" list -m -f '{{.Version}}' k8s.io/kubernetes </dev/null)
kmajor=${kver#v}; kmajor=${kmajor%%.*}
kminor=${kver#v*.}; kminor=${kminor%%.*}
vpkg=k8s.io/component-base/version
ldflags="-s -w -X $vpkg.gitVersion=$kver -X $vpkg.gitMajor=$kmajor -X $vpkg.gitMinor=$kminor -X $vpkg.gitTreeState=clean"

pkgs=()
for c in "${kube_cmds[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done

echo "k8stest: building ${kube_cmds[*]} ($kver) and ${etcd_cmds[*]} into $bin"
(cd "$here/kube" && "$go" build -trimpath -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}" </dev/null)
(cd "$here/etcd" && "$go" build -trimpath -ldflags "-s -w" -o "$tmp/" ./cmd/... </dev/null)

touch "$tmp/.complete"
rm -rf "$bin"
mv "$tmp" "$bin"
trap - EXIT
echo "k8stest: built in $(($(date +%s) - start))s: $bin"
ls -l "$bin"

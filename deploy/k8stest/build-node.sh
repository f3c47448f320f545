#!/usr/bin/env bash
# build-node.sh: builds the container runtime a Kubernetes test node needs
# for `make test-k8s`: containerd, ctr, containerd-shim-runc-v2, runc, the CNI
# plugins bridge, host-local, loopback and portmap, and CoreDNS.
#
# From where: the Go module proxy only. node/go.mod pins the upstream modules
# (containerd/v2 v2.4.2, opencontainers/runc v1.5.3, containernetworking/plugins
# v1.10.0, coredns v1.15.0); each binary is the upstream main package built by
# import path, so this tree holds no copied code. runc needs cgo and Debian's
# libseccomp-dev (seccomp), installed here if missing. See node/README.md.
#
# Where cached: ${K8S_CACHE:-/var/cache/fumehood-k8s}/node-<key>/bin, <key> the
# sha256 of node/'s go.mod, go.sum and *.go and of this script's non-comment
# lines; a complete directory (marked by .complete) is reused and the build
# skipped. It is built in a temp dir beside it and renamed at the end.
#
# Time and disk (2 cores shared with another Go build): cold 314 s with an
# empty Go build cache (module sources already fetched; CoreDNS alone ~200 s),
# 11 s for a new key with a warm Go build cache, 0.01 s on a cache hit. bin is
# 173 MB (9 static binaries; CoreDNS 79 MB, containerd 40 MB); the Go build
# cache grows ~1.4 GB, and CoreDNS pulls the cloud SDKs into the module cache.
# node/smoke.sh BIN proves the result runs a container in isolation.
#
# Runs as root with no stdin (CI=true is fine). Usage: build-node.sh [-print]
#   -print: print the bin directory and exit 0 if it is complete, 1 if not.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mod="$here/node"
cache=${K8S_CACHE:-/var/cache/fumehood-k8s}
export PATH="/usr/local/go/bin:$PATH"
# readonly: a build that would change go.sum fails instead of changing the key.
export GOFLAGS=-mod=readonly GOTOOLCHAIN=local

key=$( (cd "$mod" && find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) -print0 |
	LC_ALL=C sort -z | xargs -0 sha256sum; grep -v '^[[:space:]]*#' "$here/build-node.sh" | sha256sum) | sha256sum | cut -c1-16)
out="$cache/node-$key"
bin="$out/bin"

if [[ "${1:-}" == -print ]]; then
	echo "$bin"
	[[ -f "$out/.complete" ]]
	exit
fi

if [[ -f "$out/.complete" ]]; then
	echo "build-node: cached: $bin (key $key)"
	exit 0
fi

start=$(date +%s)
mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.node-$key.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"

# runc's seccomp links Debian's libseccomp, found through pkg-config.
if ! dpkg -s libseccomp-dev pkg-config >/dev/null 2>&1; then
	echo "build-node: installing libseccomp-dev and pkg-config (runc's seccomp)"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -q libseccomp-dev pkg-config </dev/null >/dev/null ||
		{ apt-get update -q >/dev/null && apt-get install -y -q libseccomp-dev pkg-config </dev/null >/dev/null; }
fi

cd "$mod"

static=(-trimpath -ldflags '-s -w -extldflags -static')

# Pure Go: static with cgo off (containerd's btrfs snapshotter, cgo-only, drops out).
pure=(
	containerd=github.com/containerd/containerd/v2/cmd/containerd
	ctr=github.com/containerd/containerd/v2/cmd/ctr
	containerd-shim-runc-v2=github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2
	bridge=github.com/containernetworking/plugins/plugins/main/bridge
	loopback=github.com/containernetworking/plugins/plugins/main/loopback
	host-local=github.com/containernetworking/plugins/plugins/ipam/host-local
	portmap=github.com/containernetworking/plugins/plugins/meta/portmap
	coredns=github.com/coredns/coredns
)
for p in "${pure[@]}"; do
	name=${p%%=*} path=${p#*=}
	echo "build-node: $name <- $path"
	CGO_ENABLED=0 go build "${static[@]}" -tags 'netgo osusergo no_btrfs' -o "$tmp/bin/$name" "$path"
done

# runc: cgo (its nsexec is C) and libseccomp, linked statically.
echo "build-node: runc <- github.com/opencontainers/runc"
CGO_ENABLED=1 go build "${static[@]}" -tags 'seccomp netgo osusergo urfave_cli_no_docs' \
	-o "$tmp/bin/runc" github.com/opencontainers/runc

"$tmp/bin/runc" --version >/dev/null
"$tmp/bin/containerd" --version >/dev/null

go list -m all >"$tmp/modules.txt"
touch "$tmp/.complete"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
chmod 755 "$out"

end=$(date +%s)
echo "build-node: built $bin in $((end - start)) s ($(du -sh "$bin" | cut -f1))"

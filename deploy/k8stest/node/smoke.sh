#!/usr/bin/env bash
# smoke.sh BIN: runs the containerd built by ../build-node.sh in isolation and
# runs one container with ctr. Everything lives in a temp dir: containerd's
# root, state, sockets and config; /run is a tmpfs in a private mount
# namespace (the shim's sockets and runc's state land there); the network is a
# new namespace with only loopback; the container's cgroup is a relative path,
# which runc puts beneath its own (so this script's) cgroup in each hierarchy.
# The image is one layer holding Debian's busybox-static, its OCI layout
# written here by hand. Needs root, unshare, busybox-static.
set -euo pipefail
bin=$(cd "${1:?usage: smoke.sh BIN}" && pwd)
[[ -x /bin/busybox ]] || { echo "smoke: /bin/busybox missing (apt-get install busybox-static)" >&2; exit 1; }
T=$(mktemp -d /tmp/k8snode-smoke.XXXXXX)
cg=k8snode-smoke-$$

if [[ "${SMOKE_INNER:-}" != 1 ]]; then
	trap 'rm -rf "$T"' EXIT
	# private mount + net namespaces; everything mounted inside dies with them
	SMOKE_INNER=1 SMOKE_T="$T" SMOKE_CG="$cg" unshare --mount --net --propagation private -- "$0" "$bin"
	rc=$?
	exit $rc
fi
rmdir "$T"; T=$SMOKE_T cg=$SMOKE_CG
# the user-namespace container (root = uid 100000 here) must reach its rootfs under $T
chmod 711 "$T"
ip link set lo up
mount -t tmpfs -o mode=755 smoke-run /run

# --- image: OCI layout, one uncompressed layer (bin/busybox, bin/sh)
img=$T/img; mkdir -p "$img/blobs/sha256" "$T/layer/bin"
cp /bin/busybox "$T/layer/bin/busybox"; ln -s busybox "$T/layer/bin/sh"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$T/layer" -cf "$T/layer.tar" bin
blob() { local d; d=$(sha256sum "$1" | cut -d' ' -f1); cp "$1" "$img/blobs/sha256/$d"; echo "$d"; }
ld=$(blob "$T/layer.tar"); ls=$(stat -c %s "$T/layer.tar")
printf '{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/bin"],"Cmd":["/bin/sh"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$ld" >"$T/config.json"
cd_=$(blob "$T/config.json"); cs=$(stat -c %s "$T/config.json")
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' "$cd_" "$cs" "$ld" "$ls" >"$T/manifest.json"
md=$(blob "$T/manifest.json"); ms=$(stat -c %s "$T/manifest.json")
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"amd64","os":"linux"},"annotations":{"io.containerd.image.name":"docker.io/fumehood/busybox:smoke","org.opencontainers.image.ref.name":"smoke"}}]}' "$md" "$ms" >"$img/index.json"
echo '{"imageLayoutVersion":"1.0.0"}' >"$img/oci-layout"
tar -C "$img" -cf "$T/img.tar" .

# --- containerd, all under $T
cat >"$T/config.toml" <<TOML
version = 3
root = "$T/root"
state = "$T/state"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.images", "io.containerd.cri.v1.runtime", "io.containerd.nri.v1.nri", "io.containerd.podsandbox.controller.v1.podsandbox", "io.containerd.sandbox.controller.v1.shim"]
[grpc]
  address = "$T/containerd.sock"
[ttrpc]
  address = "$T/containerd.ttrpc.sock"
[debug]
  address = ""
[metrics]
  address = ""
[plugins.'io.containerd.internal.v1.opt']
  path = "$T/opt"
TOML
export PATH="$bin:$PATH"
containerd --config "$T/config.toml" >"$T/containerd.log" 2>&1 &
cpid=$!
stop() {
	local rc=$?
	[[ $rc == 0 ]] || { echo "smoke: failed ($rc); containerd log:" >&2; tail -30 "$T/containerd.log" >&2; }
	kill "$cpid" 2>/dev/null && wait "$cpid" 2>/dev/null || true
	local m; m=$(awk -F: '$2=="memory"{print $3}' /proc/self/cgroup)
	for c in "$cg" "$cg-userns" "$cg-idmap"; do rmdir /sys/fs/cgroup/*/"$c" "/sys/fs/cgroup/memory$m/$c" 2>/dev/null || true; done
}
trap stop EXIT
ctr() { command ctr --address "$T/containerd.sock" --namespace smoke "$@"; }
for _ in $(seq 50); do ctr version >/dev/null 2>&1 && break; sleep 0.2; done
ctr version
ctr images import "$T/img.tar"
ctr images ls
ctr run --rm --cgroup "$cg" --runc-binary "$bin/runc" --runc-root /run/smoke-runc \
	docker.io/fumehood/busybox:smoke smoke1 /bin/sh -c 'echo hello from containerd; cat /proc/self/cgroup; ip addr 2>/dev/null | grep -c inet || true'
echo "smoke: ok"

# --- user namespace (what kubelet asks for with hostUsers: false): reported,
# not required. Plain --uidmap makes ctr chown a copy of the snapshot;
# --remap-labels hands the mapping to the overlay snapshotter, which then
# mounts the layers idmapped (the way the CRI does for hostUsers: false).
if ctr run --rm --cgroup "$cg-userns" --runc-binary "$bin/runc" --runc-root /run/smoke-runc \
	--uidmap 0:100000:65536 --gidmap 0:100000:65536 \
	docker.io/fumehood/busybox:smoke smoke2 /bin/sh -c 'echo hello from a user namespace; cat /proc/self/uid_map; ls -ln /bin'; then
	echo "smoke: userns ok"
else
	echo "smoke: userns FAILED (rc $?)"
fi
if ctr run --rm --cgroup "$cg-idmap" --runc-binary "$bin/runc" --runc-root /run/smoke-runc \
	--uidmap 0:100000:65536 --gidmap 0:100000:65536 --remap-labels \
	docker.io/fumehood/busybox:smoke smoke3 /bin/sh -c 'echo hello from an idmapped rootfs; cat /proc/self/uid_map; ls -ln /bin/busybox'; then
	echo "smoke: userns idmapped ok"
else
	echo "smoke: userns idmapped FAILED (rc $?)"
fi

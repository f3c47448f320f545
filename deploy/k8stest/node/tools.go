//go:build tools

// Package node pins the upstream programs a Kubernetes test node runs
// (containerd, ctr, the runc shim, runc, four CNI plugins, CoreDNS).
// Nothing here is linked into the sandbox library or CLI: build-node.sh
// builds each main package below by import path, from the module proxy.
package node

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/main/bridge"
	_ "github.com/containernetworking/plugins/plugins/main/loopback"
	_ "github.com/containernetworking/plugins/plugins/meta/portmap"
	_ "github.com/coredns/coredns"
	_ "github.com/opencontainers/runc"
)

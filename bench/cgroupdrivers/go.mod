module github.com/fumehood/sandbox/bench/cgroupdrivers

go 1.26.0

require (
	github.com/containerd/cgroups/v3 v3.1.3
	github.com/fumehood/sandbox v0.0.0
	github.com/opencontainers/cgroups v0.1.0
	github.com/opencontainers/runtime-spec v1.3.0
	golang.org/x/sys v0.49.0
)

require (
	github.com/cilium/ebpf v0.17.3 // indirect
	github.com/containerd/log v0.1.0 // indirect
	github.com/coreos/go-systemd/v22 v22.6.0 // indirect
	github.com/cyphar/filepath-securejoin v0.4.1 // indirect
	github.com/docker/go-units v0.5.0 // indirect
	github.com/godbus/dbus/v5 v5.1.0 // indirect
	github.com/moby/sys/mountinfo v0.7.2 // indirect
	github.com/moby/sys/userns v0.1.0 // indirect
	github.com/sirupsen/logrus v1.9.4 // indirect
	google.golang.org/protobuf v1.35.2 // indirect
)

replace github.com/fumehood/sandbox => ../..

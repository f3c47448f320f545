// Package cgroupdrivers compares cgroup drivers for the library's per-run
// cgroup: its own internal/cgroup, github.com/opencontainers/cgroups and
// github.com/containerd/cgroups/v3. It is a module of its own so that
// neither library enters the library's go.mod. The benchmarks are in
// lifecycle_test.go, the size programs under size/, and run.sh prints the
// tables (README.md).
package cgroupdrivers

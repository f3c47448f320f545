//go:build linux

package sandbox

import "testing"

// BenchmarkRunTruePooled is the cost of one run taken from a pool of
// prepared sandboxes: what is left of a start once the sandbox is built.
func BenchmarkRunTruePooled(b *testing.B) { benchRun(b, Options{Pool: 2}, "/bin/true") }

//go:build !unix

package egress

// readable says a read may be tried: without a way to peek, a connection
// waits for data holding its buffer.
func readable(fd uintptr) bool { return true }

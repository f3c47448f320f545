//go:build !linux

package sandbox

// Changes is not available on this system.
func (s *Sandbox) Changes(since *Snapshot) ([]Change, int, error) { return nil, 0, unsupported() }

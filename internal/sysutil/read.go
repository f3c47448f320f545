package sysutil

import (
	"io"
	"syscall"
)

// ReadLimited reads r to its end, up to limit bytes (EFBIG beyond).
func ReadLimited(r io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err == nil && int64(len(data)) > limit {
		err = syscall.EFBIG
	}
	return data, err
}

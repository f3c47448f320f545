//go:build !linux

package report

import "syscall"

// Other systems run no sandbox, so no Denial names their errnos: each is
// "errno N".
func errnoName(syscall.Errno) string { return "" }

func errnoValue(string) syscall.Errno { return 0 }

// Package sysutil holds the small system helpers that more than one of the
// sandbox's processes needs: the caller, the spawner, the launcher and the
// workspace keeper. It imports nothing of the sandbox's own, so any
// package may use it.
package sysutil

package service

import (
	"maps"
	"slices"
	"strings"
	"syscall"
)

// signals are the signals a client may send a process in its session, by
// name without SIG.
var signals = map[string]syscall.Signal{
	"HUP": syscall.SIGHUP, "INT": syscall.SIGINT, "QUIT": syscall.SIGQUIT, "KILL": syscall.SIGKILL,
	"USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "TERM": syscall.SIGTERM,
	"STOP": syscall.SIGSTOP, "CONT": syscall.SIGCONT,
}

// signalOf reads a signal's name: "TERM" or "SIGTERM", either case.
func signalOf(name string) (syscall.Signal, *apiError) {
	sig, ok := signals[strings.TrimPrefix(strings.ToUpper(name), "SIG")]
	if !ok {
		return 0, badField("signal", "%q: want one of %s", name, strings.Join(slices.Sorted(maps.Keys(signals)), ", "))
	}
	return sig, nil
}

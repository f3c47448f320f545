package sysutil

import (
	"strconv"
	"strings"
)

// NSInitWithDefault says whether the /proc/PID/status text describes the
// init of a PID namespace (its innermost pid is 1) whose action for the
// signal numbered sig is the default one: neither caught nor ignored. The
// kernel drops a signal sent to such an init from outside its namespace,
// unless it is SIGKILL or SIGSTOP, where the same signal would end or stop
// any other process.
func NSInitWithDefault(status string, sig int) bool {
	init := false
	for line := range strings.Lines(status) {
		key, val, _ := strings.Cut(strings.TrimSpace(line), ":")
		if fields := strings.Fields(val); key == "NSpid" {
			init = len(fields) > 1 && fields[len(fields)-1] == "1"
		}
	}
	return init && DefaultAction(status, sig)
}

// DefaultAction says whether the /proc/PID/status text describes a
// process whose action for the signal numbered sig is the default one:
// neither caught nor ignored.
func DefaultAction(status string, sig int) bool {
	if sig < 1 || sig > 64 {
		return false // no signal, or none the kernel has
	}
	for line := range strings.Lines(status) {
		key, val, _ := strings.Cut(strings.TrimSpace(line), ":")
		if key != "SigIgn" && key != "SigCgt" {
			continue
		}
		mask, err := strconv.ParseUint(strings.Join(strings.Fields(val), ""), 16, 64)
		if err != nil || mask&(1<<(uint(sig)-1)) != 0 {
			return false
		}
	}
	return true
}

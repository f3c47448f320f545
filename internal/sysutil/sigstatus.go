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
	var init, set bool
	for line := range strings.Lines(status) {
		key, val, _ := strings.Cut(strings.TrimSpace(line), ":")
		fields := strings.Fields(val)
		switch key {
		case "NSpid":
			init = len(fields) > 1 && fields[len(fields)-1] == "1"
		case "SigIgn", "SigCgt":
			mask, err := strconv.ParseUint(strings.Join(fields, ""), 16, 64)
			if err != nil || mask&(1<<(uint(sig)-1)) != 0 {
				set = true
			}
		}
	}
	return init && !set
}

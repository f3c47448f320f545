package main

import (
	"testing"
	"time"
)

// TestParseStat: the times come from after the command name, which may
// hold spaces and parentheses.
func TestParseStat(t *testing.T) {
	b := []byte("4242 (a) b (c) S 1 4242 4242 0 -1 4194560 100 0 0 0 7 3 5 2 20 0 9 0 1000 0 0\n")
	st, ok := parseStat(b)
	want := taskStat{own: cpuSplit{70 * time.Millisecond, 30 * time.Millisecond}, reaped: cpuSplit{50 * time.Millisecond, 20 * time.Millisecond}}
	if !ok || st != want {
		t.Errorf("parseStat: %+v, %v; want %+v", st, ok, want)
	}
	if _, ok := parseStat([]byte("4242 (a) S 1")); ok {
		t.Error("parseStat of a short line: ok")
	}
}

// TestParseProcStat: busy time is user, nice, system, irq, softirq and
// steal of the "cpu" line; idle, iowait and guest time are left out.
func TestParseProcStat(t *testing.T) {
	b := []byte("cpu  100 2 30 9000 50 4 6 8 70 0\ncpu0 50 1 15 4500 25 2 3 4 35 0\n")
	if d, ok := parseProcStat(b); !ok || d != 150*clockTick {
		t.Errorf("parseProcStat: %v, %v; want %v", d, ok, 150*clockTick)
	}
	if d, ok := parseSchedstat([]byte("8713880 40431718 166\n")); !ok || d != 8713880 {
		t.Errorf("parseSchedstat: %v, %v; want 8.71388ms", d, ok)
	}
	if d, ok := parseV2Usage([]byte("usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n")); !ok || d != 1500*time.Microsecond {
		t.Errorf("parseV2Usage: %v, %v; want 1.5ms", d, ok)
	}
}

package main

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// TestPickRows: -rows keeps the rows it names, in the table's order, with
// floor and bwrap; empty keeps all; a row that does not exist is an error
// naming it.
func TestPickRows(t *testing.T) {
	all := []*row{{name: "floor"}, {name: "live"}, {name: "bwrap"}, {name: "cold"}, {name: "cli"}, {name: "cliimg"}}
	for _, c := range []struct {
		names string
		want  []string
	}{
		{"", []string{"floor", "live", "bwrap", "cold", "cli", "cliimg"}},
		{"cliimg,cli", []string{"floor", "bwrap", "cli", "cliimg"}},
		{"cold", []string{"floor", "bwrap", "cold"}},
	} {
		got, err := pickRows(all, c.names)
		if err != nil || !slices.Equal(rowNames(got), c.want) {
			t.Errorf("-rows %q: %q, %v; want %q", c.names, rowNames(got), err, c.want)
		}
	}
	if _, err := pickRows(all, "cli,clim"); err == nil || !strings.Contains(err.Error(), `"clim"`) {
		t.Errorf("-rows cli,clim: %v, want an error naming clim", err)
	}
}

// TestRatiosOfRowsNotMeasured: a ratio of a row that was not measured is
// NaN, and the ratios line leaves it out.
func TestRatiosOfRowsNotMeasured(t *testing.T) {
	lat := latencies{"floor": {median: 2}, "cli": {median: 4}}
	if r := lat.ratio("cli", "floor"); r != 2 {
		t.Errorf("cli/floor = %v, want 2", r)
	}
	if r := lat.ratio("cliimg", "cli"); !math.IsNaN(r) {
		t.Errorf("cliimg/cli with no cliimg = %v, want NaN", r)
	}
	tput := throughputs{{"cli", 2}: {runs: 10, elapsed: 1e9}}
	if r := tput.ratio("cold", "cli", 2); !math.IsNaN(r) {
		t.Errorf("tput cold/cli with no cold = %v, want NaN", r)
	}
}

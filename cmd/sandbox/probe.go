package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/fumehood/sandbox"
)

// probeFlags are the flags of "sandbox probe".
type probeFlags struct {
	fs   *flag.FlagSet
	json bool
}

func newProbeFlags() *probeFlags {
	f := &probeFlags{fs: flag.NewFlagSet("probe", flag.ContinueOnError)}
	f.fs.SetOutput(io.Discard)
	f.fs.Usage = func() {}
	f.fs.BoolVar(&f.json, "json", false, "print the report as one JSON object")
	return f
}

func printProbeUsage(w io.Writer, f *probeFlags) {
	fmt.Fprint(w, "Usage: sandbox probe [--json]\n\n"+
		"Reports which protections this host can provide to you, with the verdict on its first line.\n"+
		"Exits 0 if a default run works, 2 if only runs with --best-effort do (no writable cgroup\n"+
		"for the limits), 1 if sandboxes cannot run.\n\nFlags:\n")
	printFlags(w, f.fs)
}

// jsonProbe is a sandbox.ProbeReport as --json prints it.
type jsonProbe struct {
	Summary       string      `json:"summary"` // the verdict, as the first line of the text report
	Kernel        string      `json:"kernel"`
	CanRun        bool        `json:"can_run"`         // with --best-effort at least
	CanRunDefault bool        `json:"can_run_default"` // without it: a writable cgroup for the limits exists
	Layers        []jsonLayer `json:"layers"`
}

type jsonLayer struct {
	Name      string `json:"name"`
	Available bool   `json:"available"`
	Detail    string `json:"detail,omitempty"`
}

func probeMain(args []string, s streams) int {
	f := newProbeFlags()
	err := f.fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		printProbeUsage(s.stdout, f)
		return 0
	}
	if err == nil && f.fs.NArg() > 0 {
		err = fmt.Errorf("unexpected argument %q", f.fs.Arg(0))
	}
	if err != nil {
		fmt.Fprintf(s.stderr, "sandbox: probe: %v\n%s", err, seeHelp("probe"))
		return exitFailure
	}
	report, err := sandbox.Probe()
	if err != nil {
		fmt.Fprintln(s.stderr, errorLine(fmt.Errorf("probe: %w", err)))
		return exitFailure
	}
	if f.json {
		out := jsonProbe{Summary: report.Summary(), Kernel: report.Kernel, CanRun: report.CanRun(), CanRunDefault: report.CanRunDefault(),
			Layers: []jsonLayer{}}
		for _, l := range report.Layers {
			out.Layers = append(out.Layers, jsonLayer(l))
		}
		enc := json.NewEncoder(s.stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			fmt.Fprintf(s.stderr, "sandbox: write report: %v\n", err)
			return exitFailure
		}
	} else {
		fmt.Fprint(s.stdout, report) // the verdict first
	}
	switch {
	case !report.CanRun():
		return 1
	case !report.CanRunDefault():
		return exitBestEffortOnly
	}
	return 0
}

// exitBestEffortOnly is the status of "sandbox probe" where only runs with
// --best-effort work.
const exitBestEffortOnly = 2

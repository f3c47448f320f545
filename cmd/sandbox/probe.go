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
		"Reports which protections this host can provide. Exits 0 if sandboxes can run, 1 if not.\n\nFlags:\n")
	printFlags(w, f.fs)
}

// jsonProbe is a sandbox.ProbeReport as --json prints it.
type jsonProbe struct {
	Kernel string      `json:"kernel"`
	CanRun bool        `json:"can_run"`
	Layers []jsonLayer `json:"layers"`
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
		fmt.Fprintf(s.stderr, "sandbox: probe: %v\n\n", err)
		printProbeUsage(s.stderr, newProbeFlags())
		return exitFailure
	}
	report, err := sandbox.Probe()
	if err != nil {
		fmt.Fprintln(s.stderr, errorLine(fmt.Errorf("probe: %w", err)))
		return exitFailure
	}
	if f.json {
		out := jsonProbe{Kernel: report.Kernel, CanRun: report.CanRun(), Layers: []jsonLayer{}}
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
		fmt.Fprint(s.stdout, report)
		if report.CanRun() {
			fmt.Fprintln(s.stdout, "sandboxes can run on this host")
		} else {
			fmt.Fprintln(s.stdout, "sandboxes cannot run on this host: see the layers marked \"no\"")
		}
	}
	if !report.CanRun() {
		return 1
	}
	return 0
}

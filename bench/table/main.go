// Table measures the sandbox's start cost against plain fork+exec and
// against bubblewrap with the same isolation, all in one process run on this
// machine, and prints one fixed-width table. Its last line holds the ratios
// the speed targets are judged by:
//
//	ratios: cold/bwrap=R cli/bwrap=R warm/floor=R live/floor=R image/cold=R cliimg/cli=R oneshot/bwrap=R cli/oneshot=R tput2/bwrap=R cpu/bwrap=R rss1g/rss10m=R seccomp=R
//
// The rows are: floor (fork+exec+wait of /bin/true from Go), bwrap
// (bubblewrap --unshare-all with our mounts, running /bin/true), cold
// (sandbox.New(Options{}).Run of /bin/true through the spawner), warm (the
// same with Options{Pool: 2}), live (the same with Options{Live: true}: a
// command entering one running sandbox), image (cold, in a stored image of
// the host's /bin/true instead of the host's /usr: Options.Root), oneshot (the smallest Go
// command on the library, bench/table/oneshot: one in-process run, then exit), cli (the command-line tool's
// `sandbox run -- /bin/true`, started as a shell starts it) and cliimg (the same in the stored
// image, named by digest: `sandbox run --image NAME@sha256:... -- /bin/true`). The sections are:
//
//   - latency: every iteration runs each row once, starting at a row that
//     rotates, so drift in the machine's load hits every row alike; median
//     and p99, and the medians' ratios to floor and to bwrap;
//   - throughput: runs per second with 1 and 2 concurrent callers, measured
//     in short slices that alternate between rows and caller counts;
//   - cpu by process: the CPU of a run, split between the caller, the
//     spawner, the sandbox's processes, kernel threads and the rest of the
//     machine, in batches of runs of each row taken in turn; cpu/bwrap is
//     cold's total over bwrap's;
//   - caller heap: Run's latency from two worker processes, one holding
//     10 MiB and one 1 GiB of touched heap, each with its own spawner, asked
//     in turn;
//   - seccomp: a getpid loop inside the sandbox with the default filter,
//     with a filter that allows everything (what any filter costs) and with
//     none, in runs taken in turn.
//
// Usage:
//
//	table [-n 200] [-warmup 20] [-duration 1s] [-rounds 6] [-cpu-runs 100] [-seccomp-runs 15] [-calls 2000000] [-rows LIST]
//
// It installs bubblewrap with apt-get when it is missing and it runs as root.
// It exits non-zero only when a command fails, never because of a figure.
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"time"
)

// Hidden flags: the roles the tool re-executes itself in.
var (
	heapWorkerFlag = flag.Int64("heap-worker", 0, "")
	getpidFlag     = flag.Int("getpid", 0, "")
)

var hiddenFlags = map[string]bool{"heap-worker": true, "getpid": true}

// config is the size of the measurement.
type config struct {
	n, warmup   int           // measured and unmeasured latency iterations
	duration    time.Duration // one throughput slice
	rounds      int           // throughput slices per row and caller count; cpu batches per row
	cpuRuns     int           // runs in one cpu batch
	seccompRuns int           // measured runs of each seccomp row
	calls       int           // getpid calls per seccomp run
	rows        string        // the rows measured, comma-separated; empty: all, and every section
}

func main() {
	var c config
	flag.IntVar(&c.n, "n", 200, "measured latency iterations (each runs every row once); also of the heap rows")
	flag.IntVar(&c.warmup, "warmup", 20, "unmeasured iterations before measuring")
	flag.DurationVar(&c.duration, "duration", time.Second, "length of one throughput slice")
	flag.IntVar(&c.rounds, "rounds", 6, "throughput slices of each row and caller count; cpu batches of each row")
	flag.IntVar(&c.cpuRuns, "cpu-runs", 100, "runs in one cpu-by-process batch")
	flag.IntVar(&c.seccompRuns, "seccomp-runs", 15, "measured runs of each seccomp row")
	flag.IntVar(&c.calls, "calls", 2_000_000, "getpid calls per seccomp run")
	flag.StringVar(&c.rows, "rows", "", "measure only these rows (comma-separated; floor and bwrap always), in latency,\n"+
		"throughput and cpu by process alone, e.g. -rows cli,cliimg; empty: every row and section")
	flag.Usage = usage
	flag.Parse()

	var err error
	switch {
	case *getpidFlag > 0:
		getpidLoop(*getpidFlag)
		return
	case *heapWorkerFlag > 0:
		err = heapWorker(*heapWorkerFlag)
	case flag.NArg() > 0:
		err = fmt.Errorf("unexpected arguments %q", flag.Args())
	case c.n < 1 || c.warmup < 0 || c.duration <= 0 || c.rounds < 1 || c.cpuRuns < 1 || c.seccompRuns < 1 || c.calls < 1:
		err = fmt.Errorf("-n, -rounds, -cpu-runs, -seccomp-runs and -calls must be at least 1, -warmup at least 0, -duration positive")
	default:
		err = run(c)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "table:", err)
		os.Exit(1)
	}
}

func usage() {
	out := flag.CommandLine.Output()
	fmt.Fprintln(out, "usage: table [flags]")
	flag.VisitAll(func(f *flag.Flag) {
		if !hiddenFlags[f.Name] {
			fmt.Fprintf(out, "  -%s\t%s (default %s)\n", f.Name, f.Usage, f.DefValue)
		}
	})
}

// run measures every section in turn, printing each as it is done, and
// ends with the ratios line.
func run(c config) error {
	bwrapArgv, err := bwrapCommand()
	if err != nil {
		return err
	}
	treeNote := enterCPUGroup()
	defer leaveCPUGroup()
	opts, limitsNote := defaultOptions()
	printMachine(bwrapArgv, limitsNote+"\n"+treeNote)

	dir, err := os.MkdirTemp("", "table-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := buildCLI(dir)
	if err != nil {
		return err
	}
	oneshot, err := buildOneshot(dir)
	if err != nil {
		return err
	}
	im, err := makeImage(dir)
	if err != nil {
		return err
	}
	all := newRows(bwrapArgv, []string{oneshot, "/bin/true"}, cliCommand(bin), cliImageCommand(bin, im.store, im.digestRef), opts, imageOptions(opts, im))
	rows, err := pickRows(all, c.rows)
	var lat latencies
	var tput throughputs
	var cpu cpuPerRun
	if err == nil {
		lat, err = latency(rows, c)
	}
	if err == nil {
		tput, err = throughput(rows, c)
	}
	if err == nil {
		cpu, err = cpuByProcess(rows, c)
	}
	if err2 := closeRows(all); err == nil {
		err = err2
	}
	if err != nil {
		return err
	}
	ratios := []ratioOf{
		{"cold/bwrap", lat.ratio("cold", "bwrap")}, {"cli/bwrap", lat.ratio("cli", "bwrap")},
		{"warm/floor", lat.ratio("warm", "floor")}, {"live/floor", lat.ratio("live", "floor")},
		{"image/cold", lat.ratio("image", "cold")}, {"cliimg/cli", lat.ratio("cliimg", "cli")},
		{"oneshot/bwrap", lat.ratio("oneshot", "bwrap")}, {"cli/oneshot", lat.ratio("cli", "oneshot")},
		{"tput2/bwrap", tput.ratio("cold", "bwrap", 2)}, {"cpu/bwrap", cpu.ratio("cold", "bwrap")},
	}
	if c.rows == "" {
		heap, err := callerHeap(c)
		if err != nil {
			return err
		}
		sc, err := seccompCost(opts, c)
		if err != nil {
			return err
		}
		ratios = append(ratios, ratioOf{"rss1g/rss10m", heap}, ratioOf{"seccomp", sc})
	}
	printRatios(ratios)
	return nil
}

// ratioOf is one ratio of the ratios line; NaN when a row it needs was
// not measured.
type ratioOf struct {
	name string
	v    float64
}

// printRatios prints the ratios line, leaving out the ratios of rows that
// were not measured.
func printRatios(ratios []ratioOf) {
	line := "ratios:"
	for _, r := range ratios {
		if !math.IsNaN(r.v) {
			line += fmt.Sprintf(" %s=%.2f", r.name, r.v)
		}
	}
	fmt.Println(line)
}

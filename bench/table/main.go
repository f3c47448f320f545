// Table measures the sandbox's start cost against plain fork+exec and
// against bubblewrap with the same isolation, all in one process run on this
// machine, and prints one fixed-width table. Its last line holds the ratios
// the speed targets are judged by:
//
//	ratios: cold/bwrap=R cli/bwrap=R warm/floor=R live/floor=R image/cold=R tput2/bwrap=R rss1g/rss10m=R seccomp=R
//
// The rows are: floor (fork+exec+wait of /bin/true from Go), bwrap
// (bubblewrap --unshare-all with our mounts, running /bin/true), cold
// (sandbox.New(Options{}).Run of /bin/true through the spawner), warm (the
// same with Options{Pool: 2}), live (the same with Options{Live: true}: a
// command entering one running sandbox), image (cold, in a stored image of
// the host's /bin/true instead of the host's /usr: Options.Image) and cli (the command-line tool's
// `sandbox run -- /bin/true`, started as a shell starts it). The sections are:
//
//   - latency: every iteration runs each row once, starting at a row that
//     rotates, so drift in the machine's load hits every row alike; median
//     and p99, and the medians' ratios to floor and to bwrap;
//   - throughput: runs per second with 1 and 2 concurrent callers, measured
//     in short slices that alternate between rows and caller counts;
//   - caller heap: Run's latency from two worker processes, one holding
//     10 MiB and one 1 GiB of touched heap, each with its own spawner, asked
//     in turn;
//   - seccomp: a getpid loop inside the sandbox with the default filter,
//     with a filter that allows everything (what any filter costs) and with
//     none, in runs taken in turn.
//
// Usage:
//
//	table [-n 200] [-warmup 20] [-duration 1s] [-rounds 6] [-seccomp-runs 15] [-calls 2000000]
//
// It installs bubblewrap with apt-get when it is missing and it runs as root.
// It exits non-zero only when a command fails, never because of a figure.
package main

import (
	"flag"
	"fmt"
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
	rounds      int           // throughput slices per row and caller count
	seccompRuns int           // measured runs of each seccomp row
	calls       int           // getpid calls per seccomp run
}

func main() {
	var c config
	flag.IntVar(&c.n, "n", 200, "measured latency iterations (each runs every row once); also of the heap rows")
	flag.IntVar(&c.warmup, "warmup", 20, "unmeasured iterations before measuring")
	flag.DurationVar(&c.duration, "duration", time.Second, "length of one throughput slice")
	flag.IntVar(&c.rounds, "rounds", 6, "throughput slices of each row and caller count")
	flag.IntVar(&c.seccompRuns, "seccomp-runs", 15, "measured runs of each seccomp row")
	flag.IntVar(&c.calls, "calls", 2_000_000, "getpid calls per seccomp run")
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
	case c.n < 1 || c.warmup < 0 || c.duration <= 0 || c.rounds < 1 || c.seccompRuns < 1 || c.calls < 1:
		err = fmt.Errorf("-n, -rounds, -seccomp-runs and -calls must be at least 1, -warmup at least 0, -duration positive")
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
	opts, limitsNote := defaultOptions()
	printMachine(bwrapArgv, limitsNote)

	dir, err := os.MkdirTemp("", "table-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cliArgv, err := cliCommand(dir)
	if err != nil {
		return err
	}
	imageOpts, err := imageOptions(opts, dir)
	if err != nil {
		return err
	}
	rows := newRows(bwrapArgv, cliArgv, opts, imageOpts)
	lat, err := latency(rows, c)
	var tput throughputs
	if err == nil {
		tput, err = throughput(rows, c)
	}
	if err2 := closeRows(rows); err == nil {
		err = err2
	}
	if err != nil {
		return err
	}
	heap, err := callerHeap(c)
	if err != nil {
		return err
	}
	sc, err := seccompCost(opts, c)
	if err != nil {
		return err
	}
	fmt.Printf("ratios: cold/bwrap=%.2f cli/bwrap=%.2f warm/floor=%.2f live/floor=%.2f image/cold=%.2f tput2/bwrap=%.2f rss1g/rss10m=%.2f seccomp=%.2f\n",
		lat.ratio("cold", "bwrap"), lat.ratio("cli", "bwrap"), lat.ratio("warm", "floor"), lat.ratio("live", "floor"), lat.ratio("image", "cold"), tput.ratio("cold", "bwrap", 2), heap, sc)
	return nil
}

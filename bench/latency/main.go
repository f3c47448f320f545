// Latency measures the wall time of starting and finishing commands, run
// interleaved so that drift in the machine's load hits every command alike.
//
// Usage:
//
//	latency [-n 200] [-warmup 20] [-baseline NAME] LABEL CMD [ARG...] ::: LABEL CMD [ARG...] ...
//
// Each command is given as a label of the form GROUP/NAME followed by its
// argv; commands are separated by a ":::" argument. Every iteration runs
// each command once, starting at a different command each time. The tool
// prints the median, 90th percentile and minimum of each command, and for
// each group the ratio of every command's median to the median of the
// command named by -baseline in that group. It exits 1 if any run of any
// command fails, never because of a figure.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/fumehood/sandbox"
)

// Library runners for the @inprocess and @spawner pseudo-commands.
var libraries = map[string]*sandbox.Sandbox{
	"@inprocess": sandbox.New(sandbox.Options{InProcess: true}),
	"@spawner":   sandbox.New(sandbox.Options{}),
}

const separator = ":::"

// command is one measured command and its timings.
type command struct {
	group, name string
	argv        []string
	times       []time.Duration
}

func (c *command) label() string { return c.group + "/" + c.name }

func main() {
	n := flag.Int("n", 200, "measured runs of each command")
	warmup := flag.Int("warmup", 20, "unmeasured runs of each command before measuring")
	baseline := flag.String("baseline", "bwrap", "the NAME whose median the others in its GROUP are divided by")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(),
			"usage: latency [flags] GROUP/NAME CMD [ARG...] ::: GROUP/NAME CMD [ARG...] ...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	cmds, err := parseCommands(flag.Args())
	if err == nil && (*n < 1 || *warmup < 0) {
		err = errors.New("-n must be at least 1 and -warmup at least 0")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "latency:", err)
		flag.Usage()
		os.Exit(2)
	}
	if err := measure(cmds, *warmup, *n); err != nil {
		fmt.Fprintln(os.Stderr, "latency:", err)
		os.Exit(1)
	}
	report(cmds, *baseline)
}

// parseCommands splits LABEL CMD ARG... ::: LABEL CMD ARG... into commands.
func parseCommands(args []string) ([]*command, error) {
	var cmds []*command
	for len(args) > 0 {
		i := slices.Index(args, separator)
		if i < 0 {
			i = len(args)
		}
		part := args[:i]
		args = args[min(i+1, len(args)):]
		if len(part) < 2 {
			return nil, fmt.Errorf("want GROUP/NAME CMD [ARG...], got %q", part)
		}
		group, name, ok := strings.Cut(part[0], "/")
		if !ok || group == "" || name == "" {
			return nil, fmt.Errorf("label %q: want GROUP/NAME", part[0])
		}
		cmds = append(cmds, &command{group: group, name: name, argv: part[1:]})
	}
	if len(cmds) == 0 {
		return nil, errors.New("no commands given")
	}
	return cmds, nil
}

// measure runs warmup+n iterations; each runs every command once,
// starting at a command that rotates from one iteration to the next.
func measure(cmds []*command, warmup, n int) error {
	for iter := range warmup + n {
		for k := range cmds {
			c := cmds[(iter+k)%len(cmds)]
			d, err := runOnce(c.argv)
			if err != nil {
				return fmt.Errorf("%s (run %d): %w", c.label(), iter+1, err)
			}
			if iter >= warmup {
				c.times = append(c.times, d)
			}
		}
	}
	return nil
}

// runOnce runs argv with stdin and stdout on /dev/null and returns its wall
// time from start to reaped exit.
func runOnce(argv []string) (time.Duration, error) {
	if sb := libraries[argv[0]]; sb != nil {
		start := time.Now()
		res, err := sb.Run(context.Background(), sandbox.Command(argv[1], argv[2:]...))
		d := time.Since(start)
		if err == nil {
			err = res.Err()
		}
		if err != nil {
			return 0, fmt.Errorf("%q: %w", argv, err)
		}
		return d, nil
	}
	var stderr bytes.Buffer
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("%q: %w: %s", argv, err, strings.TrimSpace(stderr.String()))
	}
	return d, nil
}

// percentile returns the p-th percentile (0 < p <= 100) of sorted
// durations by the nearest-rank method.
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func median(sorted []time.Duration) time.Duration {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d)/float64(time.Millisecond)) }

func report(cmds []*command, baseline string) {
	medians := map[string]time.Duration{}
	width := len("command")
	for _, c := range cmds {
		width = max(width, len(c.label()))
	}
	fmt.Printf("%-*s  %5s  %10s  %10s  %10s\n", width, "command", "runs", "median ms", "p90 ms", "min ms")
	for _, c := range cmds {
		s := slices.Clone(c.times)
		slices.Sort(s)
		medians[c.label()] = median(s)
		fmt.Printf("%-*s  %5d  %10s  %10s  %10s\n", width, c.label(), len(s), ms(median(s)), ms(percentile(s, 90)), ms(s[0]))
	}
	fmt.Println()
	fmt.Println("ratio of medians (NAME / " + baseline + "):")
	for _, c := range cmds {
		if c.name == baseline {
			continue
		}
		base, ok := medians[c.group+"/"+baseline]
		if !ok || base == 0 {
			fmt.Printf("  %-24s no %s/%s to compare with\n", c.label(), c.group, baseline)
			continue
		}
		fmt.Printf("  %-24s %.2f\n", c.label()+" / "+baseline, float64(medians[c.label()])/float64(base))
	}
}

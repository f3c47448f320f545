package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/fumehood/sandbox"
)

// runTimeout bounds one run, so that a hung sandbox fails the tool instead
// of stalling it.
const runTimeout = time.Minute

// row is one measured way of running /bin/true.
type row struct {
	name string
	run  func() error
	sb   *sandbox.Sandbox // nil for the rows that are plain commands
}

// newRows returns the nine rows. The sandbox rows share this process's
// spawner, as the Sandboxes of one service would; the cli rows are a
// process of their own each time, as a user's command is. imageOpts are
// opts with the stored image as the root (imageOptions).
func newRows(bwrapArgv, oneshotArgv, cliArgv, cliImageArgv []string, opts, imageOpts sandbox.Options) []*row {
	warmOpts, liveOpts := opts, opts
	warmOpts.Start = sandbox.Pool{Size: 2}
	liveOpts.Live = &sandbox.Live{}
	cold, warm, live := sandbox.New(opts), sandbox.New(warmOpts), sandbox.New(liveOpts)
	image := sandbox.New(imageOpts)
	// In this order each iteration runs them (from a row that rotates):
	// live after floor, whose run leaves no work behind, not after warm,
	// whose pool refills in the background once it has served a run.
	return []*row{
		{name: "floor", run: func() error { return execRun([]string{"/bin/true"}) }},
		{name: "live", run: func() error { return sandboxRun(live) }, sb: live},
		{name: "bwrap", run: func() error { return execRun(bwrapArgv) }},
		{name: "cold", run: func() error { return sandboxRun(cold) }, sb: cold},
		{name: "image", run: func() error { return sandboxRun(image) }, sb: image},
		{name: "warm", run: func() error { return sandboxRun(warm) }, sb: warm},
		{name: "oneshot", run: func() error { return execRun(oneshotArgv) }},
		{name: "cli", run: func() error { return execRun(cliArgv) }},
		{name: "cliimg", run: func() error { return execRun(cliImageArgv) }},
	}
}

// pickRows returns the rows named in names, a comma-separated list, in
// their order, with floor and bwrap, which the ratios are to; all of them
// when names is empty.
func pickRows(rows []*row, names string) ([]*row, error) {
	if names == "" {
		return rows, nil
	}
	want := map[string]bool{"floor": true, "bwrap": true}
	for _, n := range strings.Split(names, ",") {
		if !slices.ContainsFunc(rows, func(r *row) bool { return r.name == n }) {
			return nil, fmt.Errorf("-rows: no row %q (the rows: %s)", n, strings.Join(rowNames(rows), ", "))
		}
		want[n] = true
	}
	var out []*row
	for _, r := range rows {
		if want[r.name] {
			out = append(out, r)
		}
	}
	return out, nil
}

// rowNames are the names of rows, in their order.
func rowNames(rows []*row) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.name)
	}
	return out
}

// closeRows closes the rows' Sandboxes.
func closeRows(rows []*row) error {
	var errs []error
	for _, r := range rows {
		if r.sb != nil {
			if err := r.sb.Close(); err != nil {
				errs = append(errs, fmt.Errorf("%s: close: %w", r.name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// execRun starts argv with stdin and stdout on /dev/null and waits for it.
// Its stderr is ours, passed as the fd itself, so that a failing command
// says why without a pipe and a copying goroutine slowing every run.
func execRun(argv []string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%q: %w", argv, err)
	}
	return nil
}

// sandboxRun runs /bin/true in sb, as a caller would: output captured.
func sandboxRun(sb *sandbox.Sandbox) error {
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	res, err := sb.Run(ctx, sandbox.Command("/bin/true"))
	if err == nil {
		err = res.Err()
	}
	if err != nil {
		return fmt.Errorf("run of /bin/true: %w", err)
	}
	return nil
}

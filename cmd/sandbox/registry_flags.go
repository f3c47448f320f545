package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/fumehood/sandbox"
	"github.com/fumehood/sandbox/internal/image"
)

// registryFlags are the flags that say how to reach a registry: its
// mirrors and how long a pull may take. "sandbox run", "sandbox mcp" and
// "sandbox pull" take them.
type registryFlags struct {
	mirrors     mirrorFlag
	pullTimeout time.Duration
}

func (f *registryFlags) add(fs *flag.FlagSet) {
	fs.Var(&f.mirrors, "registry-mirror",
		"`REGISTRY=MIRROR`: fetch REGISTRY's images from MIRROR, HOST[:PORT][/PATH], first\n"+
			"(e.g. docker.io=mirror.example:5000); repeatable: mirrors are tried in the order\n"+
			"given, then the registry; the image keeps its name and is checked by the same\n"+
			"digests; plain HTTP only to a loopback mirror, with --insecure-registry")
	fs.Var(pullTimeoutFlag{&f.pullTimeout}, "pull-timeout",
		"give up a pull of the image after `DUR` (default "+sandbox.DefaultPullTimeout.String()+")")
}

// pullTimeoutFlag is --pull-timeout: a duration, not negative.
type pullTimeoutFlag struct{ d *time.Duration }

func (f pullTimeoutFlag) String() string {
	if f.d == nil || *f.d == 0 {
		return ""
	}
	return f.d.String()
}

func (f pullTimeoutFlag) Set(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return fmt.Errorf("%q: want a duration such as 30s or 20m", v)
	}
	*f.d = d
	return nil
}

// timeout is --pull-timeout as the options take it, zero for the default.
func (f *registryFlags) timeout() time.Duration { return f.pullTimeout }

// mirrorFlag is --registry-mirror: mirrors per registry, in order.
type mirrorFlag struct {
	m    map[string][]string
	args []string
}

func (f *mirrorFlag) String() string { return strings.Join(f.args, ",") }

func (f *mirrorFlag) Set(v string) error {
	reg, mirror, ok := strings.Cut(v, "=")
	if !ok || reg == "" || mirror == "" {
		return fmt.Errorf("%q: want REGISTRY=MIRROR, e.g. docker.io=mirror.example:5000", v)
	}
	if err := image.CheckMirrors(map[string][]string{reg: {mirror}}); err != nil {
		return err
	}
	if f.m == nil {
		f.m = map[string][]string{}
	}
	f.m[reg] = append(f.m[reg], mirror)
	f.args = append(f.args, v)
	return nil
}

// pullTimeoutHint is what to do about a pull that ran out of its time, or
// "" when err is not one.
func pullTimeoutHint(err error) string {
	if !errors.Is(err, sandbox.ErrImageTimeout) {
		return ""
	}
	return "raise --pull-timeout (default " + sandbox.DefaultPullTimeout.String() + ") for a large image or a slow registry, or add a --registry-mirror"
}

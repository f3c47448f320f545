package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fumehood/sandbox"
	"github.com/fumehood/sandbox/internal/image"
)

// imageFlags are the flags that say where an image comes from, shared by
// "sandbox run", "sandbox mcp" and "sandbox pull".
type imageFlags struct {
	ref      string
	platform string
	store    absDir
	insecure bool
	registry registryFlags
	pull     sandbox.PullPolicy
}

// add defines the flags in fs; withRef adds --image too.
func (f *imageFlags) add(fs *flag.FlagSet, withRef bool) {
	if withRef {
		fs.StringVar(&f.ref, "image", "",
			"use the container image `REF` as the root instead of the host's /usr, /bin, /lib*:\n"+
				"a registry reference (python:3.12-slim, ghcr.io/o/x:tag, name@sha256:...),\n"+
				"oci:DIR[:TAG], oci-archive:FILE[:TAG] or docker-archive:FILE; pulled into the\n"+
				"--image-store once; its Env and working directory are the program's defaults")
		fs.Func("pull", "when to ask the registry for --image: `missing` (default: run the stored image\n"+
			"with no request, pull it only if the store has none), always (ask for the tag's\n"+
			"manifest each time), never (run only a stored image)", func(v string) error {
			p, err := image.ParsePullPolicy(v)
			f.pull = p
			return err
		})
	}
	fs.StringVar(&f.platform, "platform", "",
		"the image's platform, `OS/ARCH[/VARIANT]` (default linux and this machine's arch)")
	fs.Var(&f.store, "image-store", "keep images in `DIR` (default "+defaultStoreHelp()+")")
	fs.BoolVar(&f.insecure, "insecure-registry", false,
		"allow plain HTTP to a registry on a loopback address (a test registry)")
	f.registry.add(fs)
}

// defaultStoreHelp is the default store as the help text gives it.
func defaultStoreHelp() string {
	return "$XDG_CACHE_HOME/fumehood-sandbox/images, else /var/cache/... for root, ~/.cache/... for others"
}

// dir is the store's directory: --image-store, or the library's default.
func (f *imageFlags) dir() (string, error) {
	if f.store != "" {
		return string(f.store), nil
	}
	return sandbox.ImageStoreDir()
}

// image is the sandbox.Image the flags describe, nil without --image.
// progress, when set, shows the pull.
func (f *imageFlags) image(progress io.Writer) *sandbox.Image {
	if f.ref == "" {
		return nil
	}
	im := &sandbox.Image{Ref: f.ref, Platform: f.platform, Store: string(f.store), Insecure: f.insecure,
		Mirrors: f.registry.mirrors.m, PullTimeout: f.registry.timeout(), Pull: f.pull}
	if progress != nil {
		im.Progress = newPullProgress(progress).show
	}
	return im
}

// imageHint says what to do about an error from pulling an image, or ""
// when it is not one.
func imageHint(err error) string {
	if h := pullTimeoutHint(err); h != "" {
		return h
	}
	switch {
	case errors.Is(err, sandbox.ErrImageInsecure):
		return "plain HTTP is allowed only to a registry on loopback, with --insecure-registry"
	case errors.Is(err, sandbox.ErrImagePlatform):
		return "pass --platform with one of the platforms the image has"
	case errors.Is(err, sandbox.ErrImageNotStored):
		return "pull it first (sandbox pull REF), or run with --pull missing"
	case errors.Is(err, sandbox.ErrImageNotFound):
		return "check the name, the tag and the path (\"sandbox images\" lists the stored images)"
	case errors.Is(err, sandbox.ErrBadImageRef):
		return "give a registry reference (NAME[:TAG] or NAME@DIGEST), oci:DIR[:TAG], oci-archive:FILE[:TAG] or docker-archive:FILE"
	case errors.Is(err, sandbox.ErrImageTransfer):
		return "the connection to the registry broke during the pull; nothing was stored: run it again"
	case errors.Is(err, sandbox.ErrImageTooLarge):
		return "the image is larger than the pull's limit"
	case errors.Is(err, fs.ErrPermission) && strings.Contains(err.Error(), "Image.Store"):
		return "or pass --image-store DIR with a directory the sandbox's user can reach"
	case errors.Is(err, sandbox.ErrBadImage):
		return "the image is damaged or not an image: fetch or save it again"
	}
	return ""
}

// withImageHint adds imageHint's advice to err.
func withImageHint(err error) error {
	if h := imageHint(err); h != "" {
		return fmt.Errorf("%w\n  %s", err, h)
	}
	return err
}

// pullProgress shows a pull: on a terminal, one line per layer redrawn as
// it grows; elsewhere, a line when a layer starts and one when it is done.
type pullProgress struct {
	w        io.Writer
	terminal bool
	last     time.Time
	index    int
}

func newPullProgress(w io.Writer) *pullProgress {
	p := &pullProgress{w: w, index: -1}
	if f, ok := w.(*os.File); ok {
		p.terminal = isTerminal(int(f.Fd()))
	}
	return p
}

func (p *pullProgress) show(e sandbox.ImageProgress) {
	layer := e.Layer
	if len(layer) > 19 {
		layer = layer[:19] // sha256: and 12 hex digits
	}
	done := e.Total >= 0 && e.Done >= e.Total
	if !p.terminal {
		switch {
		case e.Index != p.index:
			p.index = e.Index
			fmt.Fprintf(p.w, "pulling %s: layer %d/%d %s (%s)\n", e.Ref, e.Index+1, e.Count, layer, sizeOf(e.Total))
		case done:
			fmt.Fprintf(p.w, "pulling %s: layer %d/%d done\n", e.Ref, e.Index+1, e.Count)
		}
		return
	}
	if !done && e.Index == p.index && time.Since(p.last) < 100*time.Millisecond {
		return
	}
	p.index, p.last = e.Index, time.Now()
	const width = 30
	bar := strings.Repeat("?", width)
	if e.Total > 0 {
		n := int(min(e.Done, e.Total) * width / e.Total)
		bar = strings.Repeat("=", n) + strings.Repeat(" ", width-n)
	}
	fmt.Fprintf(p.w, "\r\x1b[K%d/%d %s [%s] %s/%s", e.Index+1, e.Count, layer, bar, sizeOf(e.Done), sizeOf(e.Total))
	if done {
		fmt.Fprint(p.w, "\n")
	}
}

// sizeOf is a size in bytes for people, "?" when unknown.
func sizeOf(n int64) string {
	switch {
	case n < 0:
		return "?"
	case n < 1<<10:
		return fmt.Sprintf("%dB", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1fK", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1fM", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.2fG", float64(n)/(1<<30))
}

const pullUsage = `Usage: sandbox pull [flags] REF

Stores the image REF (a registry reference, oci:DIR[:TAG],
oci-archive:FILE[:TAG] or docker-archive:FILE) for "sandbox run --image",
showing its progress on stderr.

Flags:
`

func pullMain(args []string, s streams) int {
	var f imageFlags
	fs := flag.NewFlagSet("pull", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	f.add(fs, false)
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(s.stdout, pullUsage)
		printFlags(s.stdout, fs)
		return 0
	} else if err != nil || fs.NArg() != 1 {
		if err == nil {
			err = errors.New("want one image reference: sandbox pull [flags] REF")
		}
		fmt.Fprintf(s.stderr, "sandbox: pull: %v\n%s", err, seeHelp("pull"))
		return exitFailure
	}
	dir, err := f.dir()
	if err != nil {
		fmt.Fprintf(s.stderr, "sandbox: pull: %v\n", err)
		return exitFailure
	}
	st, err := image.Open(dir)
	if err != nil {
		fmt.Fprintf(s.stderr, "sandbox: pull: %v\n", err)
		return exitFailure
	}
	defer st.Close()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	catchSignals(stop)
	f.ref = fs.Arg(0)
	prog := f.image(s.stderr).Progress
	// As docker pull: the registry is asked, whatever the store holds.
	img, err := st.Pull(ctx, f.ref, image.PullOptions{Platform: f.platform, Insecure: f.insecure, Policy: image.PullAlways,
		Mirrors: f.registry.mirrors.m, Timeout: f.registry.timeout(),
		Progress: func(p image.Progress) {
			prog(sandbox.ImageProgress{Ref: f.ref, Layer: p.Layer, Index: p.Index, Count: p.Count, Done: p.Done, Total: p.Total})
		}})
	if err != nil {
		fmt.Fprintf(s.stderr, "sandbox: pull: %v\n", withImageHint(err))
		return exitFailure
	}
	fmt.Fprintf(s.stdout, "%s %s %s %s\n", img.Ref, img.Digest, img.Platform, sizeOf(img.Size))
	return 0
}

const imagesUsage = `Usage: sandbox images [flags]         list the stored images
       sandbox images prune [flags]   remove every stored image no sandbox uses

The IN USE column says whether a sandbox (of any process) uses the image
now; prune keeps those.

Flags:
`

func imagesMain(args []string, s streams) int {
	var f imageFlags
	prune := len(args) > 0 && args[0] == "prune"
	if prune {
		args = args[1:]
	}
	fs := flag.NewFlagSet("images", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.Var(&f.store, "image-store", "the store's `DIR` (default "+defaultStoreHelp()+")")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(s.stdout, imagesUsage)
		printFlags(s.stdout, fs)
		return 0
	} else if err != nil || fs.NArg() != 0 {
		if err == nil {
			err = fmt.Errorf("unexpected argument %q: want sandbox images [prune] [flags]", fs.Arg(0))
		}
		fmt.Fprintf(s.stderr, "sandbox: images: %v\n%s", err, seeHelp("images"))
		return exitFailure
	}
	dir, err := f.dir()
	if err == nil {
		if _, serr := os.Stat(filepath.Join(dir, "images")); errors.Is(serr, os.ErrNotExist) && !prune {
			return 0 // no store yet: nothing stored, and nothing made
		}
	}
	var st *image.Store
	if err == nil {
		st, err = image.Open(dir)
	}
	if err != nil {
		fmt.Fprintf(s.stderr, "sandbox: images: %v\n", err)
		return exitFailure
	}
	defer st.Close()
	if prune {
		freed, err := st.Prune(context.Background(), nil)
		if err != nil {
			fmt.Fprintf(s.stderr, "sandbox: images prune: %v\n", err)
			return exitFailure
		}
		fmt.Fprintf(s.stdout, "freed %s\n", sizeOf(freed))
		return 0
	}
	imgs, err := st.List()
	if err != nil {
		fmt.Fprintf(s.stderr, "sandbox: images: %v\n", err)
		return exitFailure
	}
	tw := tabwriter.NewWriter(s.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REF\tDIGEST\tPLATFORM\tSIZE\tIN USE")
	for _, img := range imgs {
		used, err := inUseColumn(st, img)
		if err != nil {
			tw.Flush()
			fmt.Fprintf(s.stderr, "sandbox: images: %v\n", err)
			return exitFailure
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", img.Ref, img.Digest, img.Platform, sizeOf(img.Size), used)
	}
	tw.Flush()
	return 0
}

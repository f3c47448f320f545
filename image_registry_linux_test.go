//go:build linux

package sandbox

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fumehood/sandbox/internal/image"
	"github.com/fumehood/sandbox/internal/testsupport/imagetest"
	"github.com/google/go-containerregistry/pkg/registry"
)

// TestImageMirror: an image of a registry that resolves nowhere runs from
// its mirror on loopback and is stored by its own name; a mirror that is
// not a host is refused by New, naming it.
func TestImageMirror(t *testing.T) {
	requireSandbox(t)
	mirror := imagetest.Registry(t)
	imagetest.Push(t, mirror, "team/shell:v1", shellImage(t))
	ref := "unreachable.test/team/shell:v1"
	store := imageStore(t)
	mirrors := map[string][]string{"unreachable.test": {mirror}}
	sb := New(testOpts(Options{Root: &Image{Ref: ref, Store: store, Insecure: true, Mirrors: mirrors}}))
	defer sb.Close()
	// The Sandbox keeps the mirrors it was given, as it keeps its Image.
	mirrors["unreachable.test"][0] = "127.0.0.1:1"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := sb.Run(ctx, Command("/bin/sh", "-c", "read -r m < /srv/app/marker; echo $m"))
	if err != nil {
		t.Fatalf("run from the mirror: %v", err)
	}
	if string(res.Stdout) != "from the image\n" {
		t.Errorf("run from the mirror: stdout %q, stderr %q", res.Stdout, res.Stderr)
	}
	st, err := image.Open(store)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if list, err := st.List(); err != nil || len(list) != 1 || list[0].Ref != ref {
		t.Errorf("the store lists %+v (%v), want one image named %s", list, err, ref)
	}

	bad := "http://" + mirror
	s := New(Options{Root: &Image{Ref: ref, Store: imageStore(t), Mirrors: map[string][]string{"unreachable.test": {bad}}}})
	defer s.Close()
	if err := s.Err(); !errors.Is(err, ErrBadImageRef) || !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), bad) {
		t.Errorf("New with mirror %s: %v, want ErrBadImageRef and ErrInvalidOption naming it", bad, err)
	}
}

// TestImagePullTimeout: a registry that stalls in the middle of the
// image fails the Run when Image.PullTimeout runs out, with an error that
// names the image and the option and matches ErrImageTimeout, and the
// store holds nothing of it.
func TestImagePullTimeout(t *testing.T) {
	requireSandbox(t)
	ref := imagetest.StalledRegistry(t, "stalled/shell:v1", shellImage(t))
	store := imageStore(t)
	s := newTest(t, Options{Root: &Image{Ref: ref, Store: store, Insecure: true, PullTimeout: 500 * time.Millisecond}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := s.Run(ctx, Command("/bin/sh", "-c", "true"))
	if !errors.Is(err, ErrImageTimeout) || !errors.Is(err, context.DeadlineExceeded) ||
		!strings.Contains(err.Error(), ref) || !strings.Contains(err.Error(), "Image.PullTimeout (500ms)") {
		t.Errorf("Run: %v; want ErrImageTimeout naming %s and Image.PullTimeout", err, ref)
	}
	t.Log(err)
	s.Close() // waits for a pool's pull too
	if left := storeEntries(t, store); len(left) > 0 {
		t.Errorf("the store holds %v after a pull that timed out", left)
	}

	if err := New(Options{Root: &Image{Ref: ref, PullTimeout: -time.Second}}).Err(); !errors.Is(err, ErrInvalidOption) ||
		!strings.Contains(err.Error(), "PullTimeout") {
		t.Errorf("New with a negative PullTimeout: %v, want ErrInvalidOption naming it", err)
	}
}

// TestImagePullPolicy: a stored image run by its tag makes no request to
// the registry (PullMissing, the default), and runs with the registry
// gone; PullAlways asks it, and so fails with it gone; PullNever with
// nothing stored fails naming the image and the policy.
func TestImagePullPolicy(t *testing.T) {
	requireSandbox(t)
	var requests atomic.Int64
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		reg.ServeHTTP(w, r)
	}))
	defer srv.Close()
	ref := imagetest.Push(t, strings.TrimPrefix(srv.URL, "http://"), "team/shell:v1", shellImage(t))
	store := imageStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := func(p PullPolicy, store string) (*Result, error) {
		s := newTest(t, Options{Root: &Image{Ref: ref, Store: store, Insecure: true, Pull: p}})
		defer s.Close()
		return s.Run(ctx, Command("/bin/sh", "-c", "read -r m < /srv/app/marker; echo $m"))
	}
	requests.Store(0)
	if res, err := run(PullMissing, store); err != nil || string(res.Stdout) != "from the image\n" {
		t.Fatalf("first run of %s: %v, %+v", ref, err, res)
	}
	t.Logf("first run: %d requests to the registry", requests.Load())
	requests.Store(0)
	if res, err := run(PullMissing, store); err != nil || string(res.Stdout) != "from the image\n" {
		t.Fatalf("second run of %s: %v, %+v", ref, err, res)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("a run of the stored %s made %d requests to the registry, want none", ref, n)
	}
	if _, err := run(PullAlways, store); err != nil {
		t.Fatalf("run with PullAlways: %v", err)
	}
	if n := requests.Load(); n == 0 {
		t.Errorf("a run with PullAlways made no request to the registry")
	}

	srv.Close()
	if res, err := run(PullMissing, store); err != nil || string(res.Stdout) != "from the image\n" {
		t.Errorf("run of the stored %s with the registry gone: %v, %+v", ref, err, res)
	}
	if _, err := run(PullAlways, store); err == nil {
		t.Errorf("run with PullAlways and the registry gone succeeded; it did not ask")
	}
	_, err := run(PullNever, imageStore(t))
	if !errors.Is(err, ErrImageNotFound) || !errors.Is(err, ErrImageNotStored) || !strings.Contains(err.Error(), ref) || !strings.Contains(err.Error(), "pull policy is never") {
		t.Errorf("run with PullNever and nothing stored: %v; want ErrImageNotFound naming the image and the policy", err)
	}
	if err := New(Options{Root: &Image{Ref: ref, Pull: PullNever + 1}}).Err(); !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "Options.Root (Image.Pull)") {
		t.Errorf("New with an unknown pull policy: %v, want ErrInvalidOption naming Options.Root (Image.Pull)", err)
	}
}

// TestImagePullCutOff: a registry whose connection breaks in the middle
// of a large layer fails the Run with an error matching ErrImageTransfer
// and not ErrBadImage, naming the image and saying to pull again, and
// the store holds nothing of it.
func TestImagePullCutOff(t *testing.T) {
	requireSandbox(t)
	big := make([]byte, 16<<20) // random, so that gzip leaves it as large
	rand.Read(big)
	ref := imagetest.CutRegistry(t, "big/shell:v1", shellImage(t, imagetest.File("srv/app/big", 0o644, string(big))), 2<<20)
	store := imageStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := newTest(t, Options{Root: &Image{Ref: ref, Store: store, Insecure: true}})
	_, err := s.Run(ctx, Command("/bin/sh", "-c", "true"))
	if !errors.Is(err, ErrImageTransfer) || errors.Is(err, ErrBadImage) || !strings.Contains(err.Error(), ref) || !strings.Contains(err.Error(), "pull it again") {
		t.Errorf("Run with the registry's connection cut mid-layer: %v; want ErrImageTransfer, not ErrBadImage, naming %s and saying to pull again", err, ref)
	}
	s.Close()
	if left := storeEntries(t, store); len(left) > 0 {
		t.Errorf("the store holds %v after a pull cut off", left)
	}
}

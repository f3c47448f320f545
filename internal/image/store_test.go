package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fumehood/sandbox/internal/testsupport/imagetest"
)

// TestMain lets the test binary pull as a second process: with
// IMAGE_TEST_PULL set it pulls that reference into the store
// IMAGE_TEST_STORE and prints the image as JSON.
func TestMain(m *testing.M) {
	if ref := os.Getenv("IMAGE_TEST_PULL"); ref != "" {
		s, err := Open(os.Getenv("IMAGE_TEST_STORE"))
		if err == nil {
			var img *Image
			img, err = s.Pull(context.Background(), ref, PullOptions{Insecure: true, Keychain: noKeychain})
			if err == nil {
				json.NewEncoder(os.Stdout).Encode(img)
				os.Exit(0)
			}
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// TestPullTwice: a second pull of a stored image fetches no blob and
// unpacks nothing; by digest it does not even ask the registry; an image
// sharing a layer unpacks only its own.
func TestPullTwice(t *testing.T) {
	base := baseLayers(t)
	img := imageOf(t, "", base...)
	reg := newRegistry(t, "", "")
	ref := reg.push(t, "test/base:v1", img, nil)
	s, _ := newStore(t)
	first, err := s.Pull(ctxT(t), ref, local())
	if err != nil {
		t.Fatal(err)
	}
	if n := s.unpacked.Load(); n != 2 || reg.count("blobs") != 3 {
		t.Fatalf("first pull: %d layers unpacked, %d blobs fetched; want 2 and 3", n, reg.count("blobs"))
	}
	reg.reset()
	second, err := s.Pull(ctxT(t), ref, local())
	if err != nil {
		t.Fatal(err)
	}
	if n := s.unpacked.Load(); n != 2 || reg.count("blobs") != 0 {
		t.Errorf("second pull: %d layers unpacked in all, %d blobs fetched; want 2 and 0", n, reg.count("blobs"))
	}
	if second.Root != first.Root || second.Digest != first.Digest {
		t.Errorf("second pull: %+v, first %+v", second, first)
	}
	reg.reset()
	byDigest, err := s.Pull(ctxT(t), reg.host+"/test/base@"+first.Digest, local())
	if err != nil {
		t.Fatal(err)
	}
	if reg.count("") != 0 || s.unpacked.Load() != 2 || byDigest.Root != first.Root {
		t.Errorf("by digest: %d requests, %d layers unpacked in all, root %s", reg.count(""), s.unpacked.Load(), byDigest.Root)
	}
	checkImage(t, byDigest)

	other := imageOf(t, "", base[0], imagetest.Layer(t, "", file("other", 0o644, "x")))
	otherRef := reg.push(t, "test/other:v1", other, nil)
	o, err := s.Pull(ctxT(t), otherRef, local())
	if err != nil {
		t.Fatal(err)
	}
	if n := s.unpacked.Load(); n != 3 {
		t.Errorf("an image sharing a layer: %d layers unpacked in all, want 3", n)
	}
	if o.Root == first.Root {
		t.Error("two images share a root")
	}
	list, _ := s.List()
	if len(list) != 3 {
		t.Errorf("List: %+v", list)
	}
}

// slowBlobs makes reg hold every layer blob for d before serving it, so
// that pulls overlap.
func slowBlobs(reg *testRegistry, d time.Duration) {
	reg.mu.Lock()
	reg.wrap = func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if strings.Contains(r.URL.Path, "/blobs/") {
			time.Sleep(d)
		}
		next.ServeHTTP(w, r)
	}
	reg.mu.Unlock()
}

// TestConcurrentPulls: goroutines and processes pull one image
// into one store at once; all succeed and agree, and the store holds one
// copy.
func TestConcurrentPulls(t *testing.T) {
	img := imageOf(t, "", baseLayers(t)...)
	reg := newRegistry(t, "", "")
	ref := reg.push(t, "test/base:v1", img, nil)
	slowBlobs(reg, 100*time.Millisecond)
	s, _ := newStore(t)

	var wg sync.WaitGroup
	// Four goroutines and two processes, so that several reach each
	// rename into place at once.
	const goroutines, procs = 4, 2
	results := make([]*Image, goroutines+procs)
	errs := make([]error, goroutines+procs)
	// Puller 0 shares s with the test; the others open the directory as
	// other users of it would.
	wg.Go(func() { results[0], errs[0] = s.Pull(ctxT(t), ref, local()) })
	for i := 1; i < goroutines; i++ {
		wg.Go(func() {
			s2, err := Open(s.Dir())
			if err != nil {
				errs[i] = err
				return
			}
			defer s2.Close()
			results[i], errs[i] = s2.Pull(ctxT(t), ref, local())
		})
	}
	for i := goroutines; i < goroutines+procs; i++ {
		wg.Go(func() {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "IMAGE_TEST_PULL="+ref, "IMAGE_TEST_STORE="+s.Dir())
			out, err := cmd.Output()
			if err != nil {
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					err = fmt.Errorf("%w: %s", err, ee.Stderr)
				}
				errs[i] = err
				return
			}
			results[i] = new(Image)
			errs[i] = json.Unmarshal(out, results[i])
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("puller %d: %v", i, err)
		}
	}
	for i, r := range results {
		if r.Root != results[0].Root || r.Digest != results[0].Digest {
			t.Errorf("puller %d got %s %s, puller 0 %s %s", i, r.Digest, r.Root, results[0].Digest, results[0].Root)
		}
	}
	checkImage(t, results[0])
	var layers, roots, images int
	for _, f := range storeFiles(t, s) {
		switch filepath.Dir(f) {
		case layersDir:
			layers++
		case rootsDir:
			roots++
		case imagesDir:
			images++
		default:
			t.Errorf("store holds %s", f)
		}
	}
	if layers != 2 || roots != 1 || images != 1 {
		t.Errorf("store holds %d layers, %d roots, %d records; want 2, 1, 1", layers, roots, images)
	}
}

// TestInterruptedPull: a pull cancelled while a layer is arriving returns
// the context's error and leaves nothing in the store; the next pull
// works. A temporary directory left by a killed pull is removed by the
// next Open, unless a pull is running.
func TestInterruptedPull(t *testing.T) {
	img := imageOf(t, "", baseLayers(t)...)
	layers, _ := img.Layers()
	second, _ := layers[1].Digest()
	size, _ := layers[1].Size()
	reg := newRegistry(t, "", "")
	ref := reg.push(t, "test/base:v1", img, nil)
	started := make(chan struct{})
	reg.mu.Lock()
	reg.wrap = func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/blobs/"+second.String()) {
			// The blob's own length: the client refuses a response
			// whose length is not the manifest's at once, which would
			// race the cancel this test is about.
			w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
			w.Write([]byte{0x1f, 0x8b, 8, 0})
			w.(http.Flusher).Flush()
			close(started)
			select {
			case <-r.Context().Done():
			case <-time.After(time.Minute):
			}
			return
		}
		next.ServeHTTP(w, r)
	}
	reg.mu.Unlock()
	s, _ := newStore(t)
	ctx, cancel := context.WithCancel(ctxT(t))
	go func() { <-started; cancel() }()
	_, err := s.Pull(ctx, ref, local())
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), ref) {
		t.Fatalf("cancelled pull: %v", err)
	}
	checkEmpty(t, s)

	reg.mu.Lock()
	reg.wrap = nil
	reg.mu.Unlock()
	got, err := s.Pull(ctxT(t), ref, local())
	if err != nil {
		t.Fatal(err)
	}
	checkImage(t, got)

	// What a killed pull leaves: a temporary directory, even one it
	// cannot enter.
	left := filepath.Join(s.Dir(), tmpDir, "work-killed")
	if err := os.MkdirAll(filepath.Join(left, "fs", "locked"), 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(left, "fs", "locked"), 0)
	busy, err := s.lockStore(ctxT(t), false)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := Open(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	s2.Close()
	if _, err := os.Stat(left); err != nil {
		t.Errorf("Open removed a temporary directory while a pull held the store: %v", err)
	}
	busy.Close()
	s3, err := Open(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	s3.Close()
	if _, err := os.Stat(left); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open left %s: %v", left, err)
	}
}

// TestPrune: Prune removes what keep does not want unless it is in use,
// then the roots and layers no one needs, and reports the bytes freed.
func TestPrune(t *testing.T) {
	base := baseLayers(t)
	a := imageOf(t, "", base...)
	b := imageOf(t, "", base[0], imagetest.Layer(t, "", file("b-only", 0o644, strings.Repeat("b", 10000))))
	src := filepath.Join(t.TempDir(), "layout")
	writeLayout(t, src, a, "a")
	writeLayout(t, src, b, "b")
	s, _ := newStore(t)
	imgA, err := s.Pull(ctxT(t), "oci:"+src+":a", PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	imgB, err := s.Pull(ctxT(t), "oci:"+src+":b", PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	keepA := func(img Image) bool { return img.Ref == imgA.Ref }

	lease, err := s.Use(ctxT(t), imgB)
	if err != nil {
		t.Fatal(err)
	}
	before := storeFiles(t, s)
	if _, err := s.Prune(ctxT(t), keepA); err != nil {
		t.Fatal(err)
	}
	if after := storeFiles(t, s); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("Prune with b in use: %v, was %v", after, before)
	}
	lease.Close()

	freed, err := s.Prune(ctxT(t), keepA)
	if err != nil {
		t.Fatal(err)
	}
	if freed < 10000 {
		t.Errorf("freed %d bytes, want at least b's 10000", freed)
	}
	list, _ := s.List()
	if len(list) != 1 || list[0].Ref != imgA.Ref {
		t.Errorf("after Prune: %+v", list)
	}
	if _, err := os.Stat(imgB.Root); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("b's root: %v", err)
	}
	var layers int
	for _, f := range storeFiles(t, s) {
		if filepath.Dir(f) == layersDir {
			layers++
		}
	}
	if layers != 2 {
		t.Errorf("%d layers left, want a's 2", layers)
	}
	checkImage(t, imgA)
	if _, err := s.Use(ctxT(t), imgB); !errors.Is(err, ErrNotFound) {
		t.Errorf("Use of a pruned image: %v", err)
	}

	// A Lease ends with its process; Prune waits for running pulls.
	busy, err := s.lockStore(ctxT(t), false)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctxT(t), 100*time.Millisecond)
	defer cancel()
	if _, err := s.Prune(short, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Prune while a pull runs: %v", err)
	}
	busy.Close()
	if freed, err := s.Prune(ctxT(t), nil); err != nil || freed == 0 {
		t.Errorf("Prune: %d, %v", freed, err)
	}
	checkEmpty(t, s)
}

func TestDefaultDir(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	if d, err := DefaultDir(); err != nil || d != "/xdg/fumehood-sandbox/images" {
		t.Errorf("with XDG_CACHE_HOME: %s, %v", d, err)
	}
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "/home/x")
	want := "/home/x/.cache/fumehood-sandbox/images"
	if os.Geteuid() == 0 {
		want = "/var/cache/fumehood-sandbox/images"
	}
	if d, err := DefaultDir(); err != nil || d != want {
		t.Errorf("DefaultDir: %s, %v; want %s", d, err, want)
	}
}

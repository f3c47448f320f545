//go:build linux

package spawner

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// caller is the caller's end of a socket pair whose other end a server
// serves.
type caller struct {
	t  *testing.T
	fd int
}

// serveTest starts a server on a new socket pair, and returns its
// caller's end; the server is shut down and gone when the test ends.
func serveTest(t *testing.T) *caller {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(fds[1])
	done := make(chan struct{})
	go func() {
		s.serve()
		s.shutdown()
		close(done)
	}()
	t.Cleanup(func() {
		unix.Close(fds[0]) // the caller is gone: the server ends
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the server did not end when its caller went away")
		}
		unix.Close(fds[1])
	})
	tv := unix.NsecToTimeval(int64(5 * time.Second))
	if err := unix.SetsockoptTimeval(fds[0], unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	return &caller{t, fds[0]}
}

// send sends msg, a request as JSON, with files as SCM_RIGHTS.
func (c *caller) send(msg string, files ...*os.File) {
	var oob []byte
	if len(files) > 0 {
		var fds []int
		for _, f := range files {
			fds = append(fds, int(f.Fd()))
		}
		oob = unix.UnixRights(fds...)
	}
	if err := unix.Sendmsg(c.fd, []byte(msg), oob, nil, 0); err != nil {
		c.t.Fatal(err)
	}
}

// read returns the next reply, failing the test if none comes within 5
// seconds.
func (c *caller) read() wire.Reply {
	buf := make([]byte, wire.MaxReply)
	n, err := unix.Read(c.fd, buf)
	if err != nil {
		c.t.Fatalf("no reply: %v", err)
	}
	var r wire.Reply
	if err := json.Unmarshal(buf[:n], &r); err != nil {
		c.t.Fatalf("reply %q: %v", buf[:n], err)
	}
	return r
}

// TestServerRefusesMalformedRequests: a request of a kind the spawner
// does not know, or with a field its kind does not carry, or without one
// it needs, is answered Refused with an error that names the kind and
// the field, and its files are closed; the server goes on serving the
// next request.
func TestServerRefusesMalformedRequests(t *testing.T) {
	c := serveTest(t)
	for _, tc := range []struct {
		msg   string
		words []string
	}{
		{`{"ID":1}`, []string{`""`}},
		{`{"ID":2,"Kind":"restart"}`, []string{`"restart"`}},
		{`{"ID":3,"Kind":"kill","Owner":"x"}`, []string{"kill", "Owner"}},
		{`{"ID":4,"Kind":"sync","Live":7}`, []string{"sync", "Live"}},
		{`{"ID":5,"Kind":"start","Spec":{}}`, []string{"start", "Program"}},
		{`{"ID":6,"Kind":"fill","Spec":{},"Owner":"x"}`, []string{"fill", "Pool"}},
		{`{"ID":7,"Kind":"dial","Live":3,"Network":"tcp4","Address":"127.0.0.1:1","DialTimeout":1000000,"Spec":{}}`, []string{"dial", "Spec"}},
		{`{"ID":8,"Kind":"dial","Live":3,"Network":"tcp4","Address":"127.0.0.1:1"}`, []string{"dial", "DialTimeout"}},
	} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		c.send(tc.msg, w)
		w.Close()
		rep := c.read()
		var want wire.Request
		json.Unmarshal([]byte(tc.msg), &want)
		if rep.ID != want.ID || rep.Kind != wire.Refused || rep.Err == nil {
			t.Errorf("%s: reply %+v, want Refused with an error", tc.msg, rep)
		} else {
			if err := want.Check(); !errors.Is(err, wire.ErrRequest) || !strings.Contains(rep.Err.Text, err.Error()) {
				t.Errorf("%s: refused with %q; Check says %v", tc.msg, rep.Err.Text, err)
			}
			for _, word := range tc.words {
				if !strings.Contains(rep.Err.Text, word) {
					t.Errorf("%s: refused with %q, which does not name %s", tc.msg, rep.Err.Text, word)
				}
			}
		}
		// The server's copy of the pipe's write end is closed: the read
		// end sees EOF, not a writer that is still there.
		r.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := r.Read(make([]byte, 1)); n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("%s: the file the request carried is still open in the server: read %d, %v", tc.msg, n, err)
		}
		r.Close()
	}
	// A good request after them is served: a Sync of an owner with no
	// runs is answered Synced, and a Kill of no run is not answered.
	c.send(`{"ID":10,"Kind":"kill"}`)
	c.send(`{"ID":11,"Kind":"sync","Owner":"x"}`)
	if rep := c.read(); rep.ID != 11 || rep.Kind != wire.Synced || rep.Err != nil {
		t.Errorf("a Sync after the refused requests: reply %+v, want Synced", rep)
	}
}

// Dev-server starts a web server in one call to a live sandbox
// (Options.Live) and uses it from the host in the next ones, as an agent
// does with the dev server of the app it builds. The first call starts
// python3's http.server in the background and returns while the server
// runs on; the second writes a page; the host then fetches the page with
// an http.Client whose Transport dials into the sandbox with
// Sandbox.DialContext. The server's port is on the sandbox's own loopback
// only: dialled on the host, nothing of the sandbox answers. Close ends
// the server.
//
// It needs python3 on the host (the sandbox sees the host's /usr).
//
//	go run ./examples/dev-server
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/fumehood/sandbox"
)

// port is the server's port inside the sandbox. Any port would do there:
// the sandbox's loopback is its own. One unlikely to be taken on the host
// makes the check below, that the host's 127.0.0.1 does not have it, say
// something.
const port = 18765

// page is what the second call writes and the host fetches, but its
// newline, which echo adds.
const page = "<h1>Hello from inside the sandbox</h1>"

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "dev-server:", err)
		os.Exit(1)
	}
}

// run plays the session, printing what happens to w.
func run(w io.Writer) error {
	// Live: one sandbox for all the calls, whose processes outlive the
	// call that started them, until Close. BestEffortLimits so the
	// example also runs where no writable cgroup exists.
	sb := sandbox.New(sandbox.Options{Live: &sandbox.Live{}, Limits: sandbox.Limits{Policy: sandbox.BestEffortLimits}})
	defer sb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	n := 0
	call := func(what, script string) (*sandbox.Result, error) {
		n++
		res, err := sb.Run(ctx, sandbox.Command("sh", "-c", script))
		if err != nil {
			return nil, err // the sandbox could not run the call
		}
		how := "ok"
		if err := res.Err(); err != nil {
			how = err.Error()
		}
		fmt.Fprintf(w, "\n== call %d: %s\n$ %s\n%s%s-> %s\n", n, what, script, res.Stdout, res.Stderr, how)
		return res, nil
	}

	// Call 1 starts the server in the background, its output to a file,
	// and returns at once: in a live sandbox the server runs on.
	res, err := call("start a web server in the background", fmt.Sprintf(
		"command -v python3 >/dev/null || exit 127\n"+
			"mkdir -p /workspace/site\n"+
			"python3 -m http.server %d --bind 127.0.0.1 --directory /workspace/site >/tmp/server.log 2>&1 &\n"+
			"echo started the server as pid $!", port))
	if err != nil {
		return err
	}
	if res.ExitCode == 127 {
		fmt.Fprintln(w, "python3 is not installed on this host; this example needs it")
		return nil
	}
	if !res.Success() {
		return errors.New("the first call could not start the server")
	}

	// Call 2 writes the page the server serves.
	if res, err = call("write a page", fmt.Sprintf("echo '%s' > /workspace/site/index.html", page)); err != nil {
		return err
	}
	if !res.Success() {
		return errors.New("the second call could not write the page")
	}

	// The host fetches it. Its http.Client dials into the sandbox's
	// network namespace whatever the URL's host says: the connection is
	// the host's alone, and nothing is exposed on the host's network.
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return sb.DialContext(ctx, "tcp", addr)
		},
	}}
	defer client.CloseIdleConnections()
	body, status, err := fetch(ctx, client, "http://dev-server/index.html")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\n== the host's GET http://dev-server/index.html, dialled with DialContext to %s in the sandbox: %s\n%s", addr, status, body)
	if body != page+"\n" {
		return fmt.Errorf("the page fetched from the sandbox is %q, want %q", body, page+"\n")
	}

	// The server is among the sandbox's processes, an orphan of the
	// first call that the sandbox's init adopted.
	procs, err := sb.Processes(ctx)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(procs, func(p sandbox.ProcessInfo) bool { return slices.Contains(p.Args, "http.server") })
	if i < 0 {
		return fmt.Errorf("the server is not among the sandbox's processes: %+v", procs)
	}
	p := procs[i]
	fmt.Fprintf(w, "\n== Processes: pid %d (parent %d) %s, %s, RSS %.1f MiB\n",
		p.Pid, p.PPid, strings.Join(p.Args, " "), p.State, float64(p.RSS)/(1<<20))

	// On the host's own loopback, the port is not the sandbox's.
	if err := hostDoesNotServe(ctx, w, addr); err != nil {
		return err
	}

	// Call 3, from inside: the server logged the host's request as one
	// from the sandbox's loopback.
	if _, err := call("read the server's log", "cat /tmp/server.log"); err != nil {
		return err
	}

	// Close ends the live sandbox, and the server with it.
	if err := sb.Close(); err != nil {
		return err
	}
	if _, err := sb.DialContext(ctx, "tcp", addr); !errors.Is(err, sandbox.ErrClosed) {
		return fmt.Errorf("DialContext after Close: %v, want ErrClosed", err)
	}
	fmt.Fprintln(w, "\n== Close ended the sandbox and its server: DialContext now fails with ErrClosed")
	return nil
}

// fetch GETs url through client and returns the body and status. It
// retries while the connection is refused: the server the first call
// started in the background may not listen yet.
func fetch(ctx context.Context, client *http.Client, url string) (string, string, error) {
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return "", "", err
		}
		resp, err := client.Do(req)
		if err == nil {
			defer resp.Body.Close()
			body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			return string(body), resp.Status, err
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return "", "", fmt.Errorf("GET %s in the sandbox: %w", url, err)
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return "", "", fmt.Errorf("the server in the sandbox never listened: %w", ctx.Err())
		}
	}
}

// hostDoesNotServe dials addr on the host's own network and says what it
// finds: nothing, or a listener of the host's that is not the sandbox's
// server (it does not serve the page).
func hostDoesNotServe(ctx context.Context, w io.Writer, addr string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		fmt.Fprintf(w, "\n== the same address dialled on the host: %v\n   (nothing listens there: the port is on the sandbox's own loopback only)\n", err)
		return nil
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	fmt.Fprintf(c, "GET /index.html HTTP/1.0\r\n\r\n")
	got, _ := io.ReadAll(io.LimitReader(c, 1<<20))
	if strings.Contains(string(got), page) {
		return fmt.Errorf("the host's %s serves the sandbox's page: the sandbox's port is on the host's network", addr)
	}
	fmt.Fprintf(w, "\n== the same address dialled on the host: something of the host's listens there, and it is not the sandbox's server (it does not serve the page)\n")
	return nil
}

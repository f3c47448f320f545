package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/fumehood/sandbox/examples/internal/exampletest"
)

// TestDevServer runs the example and checks that its output tells the
// story: the server started by the first call serves the second call's
// page to the host through DialContext, it is among the sandbox's
// processes, the host's own loopback does not have it, its log shows the
// request from inside, and Close ends it, after which no python3 of this
// process is left on the host.
func TestDevServer(t *testing.T) {
	exampletest.RequirePython(t)
	var out bytes.Buffer
	err := run(&out)
	t.Logf("the example printed:\n%s", out.String())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	for _, want := range []string{
		"== call 1: start a web server in the background\n",
		"started the server as pid ",
		"== call 2: write a page\n",
		fmt.Sprintf("dialled with DialContext to 127.0.0.1:%d in the sandbox: 200 OK\n%s", port, page),
		fmt.Sprintf("python3 -m http.server %d --bind 127.0.0.1", port),
		"== the same address dialled on the host: ",
		`"GET /index.html HTTP/1.1" 200 -`,
		"== Close ended the sandbox and its server",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q", want)
		}
	}
	if pids := exampletest.OwnPrograms("python3"); len(pids) > 0 {
		t.Errorf("python3 processes of this test still run after the example returned: %v", pids)
	}
}

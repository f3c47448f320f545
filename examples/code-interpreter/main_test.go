package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/fumehood/sandbox/examples/internal/exampletest"
)

// TestCodeInterpreter runs the example and checks that its output tells
// the story: state kept across cells, a file fetched by the host, an
// exception and an interrupt survived, the kernel in Processes, and its
// end at Close, after which no python3 of this process is left on the
// host.
func TestCodeInterpreter(t *testing.T) {
	exampletest.RequirePython(t)
	var out bytes.Buffer
	err := run(&out)
	t.Logf("the example printed:\n%s", out.String())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	for _, want := range []string{
		"== the kernel runs in the live sandbox as pid ",
		"--> x is 42\n",
		"--> x is still 42\n",
		`== the host fetched squares.csv with ReadFile: "0,0\n1,1\n2,4\n3,9\n"`,
		"!!! Traceback (most recent call last):\n",
		"ZeroDivisionError: division by zero\n",
		"--> still alive, x = 42\n",
		"== Processes shows the kernel busy on the runaway cell: pid ",
		" python3 -c <kernel.py>, running, CPU ",
		"KeyboardInterrupt\n",
		"--> the loop got to n = ",
		"== Close ended the kernel: signaled by SIGKILL\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q", want)
		}
	}
	if pids := exampletest.OwnPrograms("python3"); len(pids) > 0 {
		t.Errorf("python3 processes of this test still run after the example returned: %v", pids)
	}
}

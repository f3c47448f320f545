// Command poolpass runs the root package's tests that build a Sandbox
// through newTest, the test helper that gives it a pool when
// SANDBOX_TEST_POOL is set, and says how many ran.
//
// The set is found from the test sources, not kept by hand: every Test
// function of the package (for this GOOS and GOARCH, without build tags)
// whose body reaches newTest through calls, function values or methods of
// the package's test files. A new test that uses newTest is in the pass the
// moment it is written. The reach is by name, so it errs towards including
// a test that does not need the pool, never towards leaving one out.
//
// Usage, from the module root:
//
//	SANDBOX_TEST_POOL=2 go run ./scripts/poolpass [-list] [-run regexp] [go test flags]
//
// -list prints the selected tests, one a line, and runs nothing; -run
// narrows the selection to the tests that also match regexp. Other flags
// (e.g. -skip, -timeout) go to go test, which runs with -json so that
// the pass can count its tests: a failing test's output is printed as go
// test prints it, the rest is summed up in one line. The exit status is go
// test's.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// helper is the function whose callers the pass selects.
const helper = "newTest"

func main() {
	list, run, rest, err := parseArgs(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "poolpass:", err)
		os.Exit(2)
	}
	tests, err := selected(".", helper)
	if err != nil {
		fmt.Fprintln(os.Stderr, "poolpass:", err)
		os.Exit(2)
	}
	if run != "" {
		re, err := regexp.Compile(run)
		if err != nil {
			fmt.Fprintln(os.Stderr, "poolpass: -run:", err)
			os.Exit(2)
		}
		kept := tests[:0]
		for _, name := range tests {
			if re.MatchString(name) {
				kept = append(kept, name)
			}
		}
		tests = kept
	}
	if list {
		for _, name := range tests {
			fmt.Println(name)
		}
		return
	}
	if len(tests) == 0 {
		fmt.Fprintf(os.Stderr, "poolpass: no test reaches %s\n", helper)
		os.Exit(2)
	}
	os.Exit(runTests(tests, rest))
}

// parseArgs takes the pass's own flags, -list and -run, out of args and
// returns the rest for go test, whose flags the pass does not know.
func parseArgs(args []string) (list bool, run string, rest []string, err error) {
	for i := 0; i < len(args); i++ {
		switch a := strings.TrimPrefix(args[i], "-"); {
		case a == "-list" || a == "list":
			list = true
		case a == "-run" || a == "run":
			if i+1 == len(args) {
				return false, "", nil, errors.New("-run needs a regexp")
			}
			i++
			run = args[i]
		case strings.HasPrefix(a, "run=") || strings.HasPrefix(a, "-run="):
			_, run, _ = strings.Cut(a, "=")
		default:
			rest = append(rest, args[i])
		}
	}
	return list, run, rest, nil
}

// selected returns, sorted, the Test functions of the package in dir that
// reach target.
func selected(dir, target string) ([]string, error) {
	pkg, err := build.Default.ImportDir(dir, 0)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	g := graph{}
	for _, name := range pkg.TestGoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		g.add(f)
	}
	if _, ok := g[target]; !ok {
		return nil, fmt.Errorf("%s is not declared in %s's test files", target, pkg.ImportPath)
	}
	var tests []string
	for name := range g {
		if isTest(name) && g.reaches(name, target) {
			tests = append(tests, name)
		}
	}
	sort.Strings(tests)
	return tests, nil
}

// isTest reports whether name is go test's name of a test function.
func isTest(name string) bool {
	rest, ok := strings.CutPrefix(name, "Test")
	return ok && (rest == "" || !strings.ContainsAny(rest[:1], "abcdefghijklmnopqrstuvwxyz"))
}

// graph maps each package-level function, method (as ".Name") and
// variable of the test files to the names its body or value uses.
type graph map[string]map[string]bool

func (g graph) add(f *ast.File) {
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			name := d.Name.Name
			if d.Recv != nil {
				name = "." + name
			}
			if d.Body != nil {
				g.uses(name, d.Body)
			} else {
				g.uses(name, nil)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				if v, ok := s.(*ast.ValueSpec); ok {
					for _, n := range v.Names {
						for _, e := range v.Values {
							g.uses(n.Name, e)
						}
						g.uses(n.Name, nil)
					}
				}
			}
		}
	}
}

// uses records the identifiers under node as used by name; a selector's
// name counts as a use of every method so named.
func (g graph) uses(name string, node ast.Node) {
	if g[name] == nil {
		g[name] = map[string]bool{}
	}
	if node == nil {
		return
	}
	ast.Inspect(node, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Ident:
			g[name][n.Name] = true
		case *ast.SelectorExpr:
			g[name]["."+n.Sel.Name] = true
		}
		return true
	})
}

// reaches reports whether from uses target, directly or through the other
// names of g.
func (g graph) reaches(from, target string) bool {
	seen := map[string]bool{from: true}
	todo := []string{from}
	for len(todo) > 0 {
		n := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		for used := range g[n] {
			if used == target {
				return true
			}
			if _, declared := g[used]; declared && !seen[used] {
				seen[used] = true
				todo = append(todo, used)
			}
		}
	}
	return false
}

// event is the part of go test -json's output the pass reads.
type event struct {
	Action string
	Test   string
	Output string
}

// runTests runs go test -json on tests and returns its exit status.
func runTests(tests, args []string) int {
	cmdArgs := append([]string{"test", "-json", "-count=1", "-run", "^(" + strings.Join(tests, "|") + ")$"}, args...)
	goCmd := os.Getenv("GO")
	if goCmd == "" {
		goCmd = "go"
	}
	cmd := exec.Command(goCmd, append(cmdArgs, ".")...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "poolpass:", err)
		return 2
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "poolpass:", err)
		return 2
	}
	c := newCounter(os.Stdout)
	readErr := c.read(out)
	err = cmd.Wait()
	c.flush()
	fmt.Printf("poolpass: %d tests selected (they reach %s), %d ran: %d passed, %d failed, %d skipped\n",
		len(tests), helper, c.passed+c.failed+c.skipped, c.passed, c.failed, c.skipped)
	if readErr != nil {
		fmt.Fprintln(os.Stderr, "poolpass: reading go test's output:", readErr)
		return 2
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "poolpass:", err)
		return 2
	}
	return 0
}

// counter turns go test -json's events back into go test's own output,
// holding each top-level test's output until it ends and printing it only
// if it failed, and counts the top-level tests by how they ended.
type counter struct {
	w                       io.Writer
	held                    map[string][]string
	order                   []string
	passed, failed, skipped int
}

func newCounter(w io.Writer) *counter { return &counter{w: w, held: map[string][]string{}} }

func (c *counter) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			// Not an event (a build error printed as text): pass it on.
			fmt.Fprintln(c.w, sc.Text())
			continue
		}
		c.event(e)
	}
	return sc.Err()
}

func (c *counter) event(e event) {
	top, _, sub := strings.Cut(e.Test, "/")
	switch {
	case e.Action == "build-output" || (e.Test == "" && e.Action == "output"):
		fmt.Fprint(c.w, e.Output)
	case e.Test == "":
	case e.Action == "output":
		if _, ok := c.held[top]; !ok {
			c.order = append(c.order, top)
		}
		c.held[top] = append(c.held[top], e.Output)
	case sub:
	case e.Action == "pass" || e.Action == "skip":
		if e.Action == "pass" {
			c.passed++
		} else {
			c.skipped++
		}
		delete(c.held, top)
	case e.Action == "fail":
		c.failed++
		c.print(top)
	}
}

// print writes the output held for test and forgets it.
func (c *counter) print(test string) {
	for _, line := range c.held[test] {
		// go test -json runs the binary with -test.v; without -v
		// go test prints a failing test's output from its "---" line.
		if strings.HasPrefix(line, "=== ") {
			continue
		}
		fmt.Fprint(c.w, line)
	}
	delete(c.held, test)
}

// flush prints the output of the tests that never ended (the binary
// panicked or timed out in them).
func (c *counter) flush() {
	for _, test := range c.order {
		if _, ok := c.held[test]; ok {
			c.print(test)
		}
	}
}

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// cliCommand builds the command-line tool (cmd/sandbox) into dir and
// returns the argv a user types to run /bin/true in a sandbox with it:
// `sandbox run -- /bin/true`, with the tool's defaults, which build the
// same sandbox as the library's. It is built with the go command that
// runs this tool ($GO, else go on PATH).
func cliCommand(dir string) ([]string, error) {
	goCmd := os.Getenv("GO")
	if goCmd == "" {
		goCmd = "go"
	}
	bin := filepath.Join(dir, "sandbox")
	cmd := exec.Command(goCmd, "build", "-o", bin, "github.com/fumehood/sandbox/cmd/sandbox")
	// Static, as the README builds it: see there.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("build the command-line tool: %w", err)
	}
	return []string{bin, "run", "--", "/bin/true"}, nil
}

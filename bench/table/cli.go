package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// buildCLI builds the command-line tool (cmd/sandbox) into dir and returns
// its path.
func buildCLI(dir string) (string, error) {
	return buildCommand(dir, "sandbox", "github.com/fumehood/sandbox/cmd/sandbox")
}

// buildOneshot builds the oneshot row's command (bench/table/oneshot) into
// dir and returns its path.
func buildOneshot(dir string) (string, error) {
	return buildCommand(dir, "oneshot", "github.com/fumehood/sandbox/bench/table/oneshot")
}

// buildCommand builds the Go package pkg into dir as name and returns its
// path. It is built with the go command that runs this tool ($GO, else go
// on PATH), static, as the README builds the tool: see there.
func buildCommand(dir, name, pkg string) (string, error) {
	goCmd := os.Getenv("GO")
	if goCmd == "" {
		goCmd = "go"
	}
	bin := filepath.Join(dir, name)
	cmd := exec.Command(goCmd, "build", "-o", bin, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build %s: %w", pkg, err)
	}
	return bin, nil
}

// cliCommand is the argv a user types to run /bin/true in a sandbox with
// the tool bin: `sandbox run -- /bin/true`, with the tool's defaults,
// which build the same sandbox as the library's.
func cliCommand(bin string) []string { return []string{bin, "run", "--", "/bin/true"} }

// cliImageCommand is the same in the stored image ref of the store:
// `sandbox run --image-store STORE --image REF -- /bin/true`.
func cliImageCommand(bin, store, ref string) []string {
	return []string{bin, "run", "--image-store", store, "--image", ref, "--", "/bin/true"}
}

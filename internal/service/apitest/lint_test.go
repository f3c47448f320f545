package apitest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestRedoclyLint runs redocly's linter, installed from the npm registry
// into a directory of the test's own, on the document, so that the check a
// reader of the document would make is part of the suite.
func TestRedoclyLint(t *testing.T) {
	npx, err := exec.LookPath("npx")
	if err != nil {
		t.Skip("npx (npm) is not installed; redocly lint needs it")
	}
	spec, err := filepath.Abs(specFile)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npx, "--yes", "@redocly/cli@latest", "lint", spec)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "npm_config_cache="+filepath.Join(cmd.Dir, "npm-cache"))
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Skipf("redocly could not be fetched from the npm registry in time:\n%s", out)
	}
	if err != nil {
		t.Fatalf("redocly lint %s: %v\n%s", spec, err, out)
	}
}

package service

import (
	"fmt"
	"io"
	"log/slog"
	"os"
)

// openAudit opens the audit trail of -audit: path, appended to as JSON
// lines, one event of a sandbox a line (sandbox.Options.Audit). Every
// Sandbox the server makes shares the one handler, which writes each line
// whole. With no path there is no trail: a nil handler and closer.
func openAudit(path string) (slog.Handler, io.Closer, error) {
	if path == "" {
		return nil, nil, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("-audit: %w", err)
	}
	return slog.NewJSONHandler(f, nil), f, nil
}

// Toolserver is the smallest useful service that embeds the library: POST
// a shell command's text and get back how it ended and what it printed:
// the run's sandbox.Result, as JSON. Each request gets a fresh sandbox with no network and the default
// limits, and waits at most ten seconds.
//
//	go run ./examples/toolserver
//	curl -s localhost:8090/run -d 'echo hello from $(hostname)'
//
// It listens on loopback only and authenticates no one: it shows how a
// service calls the library, not how to face a network. The service users
// deploy is "sandbox serve" (cmd/sandbox), which authenticates every
// request, keeps tenants apart and holds each to its quotas.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"time"

	"github.com/fumehood/sandbox"
)

func main() {
	// Best effort lets rlimits stand in for the cgroup where this user
	// has no writable one; each answer's "limits" says what held.
	sb := sandbox.New(sandbox.Options{Limits: sandbox.Limits{Policy: sandbox.BestEffortLimits}})
	defer sb.Close()
	srv := &http.Server{Addr: "127.0.0.1:8090", Handler: handler(sb), ReadHeaderTimeout: 5 * time.Second}
	log.Printf("toolserver: POST a shell command to http://%s/run", srv.Addr)
	log.Fatal(srv.ListenAndServe())
}

// handler runs each POST /run body as "sh -c BODY" in sb.
func handler(sb *sandbox.Sandbox) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /run", func(w http.ResponseWriter, r *http.Request) {
		script, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
		if err != nil {
			http.Error(w, "the body is the command's text, at most 64 KiB: "+err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		// err is for a sandbox that could not run; however the
		// program ended (exit, signal, timeout, out of memory) is in res.
		res, err := sb.Run(ctx, sandbox.Command("sh", "-c", string(script)))
		if err != nil {
			status := http.StatusInternalServerError
			if errors.Is(err, sandbox.ErrNotSupported) {
				status = http.StatusNotImplemented
			}
			http.Error(w, err.Error(), status)
			return
		}
		// The Result serialises itself, as "sandbox run --json" prints it.
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(res)
	})
	return mux
}

package main

import "github.com/fumehood/sandbox/internal/service"

// serveMain runs "sandbox serve": the HTTP service (internal/service).
func serveMain(args []string) int {
	return service.Main(args)
}

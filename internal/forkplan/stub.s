// Empty: it lets start_linux.go declare the runtime fork hooks it links to
// without bodies.

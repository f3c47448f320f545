// Command k8spause is the pods' sandbox container in the Kubernetes test,
// which holds a pod's namespaces for its other containers: it waits for
// SIGTERM or SIGINT, reaping any process handed to it meanwhile. The test
// builds it into an image of its own, so that the nodes need no registry
// for the pause image a kubelet's runtime asks for.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 8)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}

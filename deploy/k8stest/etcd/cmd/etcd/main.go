// Command etcd is the etcd server, built from go.etcd.io/etcd/server/v3 at
// the version in this module's go.mod, as the store for the API server in
// make test-k8s.
//
// etcd is a module of its own, apart from the Kubernetes wrapper in
// ../kube, so that each keeps the versions of shared dependencies (grpc,
// OpenTelemetry) its upstream was built and tested with.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}

// Command kube-controller-manager is the Kubernetes controller manager,
// built from k8s.io/kubernetes at the version in this module's go.mod, for
// make test-k8s.
//
// It exists because Kubernetes' own cmd/ packages are main packages in a
// module whose replace directives (staging modules as local paths) do not
// apply to a module that requires it; this wrapper module carries those
// replaces itself, so the binary builds from the Go module proxy.
package main

import (
	"os"
	_ "time/tzdata"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}

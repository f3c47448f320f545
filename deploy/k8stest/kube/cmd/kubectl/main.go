// Command kubectl is the Kubernetes command-line client, built from
// k8s.io/kubectl at the version in this module's go.mod, for make test-k8s:
// Debian's kubectl (kubernetes-client 1.20) is far too old for the API
// server built next to it.
//
// It lives in this wrapper module because Kubernetes' own cmd/kubectl is a
// main package in a module whose replace directives (staging modules as
// local paths) do not apply to a module that requires it; this module
// carries those replaces itself, so the binary builds from the Go module
// proxy, at the same version as the server.
package main

import (
	"os"

	_ "k8s.io/client-go/plugin/pkg/client/auth"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	// Set the log verbosity from -v before the command is built, since
	// building it (plugins, .kuberc) already logs.
	_, _ = logs.GlogSetter(cmd.GetLogVerbosity(os.Args))
	if err := cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()); err != nil {
		util.CheckErr(err)
	}
}

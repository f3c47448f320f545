// Package validate checks the deployment files of "sandbox serve" offline: the
// Kubernetes manifests in deploy/kubernetes and deploy/agent-sandbox and the
// image recipe in deploy/Dockerfile.
//
// It is a module of its own so that the library's go.mod does not grow the
// Kubernetes API modules. Its test is the check CI runs:
//
//	cd deploy/validate && go test ./...
//
// Every manifest is decoded strictly into the k8s.io/api Go type its kind
// names, the agent-sandbox controller's kinds into the package's own types
// (an unknown kind, an unknown or duplicated field, or a value of the
// wrong type fails, with the file and the field's path), and then the files
// are checked against each other and against the server's flags: the
// ports, probes, grace period, security context, autoscaler target and
// selectors, the authentication an address beyond loopback needs, the
// volumes the file flags read from, the Host names -allow-host must list,
// and the Dockerfile's EXPOSE, USER, ENTRYPOINT and the package it builds. Nothing is fetched at test time: no cluster, no schemas.
//
// Where dockerd is installed and the test runs as root, it also runs the
// sandbox CLI in containers of a dockerd of its own, with the docker run
// settings README.md documents (TestDockerContainer).
package validate

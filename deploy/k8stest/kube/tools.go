//go:build tools

// Package tools records the Kubernetes main packages that build.sh builds
// by import path (go build k8s.io/kubernetes/cmd/...), so that go mod tidy
// keeps k8s.io/kubernetes and everything they need in go.mod. It is never
// compiled: a main package cannot be imported by a real build.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)

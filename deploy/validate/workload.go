package validate

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// workload is what runs the toolserver's pods, a StatefulSet or a
// Deployment, seen through the fields the checks read.
type workload struct {
	File     string
	Kind     string // "StatefulSet" or "Deployment"; "Sandbox" or "SandboxTemplate" (sandbox true)
	Name     string
	Template *corev1.PodTemplateSpec
	// PodPath is the field path of Template's spec in File.
	PodPath  string
	Selector *metav1.LabelSelector
	Replicas *int32
	// ServiceName is a StatefulSet's headless Service, which gives each
	// pod a stable DNS name; "" for a Deployment.
	ServiceName string
	// Parallel is a StatefulSet's podManagementPolicy Parallel.
	Parallel bool
	// Sandbox is set for the agent-sandbox controller's pods: one per
	// agent session, no peers, its own Service named after the pod.
	Sandbox bool
	// Namespace is the Sandbox's metadata.namespace, often "" (the
	// namespace kubectl applies it in).
	Namespace string
	// Service is a Sandbox's spec.service: the controller makes a
	// headless Service named after the pod.
	Service *bool
}

// templatePodPath is where a StatefulSet's or Deployment's pod spec is.
const templatePodPath = "spec.template.spec"

// workloads lists the bundle's StatefulSets and Deployments.
func (b *Bundle) workloads() []workload {
	var ws []workload
	for _, s := range b.StatefulSets {
		ws = append(ws, workload{File: s.File, Kind: "StatefulSet", Name: s.Obj.Name, Template: &s.Obj.Spec.Template, PodPath: templatePodPath,
			Selector: s.Obj.Spec.Selector, Replicas: s.Obj.Spec.Replicas, ServiceName: s.Obj.Spec.ServiceName,
			Parallel: s.Obj.Spec.PodManagementPolicy == "Parallel"})
	}
	for _, d := range b.Deployments {
		ws = append(ws, workload{File: d.File, Kind: "Deployment", Name: d.Obj.Name, Template: &d.Obj.Spec.Template, PodPath: templatePodPath,
			Selector: d.Obj.Spec.Selector, Replicas: d.Obj.Spec.Replicas})
	}
	return ws
}

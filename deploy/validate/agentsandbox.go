package validate

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The kinds of the kubernetes-sigs/agent-sandbox controller that
// deploy/agent-sandbox uses. Its Go module is not in the module proxy, so
// these are the validator's own: the fields of the project's v1beta1 CRDs
// that the files use, and no more. A field the files do not use fails
// decoding until it is added here, where the checks can read it.

// SandboxPodTemplate is the pod a Sandbox or SandboxTemplate runs: the
// controller takes only the labels and annotations of its metadata.
type SandboxPodTemplate struct {
	Metadata struct {
		Labels      map[string]string `json:"labels,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
	} `json:"metadata,omitempty"`
	Spec corev1.PodSpec `json:"spec"`
}

// Sandbox is agents.x-k8s.io/v1beta1 Sandbox: one pod, and with service
// a headless Service of the same name.
type Sandbox struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		PodTemplate          SandboxPodTemplate             `json:"podTemplate"`
		Service              *bool                          `json:"service,omitempty"`
		ShutdownTime         *metav1.Time                   `json:"shutdownTime,omitempty"`
		ShutdownPolicy       string                         `json:"shutdownPolicy,omitempty"` // Delete or Retain
		OperatingMode        string                         `json:"operatingMode,omitempty"`  // Running or Suspended
		VolumeClaimTemplates []corev1.PersistentVolumeClaim `json:"volumeClaimTemplates,omitempty"`
	} `json:"spec"`
}

// SandboxNetworkPolicy is the rules a SandboxTemplate's controller-managed
// NetworkPolicy has in place of its default ones.
type SandboxNetworkPolicy struct {
	Ingress []networkingv1.NetworkPolicyIngressRule `json:"ingress,omitempty"`
	Egress  []networkingv1.NetworkPolicyEgressRule  `json:"egress,omitempty"`
}

// SandboxTemplate is extensions.agents.x-k8s.io/v1beta1 SandboxTemplate:
// the pod (and Service) of the Sandboxes a warm pool or a claim makes.
type SandboxTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		PodTemplate SandboxPodTemplate `json:"podTemplate"`
		Service     *bool              `json:"service,omitempty"`
		// NetworkPolicyManagement is Managed (the default: the controller
		// makes a NetworkPolicy of NetworkPolicy's rules, or of its own
		// defaults) or Unmanaged (it makes none).
		NetworkPolicyManagement string                `json:"networkPolicyManagement,omitempty"`
		NetworkPolicy           *SandboxNetworkPolicy `json:"networkPolicy,omitempty"`
	} `json:"spec"`
}

// SandboxWarmPool is extensions.agents.x-k8s.io/v1beta1 SandboxWarmPool:
// replicas Sandboxes of a SandboxTemplate kept started for claims.
type SandboxWarmPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Replicas           *int32 `json:"replicas,omitempty"`
		SandboxTemplateRef struct {
			Name string `json:"name"`
		} `json:"sandboxTemplateRef"`
	} `json:"spec"`
}

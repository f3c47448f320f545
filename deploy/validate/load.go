package validate

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// Object is a decoded manifest and the file it came from.
type Object[T any] struct {
	File string // relative to deploy/
	Obj  *T
}

// Kustomization is the part of kustomization.yaml the checks read. It is
// not a k8s.io/api type; decoding it into this struct strictly still
// catches a misspelt field among these.
type Kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace,omitempty"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
		Digest  string `json:"digest,omitempty"`
	} `json:"images,omitempty"`
}

// Bundle is everything in deploy/ that the checks compare.
type Bundle struct {
	// RepoRoot is the repository root, where the Dockerfile's build
	// context starts.
	RepoRoot string

	Dockerfile     *Dockerfile
	DockerfileFile string

	Deployments     []Object[appsv1.Deployment]
	StatefulSets    []Object[appsv1.StatefulSet]
	Services        []Object[corev1.Service]
	HPAs            []Object[autoscalingv2.HorizontalPodAutoscaler]
	PDBs            []Object[policyv1.PodDisruptionBudget]
	NetworkPolicies []Object[networkingv1.NetworkPolicy]

	// ManifestFiles are the manifests' file names in kubernetes/, sorted;
	// Kustomization is kustomization.yaml's content, nil if there is none.
	ManifestFiles     []string
	Kustomization     *Kustomization
	KustomizationFile string

	// From agent-sandbox/: the server as one pod per agent session, made
	// by the kubernetes-sigs/agent-sandbox controller, and the
	// NetworkPolicy for those pods. Empty without that directory.
	Sandboxes        []Object[Sandbox]
	SandboxTemplates []Object[SandboxTemplate]
	SandboxWarmPools []Object[SandboxWarmPool]
	SessionPolicies  []Object[networkingv1.NetworkPolicy]
}

// agentSandboxDir holds the agent-sandbox controller's manifests.
const agentSandboxDir = "agent-sandbox"

// kustomizationName is the file kustomize reads in a directory.
const kustomizationName = "kustomization.yaml"

// Load reads deployDir's Dockerfile and every *.yaml and *.yml file in
// deployDir/kubernetes and, if there is one, deployDir/agent-sandbox. repoRoot is the Dockerfile's build context. Files
// that do not decode are reported, and left out of the Bundle.
func Load(deployDir, repoRoot string) (*Bundle, []Problem) {
	b := &Bundle{RepoRoot: repoRoot, DockerfileFile: "Dockerfile"}
	var probs []Problem

	text, err := os.ReadFile(filepath.Join(deployDir, b.DockerfileFile))
	if err != nil {
		probs = append(probs, Problem{File: b.DockerfileFile, Msg: err.Error()})
	} else if b.Dockerfile, err = parseDockerfile(string(text)); err != nil {
		probs = append(probs, Problem{File: b.DockerfileFile, Msg: err.Error()})
	}

	dir := filepath.Join(deployDir, "kubernetes")
	names, err := yamlFiles(dir)
	if err != nil {
		return b, append(probs, Problem{File: "kubernetes", Msg: err.Error()})
	}
	for _, name := range names {
		file := "kubernetes/" + name
		if name == kustomizationName {
			b.KustomizationFile = file
			data, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				probs = append(probs, Problem{File: file, Msg: err.Error()})
				continue
			}
			j, err := yaml.YAMLToJSONStrict(data)
			if err != nil {
				probs = append(probs, Problem{File: file, Msg: "not valid YAML: " + oneLine(err.Error())})
				continue
			}
			k := &Kustomization{}
			if ps := decodeStrict(file, j, k); len(ps) > 0 {
				probs = append(probs, ps...)
				continue
			}
			b.Kustomization = k
			continue
		}
		b.ManifestFiles = append(b.ManifestFiles, name)
		probs = append(probs, loadFile(filepath.Join(dir, name), file, func(f string, obj any) string {
			switch o := obj.(type) {
			case *appsv1.Deployment:
				b.Deployments = append(b.Deployments, Object[appsv1.Deployment]{f, o})
			case *appsv1.StatefulSet:
				b.StatefulSets = append(b.StatefulSets, Object[appsv1.StatefulSet]{f, o})
			case *corev1.Service:
				b.Services = append(b.Services, Object[corev1.Service]{f, o})
			case *autoscalingv2.HorizontalPodAutoscaler:
				b.HPAs = append(b.HPAs, Object[autoscalingv2.HorizontalPodAutoscaler]{f, o})
			case *policyv1.PodDisruptionBudget:
				b.PDBs = append(b.PDBs, Object[policyv1.PodDisruptionBudget]{f, o})
			case *networkingv1.NetworkPolicy:
				b.NetworkPolicies = append(b.NetworkPolicies, Object[networkingv1.NetworkPolicy]{f, o})
			default:
				return fmt.Sprintf("a %s belongs in %s/, with the agent-sandbox controller's other resources", kindOf(obj), agentSandboxDir)
			}
			return ""
		})...)
	}

	// agent-sandbox/ is the other way to run the server: its own pods,
	// checked on their own (checkAgentSandbox).
	dir = filepath.Join(deployDir, agentSandboxDir)
	names, err = yamlFiles(dir)
	if err != nil && !os.IsNotExist(err) {
		probs = append(probs, Problem{File: agentSandboxDir, Msg: err.Error()})
	}
	for _, name := range names {
		file := agentSandboxDir + "/" + name
		probs = append(probs, loadFile(filepath.Join(dir, name), file, func(f string, obj any) string {
			switch o := obj.(type) {
			case *Sandbox:
				b.Sandboxes = append(b.Sandboxes, Object[Sandbox]{f, o})
			case *SandboxTemplate:
				b.SandboxTemplates = append(b.SandboxTemplates, Object[SandboxTemplate]{f, o})
			case *SandboxWarmPool:
				b.SandboxWarmPools = append(b.SandboxWarmPools, Object[SandboxWarmPool]{f, o})
			case *networkingv1.NetworkPolicy:
				b.SessionPolicies = append(b.SessionPolicies, Object[networkingv1.NetworkPolicy]{f, o})
			default:
				return fmt.Sprintf("a %s belongs in kubernetes/: %s/ holds the agent-sandbox controller's resources and their NetworkPolicy", kindOf(obj), agentSandboxDir)
			}
			return ""
		})...)
	}
	return b, probs
}

// kindOf is a decoded object's kind.
func kindOf(obj any) string {
	if o, ok := obj.(interface{ GetObjectKind() schema.ObjectKind }); ok {
		return o.GetObjectKind().GroupVersionKind().Kind
	}
	return fmt.Sprintf("%T", obj)
}

// yamlFiles lists the *.yaml and *.yml files in dir, sorted.
func yamlFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if n := e.Name(); !e.IsDir() && (strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names, nil
}

// loadFile decodes each document of the manifest at path, named file in
// problems, and hands it to keep, which says why the directory may not
// hold it ("" when it may).
func loadFile(path, file string, keep func(f string, obj any) string) []Problem {
	data, err := os.ReadFile(path)
	if err != nil {
		return []Problem{{File: file, Msg: err.Error()}}
	}
	var probs []Problem
	docs := splitDocuments(data)
	if len(docs) == 0 {
		probs = append(probs, Problem{File: file, Msg: "holds no manifest"})
	}
	for i, doc := range docs {
		f := file
		if len(docs) > 1 {
			f = fmt.Sprintf("%s (document %d)", file, i+1)
		}
		obj, ps := decodeManifest(f, doc)
		probs = append(probs, ps...)
		if obj == nil {
			continue
		}
		if msg := keep(f, obj); msg != "" {
			probs = append(probs, Problem{File: f, Field: "kind", Msg: msg})
		}
	}
	return probs
}

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
}

// kustomizationName is the file kustomize reads in a directory.
const kustomizationName = "kustomization.yaml"

// Load reads deployDir's Dockerfile and every *.yaml and *.yml file in
// deployDir/kubernetes. repoRoot is the Dockerfile's build context. Files
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
	entries, err := os.ReadDir(dir)
	if err != nil {
		return b, append(probs, Problem{File: "kubernetes", Msg: err.Error()})
	}
	var names []string
	for _, e := range entries {
		if n := e.Name(); !e.IsDir() && (strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		file := "kubernetes/" + name
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			probs = append(probs, Problem{File: file, Msg: err.Error()})
			continue
		}
		if name == kustomizationName {
			b.KustomizationFile = file
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
			}
		}
	}
	return b, probs
}

// Package manifest decodes Kubernetes manifests strictly into their API
// types, for the tests of deploy/kubernetes (the kustomize set) and
// deploy/helm (the chart), which must judge the two sets by the same
// rules. It reads YAML, runs kustomize's library, and knows the kinds the
// deployment uses; it does not know what the deployment should hold (the
// tests do).
//
// Strict means what the API server's fieldValidation=Strict means: field
// names are case-sensitive and an unknown or duplicate field is an error.
package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sjson "sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// DecodeStrict decodes one YAML document into out the way the API server
// does with fieldValidation=Strict.
func DecodeStrict(doc []byte, out any) error {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strict, err := sjson.UnmarshalStrict(j, out)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

// Documents splits a multi-document YAML stream, dropping documents that
// hold only comments and blank lines (what a disabled Helm template or a
// commented-out manifest leaves). name is for errors.
func Documents(name string, data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		d, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		blank := true
		for line := range strings.SplitSeq(string(d), "\n") {
			line = strings.TrimSpace(line)
			if line != "" && line != "---" && !strings.HasPrefix(line, "#") {
				blank = false
				break
			}
		}
		if !blank {
			docs = append(docs, d)
		}
	}
}

// Decode decodes one manifest into the API type its apiVersion and kind
// name. A kind the deployment does not use is an error.
func Decode(doc []byte) (metav1.Object, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, err
	}
	var obj metav1.Object
	switch gvk := schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind); gvk {
	case corev1.SchemeGroupVersion.WithKind("Namespace"):
		obj = &corev1.Namespace{}
	case corev1.SchemeGroupVersion.WithKind("ServiceAccount"):
		obj = &corev1.ServiceAccount{}
	case corev1.SchemeGroupVersion.WithKind("Service"):
		obj = &corev1.Service{}
	case appsv1.SchemeGroupVersion.WithKind("DaemonSet"):
		obj = &appsv1.DaemonSet{}
	// The fleet labeller's (deploy/kubernetes/fleet).
	case batchv1.SchemeGroupVersion.WithKind("CronJob"):
		obj = &batchv1.CronJob{}
	case rbacv1.SchemeGroupVersion.WithKind("ClusterRole"):
		obj = &rbacv1.ClusterRole{}
	case rbacv1.SchemeGroupVersion.WithKind("ClusterRoleBinding"):
		obj = &rbacv1.ClusterRoleBinding{}
	case monitoringv1.SchemeGroupVersion.WithKind(monitoringv1.ServiceMonitorsKind):
		obj = &monitoringv1.ServiceMonitor{}
	case monitoringv1.SchemeGroupVersion.WithKind(monitoringv1.PrometheusRuleKind):
		obj = &monitoringv1.PrometheusRule{}
	default:
		return nil, fmt.Errorf("apiVersion %q, kind %q: not a type of this deployment", tm.APIVersion, tm.Kind)
	}
	if err := DecodeStrict(doc, obj); err != nil {
		return nil, fmt.Errorf("%s: %w", tm.Kind, err)
	}
	return obj, nil
}

// DecodeAll decodes every document of a YAML stream with Decode; errors
// name the stream and the document's position in it.
func DecodeAll(name string, data []byte) ([]metav1.Object, error) {
	docs, err := Documents(name, data)
	if err != nil {
		return nil, err
	}
	var objs []metav1.Object
	for i, doc := range docs {
		o, err := Decode(doc)
		if err != nil {
			return nil, fmt.Errorf("%s, document %d: %w", name, i+1, err)
		}
		objs = append(objs, o)
	}
	return objs, nil
}

// KustomizeBuild runs `kustomize build dir` with kustomize's own library
// (the one `kubectl kustomize` and `kubectl apply -k` embed, so no kubectl
// is needed) and decodes every object it emits with Decode. dir should be
// absolute: kustomize resolves a base by a path relative to its overlay.
func KustomizeBuild(dir string) ([]metav1.Object, error) {
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	out, err := rm.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	return DecodeAll("kustomize build "+dir, out)
}

// KustomizeOverlay writes dir/kustomization.yaml, text with every "{base}"
// replaced by the path of base relative to dir (kustomize takes a base
// or a component by a relative path only), and builds it
// (KustomizeBuild). dir and base should be absolute.
func KustomizeOverlay(dir, base, text string) ([]metav1.Object, error) {
	rel, err := filepath.Rel(dir, base)
	if err != nil {
		return nil, fmt.Errorf("overlay %s of %s: %w", dir, base, err)
	}
	name := filepath.Join(dir, "kustomization.yaml")
	if err := os.WriteFile(name, []byte(strings.ReplaceAll(text, "{base}", rel)), 0o644); err != nil {
		return nil, err
	}
	return KustomizeBuild(dir)
}

// KindName is "Kind/name" of a decoded object.
func KindName(o metav1.Object) string {
	return o.(runtime.Object).GetObjectKind().GroupVersionKind().Kind + "/" + o.GetName()
}

// Tolerates reports whether any of ts tolerates taint, by the rule the
// scheduler and the taint manager apply (corev1.Toleration.ToleratesTaint).
func Tolerates(ts []corev1.Toleration, taint corev1.Taint) bool {
	for i := range ts {
		if ts[i].ToleratesTaint(logr.Discard(), &taint, false) {
			return true
		}
	}
	return false
}

// DaemonSet returns the one DaemonSet among objs; none or several is an
// error that says how many.
func DaemonSet(objs []metav1.Object) (*appsv1.DaemonSet, error) {
	var ds []*appsv1.DaemonSet
	for _, o := range objs {
		if d, ok := o.(*appsv1.DaemonSet); ok {
			ds = append(ds, d)
		}
	}
	if len(ds) != 1 {
		return nil, fmt.Errorf("%d DaemonSets, want 1", len(ds))
	}
	return ds[0], nil
}

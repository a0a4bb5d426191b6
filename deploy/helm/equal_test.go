package helm

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuaffinity/gpuaffinity/deploy/internal/manifest"
)

// helmLabels are the labels the chart puts on every object's metadata and
// the kustomize set does not (templates/_helpers.tpl, "gpuaffinity.labels";
// the keys are Helm's standard labels,
// https://helm.sh/docs/chart_best_practices/labels/), with the values a
// release of this chart must give them.
func helmLabels(t *testing.T, release string) map[string]string {
	t.Helper()
	md := loadChart(t).Metadata
	return map[string]string{
		"app.kubernetes.io/instance":   release,
		"app.kubernetes.io/version":    md.AppVersion,
		"app.kubernetes.io/managed-by": "Helm",
		"helm.sh/chart":                md.Name + "-" + md.Version,
	}
}

// stripHelmLabels checks that every object carries helmLabels with their
// values and removes them.
func stripHelmLabels(t *testing.T, objs []metav1.Object, release string) {
	t.Helper()
	want := helmLabels(t, release)
	for _, o := range objs {
		l := o.GetLabels()
		for k, v := range want {
			if l[k] != v {
				t.Errorf("%s: label %s=%q, want %q", manifest.KindName(o), k, l[k], v)
			}
			delete(l, k)
		}
		o.SetLabels(l)
	}
}

// quantities compare by value (resource.Quantity keeps its parsed form in
// unexported fields): "96Mi" and "100663296" are the same limit.
var quantities = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

// diffSets compares the kustomize set with the chart's render, object by
// object, and returns "" when they describe the same objects. What may
// differ, and is normalized, is only this:
//
//   - The kustomize set's Namespace object is left out: the chart creates no
//     namespace (`helm install --create-namespace` does, and a chart that
//     templated its own namespace would clash with it). The chart's README
//     says how to give the namespace the kustomize set's Pod Security label.
//   - The chart's objects carry Helm's standard labels (helmLabels) on top:
//     the caller checks and strips them first (stripHelmLabels). Selectors
//     and pod template labels have none of them, so they are compared as
//     they are.
//
// Nothing else is normalized: every other field, down to the order of
// arguments and tolerations, must be equal.
func diffSets(kust, chart []metav1.Object) string {
	var b strings.Builder
	k := map[string]metav1.Object{}
	for _, o := range kust {
		if _, ok := o.(*corev1.Namespace); ok {
			continue
		}
		k[manifest.KindName(o)] = o
	}
	c := map[string]metav1.Object{}
	for _, o := range chart {
		c[manifest.KindName(o)] = o
	}
	keys := func(m map[string]metav1.Object) []string {
		return slices.Sorted(func(yield func(string) bool) {
			for n := range m {
				if !yield(n) {
					return
				}
			}
		})
	}
	if diff := cmp.Diff(keys(k), keys(c)); diff != "" {
		fmt.Fprintf(&b, "objects (-kustomize +chart):\n%s", diff)
	}
	for _, name := range keys(k) {
		if co, ok := c[name]; ok {
			if diff := cmp.Diff(k[name], co, quantities); diff != "" {
				fmt.Fprintf(&b, "%s (-kustomize +chart):\n%s", name, diff)
			}
		}
	}
	return b.String()
}

func kustomizeBuild(t *testing.T, dir string) []metav1.Object {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifest.KustomizeBuild(abs)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// TestDefaultRenderMatchesKustomize: `helm install gpuaffinity
// deploy/helm/gpuaffinity -n gpuaffinity` with the default values and
// `kubectl apply -k deploy/kubernetes` create the same objects.
func TestDefaultRenderMatchesKustomize(t *testing.T) {
	kust := kustomizeBuild(t, kustomizeDir)
	var namespaces []string
	for _, o := range kust {
		if ns, ok := o.(*corev1.Namespace); ok {
			namespaces = append(namespaces, ns.Name)
		}
	}
	if !slices.Equal(namespaces, []string{namespace}) {
		t.Errorf("kustomize set's Namespace objects %q, want the one %q the normalization leaves out", namespaces, namespace)
	}
	chart := renderObjects(t, renderOpts{release: release, namespace: namespace})
	if len(chart) != len(kust)-1 {
		t.Errorf("chart renders %d objects, the kustomize set has %d besides its Namespace", len(chart), len(kust)-1)
	}
	stripHelmLabels(t, chart, release)
	if diff := diffSets(kust, chart); diff != "" {
		t.Errorf("the default render and deploy/kubernetes differ; make the change in both "+
			"(deploy/helm/gpuaffinity/templates, values.yaml):\n%s", diff)
	}
}

// TestDiffSetsCatchesDrift changes a copy of deploy/kubernetes the way an
// edit to it alone would, and diffSets must report each change: the
// normalization hides nothing but what it names.
func TestDiffSetsCatchesDrift(t *testing.T) {
	chart := renderObjects(t, renderOpts{release: release, namespace: namespace})
	stripHelmLabels(t, chart, release)
	for _, tc := range []struct {
		name, file, old, new, want string
	}{
		{"a toleration narrowed", "daemonset.yaml", "        - operator: Exists\n", "        - operator: Exists\n          effect: NoSchedule\n", "Effect"},
		{"grace period", "daemonset.yaml", "terminationGracePeriodSeconds: 20", "terminationGracePeriodSeconds: 30", "TerminationGracePeriodSeconds"},
		{"an argument", "daemonset.yaml", "            - --web.listen-address=:19400\n", "            - --web.listen-address=:19400\n            - --log.format=json\n", "--log.format=json"},
		{"a memory limit", "daemonset.yaml", "memory: 96Mi", "memory: 128Mi", "Limits"},
		{"an object label", "service.yaml", "  labels:\n", "  labels:\n    example.com/team: gpu\n", "example.com/team"},
		{"a scrape interval", "servicemonitor.yaml", "interval: 30s", "interval: 15s", "Interval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyKustomizeSet(t, kustomizeDir)
			path := filepath.Join(dir, tc.file)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(data), tc.old) {
				t.Fatalf("%s has no %q to change: update this test", tc.file, tc.old)
			}
			changed := strings.Replace(string(data), tc.old, tc.new, 1)
			if err := os.WriteFile(path, []byte(changed), 0o644); err != nil {
				t.Fatal(err)
			}
			diff := diffSets(kustomizeBuild(t, dir), chart)
			if !strings.Contains(diff, tc.want) {
				t.Errorf("diff does not show the change (want %q in it):\n%s", tc.want, diff)
			}
		})
	}
}

// copyKustomizeSet copies the YAML files of a kustomize directory
// (deploy/kubernetes, deploy/kubernetes/fleet), kustomization.yaml and
// the manifests it names, into a temporary directory.
func copyKustomizeSet(t *testing.T, from string) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := filepath.Glob(filepath.Join(from, "*.yaml"))
	if err != nil || len(entries) == 0 {
		t.Fatalf("no manifests in %s: %v", from, err)
	}
	for _, src := range entries {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(src)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

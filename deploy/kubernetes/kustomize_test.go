package kubernetes

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpuaffinity/gpuaffinity/deploy/internal/manifest"
)

// kustomizeBuild builds dir as `kubectl apply -k` does and decodes every
// object it emits strictly (manifest.KustomizeBuild).
func kustomizeBuild(t *testing.T, dir string) []metav1.Object {
	t.Helper()
	objs, err := manifest.KustomizeBuild(dir)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// builtDaemonSet returns the one DaemonSet of a build.
func builtDaemonSet(t *testing.T, objs []metav1.Object) *appsv1.DaemonSet {
	t.Helper()
	ds, err := manifest.DaemonSet(objs)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return ds
}

// TestKustomizeBuild builds this directory as `kubectl apply -k
// deploy/kubernetes` does: it must succeed and emit exactly the objects
// of the files kustomization.yaml lists, each kind of the deployment
// once, every object in the gpuaffinity namespace, and the DaemonSet
// running the release image with the tag kustomization.yaml sets.
func TestKustomizeBuild(t *testing.T) {
	k := readKustomization(t)
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	built := kustomizeBuild(t, dir)

	// What the listed files hold, read without kustomize.
	var want []string
	for _, file := range k.Resources {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := manifest.DecodeAll(file, data)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			want = append(want, manifest.KindName(o))
		}
	}
	var got, kinds []string
	for _, o := range built {
		got = append(got, manifest.KindName(o))
		kinds = append(kinds, o.(runtime.Object).GetObjectKind().GroupVersionKind().Kind)
	}
	slices.Sort(want)
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("built objects against the listed files' (-files +built):\n%s", diff)
	}
	slices.Sort(kinds)
	wantKinds := []string{"DaemonSet", "Namespace", "PrometheusRule", "Service", "ServiceAccount", "ServiceMonitor"}
	if diff := cmp.Diff(wantKinds, kinds); diff != "" {
		t.Errorf("built kinds (-want +got):\n%s", diff)
	}

	for _, o := range built {
		if ns, ok := o.(*corev1.Namespace); ok {
			if ns.Name != namespace {
				t.Errorf("built Namespace %q, want %q", ns.Name, namespace)
			}
			continue
		}
		if o.GetNamespace() != namespace {
			t.Errorf("built %s in namespace %q, want %q", manifest.KindName(o), o.GetNamespace(), namespace)
		}
	}

	var tag string
	for _, img := range k.Images {
		if img.Name == image {
			tag = img.NewTag
		}
	}
	if tag == "" {
		t.Fatalf("kustomization.yaml sets no tag for %s", image)
	}
	ds := builtDaemonSet(t, built)
	if c := agentContainer(t, ds); c.Image != image+":"+tag {
		t.Errorf("built DaemonSet runs %s, want %s:%s", c.Image, image, tag)
	}
}

// TestKustomizeOverlay builds the overlay docs/operations.md ("Install")
// shows: the image tag and the release label must reach the DaemonSet and
// the objects Prometheus selects, and the label must leave selectors
// alone (a DaemonSet's selector cannot change on upgrade).
func TestKustomizeOverlay(t *testing.T) {
	base, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	const tag = "v9.8.7"
	baseDS := builtDaemonSet(t, kustomizeBuild(t, base))
	built, err := manifest.KustomizeOverlay(t.TempDir(), base, fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - {base}
images:
  - name: %s
    newTag: %s
labels:
  - pairs:
      release: kube-prometheus-stack
`, image, tag))
	if err != nil {
		t.Fatal(err)
	}

	ds := builtDaemonSet(t, built)
	if c := agentContainer(t, ds); c.Image != image+":"+tag {
		t.Errorf("overlay's DaemonSet runs %s, want %s:%s", c.Image, image, tag)
	}
	if diff := cmp.Diff(baseDS.Spec.Selector, ds.Spec.Selector); diff != "" {
		t.Errorf("the overlay's label changed the DaemonSet selector (-base +overlay):\n%s", diff)
	}
	var selected []string
	for _, o := range built {
		if o.GetLabels()["release"] != "kube-prometheus-stack" {
			t.Errorf("overlay's %s has no release=kube-prometheus-stack label", manifest.KindName(o))
		}
		switch o := o.(type) {
		case *monitoringv1.ServiceMonitor:
			selected = append(selected, manifest.KindName(o))
			if _, ok := o.Spec.Selector.MatchLabels["release"]; ok {
				t.Errorf("overlay's label went into the ServiceMonitor's selector %v", o.Spec.Selector.MatchLabels)
			}
		case *monitoringv1.PrometheusRule:
			selected = append(selected, manifest.KindName(o))
		case *corev1.Service:
			if _, ok := o.Spec.Selector["release"]; ok {
				t.Errorf("overlay's label went into the Service's selector %v", o.Spec.Selector)
			}
		}
		if _, ok := o.(*corev1.Namespace); !ok && o.GetNamespace() != namespace {
			t.Errorf("overlay's %s in namespace %q, want %q", manifest.KindName(o), o.GetNamespace(), namespace)
		}
	}
	if len(selected) != 2 {
		t.Errorf("overlay builds %s, want one ServiceMonitor and one PrometheusRule", strings.Join(selected, ", "))
	}
}

package manifest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// TestStrictDecoderRejects makes sure the decoder behind the deployment's
// tests rejects what the API server's strict field validation rejects.
func TestStrictDecoderRejects(t *testing.T) {
	const ds = `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: x
spec:
  selector:
    matchLabels: {app: x}
  template:
    metadata:
      labels: {app: x}
    spec:
      containers:
        - name: agent
          image: busybox
%s`
	if _, err := Decode(fmt.Appendf(nil, ds, "")); err != nil {
		t.Fatalf("the valid DaemonSet: %v", err)
	}
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"unknown field", fmt.Sprintf(ds, "          readinesProbe: {}\n"), "readinesProbe"},
		{"wrong case", fmt.Sprintf(ds, "          ImagePullPolicy: Always\n"), "ImagePullPolicy"},
		{"duplicate field", fmt.Sprintf(ds, "          image: busybox\n"), `key "image" already set`},
		{"unknown top-level field", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspecs: {}\n", "specs"},
		{"unknown kind", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n", "Deployment"},
		{"unknown group", "apiVersion: monitoring.coreos.com/v1alpha1\nkind: ServiceMonitor\nmetadata: {name: x}\n", "v1alpha1"},
		{"unknown ServiceMonitor field", "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: x}\nspec:\n  selector: {}\n  endpoints:\n    - port: metrics\n      intervall: 30s\n", "intervall"},
		{"unknown ClusterRole rule field", "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: x}\nrules:\n  - apiGroups: [\"\"]\n    resources: [nodes]\n    verb: [get]\n", "verb"},
		{"unknown CronJob field", "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: x}\nspec:\n  schedule: \"*/15 * * * *\"\n  concurrency: Forbid\n", "concurrency"},
		{"old rbac group", "apiVersion: rbac.authorization.k8s.io/v1beta1\nkind: ClusterRoleBinding\nmetadata: {name: x}\n", "v1beta1"},
		{"unknown rule field", "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata: {name: x}\nspec:\n  groups:\n    - name: g\n      rules:\n        - alert: A\n          expr: up\n          severity: critical\n", "severity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	err := DecodeStrict([]byte("resource:\n  - a.yaml\n"), &k)
	if err == nil || !strings.Contains(err.Error(), "resource") {
		t.Errorf("a misspelt field: error %v, want one naming it", err)
	}
}

// TestDocuments: a stream as a disabled Helm template leaves it (comments
// and separators only) holds no document; the others keep their order.
func TestDocuments(t *testing.T) {
	stream := "# a comment\n---\n# only a comment\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a}\n---\n\n---\napiVersion: v1\nkind: Service\nmetadata: {name: b}\n"
	objs, err := DecodeAll("stream", []byte(stream))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, KindName(o))
	}
	if diff := cmp.Diff([]string{"ServiceAccount/a", "Service/b"}, got); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	if docs, err := Documents("blank", []byte("---\n# nothing\n---\n")); err != nil || len(docs) != 0 {
		t.Errorf("comment-only stream: %d documents, error %v; want none", len(docs), err)
	}
	_, err = DecodeAll("stream", []byte("apiVersion: v1\nkind: Service\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: b}\nspecs: {}\n"))
	if err == nil || !strings.Contains(err.Error(), "stream, document 2") {
		t.Errorf("error %v, want one naming the stream and document 2", err)
	}
}

// TestKustomizeBuild builds a two-file kustomization with a namespace and
// an image tag: both transforms must show in the decoded objects.
func TestKustomizeBuild(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: ns\nresources: [sa.yaml, ds.yaml]\nimages:\n  - name: example.com/agent\n    newTag: v1.2.3\n",
		"sa.yaml":            "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a}\n",
		"ds.yaml":            "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d}\nspec:\n  selector: {matchLabels: {app: d}}\n  template:\n    metadata: {labels: {app: d}}\n    spec:\n      containers: [{name: c, image: example.com/agent}]\n",
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	objs, err := KustomizeBuild(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 {
		t.Fatalf("built %d objects, want 2", len(objs))
	}
	for _, o := range objs {
		if o.GetNamespace() != "ns" {
			t.Errorf("%s in namespace %q, want ns", KindName(o), o.GetNamespace())
		}
	}
	if _, err := KustomizeBuild(filepath.Join(dir, "missing")); err == nil {
		t.Error("building a missing directory: no error")
	}
}

func TestTolerates(t *testing.T) {
	exists := []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	gpuOnly := []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	for _, tc := range []struct {
		name  string
		ts    []corev1.Toleration
		taint corev1.Taint
		want  bool
	}{
		// An empty key with operator Exists matches every key, value and
		// effect (the Toleration type's documentation in k8s.io/api).
		{"Exists, any NoExecute", exists, corev1.Taint{Key: "example.com/unhealthy", Value: "xid", Effect: corev1.TaintEffectNoExecute}, true},
		{"key and effect", gpuOnly, corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}, true},
		{"same key, other effect", gpuOnly, corev1.Taint{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoExecute}, false},
		{"other key", gpuOnly, corev1.Taint{Key: "example.com/unhealthy", Effect: corev1.TaintEffectNoSchedule}, false},
		{"none", nil, corev1.Taint{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}, false},
	} {
		if got := Tolerates(tc.ts, tc.taint); got != tc.want {
			t.Errorf("%s: Tolerates(%v, %s) = %t, want %t", tc.name, tc.ts, tc.taint.ToString(), got, tc.want)
		}
	}
}

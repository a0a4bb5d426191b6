package helm

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpuaffinity/gpuaffinity/deploy/internal/manifest"
)

const (
	chartDir     = "gpuaffinity"
	kustomizeDir = "../kubernetes"
	// The install command of the chart's README.md: release gpuaffinity
	// in namespace gpuaffinity, the namespace of the kustomize set.
	release   = "gpuaffinity"
	namespace = "gpuaffinity"
	image     = "ghcr.io/gpuaffinity/gpuaffinity"
)

func loadChart(t *testing.T) *chartv2.Chart {
	t.Helper()
	ch, err := loader.LoadDir(chartDir)
	if err != nil {
		t.Fatalf("load chart %s: %v", chartDir, err)
	}
	return ch
}

// renderOpts are the inputs of one render, as `helm template` takes them.
type renderOpts struct {
	values    map[string]any // user values (-f, --set); nil: the chart's defaults
	release   string
	namespace string
	// lenient renders as `helm install` does; the default, strict, also
	// fails on a template that reads a value the values do not hold
	// (missingkey=error), which catches misspelt value names in templates.
	lenient bool
}

// render coalesces the values with the chart's, validates them against
// values.schema.json and renders every template, as `helm install` does
// before it talks to the cluster. It returns the rendered files by name
// (gpuaffinity/templates/<file>).
func render(t *testing.T, o renderOpts) (map[string]string, error) {
	t.Helper()
	ch := loadChart(t)
	top, err := util.ToRenderValuesWithSchemaValidation(ch, o.values,
		common.ReleaseOptions{Name: o.release, Namespace: o.namespace, IsInstall: true},
		common.DefaultCapabilities.Copy(), false)
	if err != nil {
		return nil, err
	}
	return engine.Engine{Strict: !o.lenient}.Render(ch, top)
}

// renderObjects renders and decodes every object of every manifest
// template strictly (manifest.DecodeAll). NOTES.txt is not a manifest.
func renderObjects(t *testing.T, o renderOpts) []metav1.Object {
	t.Helper()
	files, err := render(t, o)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	var objs []metav1.Object
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range files {
			if !yield(n) {
				return
			}
		}
	}) {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		got, err := manifest.DecodeAll(name, []byte(files[name]))
		if err != nil {
			t.Fatalf("%v\n%s", err, files[name])
		}
		objs = append(objs, got...)
	}
	return objs
}

// readValues reads a values file of testdata/.
func readValues(t *testing.T, name string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.UnmarshalStrict(data, &v); err != nil {
		t.Fatalf("testdata/%s: %v", name, err)
	}
	return v
}

// byKindName indexes objects by "Kind/name", failing on a duplicate.
func byKindName(t *testing.T, objs []metav1.Object) map[string]metav1.Object {
	t.Helper()
	m := map[string]metav1.Object{}
	for _, o := range objs {
		k := manifest.KindName(o)
		if _, dup := m[k]; dup {
			t.Fatalf("two objects %s", k)
		}
		m[k] = o
	}
	return m
}

// kustomizeTag is the image tag deploy/kubernetes/kustomization.yaml sets
// for the release image. (The tests there decode the file strictly; this
// reads the one field.)
func kustomizeTag(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(kustomizeDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Images []struct {
			Name   string `json:"name"`
			NewTag string `json:"newTag"`
		} `json:"images"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	for _, img := range k.Images {
		if img.Name == image && img.NewTag != "" {
			return img.NewTag
		}
	}
	t.Fatalf("kustomization.yaml sets no tag for %s", image)
	return ""
}

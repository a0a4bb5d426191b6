package ociimage

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// The manifests under deploy/ name the image `make image` tags:
// Repository:Release in the DaemonSet, Release in the kustomization's
// images: entry.
func TestManifestsNameTheImage(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	k8s := filepath.Join(filepath.Dir(file), "..", "..", "kubernetes")
	read := func(name string, v any) {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(k8s, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(data, v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	var kust struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Namespace  string   `json:"namespace"`
		Resources  []string `json:"resources"`
		Images     []struct {
			Name   string `json:"name"`
			NewTag string `json:"newTag"`
		} `json:"images"`
	}
	read("kustomization.yaml", &kust)
	if len(kust.Images) != 1 || kust.Images[0].Name != Repository || kust.Images[0].NewTag != Release {
		t.Errorf("kustomization.yaml images: %+v, want [{%s %s}]", kust.Images, Repository, Release)
	}
	var ds appsv1.DaemonSet
	read("daemonset.yaml", &ds)
	if c := ds.Spec.Template.Spec.Containers; len(c) != 1 || c[0].Image != Repository+":"+Release {
		t.Errorf("daemonset.yaml containers: want one with image %s:%s", Repository, Release)
	}
}

package helm

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuaffinity/gpuaffinity/deploy/internal/manifest"
)

// The flags jobs.enabled and jobs.info pass (names fixed with the agent's
// exporter; docs/audit.md, "In the agent").
const (
	jobsFlag     = "--collector.jobs=true"
	jobsInfoFlag = "--collector.jobs.info=true"
)

// jobsArgs returns the DaemonSet's hostPID and the agent's arguments that
// name the job audit's flags, in order.
func jobsArgs(t *testing.T, objs []metav1.Object) (bool, []string) {
	t.Helper()
	ds := daemonSet(t, objs)
	var flags []string
	for _, a := range ds.Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(a, "--collector.jobs") {
			flags = append(flags, a)
		}
	}
	return ds.Spec.Template.Spec.HostPID, flags
}

// TestJobsValues: hostPID and the flags come only with jobs.enabled, the
// info flag only with jobs.info too, and jobs.info alone is an error, not
// a value silently ignored.
func TestJobsValues(t *testing.T) {
	jobs := func(enabled, info bool) map[string]any {
		return map[string]any{"jobs": map[string]any{"enabled": enabled, "info": info}}
	}
	for _, tc := range []struct {
		name    string
		values  map[string]any
		hostPID bool
		flags   []string
	}{
		{"defaults", nil, false, nil},
		{"off", jobs(false, false), false, nil},
		{"enabled", jobs(true, false), true, []string{jobsFlag}},
		{"enabled and info", jobs(true, true), true, []string{jobsFlag, jobsInfoFlag}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hostPID, flags := jobsArgs(t, renderObjects(t, renderOpts{values: tc.values, release: release, namespace: namespace}))
			if hostPID != tc.hostPID || !slices.Equal(flags, tc.flags) {
				t.Errorf("hostPID %t, flags %q; want %t, %q", hostPID, flags, tc.hostPID, tc.flags)
			}
		})
	}
	_, err := render(t, renderOpts{values: jobs(false, true), release: release, namespace: namespace})
	if err == nil || !strings.Contains(err.Error(), "jobs.info needs jobs.enabled") {
		t.Errorf("jobs.info without jobs.enabled: error %v, want one saying jobs.info needs jobs.enabled", err)
	}
}

// TestJobsRenderMatchesKustomize: with jobs.enabled (and nothing else
// set) the chart renders the objects of deploy/kubernetes with its jobs
// component, normalized as TestDefaultRenderMatchesKustomize normalizes
// them and no further.
func TestJobsRenderMatchesKustomize(t *testing.T) {
	base, err := filepath.Abs(kustomizeDir)
	if err != nil {
		t.Fatal(err)
	}
	kustObjs, err := manifest.KustomizeOverlay(t.TempDir(), base, "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"+
		"resources:\n  - {base}\ncomponents:\n  - {base}/jobs\n")
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]any{"jobs": map[string]any{"enabled": true}}
	chart := renderObjects(t, renderOpts{values: values, release: release, namespace: namespace})
	stripHelmLabels(t, chart, release)
	if diff := diffSets(kustObjs, chart); diff != "" {
		t.Errorf("the render with jobs.enabled=true and deploy/kubernetes with its jobs component differ; "+
			"make the change in both (deploy/helm/gpuaffinity/templates/daemonset.yaml, deploy/kubernetes/jobs):\n%s", diff)
	}
}

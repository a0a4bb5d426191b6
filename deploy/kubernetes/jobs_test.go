package kubernetes

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuaffinity/gpuaffinity/deploy/internal/manifest"
)

// jobsComponent is the kustomize Component that turns the agent's job
// audit on (jobs/kustomization.yaml).
const jobsComponent = "jobs"

// The flags the job audit adds (names fixed with the agent's exporter;
// docs/audit.md, "In the agent").
const (
	jobsFlag     = "--collector.jobs=true"
	jobsInfoFlag = "--collector.jobs.info=true"
)

// buildJobsOverlay builds an overlay of this directory with the jobs
// component and extra (more kustomization.yaml text), as the component's
// comment shows it, and returns its objects.
func buildJobsOverlay(t *testing.T, extra string) []metav1.Object {
	t.Helper()
	base, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifest.KustomizeOverlay(t.TempDir(), base, "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"+
		"resources:\n  - {base}\ncomponents:\n  - "+filepath.Join("{base}", jobsComponent)+"\n"+extra)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// withoutJobs undoes what the component may change in a DaemonSet:
// hostPID back to false and the given trailing arguments removed (the
// test fails unless they are there, last, in order).
func withoutJobs(t *testing.T, ds *appsv1.DaemonSet, flags ...string) *appsv1.DaemonSet {
	t.Helper()
	ds = ds.DeepCopy()
	ps := &ds.Spec.Template.Spec
	if !ps.HostPID {
		t.Errorf("hostPID false: the job audit needs the host's PID namespace")
	}
	ps.HostPID = false
	c := &ps.Containers[0]
	n := len(c.Args) - len(flags)
	if n < 0 || !slices.Equal(c.Args[n:], flags) {
		t.Errorf("args %q: want them to end with %q", c.Args, flags)
	} else {
		c.Args = c.Args[:n]
	}
	return ds
}

// TestJobsComponent: the overlay with the jobs component differs from
// deploy/kubernetes in the DaemonSet's hostPID and one argument, and in
// nothing else; the component's comment's extra patch for the per-job
// series adds one more argument. (The flags are the agent's; hostPID's
// reason is docs/audit.md's.)
func TestJobsComponent(t *testing.T) {
	base := kustomizeBuild(t, ".")
	baseDS := builtDaemonSet(t, base)
	if baseDS.Spec.Template.Spec.HostPID || slices.ContainsFunc(agentContainer(t, baseDS).Args, func(a string) bool {
		return strings.HasPrefix(a, "--collector.jobs")
	}) {
		t.Fatalf("deploy/kubernetes has the job audit on: it must be off by default")
	}
	info := `patches:
  - target: {kind: DaemonSet, name: gpuaffinity-agent}
    patch: |-
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --collector.jobs.info=true
`
	for _, tc := range []struct {
		name, extra string
		flags       []string
	}{
		{"jobs", "", []string{jobsFlag}},
		{"jobs and info", info, []string{jobsFlag, jobsInfoFlag}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			built := buildJobsOverlay(t, tc.extra)
			if diff := cmp.Diff(kindNames(base), kindNames(built)); diff != "" {
				t.Errorf("objects (-base +overlay):\n%s", diff)
			}
			byName := map[string]metav1.Object{}
			for _, o := range base {
				byName[manifest.KindName(o)] = o
			}
			for _, o := range built {
				want := byName[manifest.KindName(o)]
				if ds, ok := o.(*appsv1.DaemonSet); ok {
					o = withoutJobs(t, ds, tc.flags...)
				}
				if diff := cmp.Diff(want, o); diff != "" {
					t.Errorf("%s differs beyond hostPID and %q (-base +overlay):\n%s", manifest.KindName(o), tc.flags, diff)
				}
			}
		})
	}
}

func kindNames(objs []metav1.Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, manifest.KindName(o))
	}
	slices.Sort(out)
	return out
}

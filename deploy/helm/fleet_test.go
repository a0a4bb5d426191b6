package helm

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuaffinity/gpuaffinity/deploy/internal/manifest"
)

// fleetKustomizeDir is the opt-in fleet labeller's kustomize set, which
// the chart renders with fleet.enabled.
const fleetKustomizeDir = kustomizeDir + "/fleet"

// fleetOn is the one value that turns the fleet labeller on; every other
// fleet value keeps its default.
var fleetOn = map[string]any{"fleet": map[string]any{"enabled": true}}

// fleetObjects are the objects of the fleet labeller among objs, by the
// component label the kustomize set gives them.
func fleetObjects(objs []metav1.Object) []metav1.Object {
	var f []metav1.Object
	for _, o := range objs {
		if o.GetLabels()["app.kubernetes.io/component"] == "fleet" {
			f = append(f, o)
		}
	}
	return f
}

// cronJob returns the one CronJob among objs and its one container.
func cronJob(t *testing.T, objs []metav1.Object) (*batchv1.CronJob, corev1.Container) {
	t.Helper()
	var cjs []*batchv1.CronJob
	for _, o := range objs {
		if cj, ok := o.(*batchv1.CronJob); ok {
			cjs = append(cjs, cj)
		}
	}
	if len(cjs) != 1 {
		t.Fatalf("render has %d CronJobs, want 1", len(cjs))
	}
	cs := cjs[0].Spec.JobTemplate.Spec.Template.Spec.Containers
	if len(cs) != 1 || cs[0].Name != "fleet" {
		t.Fatalf("CronJob containers %d, want one named fleet", len(cs))
	}
	return cjs[0], cs[0]
}

// TestFleetOffByDefault: the fleet labeller patches node labels
// cluster-wide, so the default render has none of its objects, and no
// ClusterRole or binding at all.
func TestFleetOffByDefault(t *testing.T) {
	for _, o := range renderObjects(t, renderOpts{release: release, namespace: namespace}) {
		switch o.(type) {
		case *batchv1.CronJob, *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding:
			t.Errorf("default render has %s", manifest.KindName(o))
		}
		if o.GetLabels()["app.kubernetes.io/component"] == "fleet" {
			t.Errorf("default render has the fleet labeller's %s", manifest.KindName(o))
		}
	}
}

// TestFleetRenderMatchesKustomize: with fleet.enabled (and nothing else
// set), the chart renders the objects of `kubectl apply -k
// deploy/kubernetes` and of `kubectl apply -k deploy/kubernetes/fleet`,
// normalized as TestDefaultRenderMatchesKustomize normalizes them and no
// further. The fleet values' defaults (schedule, Prometheus URL,
// resources, GOMEMLIMIT, …) are cronjob.yaml's: a change to either
// alone fails here.
func TestFleetRenderMatchesKustomize(t *testing.T) {
	agent := kustomizeBuild(t, kustomizeDir)
	fleet := kustomizeBuild(t, fleetKustomizeDir)
	if got, want := kinds(fleet), []string{"ClusterRole/gpuaffinity-fleet", "ClusterRoleBinding/gpuaffinity-fleet",
		"CronJob/gpuaffinity-fleet-labels", "ServiceAccount/gpuaffinity-fleet"}; !slices.Equal(got, want) {
		// diffSets would compare them all the same; this says which set
		// moved on.
		t.Errorf("kustomize fleet set %q, want %q: update the chart's templates/fleet-*.yaml", got, want)
	}
	for _, o := range fleet {
		if _, ok := o.(*corev1.Namespace); ok {
			t.Errorf("kustomize fleet set has %s: the normalization would leave it out", manifest.KindName(o))
		}
	}
	chart := renderObjects(t, renderOpts{values: fleetOn, release: release, namespace: namespace})
	if got := len(fleetObjects(chart)); got != len(fleet) {
		t.Errorf("chart renders %d fleet objects, the kustomize fleet set has %d", got, len(fleet))
	}
	stripHelmLabels(t, chart, release)
	if diff := diffSets(append(agent, fleet...), chart); diff != "" {
		t.Errorf("the render with fleet.enabled=true and deploy/kubernetes + deploy/kubernetes/fleet differ; "+
			"make the change in both (deploy/helm/gpuaffinity/templates/fleet-*.yaml, values.yaml's fleet):\n%s", diff)
	}
}

// TestFleetDiffCatchesDrift changes a copy of deploy/kubernetes/fleet the
// way an edit to it alone would (cronjob.yaml's memory figures first: the
// chart's fleet.resources and fleet.goMemLimit defaults are copies of
// them), and the comparison of TestFleetRenderMatchesKustomize must
// report each change.
func TestFleetDiffCatchesDrift(t *testing.T) {
	agent := kustomizeBuild(t, kustomizeDir)
	chart := renderObjects(t, renderOpts{values: fleetOn, release: release, namespace: namespace})
	stripHelmLabels(t, chart, release)
	for _, tc := range []struct {
		name, file, old, new, want string
	}{
		{"a memory limit", "cronjob.yaml", "limits:\n                  memory: 192Mi", "limits:\n                  memory: 256Mi", "Limits"},
		{"a memory request", "cronjob.yaml", "memory: 128Mi", "memory: 96Mi", "Requests"},
		{"GOMEMLIMIT", "cronjob.yaml", "value: 150MiB", "value: 200MiB", "200MiB"},
		{"the schedule", "cronjob.yaml", `schedule: "*/15 * * * *"`, `schedule: "*/30 * * * *"`, "*/30"},
		{"the Prometheus URL", "cronjob.yaml", "value: http://prometheus-operated.monitoring.svc:9090", "value: http://prometheus.example.com:9090", "example.com"},
		{"an argument", "cronjob.yaml", "                - --timeout=60s\n", "                - --timeout=60s\n                - --scheme=topograph\n", "--scheme=topograph"},
		{"a verb", "rbac.yaml", `verbs: ["get", "list", "patch"]`, `verbs: ["get", "list", "patch", "update"]`, "update"},
		{"the image tag", "kustomization.yaml", "newTag: v0.1.0", "newTag: v0.2.0", "Image"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyKustomizeSet(t, fleetKustomizeDir)
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
			diff := diffSets(append(slices.Clone(agent), kustomizeBuild(t, dir)...), chart)
			if !strings.Contains(diff, tc.want) {
				t.Errorf("diff does not show the change (want %q in it):\n%s", tc.want, diff)
			}
		})
	}
}

// TestFleetValues renders testdata/fleet-values.yaml, where every fleet
// value differs from its default, into another release and namespace,
// and checks that each value lands where it should.
func TestFleetValues(t *testing.T) {
	const rel, ns = "site-gpu", "gpu-system"
	objs := renderObjects(t, renderOpts{values: readValues(t, "fleet-values.yaml"), release: rel, namespace: ns})
	fleet := fleetObjects(objs)
	if diff := cmp.Diff([]string{"ClusterRole/gpuaffinity-fleet", "ClusterRoleBinding/gpuaffinity-fleet",
		"CronJob/gpuaffinity-fleet-labels", "ServiceAccount/gpuaffinity-fleet"}, kinds(fleet)); diff != "" {
		t.Errorf("fleet objects (-want +got):\n%s", diff)
	}
	m := byKindName(t, objs)
	for _, k := range []string{"CronJob/gpuaffinity-fleet-labels", "ServiceAccount/gpuaffinity-fleet"} {
		if o := m[k]; o != nil && o.GetNamespace() != ns {
			t.Errorf("%s in namespace %q, want the release's %q", k, o.GetNamespace(), ns)
		}
	}
	for _, o := range fleet {
		if o.GetLabels()["app.kubernetes.io/instance"] != rel {
			t.Errorf("%s: app.kubernetes.io/instance=%q, want %q", manifest.KindName(o), o.GetLabels()["app.kubernetes.io/instance"], rel)
		}
	}
	// The binding follows the release's namespace, or the job's token
	// would be refused every patch.
	if b, ok := m["ClusterRoleBinding/gpuaffinity-fleet"].(*rbacv1.ClusterRoleBinding); ok {
		want := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "gpuaffinity-fleet", Namespace: ns}}
		if diff := cmp.Diff(want, b.Subjects); diff != "" {
			t.Errorf("ClusterRoleBinding subjects (-want +got):\n%s", diff)
		}
	}

	cj, c := cronJob(t, objs)
	if cj.Spec.Schedule != "7 * * * *" {
		t.Errorf("schedule %q, want 7 * * * *", cj.Spec.Schedule)
	}
	if d := cj.Spec.StartingDeadlineSeconds; d == nil || *d != 900 {
		t.Errorf("startingDeadlineSeconds %s, want 900", ptrString(d))
	}
	if d := cj.Spec.JobTemplate.Spec.ActiveDeadlineSeconds; d == nil || *d != 1800 {
		t.Errorf("activeDeadlineSeconds %s, want 1800", ptrString(d))
	}
	// Not values: one run at a time, whatever the schedule.
	if cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		t.Errorf("concurrencyPolicy %q, want Forbid", cj.Spec.ConcurrencyPolicy)
	}

	// The chart's image, as the DaemonSet's.
	ds := daemonSet(t, objs)
	if agent := ds.Spec.Template.Spec.Containers[0]; c.Image != agent.Image || c.ImagePullPolicy != agent.ImagePullPolicy {
		t.Errorf("CronJob runs %s pull %s, the DaemonSet %s pull %s", c.Image, c.ImagePullPolicy, agent.Image, agent.ImagePullPolicy)
	}
	if c.Image != "registry.example.com/mirror/gpuaffinity:v0.1.0-site.1" || c.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("image %s pull %s, want registry.example.com/mirror/gpuaffinity:v0.1.0-site.1 pull Always", c.Image, c.ImagePullPolicy)
	}
	ps := cj.Spec.JobTemplate.Spec.Template.Spec
	if diff := cmp.Diff([]corev1.LocalObjectReference{{Name: "mirror-pull"}}, ps.ImagePullSecrets); diff != "" {
		t.Errorf("imagePullSecrets (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"example.com/pool": "system"}, ps.NodeSelector); diff != "" {
		t.Errorf("nodeSelector (-want +got):\n%s", diff)
	}
	wantTol := []corev1.Toleration{{Key: "example.com/system", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	if diff := cmp.Diff(wantTol, ps.Tolerations); diff != "" {
		t.Errorf("tolerations (-want +got):\n%s", diff)
	}

	wantArgs := []string{"fleet", "labels", "--apply", "--prometheus=$(GPUAFFINITY_PROMETHEUS_URL)",
		`--selector={job="gpuaffinity-agent",cluster="a"}`, "--node-label=kubernetes_node", "--timeout=2m",
		"--scheme=topograph", "--lookback=10m"}
	if diff := cmp.Diff(wantArgs, c.Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	if got := envValue(c, "GPUAFFINITY_PROMETHEUS_URL"); got != "https://prometheus.example.com:9443/prom" {
		t.Errorf("GPUAFFINITY_PROMETHEUS_URL=%q, want https://prometheus.example.com:9443/prom", got)
	}
	if got := envValue(c, "GOMEMLIMIT"); got != "400MiB" {
		t.Errorf("GOMEMLIMIT=%q, want 400MiB", got)
	}
	wantRes := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
	}
	if diff := cmp.Diff(wantRes, c.Resources, quantities); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}

	// The agent's values stay the agent's: its resources and GOMEMLIMIT
	// are not the job's.
	agent := ds.Spec.Template.Spec.Containers[0]
	if got := envValue(agent, "GOMEMLIMIT"); got != "80MiB" {
		t.Errorf("agent's GOMEMLIMIT=%q, want its default 80MiB", got)
	}
	if got := agent.Resources.Limits[corev1.ResourceMemory]; got.Cmp(resource.MustParse("96Mi")) != 0 {
		t.Errorf("agent's memory limit %s, want its default 96Mi", got.String())
	}
}

// TestFleetValueChanges changes one fleet value at a time from the
// enabled defaults, and the render must change in that field: each value
// is wired to the field it names, and nothing else in the job moves.
func TestFleetValueChanges(t *testing.T) {
	_, base := cronJob(t, renderObjects(t, renderOpts{values: fleetOn, release: release, namespace: namespace}))
	for _, tc := range []struct {
		name  string
		fleet map[string]any
		want  func(t *testing.T, c *corev1.Container)
	}{
		{"prometheusURL", map[string]any{"prometheusURL": "http://prometheus.example.com:9090"}, func(t *testing.T, c *corev1.Container) {
			setEnv(t, c, "GPUAFFINITY_PROMETHEUS_URL", "http://prometheus.example.com:9090")
		}},
		{"memory limit", map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": "256Mi"}}}, func(t *testing.T, c *corev1.Container) {
			c.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("256Mi")
		}},
		{"cpu request", map[string]any{"resources": map[string]any{"requests": map[string]any{"cpu": "200m"}}}, func(t *testing.T, c *corev1.Container) {
			c.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("200m")
		}},
		{"goMemLimit", map[string]any{"goMemLimit": "200MiB"}, func(t *testing.T, c *corev1.Container) {
			setEnv(t, c, "GOMEMLIMIT", "200MiB")
		}},
		{"nodeLabel", map[string]any{"nodeLabel": "instance"}, func(t *testing.T, c *corev1.Container) {
			setArg(t, c, "--node-label=", "--node-label=instance")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals := map[string]any{"fleet": map[string]any{"enabled": true}}
			for k, v := range tc.fleet {
				vals["fleet"].(map[string]any)[k] = v
			}
			_, got := cronJob(t, renderObjects(t, renderOpts{values: vals, release: release, namespace: namespace}))
			want := *base.DeepCopy()
			tc.want(t, &want)
			if diff := cmp.Diff(want, got, quantities); diff != "" {
				t.Errorf("container (-want +got):\n%s", diff)
			}
			if cmp.Equal(base, got, quantities) {
				t.Error("the render did not change")
			}
		})
	}
}

// TestFleetEmptyValues: an empty selector or GOMEMLIMIT drops the
// argument or variable, and null drops the default resources, as the
// agent's values do (TestEmptyValues).
func TestFleetEmptyValues(t *testing.T) {
	vals := map[string]any{"fleet": map[string]any{
		"enabled":    true,
		"selector":   "",
		"goMemLimit": "",
		"resources":  nil,
	}}
	_, c := cronJob(t, renderObjects(t, renderOpts{values: vals, release: release, namespace: namespace, lenient: true}))
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--selector") {
			t.Errorf("args %q: want no --selector", c.Args)
		}
	}
	if v := envValue(c, "GOMEMLIMIT"); v != "" {
		t.Errorf("GOMEMLIMIT=%q, want unset", v)
	}
	if c.Resources.Requests != nil || c.Resources.Limits != nil {
		t.Errorf("resources %+v, want none", c.Resources)
	}
	if v := envValue(c, "GPUAFFINITY_PROMETHEUS_URL"); v == "" {
		t.Error("GPUAFFINITY_PROMETHEUS_URL unset; the args expand it")
	}
}

// setEnv sets the value of c's variable name, which must be there.
func setEnv(t *testing.T, c *corev1.Container, name, value string) {
	t.Helper()
	for i := range c.Env {
		if c.Env[i].Name == name {
			c.Env[i].Value = value
			return
		}
	}
	t.Fatalf("container %s has no env %s", c.Name, name)
}

// setArg replaces c's one argument that starts with prefix.
func setArg(t *testing.T, c *corev1.Container, prefix, arg string) {
	t.Helper()
	i := slices.IndexFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, prefix) })
	if i < 0 {
		t.Fatalf("container %s has no argument %s…: %q", c.Name, prefix, c.Args)
	}
	c.Args[i] = arg
}

func ptrString[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

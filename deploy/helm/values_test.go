package helm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpuaffinity/gpuaffinity/deploy/internal/manifest"
)

func daemonSet(t *testing.T, objs []metav1.Object) *appsv1.DaemonSet {
	t.Helper()
	ds, err := manifest.DaemonSet(objs)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	if cs := ds.Spec.Template.Spec.Containers; len(cs) != 1 || cs[0].Name != "agent" {
		t.Fatalf("DaemonSet containers %d, want one named agent", len(cs))
	}
	return ds
}

func kinds(objs []metav1.Object) []string {
	var k []string
	for _, o := range objs {
		k = append(k, manifest.KindName(o))
	}
	slices.Sort(k)
	return k
}

// TestSiteValues renders testdata/site-values.yaml, where every value
// differs from its default, into another release and namespace, and
// checks that each value lands where it should, and nowhere else.
func TestSiteValues(t *testing.T) {
	const rel, ns = "site-gpu", "gpu-system"
	objs := renderObjects(t, renderOpts{values: readValues(t, "site-values.yaml"), release: rel, namespace: ns})

	// Monitors off: no ServiceMonitor, no PrometheusRule.
	if diff := cmp.Diff([]string{"DaemonSet/gpuaffinity-agent", "Service/gpuaffinity-agent", "ServiceAccount/gpuaffinity-agent"}, kinds(objs)); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	for _, o := range objs {
		if o.GetNamespace() != ns {
			t.Errorf("%s in namespace %q, want the release's %q", manifest.KindName(o), o.GetNamespace(), ns)
		}
		if o.GetLabels()["app.kubernetes.io/instance"] != rel {
			t.Errorf("%s: app.kubernetes.io/instance=%q, want %q", manifest.KindName(o), o.GetLabels()["app.kubernetes.io/instance"], rel)
		}
	}

	ds := daemonSet(t, objs)
	ps := ds.Spec.Template.Spec
	c := ps.Containers[0]
	if c.Image != "registry.example.com/mirror/gpuaffinity:v0.1.0-site.1" || c.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("image %s pull %s, want registry.example.com/mirror/gpuaffinity:v0.1.0-site.1 pull Always", c.Image, c.ImagePullPolicy)
	}
	if diff := cmp.Diff([]corev1.LocalObjectReference{{Name: "mirror-pull"}}, ps.ImagePullSecrets); diff != "" {
		t.Errorf("imagePullSecrets (-want +got):\n%s", diff)
	}

	// The narrowed list, then one Exists toleration per health taint key.
	wantTol := []corev1.Toleration{
		{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: "example.com/gpu-unhealthy", Operator: corev1.TolerationOpExists},
		{Key: "example.com/fabric-degraded", Operator: corev1.TolerationOpExists},
	}
	if diff := cmp.Diff(wantTol, ps.Tolerations); diff != "" {
		t.Errorf("tolerations (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		taint corev1.Taint
		want  bool
	}{
		{corev1.Taint{Key: "example.com/gpu-unhealthy", Value: "xid-79", Effect: corev1.TaintEffectNoExecute}, true},
		{corev1.Taint{Key: "example.com/fabric-degraded", Effect: corev1.TaintEffectNoSchedule}, true},
		{corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}, true},
		// Narrowed: what the lists do not name keeps the agent off.
		{corev1.Taint{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoExecute}, false},
		{corev1.Taint{Key: "example.com/decommission", Effect: corev1.TaintEffectNoExecute}, false},
	} {
		if got := manifest.Tolerates(ps.Tolerations, tc.taint); got != tc.want {
			t.Errorf("tolerates %s: %t, want %t", tc.taint.ToString(), got, tc.want)
		}
	}

	if diff := cmp.Diff(map[string]string{"example.com/pool": "training"}, ps.NodeSelector); diff != "" {
		t.Errorf("nodeSelector (-want +got):\n%s", diff)
	}
	wantAff := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "example.com/gpu-node", Operator: corev1.NodeSelectorOpExists}},
		}}},
	}}
	// A values map replaces the default affinity only where it sets keys
	// (Helm merges maps): nodeSelectorTerms is a list, so it is replaced
	// whole, and no default term survives.
	if diff := cmp.Diff(wantAff, ps.Affinity); diff != "" {
		t.Errorf("affinity (-want +got):\n%s", diff)
	}
	wantRes := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("160Mi")},
	}
	if diff := cmp.Diff(wantRes, c.Resources, quantities); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
	if got := envValue(c, "GOMEMLIMIT"); got != "128MiB" {
		t.Errorf("GOMEMLIMIT=%q, want 128MiB", got)
	}
	if ps.PriorityClassName != "gpu-node-critical" {
		t.Errorf("priorityClassName %q, want gpu-node-critical", ps.PriorityClassName)
	}
	if ps.RuntimeClassName != nil {
		t.Errorf("runtimeClassName %q, want none", *ps.RuntimeClassName)
	}
	if diff := cmp.Diff(map[string]string{"example.com/team": "gpu-infra"}, ds.Spec.Template.Annotations); diff != "" {
		t.Errorf("pod annotations (-want +got):\n%s", diff)
	}

	// NFD off: no --nfd-file, and no features.d volume or mount (the IMEX
	// channel directory stays: gpu.imex reads it). The extra arguments
	// come last, in order.
	// The job audit on, with its per-job series: after the chart's own
	// arguments, before the extra ones; hostPID with it.
	wantArgs := []string{"agent", "--root=/", "--state-dir=/run/gpuaffinity", "--web.listen-address=:19400",
		"--collector.jobs=true", "--collector.jobs.info=true",
		"--log.format=json", "--expect=/etc/gpuaffinity/expect.yaml"}
	if !ps.HostPID {
		t.Errorf("hostPID false with jobs.enabled")
	}
	if diff := cmp.Diff(wantArgs, c.Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	var vols, mounts []string
	for _, v := range ps.Volumes {
		vols = append(vols, v.Name)
	}
	for _, m := range c.VolumeMounts {
		mounts = append(mounts, m.Name)
	}
	if want := []string{"sys", "state", "imex-channels"}; !slices.Equal(vols, want) || !slices.Equal(mounts, want) {
		t.Errorf("volumes %q, mounts %q: want %q", vols, mounts, want)
	}
}

// TestNFDOnByDefault is the other side of NFD off in TestSiteValues.
func TestNFDOnByDefault(t *testing.T) {
	const nfdDir = "/etc/kubernetes/node-feature-discovery/features.d"
	ds := daemonSet(t, renderObjects(t, renderOpts{release: release, namespace: namespace}))
	c := ds.Spec.Template.Spec.Containers[0]
	if !slices.Contains(c.Args, "--nfd-file="+nfdDir+"/gpuaffinity") {
		t.Errorf("args %q: no --nfd-file=%s/gpuaffinity", c.Args, nfdDir)
	}
	var mounted bool
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.HostPath != nil && v.HostPath.Path == nfdDir {
			for _, m := range c.VolumeMounts {
				mounted = mounted || (m.Name == v.Name && m.MountPath == nfdDir && !m.ReadOnly)
			}
		}
	}
	if !mounted {
		t.Errorf("the host's %s is not mounted writable at the same path", nfdDir)
	}
}

// TestMonitorValues: the monitors' labels land on the monitors (the ones
// Prometheus selects them by) and not in any selector; interval and
// scrapeTimeout land on the endpoint.
func TestMonitorValues(t *testing.T) {
	objs := renderObjects(t, renderOpts{values: readValues(t, "monitor-values.yaml"), release: release, namespace: namespace})
	var sm *monitoringv1.ServiceMonitor
	var pr *monitoringv1.PrometheusRule
	for _, o := range objs {
		switch o := o.(type) {
		case *monitoringv1.ServiceMonitor:
			sm = o
		case *monitoringv1.PrometheusRule:
			pr = o
		default:
			if _, ok := o.GetLabels()["release"]; ok {
				t.Errorf("%s has the monitors' release label", manifest.KindName(o))
			}
		}
	}
	if sm == nil || pr == nil {
		t.Fatalf("render has ServiceMonitor %t, PrometheusRule %t; want both", sm != nil, pr != nil)
	}
	if sm.Labels["release"] != "kube-prometheus-stack" || sm.Labels["app.kubernetes.io/name"] != "gpuaffinity" {
		t.Errorf("ServiceMonitor labels %v: want release=kube-prometheus-stack beside the chart's", sm.Labels)
	}
	if _, ok := sm.Spec.Selector.MatchLabels["release"]; ok {
		t.Errorf("the release label went into the ServiceMonitor's selector %v", sm.Spec.Selector.MatchLabels)
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Interval != "15s" || sm.Spec.Endpoints[0].ScrapeTimeout != "5s" {
		t.Errorf("ServiceMonitor endpoints %+v: want one, interval 15s, scrapeTimeout 5s", sm.Spec.Endpoints)
	}
	if pr.Labels["release"] != "kube-prometheus-stack" || pr.Labels["role"] != "alert-rules" || pr.Labels["app.kubernetes.io/name"] != "gpuaffinity" {
		t.Errorf("PrometheusRule labels %v: want release=kube-prometheus-stack and role=alert-rules beside the chart's", pr.Labels)
	}
}

// TestEmptyValues: an empty string or list drops its field, and null
// drops a default map (Helm deletes a key whose value is null; {} would
// merge with the default and keep it). Rendered as `helm install` does,
// since a deleted key is missing for a strict render.
func TestEmptyValues(t *testing.T) {
	vals := map[string]any{
		"priorityClassName": "",
		"goMemLimit":        "",
		"tolerations":       []any{},
		"affinity":          nil,
		"resources":         nil,
	}
	ds := daemonSet(t, renderObjects(t, renderOpts{values: vals, release: release, namespace: namespace, lenient: true}))
	ps := ds.Spec.Template.Spec
	c := ps.Containers[0]
	if ps.PriorityClassName != "" || ps.Tolerations != nil || ps.Affinity != nil {
		t.Errorf("priorityClassName %q, tolerations %v, affinity %v: want none", ps.PriorityClassName, ps.Tolerations, ps.Affinity)
	}
	if c.Resources.Requests != nil || c.Resources.Limits != nil {
		t.Errorf("resources %+v, want none", c.Resources)
	}
	if v := envValue(c, "GOMEMLIMIT"); v != "" {
		t.Errorf("GOMEMLIMIT=%q, want unset", v)
	}
	// Unchanged by the above.
	if ps.RuntimeClassName == nil || *ps.RuntimeClassName != "nvidia" {
		t.Errorf("runtimeClassName %v, want nvidia", ps.RuntimeClassName)
	}
}

// TestSchemaRejects: values.schema.json turns a misspelt or ill-typed
// value into an install error naming it, where Helm would otherwise
// ignore it.
func TestSchemaRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"misspelt top-level key", map[string]any{"toleration": []any{}}, "toleration"},
		{"misspelt nested key", map[string]any{"image": map[string]any{"tagg": "v1"}}, "tagg"},
		{"bool as string", map[string]any{"serviceMonitor": map[string]any{"enabled": "yes"}}, "enabled"},
		{"pull policy", map[string]any{"image": map[string]any{"pullPolicy": "always"}}, "pullPolicy"},
		{"GOMEMLIMIT syntax", map[string]any{"goMemLimit": "80MB"}, "goMemLimit"},
		{"toleration operator", map[string]any{"tolerations": []any{map[string]any{"key": "a", "operator": "Exist"}}}, "operator"},
		{"health taint not a key", map[string]any{"healthTaints": []any{map[string]any{"key": "a"}}}, "healthTaints"},
		{"misspelt fleet key", map[string]any{"fleet": map[string]any{"enabled": true, "prometheusUrl": "http://p:9090"}}, "prometheusUrl"},
		{"fleet enabled as string", map[string]any{"fleet": map[string]any{"enabled": "true"}}, "enabled"},
		{"fleet URL without scheme", map[string]any{"fleet": map[string]any{"prometheusURL": "prometheus:9090"}}, "prometheusURL"},
		{"fleet timeout without unit", map[string]any{"fleet": map[string]any{"timeout": "60"}}, "timeout"},
		{"fleet deadline not an integer", map[string]any{"fleet": map[string]any{"activeDeadlineSeconds": "10m"}}, "activeDeadlineSeconds"},
		{"fleet GOMEMLIMIT syntax", map[string]any{"fleet": map[string]any{"goMemLimit": "100MB"}}, "goMemLimit"},
		{"misspelt jobs key", map[string]any{"jobs": map[string]any{"enable": true}}, "enable"},
		{"jobs enabled as string", map[string]any{"jobs": map[string]any{"enabled": "true"}}, "enabled"},
		{"fleet toleration operator", map[string]any{"fleet": map[string]any{"tolerations": []any{map[string]any{"key": "a", "operator": "Exist"}}}}, "operator"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render(t, renderOpts{values: tc.values, release: release, namespace: namespace})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want a schema error naming %q", err, tc.want)
			}
		})
	}
}

// schemaNode is the part of a JSON schema TestValuesDocumented walks.
type schemaNode struct {
	Type       any                    `json:"type"`
	Properties map[string]*schemaNode `json:"properties"`
}

// schemaKeys lists the dotted value names the schema defines: an object
// with properties is walked into, anything else is one value.
func schemaKeys(prefix string, n *schemaNode) []string {
	if len(n.Properties) == 0 {
		return []string{prefix}
	}
	var keys []string
	for name, p := range n.Properties {
		if prefix == "" && name == "global" {
			continue // Helm's, for subcharts; the chart has no global value
		}
		keys = append(keys, schemaKeys(strings.TrimPrefix(prefix+"."+name, "."), p)...)
	}
	slices.Sort(keys)
	return keys
}

// valuesKeys lists the dotted value names values.yaml sets, walking into
// the maps the schema walks into.
func valuesKeys(prefix string, v map[string]any, n *schemaNode) []string {
	var keys []string
	for name, val := range v {
		key := strings.TrimPrefix(prefix+"."+name, ".")
		if p := n.Properties[name]; p != nil && len(p.Properties) > 0 {
			if m, ok := val.(map[string]any); ok {
				keys = append(keys, valuesKeys(key, m, p)...)
				continue
			}
		}
		keys = append(keys, key)
	}
	slices.Sort(keys)
	return keys
}

// TestValuesDocumented: values.yaml, values.schema.json and the values
// table of README.md name the same values, so none is undocumented,
// unvalidated or missing a default.
func TestValuesDocumented(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema schemaNode
	dec := json.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(&schema); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	want := schemaKeys("", &schema)

	vdata, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var vals map[string]any
	if err := yaml.UnmarshalStrict(vdata, &vals); err != nil {
		t.Fatalf("values.yaml: %v", err)
	}
	if diff := cmp.Diff(want, valuesKeys("", vals, &schema)); diff != "" {
		t.Errorf("values.yaml against values.schema.json (-schema +values.yaml):\n%s", diff)
	}

	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Za-z.]+)` \\|").FindAllStringSubmatch(string(readme), -1) {
		documented = append(documented, m[1])
	}
	slices.Sort(documented)
	if diff := cmp.Diff(want, documented); diff != "" {
		t.Errorf("README.md's values table against values.schema.json (-schema +README):\n%s", diff)
	}
	const install = "helm install gpuaffinity deploy/helm/gpuaffinity -n gpuaffinity --create-namespace"
	if !strings.Contains(string(readme), install) {
		t.Errorf("README.md does not give the install command %q", install)
	}
}

func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

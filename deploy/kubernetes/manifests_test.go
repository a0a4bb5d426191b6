package kubernetes

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/gpuaffinity/gpuaffinity/deploy/internal/manifest"
)

// The facts the manifests must agree on (the agent's contract: the
// README's Agent section, docs/metrics.md, docs/health.md).
const (
	namespace     = "gpuaffinity"
	agentPort     = 19400
	stateDir      = "/run/gpuaffinity"
	nfdDir        = "/etc/kubernetes/node-feature-discovery/features.d"
	image         = "ghcr.io/gpuaffinity/gpuaffinity"
	runbookBase   = "https://github.com/gpuaffinity/gpuaffinity/blob/main/docs/operations.md#"
	operationsDoc = "../../docs/operations.md"
	metricsDoc    = "../../docs/metrics.md"
)

// kustomization is the part of kustomize's Kustomization
// (kustomize.config.k8s.io/v1beta1) this directory uses; decoded strictly,
// so a field added to kustomization.yaml must be added here too.
type kustomization struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Namespace  string           `json:"namespace"`
	Resources  []string         `json:"resources"`
	Images     []kustomizeImage `json:"images,omitempty"`
}

type kustomizeImage struct {
	Name    string `json:"name"`
	NewName string `json:"newName,omitempty"`
	NewTag  string `json:"newTag,omitempty"`
}

// manifests is the decoded set kustomization.yaml applies.
type manifests struct {
	kust           kustomization
	objects        []metav1.Object
	namespace      *corev1.Namespace
	serviceAccount *corev1.ServiceAccount
	daemonSet      *appsv1.DaemonSet
	service        *corev1.Service
	serviceMonitor *monitoringv1.ServiceMonitor
	prometheusRule *monitoringv1.PrometheusRule
}

func readKustomization(t *testing.T) kustomization {
	t.Helper()
	data, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := manifest.DecodeStrict(data, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	return k
}

// load decodes every document of every file kustomization.yaml lists, and
// fails unless each kind of the deployment is there exactly once.
func load(t *testing.T) manifests {
	t.Helper()
	m := manifests{kust: readKustomization(t)}
	for _, file := range m.kust.Resources {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		docs, err := manifest.Documents(file, data)
		if err != nil {
			t.Fatal(err)
		}
		if len(docs) == 0 {
			t.Errorf("%s: no manifest", file)
		}
		for i, doc := range docs {
			obj, err := manifest.Decode(doc)
			if err != nil {
				t.Fatalf("%s, document %d: %v", file, i+1, err)
			}
			m.objects = append(m.objects, obj)
			switch o := obj.(type) {
			case *corev1.Namespace:
				setOnce(t, &m.namespace, o, file)
			case *corev1.ServiceAccount:
				setOnce(t, &m.serviceAccount, o, file)
			case *appsv1.DaemonSet:
				setOnce(t, &m.daemonSet, o, file)
			case *corev1.Service:
				setOnce(t, &m.service, o, file)
			case *monitoringv1.ServiceMonitor:
				setOnce(t, &m.serviceMonitor, o, file)
			case *monitoringv1.PrometheusRule:
				setOnce(t, &m.prometheusRule, o, file)
			}
		}
	}
	if m.namespace == nil || m.serviceAccount == nil || m.daemonSet == nil || m.service == nil ||
		m.serviceMonitor == nil || m.prometheusRule == nil {
		t.Fatalf("kustomization.yaml misses a kind: Namespace %t, ServiceAccount %t, DaemonSet %t, Service %t, ServiceMonitor %t, PrometheusRule %t",
			m.namespace != nil, m.serviceAccount != nil, m.daemonSet != nil, m.service != nil,
			m.serviceMonitor != nil, m.prometheusRule != nil)
	}
	return m
}

func setOnce[T any](t *testing.T, dst **T, v *T, file string) {
	t.Helper()
	if *dst != nil {
		t.Fatalf("%s: a second %T", file, v)
	}
	*dst = v
}

func TestKustomizationListsEveryManifest(t *testing.T) {
	k := readKustomization(t)
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Errorf("kustomization.yaml is %s %s", k.APIVersion, k.Kind)
	}
	if k.Namespace != namespace {
		t.Errorf("kustomization namespace %q, want %q", k.Namespace, namespace)
	}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, e := range entries {
		name := e.Name()
		if e.Type().IsRegular() && (strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) &&
			name != "kustomization.yaml" {
			want = append(want, name)
		}
	}
	got := slices.Sorted(slices.Values(k.Resources))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kustomization.yaml resources against the .yaml files here (-files +listed):\n%s", diff)
	}
}

func TestManifestsDecodeStrictly(t *testing.T) {
	m := load(t)
	if m.namespace.Name != namespace {
		t.Errorf("Namespace %q, want %q", m.namespace.Name, namespace)
	}
	for _, o := range m.objects {
		if _, ok := o.(*corev1.Namespace); ok {
			continue
		}
		// kustomize sets it, but plain `kubectl apply -f` must land in the
		// same place.
		if o.GetNamespace() != namespace {
			t.Errorf("%T %s: namespace %q, want %q", o, o.GetName(), o.GetNamespace(), namespace)
		}
		if o.GetLabels()["app.kubernetes.io/name"] != "gpuaffinity" {
			t.Errorf("%T %s: no app.kubernetes.io/name=gpuaffinity label", o, o.GetName())
		}
	}
}

// agentContainer returns the DaemonSet's one container.
func agentContainer(t *testing.T, ds *appsv1.DaemonSet) corev1.Container {
	t.Helper()
	cs := ds.Spec.Template.Spec.Containers
	if len(cs) != 1 || cs[0].Name != "agent" {
		t.Fatalf("DaemonSet containers %d, want one named agent", len(cs))
	}
	return cs[0]
}

// agentFlags parses the container's `agent --flag=value` arguments.
func agentFlags(t *testing.T, c corev1.Container) map[string]string {
	t.Helper()
	if len(c.Command) != 0 {
		t.Errorf("command %q: the image's entrypoint is gpuaffinity, set args only", c.Command)
	}
	if len(c.Args) == 0 || c.Args[0] != "agent" {
		t.Fatalf("args %q: want the agent subcommand first", c.Args)
	}
	flags := map[string]string{}
	for _, a := range c.Args[1:] {
		k, v, ok := strings.Cut(a, "=")
		if !ok || !strings.HasPrefix(k, "--") {
			t.Fatalf("argument %q: want --flag=value", a)
		}
		if _, dup := flags[k]; dup {
			t.Errorf("flag %s given twice", k)
		}
		flags[k] = v
	}
	return flags
}

// containerPort resolves a probe or Service target port (a name or a
// number) against the container's ports.
func containerPort(t *testing.T, c corev1.Container, p intstr.IntOrString) int32 {
	t.Helper()
	for _, cp := range c.Ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return cp.ContainerPort
		}
	}
	t.Fatalf("port %s is not a port of container %s", p.String(), c.Name)
	return 0
}

// hostPathMount returns the container's mount of the volume whose hostPath
// is path.
func hostPathMount(t *testing.T, ps corev1.PodSpec, c corev1.Container, path string) corev1.VolumeMount {
	t.Helper()
	for _, v := range ps.Volumes {
		if v.HostPath == nil || v.HostPath.Path != path {
			continue
		}
		for _, vm := range c.VolumeMounts {
			if vm.Name == v.Name {
				return vm
			}
		}
		t.Fatalf("volume %s (hostPath %s) is not mounted", v.Name, path)
	}
	t.Fatalf("no hostPath volume for %s", path)
	return corev1.VolumeMount{}
}

func TestDaemonSet(t *testing.T) {
	m := load(t)
	ds := m.daemonSet
	ps := ds.Spec.Template.Spec
	c := agentContainer(t, ds)
	flags := agentFlags(t, c)

	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	if sel.Empty() || !sel.Matches(labels.Set(ds.Spec.Template.Labels)) {
		t.Errorf("selector %s does not select the pod template's labels %v", sel, ds.Spec.Template.Labels)
	}

	// --root=/ keeps NVML and netlink live; the host's sysfs is mounted
	// over /sys, read-only.
	if flags["--root"] != "/" {
		t.Errorf("--root=%q, want /", flags["--root"])
	}
	if vm := hostPathMount(t, ps, c, "/sys"); vm.MountPath != "/sys" || !vm.ReadOnly {
		t.Errorf("host /sys mounted at %s read-only=%t, want /sys read-only", vm.MountPath, vm.ReadOnly)
	}
	// The state directory is the host's /run/gpuaffinity, as a directory.
	if flags["--state-dir"] != stateDir {
		t.Errorf("--state-dir=%q, want %s", flags["--state-dir"], stateDir)
	}
	if vm := hostPathMount(t, ps, c, stateDir); vm.MountPath != stateDir || vm.ReadOnly || vm.SubPath != "" {
		t.Errorf("host %s mounted at %s (subPath %q, read-only %t), want the directory at %s, writable",
			stateDir, vm.MountPath, vm.SubPath, vm.ReadOnly, stateDir)
	}
	// The NFD feature file lies in NFD's features.d of the host.
	if filepath.Dir(flags["--nfd-file"]) != nfdDir || filepath.Base(flags["--nfd-file"]) != "gpuaffinity" {
		t.Errorf("--nfd-file=%q, want %s/gpuaffinity", flags["--nfd-file"], nfdDir)
	}
	if vm := hostPathMount(t, ps, c, nfdDir); vm.MountPath != nfdDir || vm.ReadOnly {
		t.Errorf("host %s mounted at %s read-only=%t, want %s writable", nfdDir, vm.MountPath, vm.ReadOnly, nfdDir)
	}
	// Nothing else is writable.
	for _, vm := range c.VolumeMounts {
		if !vm.ReadOnly && vm.MountPath != stateDir && vm.MountPath != nfdDir {
			t.Errorf("mount %s at %s is writable", vm.Name, vm.MountPath)
		}
	}

	// One port, the listen address's, named for the Service.
	if flags["--web.listen-address"] != fmt.Sprintf(":%d", agentPort) {
		t.Errorf("--web.listen-address=%q, want :%d", flags["--web.listen-address"], agentPort)
	}
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != agentPort || c.Ports[0].Name != "metrics" {
		t.Errorf("container ports %+v, want metrics=%d", c.Ports, agentPort)
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"readiness", c.ReadinessProbe, "/readyz"}, {"liveness", c.LivenessProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s probe: want an HTTP GET of %s", p.name, p.path)
			continue
		}
		if p.probe.HTTPGet.Path != p.path || containerPort(t, c, p.probe.HTTPGet.Port) != agentPort {
			t.Errorf("%s probe GETs %s on %s, want %s on %d", p.name, p.probe.HTTPGet.Path,
				p.probe.HTTPGet.Port.String(), p.path, agentPort)
		}
		if p.probe.TimeoutSeconds == 0 || p.probe.PeriodSeconds == 0 {
			t.Errorf("%s probe: set timeoutSeconds and periodSeconds", p.name)
		}
	}

	// GPUs through the NVIDIA runtime, without taking any from the node.
	if ps.RuntimeClassName == nil || *ps.RuntimeClassName != "nvidia" {
		t.Errorf("runtimeClassName %v, want nvidia", ps.RuntimeClassName)
	}
	if env := envValue(c, "NVIDIA_VISIBLE_DEVICES"); env != "all" {
		t.Errorf("NVIDIA_VISIBLE_DEVICES=%q, want all", env)
	}
	// NODE_NAME, the GPU series' Hostname label, is the node's name, as
	// dcgm-exporter's DaemonSet sets it, so that on(Hostname, gpu) joins.
	nodeName := false
	for _, e := range c.Env {
		if e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil &&
			e.ValueFrom.FieldRef.FieldPath == "spec.nodeName" {
			nodeName = true
		}
	}
	if !nodeName {
		t.Error("no NODE_NAME from fieldRef spec.nodeName in the agent's env")
	}
	for _, rl := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
		for name := range rl {
			if strings.Contains(string(name), "gpu") {
				t.Errorf("the agent asks for %s: it would take GPUs from the node's jobs", name)
			}
		}
	}

	// GPU nodes: scheduled by their labels, past their taints.
	if !selectsLabel(ps.Affinity, "nvidia.com/gpu.present") {
		t.Error("node affinity does not select nvidia.com/gpu.present nodes")
	}
	for _, taint := range []corev1.Taint{
		{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule},
		{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoExecute},
		{Key: "sku", Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
		// A site's own health taints, under a key nothing here knows:
		// the agent reports the node's health, so neither may keep it
		// off nor evict it (docs/operations.md, "Tolerations").
		{Key: "example.com/gpu-unhealthy", Value: "xid-79", Effect: corev1.TaintEffectNoSchedule},
		{Key: "example.com/gpu-unhealthy", Effect: corev1.TaintEffectNoExecute},
	} {
		if !manifest.Tolerates(ps.Tolerations, taint) {
			t.Errorf("no toleration for taint %s", taint.ToString())
		}
	}
	// A NoExecute toleration with tolerationSeconds evicts the agent when
	// they run out, that is, on a node that stays unhealthy.
	for _, tol := range ps.Tolerations {
		if tol.TolerationSeconds != nil {
			t.Errorf("toleration of key %q has tolerationSeconds %d: the agent would leave a node that stays tainted", tol.Key, *tol.TolerationSeconds)
		}
	}
	ops, err := os.ReadFile(operationsDoc)
	if err != nil {
		t.Fatal(err)
	}
	if !githubAnchors(ops)["tolerations"] {
		t.Errorf("%s has no Tolerations section, which daemonset.yaml points to", operationsDoc)
	}

	// Security: no privilege, no capability, read-only root.
	sc := c.SecurityContext
	if sc == nil {
		t.Fatal("container has no securityContext")
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Error("container is privileged")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation is not false")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("readOnlyRootFilesystem is not true")
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
		t.Errorf("capabilities %+v, want drop ALL and add none", sc.Capabilities)
	}
	if ps.SecurityContext == nil || ps.SecurityContext.SeccompProfile == nil ||
		ps.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("pod seccompProfile is not RuntimeDefault")
	}
	// hostNetwork for the host's route table, netlink and hostname
	// (daemonset.yaml says why); the rest of the host stays out.
	if !ps.HostNetwork || ps.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("hostNetwork %t, dnsPolicy %s: want the host's network with ClusterFirstWithHostNet", ps.HostNetwork, ps.DNSPolicy)
	}
	if ps.HostPID || ps.HostIPC {
		t.Errorf("hostPID %t, hostIPC %t: want neither", ps.HostPID, ps.HostIPC)
	}

	// No API access.
	if ps.ServiceAccountName != m.serviceAccount.Name {
		t.Errorf("serviceAccountName %q, want %q", ps.ServiceAccountName, m.serviceAccount.Name)
	}
	if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken ||
		m.serviceAccount.AutomountServiceAccountToken == nil || *m.serviceAccount.AutomountServiceAccountToken {
		t.Error("a service account token is mounted; the agent talks to no API server")
	}
	if ps.PriorityClassName != "system-node-critical" {
		t.Errorf("priorityClassName %q, want system-node-critical", ps.PriorityClassName)
	}

	// Resources: requests and a memory limit, GOMEMLIMIT below it.
	req, lim := c.Resources.Requests, c.Resources.Limits
	if req.Cpu().IsZero() || req.Memory().IsZero() || lim.Memory().IsZero() {
		t.Fatalf("resources %+v: want cpu and memory requests and a memory limit", c.Resources)
	}
	if lim.Memory().Cmp(*req.Memory()) < 0 {
		t.Errorf("memory limit %s below the request %s", lim.Memory(), req.Memory())
	}
	if _, ok := lim[corev1.ResourceCPU]; ok {
		t.Error("CPU limit set: throttling stretches scrapes and probes")
	}
	gml, err := goMemLimit(envValue(c, "GOMEMLIMIT"))
	if err != nil {
		t.Fatalf("GOMEMLIMIT: %v", err)
	}
	if gml >= lim.Memory().Value() || gml < req.Memory().Value() {
		t.Errorf("GOMEMLIMIT %d bytes, want between the memory request %s and limit %s", gml, req.Memory(), lim.Memory())
	}

	// The image is the release image, its tag the one kustomization.yaml sets.
	repo, tag, _ := strings.Cut(c.Image, ":")
	if repo != image {
		t.Errorf("image %s, want %s:<version>", c.Image, image)
	}
	var found bool
	for _, img := range m.kust.Images {
		if img.Name == image {
			found = true
			if img.NewName != "" || img.NewTag != tag {
				t.Errorf("kustomization sets %s to %s:%s, the DaemonSet says %s", image, img.NewName, img.NewTag, c.Image)
			}
		}
	}
	if !found {
		t.Errorf("kustomization.yaml sets no tag for %s", image)
	}
}

func TestServiceAndServiceMonitor(t *testing.T) {
	m := load(t)
	c := agentContainer(t, m.daemonSet)
	svc := m.service

	sel := labels.Set(svc.Spec.Selector)
	if len(sel) == 0 || !sel.AsSelector().Matches(labels.Set(m.daemonSet.Spec.Template.Labels)) {
		t.Errorf("Service selector %v does not select the agent's pods %v", svc.Spec.Selector, m.daemonSet.Spec.Template.Labels)
	}
	if !svc.Spec.PublishNotReadyAddresses {
		t.Error("publishNotReadyAddresses is false: unhealthy nodes (not ready) would drop out of scraping")
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("clusterIP %q, want None (headless)", svc.Spec.ClusterIP)
	}
	if len(svc.Spec.Ports) != 1 {
		t.Fatalf("Service ports %+v, want one", svc.Spec.Ports)
	}
	sp := svc.Spec.Ports[0]
	if sp.Port != agentPort || containerPort(t, c, sp.TargetPort) != agentPort {
		t.Errorf("Service port %d → %s, want %d → container port %d", sp.Port, sp.TargetPort.String(), agentPort, agentPort)
	}

	sm := m.serviceMonitor
	smSel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	if smSel.Empty() || !smSel.Matches(labels.Set(svc.Labels)) {
		t.Errorf("ServiceMonitor selector %s does not select the Service's labels %v", smSel, svc.Labels)
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("ServiceMonitor endpoints %d, want 1", len(sm.Spec.Endpoints))
	}
	ep := sm.Spec.Endpoints[0]
	if ep.Port != sp.Name || ep.Path != "/metrics" {
		t.Errorf("ServiceMonitor scrapes port %q path %q, want %q /metrics", ep.Port, ep.Path, sp.Name)
	}
	if ep.Interval == "" || ep.ScrapeTimeout == "" {
		t.Error("ServiceMonitor: set interval and scrapeTimeout")
	}
	var nodeLabel bool
	for _, r := range ep.RelabelConfigs {
		if slices.Equal(r.SourceLabels, []monitoringv1.LabelName{"__meta_kubernetes_pod_node_name"}) && r.TargetLabel == "node" {
			nodeLabel = true
		}
	}
	if !nodeLabel {
		t.Error("ServiceMonitor does not set the node label the alerts name nodes by")
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

// goMemLimit parses a GOMEMLIMIT value: bytes with an optional B, KiB,
// MiB, GiB or TiB suffix (the runtime package's syntax).
func goMemLimit(s string) (int64, error) {
	m := regexp.MustCompile(`^([0-9]+)(B|KiB|MiB|GiB|TiB)?$`).FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q is not a byte count", s)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", s, err)
	}
	shift := map[string]int{"": 0, "B": 0, "KiB": 10, "MiB": 20, "GiB": 30, "TiB": 40}[m[2]]
	return n << shift, nil
}

func selectsLabel(a *corev1.Affinity, key string) bool {
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return false
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if e.Key == key {
				return true
			}
		}
	}
	return false
}

// Package fleet_test checks deploy/kubernetes/fleet, the opt-in CronJob
// that runs `gpuaffinity fleet labels --apply`, as `kubectl apply -k`
// builds it: least privilege (get, list and patch on nodes, nothing
// else), a hardened
// pod that holds the token the patches need, and arguments the real
// command tree accepts.
package fleet_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuaffinity/gpuaffinity/deploy/internal/manifest"
)

// kustomization is the part of kustomize's Kustomization this directory
// uses; decoded strictly, so a field added to kustomization.yaml must be
// added here too (and judged by these tests).
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
	} `json:"images,omitempty"`
}

// fleetSet is the decoded build of this directory.
type fleetSet struct {
	objects        []metav1.Object
	serviceAccount *corev1.ServiceAccount
	clusterRole    *rbacv1.ClusterRole
	binding        *rbacv1.ClusterRoleBinding
	cronJob        *batchv1.CronJob
}

func build(t *testing.T, dir string) []metav1.Object {
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

// load builds this directory and fails unless it emits exactly one
// ServiceAccount, ClusterRole, ClusterRoleBinding and CronJob.
func load(t *testing.T) fleetSet {
	t.Helper()
	var s fleetSet
	s.objects = build(t, ".")
	var kinds []string
	for _, o := range s.objects {
		kinds = append(kinds, manifest.KindName(o))
		switch o := o.(type) {
		case *corev1.ServiceAccount:
			setOnce(t, &s.serviceAccount, o)
		case *rbacv1.ClusterRole:
			setOnce(t, &s.clusterRole, o)
		case *rbacv1.ClusterRoleBinding:
			setOnce(t, &s.binding, o)
		case *batchv1.CronJob:
			setOnce(t, &s.cronJob, o)
		default:
			t.Errorf("built %s: not an object of the fleet labeller", manifest.KindName(o))
		}
	}
	if s.serviceAccount == nil || s.clusterRole == nil || s.binding == nil || s.cronJob == nil {
		t.Fatalf("built %v, want a ServiceAccount, ClusterRole, ClusterRoleBinding and CronJob", kinds)
	}
	return s
}

func setOnce[T any](t *testing.T, dst **T, v *T) {
	t.Helper()
	if *dst != nil {
		t.Fatalf("two objects of type %T", v)
	}
	*dst = v
}

// TestKustomizationDecodesStrictly reads kustomization.yaml and every
// file it lists without kustomize: each must decode strictly, and the
// build must emit the same objects.
func TestKustomizationDecodesStrictly(t *testing.T) {
	data, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := manifest.DecodeStrict(data, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
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
	var got []string
	for _, o := range load(t).objects {
		got = append(got, manifest.KindName(o))
	}
	slices.Sort(want)
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("built objects against the listed files' (-files +built):\n%s", diff)
	}
}

// TestClusterRoleLeastPrivilege: `fleet labels --apply` lists the nodes'
// metadata once (their labels and its ownership annotation), reads one
// node again where a patch met a newer version of it, and sends one
// merge patch per node that needs one (fleet/kube), so the role grants
// get, list and patch on core nodes and nothing else (no update, watch,
// delete, nothing on another resource), and the binding gives it to the
// CronJob's ServiceAccount alone.
func TestClusterRoleLeastPrivilege(t *testing.T) {
	s := load(t)
	want := []rbacv1.PolicyRule{{
		APIGroups: []string{""},
		Resources: []string{"nodes"},
		Verbs:     []string{"get", "list", "patch"},
	}}
	if diff := cmp.Diff(want, s.clusterRole.Rules); diff != "" {
		t.Errorf("ClusterRole %s rules (-want +got):\n%s", s.clusterRole.Name, diff)
	}
	if s.clusterRole.AggregationRule != nil {
		t.Errorf("ClusterRole %s aggregates other roles: %+v", s.clusterRole.Name, s.clusterRole.AggregationRule)
	}

	ns := s.cronJob.Namespace
	if ns == "" {
		t.Fatal("CronJob has no namespace")
	}
	if s.serviceAccount.Namespace != ns {
		t.Errorf("ServiceAccount %s in namespace %q, the CronJob in %q", s.serviceAccount.Name, s.serviceAccount.Namespace, ns)
	}
	wantRef := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: s.clusterRole.Name}
	if diff := cmp.Diff(wantRef, s.binding.RoleRef); diff != "" {
		t.Errorf("ClusterRoleBinding %s roleRef (-want +got):\n%s", s.binding.Name, diff)
	}
	wantSubjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: s.serviceAccount.Name, Namespace: ns}}
	if diff := cmp.Diff(wantSubjects, s.binding.Subjects); diff != "" {
		t.Errorf("ClusterRoleBinding %s subjects (-want +got):\n%s", s.binding.Name, diff)
	}
}

// fleetContainer returns the CronJob's one container.
func fleetContainer(t *testing.T, cj *batchv1.CronJob) corev1.Container {
	t.Helper()
	cs := cj.Spec.JobTemplate.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("CronJob %s has %d containers, want 1", cj.Name, len(cs))
	}
	return cs[0]
}

// TestCronJobPod: one run at a time, the ServiceAccount's token mounted
// (the ServiceAccount mounts none by default), and the container as
// unprivileged as the agent's.
func TestCronJobPod(t *testing.T) {
	s := load(t)
	cj := s.cronJob
	if cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		t.Errorf("concurrencyPolicy %q, want %q", cj.Spec.ConcurrencyPolicy, batchv1.ForbidConcurrent)
	}
	ps := cj.Spec.JobTemplate.Spec.Template.Spec
	if ps.ServiceAccountName != s.serviceAccount.Name {
		t.Errorf("pod's serviceAccountName %q, want %q", ps.ServiceAccountName, s.serviceAccount.Name)
	}
	if ps.DeprecatedServiceAccount != "" && ps.DeprecatedServiceAccount != s.serviceAccount.Name {
		t.Errorf("pod's serviceAccount %q, want %q or none", ps.DeprecatedServiceAccount, s.serviceAccount.Name)
	}
	// The pod's own setting wins over the ServiceAccount's.
	if ps.AutomountServiceAccountToken == nil || !*ps.AutomountServiceAccountToken {
		t.Errorf("pod's automountServiceAccountToken %v, want true: --apply patches with the token", ptrString(ps.AutomountServiceAccountToken))
	}
	for _, v := range ps.Volumes {
		if v.Projected != nil || v.Secret != nil {
			t.Errorf("volume %s: the token is the kubelet's automount, not a volume of its own", v.Name)
		}
	}
	if ps.HostNetwork || ps.HostPID || ps.HostIPC {
		t.Error("pod shares a host namespace")
	}

	c := fleetContainer(t, cj)
	sc := c.SecurityContext
	if sc == nil {
		t.Fatal("container has no securityContext")
	}
	nonRoot := func(p *corev1.PodSecurityContext, c *corev1.SecurityContext) bool {
		if c.RunAsNonRoot != nil {
			return *c.RunAsNonRoot
		}
		return p != nil && p.RunAsNonRoot != nil && *p.RunAsNonRoot
	}
	if !nonRoot(ps.SecurityContext, sc) {
		t.Error("container may run as root: want runAsNonRoot true")
	}
	uid := sc.RunAsUser
	if uid == nil && ps.SecurityContext != nil {
		uid = ps.SecurityContext.RunAsUser
	}
	if uid == nil || *uid == 0 {
		t.Errorf("runAsUser %s, want a non-zero UID (runAsNonRoot rejects an image without a numeric USER otherwise)", ptrString(uid))
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("readOnlyRootFilesystem not true")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation not false")
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Error("container is privileged")
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
		t.Errorf("capabilities %+v, want drop [ALL] and add none", sc.Capabilities)
	}
}

func ptrString[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

// expand does the kubelet's expansion of $(VAR) in a container's args
// (k8s.io/kubernetes/third_party/forked/golang/expansion): $(NAME) of a
// variable in env becomes its value, $$ a literal $, anything else stays.
func expand(s string, env map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			if end := strings.IndexByte(s[i+2:], ')'); end >= 0 {
				name := s[i+2 : i+2+end]
				if v, ok := env[name]; ok {
					b.WriteString(v)
				} else {
					b.WriteString(s[i : i+3+end])
				}
				i += 2 + end
				continue
			}
			b.WriteByte('$')
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

func TestExpand(t *testing.T) {
	env := map[string]string{"A": "x", "B": ""}
	for in, want := range map[string]string{
		"$(A)":       "x",
		"--u=$(A)/y": "--u=x/y",
		"$(B)":       "",
		"$(C)":       "$(C)",
		"$$(A)":      "$(A)",
		"$A":         "$A",
		"a$":         "a$",
		"$(A":        "$(A",
	} {
		if got := expand(in, env); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

var gpuaffinity = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "fleet-test-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "gpuaffinity")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/gpuaffinity/gpuaffinity/cmd/gpuaffinity").CombinedOutput()
	if err != nil {
		return "", &buildError{err, out}
	}
	return bin, nil
})

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return "go build: " + e.err.Error() + "\n" + string(e.out) }

// TestCronJobArgs runs the CronJob's args, as the kubelet expands them
// from the container's env, through the real command tree with --help:
// cobra parses every flag and its value before it answers --help, so an
// unknown flag, a bad value or a wrong subcommand path fails here and
// not at 3 a.m. in the cluster.
func TestCronJobArgs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/gpuaffinity")
	}
	c := fleetContainer(t, load(t).cronJob)
	if len(c.Command) > 0 {
		t.Errorf("command %q: the image's entrypoint is gpuaffinity; set args only", c.Command)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			t.Errorf("env %s comes from %+v; this test expands literal values only", e.Name, e.ValueFrom)
			continue
		}
		env[e.Name] = e.Value
	}
	var args []string
	for _, a := range c.Args {
		x := expand(a, env)
		if strings.Contains(x, "$(") {
			t.Errorf("arg %q: a $(VAR) the container's env does not define", a)
		}
		args = append(args, x)
	}
	if len(args) < 3 || args[0] != "fleet" || args[1] != "labels" {
		t.Fatalf("args %q, want fleet labels …", args)
	}
	if !slices.Contains(args, "--apply") {
		t.Errorf("args %q: no --apply", args)
	}
	for _, a := range args[2:] {
		if !strings.HasPrefix(a, "--") || !strings.Contains(a, "=") && a != "--apply" {
			// `--flag value` would pass --help's parsing as well, but a
			// stray positional arg is only refused when the command runs.
			t.Errorf("arg %q: want --flag=value (or --apply)", a)
		}
	}
	if u := env["GPUAFFINITY_PROMETHEUS_URL"]; !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		t.Errorf("GPUAFFINITY_PROMETHEUS_URL %q: want an http(s) URL", u)
	}

	bin, err := gpuaffinity()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append(args, "--help")...)
	cmd.Env = append(os.Environ(), "GPUAFFINITY_PROMETHEUS_URL=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gpuaffinity %s --help: %v\n%s", strings.Join(args, " "), err, out)
	}
	if !strings.Contains(string(out), "gpuaffinity fleet labels [flags]") {
		t.Errorf("gpuaffinity %s --help is not fleet labels' help:\n%s", strings.Join(args, " "), out)
	}
}

// TestImageMatchesAgent: the job runs the agent's image, the same name
// and tag after both kustomizations' images: transformers, so one tag
// bump in each moves both.
func TestImageMatchesAgent(t *testing.T) {
	c := fleetContainer(t, load(t).cronJob)
	ds, err := manifest.DaemonSet(build(t, ".."))
	if err != nil {
		t.Fatal(err)
	}
	var agent *corev1.Container
	for i := range ds.Spec.Template.Spec.Containers {
		if ds.Spec.Template.Spec.Containers[i].Name == "agent" {
			agent = &ds.Spec.Template.Spec.Containers[i]
		}
	}
	if agent == nil {
		t.Fatal("deploy/kubernetes's DaemonSet has no container named agent")
	}
	if c.Image != agent.Image {
		t.Errorf("CronJob runs %s, the DaemonSet %s", c.Image, agent.Image)
	}
	if i := strings.LastIndexByte(c.Image, ':'); i < 0 || strings.Contains(c.Image[i:], "/") || strings.HasSuffix(c.Image, ":latest") {
		t.Errorf("CronJob image %s: want a pinned tag", c.Image)
	}
}

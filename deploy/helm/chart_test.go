package helm

import (
	"bufio"
	"bytes"
	"flag"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validation"

	"github.com/gpuaffinity/gpuaffinity/deploy/internal/manifest"
)

var update = flag.Bool("update", false, "copy "+rulesSource+" to "+rulesCopy)

const (
	// The alerting rules' one source, and the chart's copy of it, which
	// templates/prometheusrule.yaml reads (.Files.Get reaches no file
	// outside the chart).
	rulesSource = "../kubernetes/rules/gpuaffinity-rules.yaml"
	rulesCopy   = chartDir + "/files/gpuaffinity-rules.yaml"
)

// TestRulesCopy holds the chart's rules byte-equal to the source; with
// -update it copies them.
func TestRulesCopy(t *testing.T) {
	src, err := os.ReadFile(rulesSource)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := os.ReadFile(rulesCopy)
	if err != nil && !*update {
		t.Fatal(err)
	}
	if *update && !bytes.Equal(src, cp) {
		if err := os.WriteFile(rulesCopy, src, 0o644); err != nil {
			t.Fatal(err)
		}
		cp = src
	}
	if !bytes.Equal(src, cp) {
		t.Fatalf("%s differs from %s; run\n\tgo test ./deploy/helm -run TestRulesCopy -update\n%s",
			rulesCopy, rulesSource, cmp.Diff(string(src), string(cp)))
	}
}

// TestChartMetadata decodes Chart.yaml strictly into Helm's own type (the
// loader does not: a misspelt key would be dropped) and checks what the
// chart promises: apiVersion v2, an application chart named like its
// directory, and an appVersion that is the image tag deploy/kubernetes
// runs.
func TestChartMetadata(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var md chartv2.Metadata
	if err := manifest.DecodeStrict(data, &md); err != nil {
		t.Fatalf("Chart.yaml: %v", err)
	}
	if err := md.Validate(); err != nil {
		t.Errorf("Chart.yaml: %v", err)
	}
	if md.APIVersion != chartv2.APIVersionV2 || md.Name != filepath.Base(chartDir) || md.Type != "application" {
		t.Errorf("Chart.yaml: apiVersion %q, name %q, type %q; want %s, %s, application", md.APIVersion, md.Name, md.Type, chartv2.APIVersionV2, filepath.Base(chartDir))
	}
	if tag := kustomizeTag(t); md.AppVersion != tag {
		t.Errorf("appVersion %q, want %q, the tag deploy/kubernetes/kustomization.yaml sets", md.AppVersion, tag)
	}
	// The loader reads the same.
	if got := loadChart(t).Metadata; got.Name != md.Name || got.AppVersion != md.AppVersion || got.Version != md.Version {
		t.Errorf("loaded chart %s %s (app %s), Chart.yaml says %s %s (app %s)", got.Name, got.Version, got.AppVersion, md.Name, md.Version, md.AppVersion)
	}
}

// TestLintLevel applies, one by one and with their reasons, the rules of
// `helm lint` (pkg/chart/v2/lint/rules; TestHelmLint runs them all) that
// can fail for this chart: template file extensions, documents that start
// with an indent, object names that break Kubernetes' naming rules, and
// NOTES.txt rendering. Chart.yaml and values (schema) are checked by
// TestChartMetadata and TestSchemaRejects; the strict engine of render
// also fails on a template that reads a value values.yaml does not have.
func TestLintLevel(t *testing.T) {
	ch := loadChart(t)
	for _, tpl := range ch.Templates {
		switch path.Ext(tpl.Name) {
		case ".yaml", ".yml", ".tpl", ".txt":
		default:
			t.Errorf("%s: lint allows .yaml, .yml, .tpl and .txt templates only", tpl.Name)
		}
	}
	for _, vals := range []map[string]any{nil, readValues(t, "site-values.yaml"), readValues(t, "monitor-values.yaml"), readValues(t, "fleet-values.yaml")} {
		files, err := render(t, renderOpts{values: vals, release: release, namespace: namespace})
		if err != nil {
			t.Fatalf("render: %v", err)
		}
		for name, content := range files {
			sc := bufio.NewScanner(strings.NewReader(content))
			for sc.Scan() {
				if strings.TrimSpace(sc.Text()) == "" {
					continue
				}
				if strings.HasPrefix(sc.Text(), " ") || strings.HasPrefix(sc.Text(), "\t") {
					t.Errorf("%s starts with an indented line %q", name, sc.Text())
				}
				break
			}
		}
		notes := files[chartDir+"/templates/NOTES.txt"]
		if !strings.Contains(notes, "kubectl -n "+namespace+" rollout status ds/gpuaffinity-agent") {
			t.Errorf("NOTES.txt does not give the rollout command for namespace %s:\n%s", namespace, notes)
		}
		fleet := vals["fleet"] != nil && vals["fleet"].(map[string]any)["enabled"] == true
		if got := strings.Contains(notes, "cronjob/gpuaffinity-fleet-labels"); got != fleet {
			t.Errorf("NOTES.txt names the fleet CronJob: %t, want %t (fleet.enabled):\n%s", got, fleet, notes)
		}
	}
	objs := renderObjects(t, renderOpts{values: readValues(t, "monitor-values.yaml"), release: release, namespace: namespace})
	objs = append(objs, fleetObjects(renderObjects(t, renderOpts{values: fleetOn, release: release, namespace: namespace}))...)
	for _, o := range objs {
		// A CronJob's name is 52 characters at most: its Jobs are named
		// after it with 11 more.
		if cj, ok := o.(*batchv1.CronJob); ok && len(cj.Name) > 52 {
			t.Errorf("%s: name longer than 52 characters", manifest.KindName(o))
		}
		// As lint's validateMetadataName: a Service's name is a DNS-1035
		// label, the other kinds here take DNS subdomains.
		check := validation.NameIsDNSSubdomain
		if _, ok := o.(*corev1.Service); ok {
			check = validation.NameIsDNS1035Label
		}
		if errs := check(o.GetName(), false); len(errs) > 0 {
			t.Errorf("%s: %v", manifest.KindName(o), errs)
		}
	}
}

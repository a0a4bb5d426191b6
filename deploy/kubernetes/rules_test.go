package kubernetes

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/model"

	"github.com/gpuaffinity/gpuaffinity/deploy/internal/manifest"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/testenv"
)

var update = flag.Bool("update", false, "rewrite prometheusrule.yaml below `spec:` from "+rulesFile)

const (
	rulesFile     = "rules/gpuaffinity-rules.yaml"
	rulesTestFile = "rules/gpuaffinity-rules.test.yaml"
	ruleCRFile    = "prometheusrule.yaml"
)

// rulesDoc is a Prometheus rules file, its groups in prometheus-operator's
// types (which a PrometheusRule's spec embeds); decoding it strictly keeps
// the file to fields both Prometheus and the operator know.
type rulesDoc struct {
	Groups []monitoringv1.RuleGroup `json:"groups"`
}

func readRules(t *testing.T) ([]byte, rulesDoc) {
	t.Helper()
	data, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var r rulesDoc
	if err := manifest.DecodeStrict(data, &r); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	if len(r.Groups) == 0 {
		t.Fatalf("%s: no rule group", rulesFile)
	}
	return data, r
}

// generatedRuleCR returns prometheusrule.yaml as it must be: its own lines
// up to and including `spec:`, then the rules file from `groups:` on,
// indented by two spaces.
func generatedRuleCR(rules, current []byte) ([]byte, error) {
	head, _, ok := bytes.Cut(current, []byte("\nspec:\n"))
	if !ok {
		return nil, errors.New(ruleCRFile + ": no `spec:` line to generate below")
	}
	i := bytes.Index(rules, []byte("\ngroups:\n"))
	if i < 0 {
		return nil, errors.New(rulesFile + ": no top-level `groups:` line")
	}
	var b bytes.Buffer
	b.Write(head)
	b.WriteString("\nspec:\n")
	for line := range strings.SplitAfterSeq(string(rules[i+1:]), "\n") {
		if strings.TrimSpace(line) != "" {
			b.WriteString("  ")
		}
		b.WriteString(line)
	}
	return b.Bytes(), nil
}

// TestPrometheusRuleMatchesRules keeps one source of truth: the rules
// file. With -update it rewrites the PrometheusRule from it.
func TestPrometheusRuleMatchesRules(t *testing.T) {
	rules, parsed := readRules(t)
	current, err := os.ReadFile(ruleCRFile)
	if err != nil {
		t.Fatal(err)
	}
	want, err := generatedRuleCR(rules, current)
	if err != nil {
		t.Fatal(err)
	}
	if *update && !bytes.Equal(current, want) {
		if err := os.WriteFile(ruleCRFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
		current = want
	}
	if !bytes.Equal(current, want) {
		t.Fatalf("%s differs from %s; run\n\tgo test ./deploy/kubernetes -run TestPrometheusRuleMatchesRules -update\n%s",
			ruleCRFile, rulesFile, cmp.Diff(string(want), string(current)))
	}
	// The text copy must also mean the same thing.
	m := load(t)
	if diff := cmp.Diff(parsed.Groups, m.prometheusRule.Spec.Groups); diff != "" {
		t.Errorf("PrometheusRule groups differ from %s (-file +rule):\n%s", rulesFile, diff)
	}
}

// metricNames returns the gpuaffinity_* metric names docs/metrics.md
// documents.
func metricNames(t *testing.T) map[string]bool {
	t.Helper()
	doc, err := os.ReadFile(metricsDoc)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range regexp.MustCompile("`(gpuaffinity_[a-z0-9_]+)`").FindAllStringSubmatch(string(doc), -1) {
		names[m[1]] = true
	}
	if len(names) < 30 {
		t.Fatalf("%s documents %d metrics: not the metric contract?", metricsDoc, len(names))
	}
	return names
}

// nodeExporterIBCounters are node_exporter's infiniband collector counters
// (collector/infiniband_linux.go), whose names the agent's RDMA counters
// take with node_infiniband_ replaced by gpuaffinity_rdma_ (docs/metrics.md,
// "RDMA"). The test accepts these until docs/metrics.md lists them itself.
var nodeExporterIBCounters = []string{
	"link_downed_total", "link_error_recovery_total", "symbol_error_total",
	"local_link_integrity_errors_total", "excessive_buffer_overrun_errors_total",
	"port_errors_received_total", "port_receive_remote_physical_errors_total",
	"port_receive_switch_relay_errors_total", "port_constraint_errors_received_total",
	"port_constraint_errors_transmitted_total", "port_discards_received_total",
	"port_discards_transmitted_total", "port_transmit_wait_total", "vl15_dropped_total",
}

// githubAnchors returns the anchors GitHub gives the headings of a
// Markdown file: lower case, punctuation other than - and _ dropped,
// spaces as dashes.
func githubAnchors(doc []byte) map[string]bool {
	anchors := map[string]bool{}
	drop := regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	for line := range strings.SplitSeq(string(doc), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		h = strings.ReplaceAll(h, "`", "")
		anchors[strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")] = true
	}
	return anchors
}

func TestAlertRules(t *testing.T) {
	_, r := readRules(t)
	known := metricNames(t)
	for _, c := range nodeExporterIBCounters {
		known["gpuaffinity_rdma_"+c] = true
	}
	ops, err := os.ReadFile(operationsDoc)
	if err != nil {
		t.Fatal(err)
	}
	anchors := githubAnchors(ops)
	metricRE := regexp.MustCompile(`\bgpuaffinity_[a-z0-9_]+`)
	seen := map[string]bool{}
	for _, g := range r.Groups {
		for _, rule := range g.Rules {
			name := rule.Alert
			if name == "" {
				t.Errorf("group %s: a recording rule (%s): this file holds alerts only", g.Name, rule.Record)
				continue
			}
			if seen[name] {
				t.Errorf("alert %s defined twice", name)
			}
			seen[name] = true
			if !strings.HasPrefix(name, "GPUAffinity") {
				t.Errorf("alert %s: want the GPUAffinity prefix", name)
			}
			if s := rule.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("alert %s: severity %q, want critical or warning", name, s)
			}
			if rule.For != nil {
				if _, err := model.ParseDuration(string(*rule.For)); err != nil {
					t.Errorf("alert %s: for: %v", name, err)
				}
			}
			keys := slices.Sorted(func(yield func(string) bool) {
				for k := range rule.Annotations {
					if !yield(k) {
						return
					}
				}
			})
			if !slices.Equal(keys, []string{"runbook_url", "summary"}) {
				t.Errorf("alert %s: annotations %q, want summary and runbook_url", name, keys)
			}
			anchor, ok := strings.CutPrefix(rule.Annotations["runbook_url"], runbookBase)
			if !ok || anchor != strings.ToLower(name) {
				t.Errorf("alert %s: runbook_url %q, want %s%s", name, rule.Annotations["runbook_url"], runbookBase, strings.ToLower(name))
			}
			if !anchors[anchor] {
				t.Errorf("alert %s: docs/operations.md has no heading for #%s", name, anchor)
			}
			for _, metric := range metricRE.FindAllString(rule.Expr.String(), -1) {
				if !known[metric] {
					t.Errorf("alert %s: metric %s is not in docs/metrics.md", name, metric)
				}
			}
		}
	}
	// The alerts the deployment promises (the list).
	for _, want := range []string{
		"GPUAffinityNVLinkDown", "GPUAffinityRDMAPortDown", "GPUAffinityRDMAPortRateLow",
		"GPUAffinityRDMAErrorsRising", "GPUAffinityGPULost", "GPUAffinityFatalXID",
		"GPUAffinityRowRemapPending", "GPUAffinityRowRemapFailed", "GPUAffinityNotAligned",
		"GPUAffinityHealthGateFailing", "GPUAffinityCollectorFailing",
		// Issue 17: the NVLink fabric.
		"GPUAffinityNVLinkFabricUnhealthy", "GPUAffinityNVLinkFabricDegraded",
		"GPUAffinityNVLinkCliqueSplit", "GPUAffinityNVLinkGPUOutsideClique", "GPUAffinityIMEXChannelsMissing",
		// Issue 18: AMD Instinct. PCIe replays are one vendor-neutral alert.
		"GPUAffinityAMDGPUDown", "GPUAffinityAMDGPUUncorrectableRAS", "GPUAffinityAMDXGMILinkDown",
		"GPUAffinityPCIeReplaysRising",
		// Issue 35: the agent's job audit.
		"GPUAffinityJobMisbound",
	} {
		if !seen[want] {
			t.Errorf("no alert %s", want)
		}
	}
}

// ruleTests is the part of promtool's unit test file this test reads.
type ruleTests struct {
	RuleFiles          []string `json:"rule_files"`
	EvaluationInterval string   `json:"evaluation_interval"`
	Tests              []struct {
		Name        string `json:"name"`
		Interval    string `json:"interval"`
		InputSeries []struct {
			Series string `json:"series"`
			Values string `json:"values"`
		} `json:"input_series"`
		AlertRuleTest []struct {
			EvalTime  string `json:"eval_time"`
			Alertname string `json:"alertname"`
			ExpAlerts []struct {
				ExpLabels      map[string]string `json:"exp_labels"`
				ExpAnnotations map[string]string `json:"exp_annotations"`
			} `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// TestRuleUnitTestsCoverEveryAlert: each alert has a case where it fires
// and a case where it must stay quiet.
func TestRuleUnitTestsCoverEveryAlert(t *testing.T) {
	_, r := readRules(t)
	data, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	var rt ruleTests
	if err := manifest.DecodeStrict(data, &rt); err != nil {
		t.Fatalf("%s: %v", rulesTestFile, err)
	}
	if !slices.Equal(rt.RuleFiles, []string{"gpuaffinity-rules.yaml"}) {
		t.Errorf("rule_files %q, want the rules file beside it", rt.RuleFiles)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range rt.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	for _, g := range r.Groups {
		for _, rule := range g.Rules {
			if !fires[rule.Alert] {
				t.Errorf("%s: no case where %s fires", rulesTestFile, rule.Alert)
			}
			if !quiet[rule.Alert] {
				t.Errorf("%s: no case where %s must not fire", rulesTestFile, rule.Alert)
			}
		}
	}
}

// promtool returns the promtool binary (Debian's prometheus package). CI
// must have it; elsewhere its absence skips the test.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err == nil {
		return p
	}
	if testenv.InCI() {
		t.Fatalf("promtool not found (Debian package prometheus): %v", err)
	}
	t.Skip("promtool not installed (Debian package prometheus): rules not checked")
	return ""
}

func TestPromtoolCheckRules(t *testing.T) {
	out, err := exec.Command(promtool(t), "check", "rules", rulesFile).CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("SUCCESS")) {
		t.Fatalf("promtool check rules %s: %v\n%s", rulesFile, err, out)
	}
	t.Logf("%s", out)
}

func TestPromtoolTestRules(t *testing.T) {
	out, err := exec.Command(promtool(t), "test", "rules", rulesTestFile).CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("SUCCESS")) {
		t.Fatalf("promtool test rules %s: %v\n%s", rulesTestFile, err, out)
	}
}

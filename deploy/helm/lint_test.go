package helm

import (
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
)

// TestHelmLint runs `helm lint`'s own rules (pkg/chart/v2/lint.RunAll:
// Chart.yaml, values and their schema, every template rendered and
// parsed, object names, dependencies) on the chart with its defaults and
// with the test's non-default values, the fleet labeller's among them. Nothing may be a warning or an
// error; informational messages (such as "icon is recommended") are
// reported, not failed.
func TestHelmLint(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
	}{
		{"defaults", nil},
		{"site-values.yaml", readValues(t, "site-values.yaml")},
		{"monitor-values.yaml", readValues(t, "monitor-values.yaml")},
		{"fleet.enabled=true", fleetOn},
		{"fleet-values.yaml", readValues(t, "fleet-values.yaml")},
	} {
		l := lint.RunAll(chartDir, tc.values, namespace)
		for _, m := range l.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("helm lint (%s): %v", tc.name, m)
			} else {
				t.Logf("helm lint (%s): %v", tc.name, m)
			}
		}
	}
	// The rules bite: a value of the wrong type is an error through the
	// chart's values.schema.json.
	l := lint.RunAll(chartDir, map[string]any{"image": 5}, namespace)
	if l.HighestSeverity < support.ErrorSev {
		t.Errorf("helm lint with image: 5: highest severity %d, want an error; messages %v", l.HighestSeverity, l.Messages)
	}
}

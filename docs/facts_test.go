package docs

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/exporter"
	"github.com/gpuaffinity/gpuaffinity/health"
)

// TestArchitectureCounts holds the counts docs/architecture.md states to
// the code: the health gate's checks and the exporter's collectors (nvml's
// nvlink part, which only runs alone when nvml is switched off, is not
// counted as a collector of its own).
func TestArchitectureCounts(t *testing.T) {
	data, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Join(strings.Fields(string(data)), " ")
	for _, c := range []struct {
		re   string
		want int
	}{
		{`(\d+) checks with stable ids`, len(health.Checks())},
		{`runs its (\d+) collectors`, len(exporter.CollectorNames()) - 1},
		{`\*\*The exporter\*\* has (\w+) concurrent collectors`, len(exporter.CollectorNames()) - 1},
	} {
		m := regexp.MustCompile(c.re).FindStringSubmatch(doc)
		if m == nil {
			t.Errorf("architecture.md: no %q", c.re)
			continue
		}
		got, err := strconv.Atoi(m[1])
		if err != nil {
			got = words[m[1]]
		}
		if got != c.want {
			t.Errorf("architecture.md says %q, the code has %d", m[0], c.want)
		}
	}
}

var words = map[string]int{"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}

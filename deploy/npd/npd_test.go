package npd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// The types below are node-problem-detector's custom plugin monitor
// configuration, field for field (k8s.io/node-problem-detector at commit
// 01a6793b: pkg/custompluginmonitor/types/config.go and types.go,
// pkg/types/types.go). The module is not served here, so the test holds
// the file to a copy of NPD's types and of the rules its ApplyConfiguration
// and Validate apply; decoding is strict, so a field NPD does not have
// fails too.
type pluginGlobalConfig struct {
	InvokeInterval  *string `json:"invoke_interval,omitempty"`
	Timeout         *string `json:"timeout,omitempty"`
	MaxOutputLength *int    `json:"max_output_length,omitempty"`
	Concurrency     *int    `json:"concurrency,omitempty"`
	MessageChange   *bool   `json:"enable_message_change_based_condition_update,omitempty"`
	SkipInitial     *bool   `json:"skip_initial_status,omitempty"`
}

type condition struct {
	Type       string    `json:"type"`
	Status     string    `json:"status"`
	Transition time.Time `json:"transition"`
	Reason     string    `json:"reason"`
	Message    string    `json:"message"`
}

type customRule struct {
	Type           string   `json:"type"`
	Condition      string   `json:"condition"`
	Reason         string   `json:"reason"`
	Path           string   `json:"path"`
	Args           []string `json:"args"`
	Timeout        *string  `json:"timeout"`
	InvokeInterval *string  `json:"invoke_interval,omitempty"`
}

type customPluginConfig struct {
	Plugin            string             `json:"plugin,omitempty"`
	PluginConfig      pluginGlobalConfig `json:"pluginConfig,omitempty"`
	Source            string             `json:"source"`
	DefaultConditions []condition        `json:"conditions"`
	Rules             []*customRule      `json:"rules"`
	MetricsReporting  *bool              `json:"metricsReporting,omitempty"`
}

// validate is NPD's ApplyConfiguration and Validate: durations parse, the
// global timeout defaults to 5 s and no rule's exceeds it, the plugin is
// "custom", a permanent rule's condition has a default, and (NPD checks
// the path exists) the binary is where the rule says, here under bin.
func validate(c customPluginConfig, pathExists func(string) bool) error {
	global := 5 * time.Second
	if c.PluginConfig.Timeout != nil {
		d, err := time.ParseDuration(*c.PluginConfig.Timeout)
		if err != nil {
			return fmt.Errorf("error in parsing global timeout %q: %v", *c.PluginConfig.Timeout, err)
		}
		global = d
	}
	if c.PluginConfig.InvokeInterval != nil {
		if _, err := time.ParseDuration(*c.PluginConfig.InvokeInterval); err != nil {
			return fmt.Errorf("error in parsing invoke interval %q: %v", *c.PluginConfig.InvokeInterval, err)
		}
	}
	if c.Plugin != "custom" {
		return fmt.Errorf("NPD does not support %q plugin", c.Plugin)
	}
	for _, r := range c.Rules {
		if r.Timeout != nil {
			d, err := time.ParseDuration(*r.Timeout)
			if err != nil {
				return fmt.Errorf("error in parsing rule timeout %q: %v", *r.Timeout, err)
			}
			if d > global {
				return fmt.Errorf("plugin timeout %s is greater than global timeout %s", d, global)
			}
		}
		if !pathExists(r.Path) {
			return fmt.Errorf("rule path %q does not exist", r.Path)
		}
		if r.Type != "permanent" && r.Type != "temporary" {
			return fmt.Errorf("rule type %q: NPD knows permanent and temporary", r.Type)
		}
		if r.Type == "permanent" {
			found := false
			for _, d := range c.DefaultConditions {
				found = found || d.Type == r.Condition
			}
			if !found {
				return fmt.Errorf("Permanent problem %s does not have preset default condition.", r.Condition)
			}
		}
	}
	return nil
}

func load(t *testing.T) customPluginConfig {
	t.Helper()
	data, err := os.ReadFile("gpuaffinity-custom-plugin-monitor.json")
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c customPluginConfig
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("decode: %v", err)
	}
	return c
}

// TestNPDAcceptsConfig: the shipped config passes NPD's rules, and the
// rules catch what the README's old one-liner got wrong (no condition, a
// 10 s timeout over NPD's 5 s default global timeout).
func TestNPDAcceptsConfig(t *testing.T) {
	c := load(t)
	exists := func(p string) bool { return p == "/usr/bin/gpuaffinity" } // where the packages install it
	if err := validate(c, exists); err != nil {
		t.Fatalf("NPD would refuse the config: %v", err)
	}
	if n := c.PluginConfig.MaxOutputLength; n == nil || *n < 80 {
		t.Errorf("max_output_length %v: check -o npd writes up to 80 bytes", n)
	}
	ten := "10s"
	old := customPluginConfig{Plugin: "custom", Rules: []*customRule{{Type: "permanent", Reason: "GPUNodeUnhealthy",
		Path: "/usr/bin/gpuaffinity", Args: []string{"check", "-o", "npd", "--interval", "0"}, Timeout: &ten}}}
	if err := validate(old, exists); err == nil || !strings.Contains(err.Error(), "greater than global timeout") {
		t.Errorf("the old rule: %v; want the timeout refused", err)
	}
	old.PluginConfig.Timeout = &ten
	if err := validate(old, exists); err == nil || !strings.Contains(err.Error(), "does not have preset default condition") {
		t.Errorf("the old rule with a timeout: %v; want the missing condition refused", err)
	}
}

// TestNPDRuleRuns runs the rule's command as NPD would (the binary built
// here in the rule path's place) on a healthy and an unhealthy demo
// machine: exit 0 with the OK message, exit 1 with at most
// max_output_length bytes naming the failed check.
func TestNPDRuleRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	c := load(t)
	bin := filepath.Join(t.TempDir(), "gpuaffinity")
	_, file, _, _ := runtime.Caller(0)
	build := exec.Command("go", "build", "-o", bin, "./cmd/gpuaffinity")
	build.Dir = filepath.Join(filepath.Dir(file), "..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	r := c.Rules[0]
	for _, tc := range []struct {
		demo string
		code int
	}{{"dgx-h100", 0}, {"dgx-h100-faults", 1}} {
		cmd := exec.Command(bin, append(append([]string{}, r.Args...), "--demo", tc.demo)...)
		out, err := cmd.Output()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		msg := strings.TrimSuffix(string(out), "\n")
		if code != tc.code || len(msg) > *c.PluginConfig.MaxOutputLength || strings.Contains(msg, "\n") ||
			(tc.code == 0 && msg != "gpuaffinity: healthy") || (tc.code == 1 && !strings.Contains(msg, ": ")) {
			t.Errorf("%s: exit %d, message %q; want exit %d and one line of at most %d bytes", tc.demo, code, msg, tc.code, *c.PluginConfig.MaxOutputLength)
		}
	}
}

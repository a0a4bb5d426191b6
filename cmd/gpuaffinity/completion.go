//go:build !agent_only

package main

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuaffinity/gpuaffinity/internal/demo"
)

// outputFormats are each command's -o values, for shell completion.
var outputFormats = map[string][]string{
	"topo":   {"table", "json", "dot", "mermaid"},
	"env":    {"sh", "json", "dotenv", "table"},
	"cpumap": {"table", "json", "numactl", "taskset"},
	"check":  {"text", "json", "nhc", "npd"},
}

// flagValues are the values of flags that mean the same on every command.
var flagValues = map[string]func() []string{
	"demo":       func() []string { return append(demo.Machines(), "list") },
	"profile":    func() []string { return []string{"pretrain", "finetune", "inference"} },
	"mode":       func() []string { return []string{"node", "socket", "exclusive"} },
	"log.level":  func() []string { return []string{"debug", "info", "warn", "error"} },
	"log.format": func() []string { return []string{"logfmt", "json"} },
}

// registerCompletions gives the shell completion (`gpuaffinity
// completion bash|zsh|fish`) the values of -o, --demo, --profile, --mode
// and the log flags on every command that has them.
func registerCompletions(root *cobra.Command) {
	// The values are made when the shell asks, not at every start.
	fixed := func(vals func() []string) cobra.CompletionFunc {
		return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return vals(), cobra.ShellCompDirectiveNoFileComp
		}
	}
	for name, vals := range flagValues {
		if root.PersistentFlags().Lookup(name) != nil {
			root.RegisterFlagCompletionFunc(name, fixed(vals))
		}
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
			if f.Hidden {
				return
			}
			if vals, ok := flagValues[f.Name]; ok {
				c.RegisterFlagCompletionFunc(f.Name, fixed(vals))
			}
			if vals, ok := outputFormats[c.Name()]; ok && f.Name == "output" {
				c.RegisterFlagCompletionFunc(f.Name, fixed(func() []string { return vals }))
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	for _, sub := range root.Commands() {
		walk(sub)
	}
}

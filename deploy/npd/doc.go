// Package npd holds gpuaffinity's node-problem-detector configuration:
// gpuaffinity-custom-plugin-monitor.json, a custom plugin monitor that
// runs `gpuaffinity check -o npd` and sets the node condition
// GPUAffinityUnhealthy (docs/health.md). Its test holds the file to NPD's
// own rules.
package npd

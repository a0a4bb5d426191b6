package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/audit"
)

// The command's wiring: discovery of the --demo machine, its NVML
// replay (the example images record no process lists, which the report
// says instead of "no process"), -o json's schema, -o refused.
func TestAuditDemo(t *testing.T) {
	var rep audit.Report
	if err := json.Unmarshal([]byte(mustRun(t, "audit", "--demo", "dgx-h100", "-o", "json")), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Schema != audit.Schema || len(rep.Processes) != 0 {
		t.Errorf("schema %q, %d processes; want %s and none", rep.Schema, len(rep.Processes), audit.Schema)
	}
	if len(rep.Unread) != 16 || !strings.Contains(rep.Unread[0], "NVML GPU 0 (0000:1b:00.0): GetComputeRunningProcesses: ERROR_NOT_SUPPORTED") {
		t.Errorf("unread %q: want both lists of the 8 GPUs, not recorded", rep.Unread)
	}
	// A list that could not be read may hold processes: the table must
	// not say there are none.
	out := mustRun(t, "audit", "--demo", "amd-mi300x")
	if strings.Contains(out, "no process uses a GPU") || !strings.Contains(out, "no GPU process found, but 1 process list(s) could not be read") ||
		!strings.Contains(out, "kfd/proc is absent") {
		t.Errorf("table:\n%s", out)
	}
	if out := mustRun(t, "audit", "--demo", "dgx-h100"); !strings.Contains(out, "but 16 process list(s) could not be read") {
		t.Errorf("table:\n%s", out)
	}
	if _, err := run(t, "audit", "--demo", "dgx-h100", "-o", "yaml"); err == nil || !strings.Contains(err.Error(), "want table or json") {
		t.Errorf("-o yaml: %v", err)
	}
}

// --fabric-interval adds the fabric object: the DGX H100 demo's 8
// compute and 4 storage ports (the DGX H100 user guide's network ports
// table, as the dgx-h100 spec cites it), all measured, no GPU busy, so
// nothing judged.
func TestAuditFabricInterval(t *testing.T) {
	var rep audit.Report
	if err := json.Unmarshal([]byte(mustRun(t, "audit", "--demo", "dgx-h100", "--fabric-interval", "1ms", "-o", "json")), &rep); err != nil {
		t.Fatal(err)
	}
	f := rep.Fabric
	if f == nil {
		t.Fatal("no fabric object")
	}
	roles := map[string]int{}
	for _, p := range f.Ports {
		roles[string(p.Role)]++
		if p.BytesPerSecond == nil || p.Idle || p.ComputeTraffic {
			t.Errorf("port %s: %+v", p.Name(), p)
		}
	}
	if roles["compute"] != 8 || roles["storage"] != 4 || f.Active || len(f.Degraded) != 0 || len(f.BusyGPUs) != 0 {
		t.Errorf("fabric %+v: want 8 compute and 4 storage ports, nothing busy or degraded", f)
	}
	if out := mustRun(t, "audit", "--demo", "dgx-h100", "--fabric-interval", "1ms"); !strings.Contains(out, "no GPU is busy: nothing judged") {
		t.Errorf("table:\n%s", out)
	}
	if _, err := run(t, "audit", "--demo", "dgx-h100", "--fabric-interval", "-1s"); err == nil || !strings.Contains(err.Error(), "want a positive duration") {
		t.Errorf("--fabric-interval -1s: %v", err)
	}
}

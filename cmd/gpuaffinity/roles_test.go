package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/health"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// A compute port that is DOWN, on an InfiniBand node (its rate file reads
// 10 Gb/s) and on a RoCE node (40 Gb/s): the NIC stays compute; topo
// warns naming the NIC and port, check fails nic.port_state naming them
// (exit 1), and env leaves the port out of NCCL_IB_HCA and
// UCX_NET_DEVICES with a warning on stderr.
func TestDownComputePort(t *testing.T) {
	for _, c := range []struct {
		machine, nic, bus, state string
		rank                     string // the GPU whose NIC it is
		uses                     string // what that GPU uses meanwhile
	}{
		{"dgx-h100-faults", "mlx5_4", "0000:4f:00.0", "DOWN/Polling", "2", "mlx5_0"},
		{"oci-bm-gpu-h100-port-down", "mlx5_5", "0000:41:00.0", "DOWN/Disabled", "2", "mlx5_6"},
	} {
		t.Run(c.machine, func(t *testing.T) {
			js := mustRun(t, "topo", "--demo", c.machine, "-o", "json")
			var n topology.Node
			if err := json.Unmarshal([]byte(js), &n); err != nil {
				t.Fatal(err)
			}
			for _, nic := range n.NICs {
				if nic.Name == c.nic && nic.Role != topology.RoleCompute {
					t.Errorf("%s: role %s, want compute (a down port is not a role)", c.nic, nic.Role)
				}
			}
			want := "compute NIC " + c.nic + " (" + c.bus + ") port 1 " + c.state + ": GPU " + c.rank + " uses " + c.uses
			if !slices.Contains(n.Warnings, want) {
				t.Errorf("topo warnings %q, want %q", n.Warnings, want)
			}
			if table := mustRun(t, "topo", "--demo", c.machine); !strings.Contains(table, want) {
				t.Errorf("table has no warning %q:\n%s", want, table)
			}

			env, stderr, err := runErr(t, "env", "--demo", c.machine, "--local-rank", c.rank)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(env, c.nic+":1") || !strings.Contains(env, "UCX_NET_DEVICES='"+c.uses+":1'") {
				t.Errorf("env still names %s or not %s:\n%s", c.nic, c.uses, env)
			}
			if !strings.Contains(stderr, "NIC "+c.nic+" port 1 is DOWN") {
				t.Errorf("env stderr %q", stderr)
			}

			rep, code := checkReport(t, "--root", checkRoot(t, c.machine))
			port := rep["nic.port_state"]
			wantReason := "NIC " + c.nic + " (" + c.bus + ") port 1 is " + c.state + ", want ACTIVE/LinkUp (the NIC of GPU " + c.rank + "; meanwhile GPU " + c.rank + " uses " + c.uses + ")"
			if code != 1 || port.Verdict != health.Fail || port.Reason != wantReason {
				t.Errorf("exit %d, nic.port_state %+v, want fail %q", code, port, wantReason)
			}

		})
	}
}

// gaudiRoot is amd-mi300x with its 8 OAMs turned into Intel Gaudi 2
// (1da3:1020, class 0x120000, no driver bound, no KFD): accelerators
// gpuaffinity does not drive.
func gaudiRoot(t *testing.T) string {
	t.Helper()
	root := checkRoot(t, "amd-mi300x")
	for _, bdf := range []string{"05", "2b", "5b", "65", "7d", "a5", "d5", "e7"} {
		dir, err := filepath.EvalSymlinks(filepath.Join(root, "sys/bus/pci/devices/0000:"+bdf+":00.0"))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "vendor"), "0x1da3\n")
		writeFile(t, filepath.Join(dir, "device"), "0x1020\n")
		if err := os.Remove(filepath.Join(dir, "driver")); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.RemoveAll(filepath.Join(root, "sys/devices/virtual/kfd")); err != nil {
		t.Fatal(err)
	}
	return root
}

// A node of accelerators gpuaffinity does not drive (Intel Gaudi 2):
// every command says they are not supported; check fails gpu.count; env
// fails rather than print nothing.
func TestUnsupportedAccelerators(t *testing.T) {
	root := gaudiRoot(t)
	const warn = "8 accelerator(s) on the PCI bus are not supported yet: 8× Intel Gaudi 2 (1da3:1020, driver none)"
	for _, args := range [][]string{
		{"topo", "--root", root, "-o", "json"},
		{"nccl-topo", "--root", root},
		{"gres", "--root", root},
		{"cpumap", "--root", root},
		{"env", "--root", root, "--all-ranks"},
		{"env", "--root", root, "--local-rank", "0"},
	} {
		_, stderr, _ := runErr(t, args...)
		if !strings.Contains(stderr, warn) {
			t.Errorf("%s: stderr %q has no warning %q", strings.Join(args[:1], " "), stderr, warn)
		}
	}
	for _, args := range [][]string{{"env", "--root", root, "--all-ranks"}, {"env", "--root", root, "--local-rank", "0"}} {
		out, _, err := runErr(t, args...)
		if err == nil || out != "" || !strings.Contains(err.Error(), "no GPU gpuaffinity supports: 8 accelerator(s)") {
			t.Errorf("%s: err %v, stdout %q", strings.Join(args, " "), err, out)
		}
	}
	rep, code := checkReport(t, "--root", root)
	if r := rep["gpu.count"]; code != 1 || r.Verdict != health.Fail ||
		!strings.HasPrefix(r.Reason, "0 supported GPUs: 8 accelerators on the PCI bus are not supported yet (Intel Gaudi 2, 1da3:1020") {
		t.Errorf("exit %d, gpu.count %+v", code, r)
	}
	if r := rep["topo.aligned"]; r.Verdict != health.Skip {
		t.Errorf("topo.aligned with no GPU: %+v", r)
	}
	// The MI300X themselves are supported GPUs (amd_check_test.go holds
	// the AMD checks, amd_env_test.go their RCCL environment).
	rep, code = checkReport(t, "--demo", "amd-mi300x")
	if r := rep["gpu.count"]; code != 0 || r.Verdict != health.Pass || r.Reason != "8 GPUs, AMD Instinct MI300X" {
		t.Errorf("amd-mi300x: exit %d, gpu.count %+v", code, r)
	}
}

// Without NVML, topo.gdr reads the driver version from the driver's own
// /proc/driver/nvidia/version (dma-buf needs R515 and kernel 5.12).
func TestGDRWithoutNVML(t *testing.T) {
	root := checkRoot(t, "dgx-h100")
	if err := os.Remove(filepath.Join(root, "nvml.json")); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(root, "sys/module/nvidia_peermem"))
	rep, _ := checkReport(t, "--root", root)
	if r := rep["topo.gdr"]; r.Verdict != health.Pass || r.Reason != "dma-buf: driver 550.54.15 (/proc/driver/nvidia/version), kernel 5.15 (nvidia_peermem not loaded)" {
		t.Errorf("topo.gdr %+v", r)
	}
}

// p6-b200: the NVSwitch-side ConnectX-7 run a firmware of their own; they
// are management NICs, so nic.firmware and nic.count see the 8 EFA only.
func TestP6B200ManagementNICs(t *testing.T) {
	env := mustRun(t, "env", "--demo", "aws-p6-b200", "--local-rank", "4")
	if strings.Contains(env, "ibp11") || strings.Contains(env, "NCCL_IB_HCA") || strings.Contains(env, "UCX_NET_DEVICES") {
		t.Errorf("env names the ConnectX-7:\n%s", env)
	}
	rep, _ := checkReport(t, "--root", checkRoot(t, "aws-p6-b200"))
	for id, w := range map[string]string{"nic.firmware": "8 compute NICs on firmware 28.39.1002", "nic.count": "8 compute NICs",
		"topo.aligned": "8 GPUs with a compute NIC at PXB or better"} {
		if r := rep[id]; r.Verdict != health.Pass || r.Reason != w {
			t.Errorf("%s: %s %q, want pass %q", id, r.Verdict, r.Reason, w)
		}
	}
}

// checkReport runs check -o json --interval 0 with args and returns its
// results by check id, and the exit code.
func checkReport(t *testing.T, args ...string) (map[string]health.Result, int) {
	t.Helper()
	out, code := runCheck(t, append(args, "--interval", "0", "-o", "json")...)
	var rep health.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("check %v: %v\n%s", args, err, out)
	}
	byID := map[string]health.Result{}
	for _, r := range rep.Results {
		byID[r.ID] = r
	}
	return byID, code
}

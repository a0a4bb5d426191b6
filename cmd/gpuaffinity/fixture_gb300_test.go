package main

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/topology"
)

// The GB300 tray with ConnectX-8 Data Direct, through every command. The
// answers are NVIDIA's "Grace Blackwell CX8 GPUDirect RDMA" guide's
// (internal/testutil/fakesys/testdata/machines/gb300-nvl72-tray.yaml cites it):
// rdma_topo prints "RDMA NIC=0000:03:00.0, GPU=0009:06:00.0, RDMA DMA
// Function=0009:03:00.0" and "RDMA NIC=0002:03:00.0, GPU=0008:06:00.0,
// RDMA DMA Function=0008:03:00.0", so GPU 0 (0008:06:00.0, the first in
// bus order) uses the second PF's NIC ibP2p3s0 and GPU 1 (0009:06:00.0)
// ibp3s0; Grace 1 mirrors it: GPU 2 ibP18p3s0, GPU 3 ibP16p3s0.
func TestGB300DataDirect(t *testing.T) {
	const demo = "gb300-nvl72-tray"
	want := map[int]struct{ nic, dma string }{
		0: {"ibP2p3s0", "0008:03:00.0"},
		1: {"ibp3s0", "0009:03:00.0"},
		2: {"ibP18p3s0", "0018:03:00.0"},
		3: {"ibP16p3s0", "0019:03:00.0"},
	}

	t.Run("topo", func(t *testing.T) {
		var n topology.Node
		if err := json.Unmarshal([]byte(mustRun(t, "topo", "--demo", demo, "-o", "json")), &n); err != nil {
			t.Fatal(err)
		}
		for _, p := range n.Pairs {
			w := want[p.GPU]
			// The data path crosses the CX switch and the second switch
			// in front of the GPU, never a root port: PXB, decided.
			if !slices.Equal(p.NICs, []string{w.nic}) || p.Class != topology.ClassPXB || !p.Decided {
				t.Errorf("GPU %d: %v %s decided=%v, want [%s] PXB decided (%s)", p.GPU, p.NICs, p.Class, p.Decided, w.nic, p.Note)
			}
			if !strings.Contains(p.Note, w.dma) || !strings.Contains(p.Note, "VPD V3") {
				t.Errorf("GPU %d: the note does not name the Data Direct function %s and the VPD: %q", p.GPU, w.dma, p.Note)
			}
		}
		for _, p := range n.Paths {
			w := want[p.GPU]
			if p.NIC != w.nic {
				continue
			}
			// nvidia-smi topo -m places the NIC at its PF, on another
			// root port of the GPU's Grace: NODE.
			if p.PFClass != topology.ClassNODE {
				t.Errorf("GPU %d - %s: pf_class %s, want NODE", p.GPU, p.NIC, p.PFClass)
			}
		}
		for _, nic := range n.NICs {
			if nic.Role != topology.RoleCompute {
				if nic.DataDirect != nil {
					t.Errorf("%s (BlueField-3) has a Data Direct function %+v", nic.Name, nic.DataDirect)
				}
				continue
			}
			if nic.DataDirect == nil || nic.DataDirect.MatchedBy != "vpd" {
				t.Errorf("%s: data_direct %+v, want tied by vpd", nic.Name, nic.DataDirect)
			}
		}
		for _, w := range n.Warnings {
			if strings.Contains(w, "Data Direct") {
				t.Errorf("warning on a node whose functions are all tied: %s", w)
			}
		}
		// Storage: the E1.S behind each GPU's own ConnectX-8 (nvme3 is in
		// the guide's complex of GPU 0009:06:00.0, GPU 1).
		for _, sp := range n.Storage.Pairs {
			wantDrive := map[int]string{0: "nvme4", 1: "nvme3", 2: "nvme6", 3: "nvme5"}[sp.GPU]
			if !slices.Equal(sp.NVMe, []string{wantDrive}) {
				t.Errorf("GPU %d: storage %v, want [%s] (%s)", sp.GPU, sp.NVMe, wantDrive, sp.Note)
			}
		}
	})

	t.Run("env", func(t *testing.T) {
		for _, rank := range []string{"0", "3"} {
			gpu := map[string]int{"0": 0, "3": 3}[rank]
			out, _, err := envRun(t, "--demo", demo, "--local-rank", rank)
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range []string{
				"export UCX_NET_DEVICES='" + want[gpu].nic + ":1'",
				"export GPUAFFINITY_NICS='" + want[gpu].nic + "'",
				// Every ConnectX-8 by its RDMA name (NCCL matches
				// NCCL_IB_HCA against the device, then exposes <name>_dma),
				// never a BlueField-3 front-end port.
				"export NCCL_IB_HCA='=ibp3s0:1,ibP2p3s0:1,ibP16p3s0:1,ibP18p3s0:1'",
				"export NCCL_SOCKET_IFNAME='=enP6p3s0f0np0'",
			} {
				if !strings.Contains(out, line+"\n") {
					t.Errorf("rank %s: no %s in\n%s", rank, line, out)
				}
			}
		}
	})

	t.Run("nccl-topo", func(t *testing.T) {
		out := mustRun(t, "nccl-topo", "--demo", demo)
		for _, w := range want {
			// The Data Direct function, class 0x080100, where NCCL will
			// hang <name>_dma.
			re := regexp.MustCompile(`<pci busid="` + regexp.QuoteMeta(w.dma) + `" class="0x080100" vendor="0x15b3" device="0x2100"`)
			if !re.MatchString(out) {
				t.Errorf("no Data Direct function %s in\n%s", w.dma, out)
			}
		}
		// The PFs are not NCCL's devices while Data Direct is on.
		for _, pf := range []string{"0000:03:00.0", "0002:03:00.0", "0010:03:00.0", "0012:03:00.0"} {
			if strings.Contains(out, `busid="`+pf+`"`) {
				t.Errorf("PF %s in the XML:\n%s", pf, out)
			}
		}
	})

	t.Run("cpumap", func(t *testing.T) {
		out := mustRun(t, "cpumap", "--demo", demo)
		// Two GPUs per 72-core Grace, exclusive halves.
		for _, row := range []string{"0 0 0 exclusive 0-35 0", "3 3 1 exclusive 108-143 1"} {
			if !strings.Contains(strings.Join(strings.Fields(out), " "), row) {
				t.Errorf("cpumap has no row %q:\n%s", row, out)
			}
		}
	})

	t.Run("check", func(t *testing.T) {
		out, code := runCheck(t, "--demo", demo)
		if code != 0 || !strings.Contains(out, "topo.aligned        4 GPUs with a compute NIC at PXB or better") {
			t.Errorf("check exit %d:\n%s", code, out)
		}
	})

	t.Run("gres", func(t *testing.T) {
		out := mustRun(t, "gres", "--demo", demo)
		for _, line := range []string{
			"Name=gpu Type=gb300 File=/dev/nvidia0 Cores=0-71 Links=-1,18,18,18",
			"Name=gpu Type=gb300 File=/dev/nvidia3 Cores=72-143 Links=18,18,18,-1",
		} {
			if !strings.Contains(out, line+"\n") {
				t.Errorf("gres has no %q:\n%s", line, out)
			}
		}
	})
}

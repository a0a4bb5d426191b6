package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/health"
	"github.com/gpuaffinity/gpuaffinity/ncclxml"
)

// The issue 32 acceptance for the AMD fixtures: topo -o json, env (rank
// 0 and the last), nccl-topo, cpumap, check and gres on amd-mi355x (8x
// MI355X in SPX/NPS1) and amd-mi300x-cpx (8x MI300X in CPX/NPS4: 64 HIP
// devices), each value derived by hand from the fixtures' sources (their
// HAND-WRITTEN EXPECTATIONS blocks), not from the program.

// amdTopo is the part of topo -o json these tests read.
type amdTopo struct {
	GPUs []struct {
		Index    int    `json:"index"`
		BusID    string `json:"bus_id"`
		Model    string `json:"model"`
		Locality struct {
			CPUs string `json:"cpus"`
			Node int    `json:"node"`
		} `json:"locality"`
		AMD struct {
			KFDNodes         []int  `json:"kfd_nodes"`
			Ordinals         []int  `json:"ordinals"`
			GFXTarget        string `json:"gfx_target"`
			ComputeUnits     int    `json:"compute_units"`
			XCCs             int    `json:"xccs"`
			RenderMinor      *int   `json:"render_minor"`
			ComputePartition string `json:"compute_partition"`
			MemoryPartition  string `json:"memory_partition"`
			Partitions       []struct {
				Partition    int  `json:"partition"`
				KFDNode      int  `json:"kfd_node"`
				Ordinal      int  `json:"ordinal"`
				RenderMinor  *int `json:"render_minor"`
				ComputeUnits int  `json:"compute_units"`
				XCCs         int  `json:"xccs"`
			} `json:"partitions"`
			XGMILinks []struct {
				Peer         string `json:"peer"`
				Hops         int    `json:"hops"`
				Weight       int    `json:"weight"`
				MaxBandwidth int    `json:"max_bandwidth_mbs"`
			} `json:"xgmi_links"`
		} `json:"amd"`
	} `json:"gpus"`
	Pairs []struct {
		GPU   int      `json:"gpu"`
		NICs  []string `json:"nics"`
		Class string   `json:"class"`
	} `json:"pairs"`
	Warnings []string `json:"warnings"`
}

func amdTopoJSON(t *testing.T, machine string) amdTopo {
	t.Helper()
	out := mustRun(t, "topo", "--demo", machine, "-o", "json")
	var tp amdTopo
	if err := json.Unmarshal([]byte(out), &tp); err != nil {
		t.Fatalf("topo -o json: %v", err)
	}
	return tp
}

// The reference tree's GPUs (AMD's topology-mapping.md), in index order.
var amdRefBus = []string{"0000:05:00.0", "0000:2b:00.0", "0000:5b:00.0", "0000:65:00.0",
	"0000:7d:00.0", "0000:a5:00.0", "0000:d5:00.0", "0000:e7:00.0"}

func TestFixtureAMDMI355X(t *testing.T) {
	envCleanEnv(t)
	t.Setenv("SLURM_JOB_GPUS", "")
	const m = "amd-mi355x"
	// Pollara on the platform switch of each GPU (validation.md's benic
	// order): GPU k's NIC.
	nics := []string{"ionic_6", "ionic_5", "ionic_4", "ionic_7", "ionic_3", "ionic_2", "ionic_0", "ionic_1"}
	// 2x EPYC 9575F, 64 cores and SMT: node 0 = 0-63,128-191.
	cpus := []string{"0-63,128-191", "64-127,192-255"}

	t.Run("topo", func(t *testing.T) {
		tp := amdTopoJSON(t, m)
		if len(tp.GPUs) != 8 || len(tp.Warnings) != 0 {
			t.Fatalf("%d GPUs, warnings %q; want 8, none", len(tp.GPUs), tp.Warnings)
		}
		for i, g := range tp.GPUs {
			a := g.AMD
			// SPX: one KFD node per GPU (CPU nodes 0-1 first), HIP
			// ordinal = index; 256 CUs on 8 XCDs; 8 DRM devices per GPU.
			if g.BusID != amdRefBus[i] || g.Model != "AMD Instinct MI355X" || a.GFXTarget != "gfx950" ||
				a.ComputeUnits != 256 || a.XCCs != 8 || a.RenderMinor == nil || *a.RenderMinor != 128+8*i ||
				fmt.Sprint(a.KFDNodes) != fmt.Sprint([]int{2 + i}) || fmt.Sprint(a.Ordinals) != fmt.Sprint([]int{i}) ||
				a.ComputePartition != "SPX" || a.MemoryPartition != "NPS1" || len(a.Partitions) != 0 {
				t.Errorf("GPU %d: %s %s %+v", i, g.BusID, g.Model, a)
			}
			if g.Locality.Node != i/4 || g.Locality.CPUs != cpus[i/4] {
				t.Errorf("GPU %d: locality node %d CPUs %s, want %d %s", i, g.Locality.Node, g.Locality.CPUs, i/4, cpus[i/4])
			}
			// Fully connected 8-OAM board: 7 one-hop links, KFD weight
			// 15, one 38.4 Gb/s x16 link = 76800 MB/s.
			if len(a.XGMILinks) != 7 {
				t.Errorf("GPU %d: %d XGMI links, want 7", i, len(a.XGMILinks))
			}
			for _, l := range a.XGMILinks {
				if l.Hops != 1 || l.Weight != 15 || l.MaxBandwidth != 76800 {
					t.Errorf("GPU %d -> %s: %+v, want 1 hop, weight 15, 76800 MB/s", i, l.Peer, l)
				}
			}
		}
		for _, p := range tp.Pairs {
			if fmt.Sprint(p.NICs) != fmt.Sprint([]string{nics[p.GPU]}) || p.Class != "PXB" {
				t.Errorf("pair of GPU %d: %v %s, want [%s] PXB", p.GPU, p.NICs, p.Class, nics[p.GPU])
			}
		}
	})

	t.Run("env", func(t *testing.T) {
		for rank, want := range map[string][]string{
			"0": {"GPUAFFINITY_GPU='0'", "GPUAFFINITY_HIP_DEVICES='0'", "GPUAFFINITY_NICS='ionic_6'",
				"GPUAFFINITY_CPUS='0-63,128-191'", "GPUAFFINITY_NUMA='0'", "UCX_NET_DEVICES='ionic_6:1'"},
			"7": {"GPUAFFINITY_GPU='7'", "GPUAFFINITY_HIP_DEVICES='7'", "GPUAFFINITY_NICS='ionic_1'",
				"GPUAFFINITY_CPUS='64-127,192-255'", "GPUAFFINITY_NUMA='1'", "UCX_NET_DEVICES='ionic_1:1'"},
		} {
			out, stderr, err := envRun(t, "--demo", m, "--local-rank", rank)
			if err != nil || stderr != "" {
				t.Fatalf("rank %s: %v %q", rank, err, stderr)
			}
			// RoCE v2-only GID table (ionic): the IPv4-mapped GID at 1;
			// every Pollara in bus order.
			want = append(want, "NCCL_IB_GID_INDEX='1'",
				"NCCL_IB_HCA='=ionic_6:1,ionic_5:1,ionic_4:1,ionic_7:1,ionic_3:1,ionic_2:1,ionic_0:1,ionic_1:1'",
				"NCCL_SOCKET_IFNAME='=ens99f0np0'")
			for _, w := range want {
				if !strings.Contains(out, "export "+w+"\n") {
					t.Errorf("rank %s: no %s in\n%s", rank, w, out)
				}
			}
			if strings.Contains(out, "GPUAFFINITY_PARTITION") || strings.Contains(out, "CUDA_DEVICE_ORDER") {
				t.Errorf("rank %s: SPX rank with partition or CUDA variables:\n%s", rank, out)
			}
		}
	})

	t.Run("nccl-topo", func(t *testing.T) {
		root := amdNCCLTopo(t, m)
		// RCCL's file; the 8 MI355X functions (1002:75a3) and the 8
		// Pollara functions under their switches; RCCL adds <gpu> itself.
		for _, b := range amdRefBus {
			e := xmlFindBusID(root, b)
			if e == nil {
				t.Errorf("%s not in the file", b)
			} else if d, _ := e.Value("device"); d != "0x75a3" {
				t.Errorf("%s device %q, want 0x75a3", b, d)
			}
		}
		for _, b := range []string{"0000:09:00.0", "0000:23:00.0", "0000:53:00.0", "0000:69:00.0", "0000:8f:00.0", "0000:9c:00.0", "0000:cd:00.0", "0000:f1:00.0"} {
			if xmlFindBusID(root, b) == nil {
				t.Errorf("NIC %s not in the file", b)
			}
		}
	})

	t.Run("cpumap", func(t *testing.T) {
		out := mustRun(t, "cpumap", "--demo", m)
		// Exclusive: each socket's 64 cores split among its 4 GPUs.
		for _, w := range []string{"0 0 0 exclusive 0-15,128-143 0", "3 3 0 exclusive 48-63,176-191 0",
			"4 4 1 exclusive 64-79,192-207 1", "7 7 1 exclusive 112-127,240-255 1"} {
			if !strings.Contains(squash(out), w+"\n") {
				t.Errorf("no row %q in\n%s", w, out)
			}
		}
		if n := strings.Count(out, "exclusive"); n != 8 {
			t.Errorf("%d ranks, want 8", n)
		}
	})

	t.Run("check", func(t *testing.T) {
		rep, code := checkReport(t, "--demo", m)
		if code != 0 {
			t.Errorf("exit %d", code)
		}
		wantResult(t, rep, "gpu.count", health.Pass, "8 GPUs", "AMD Instinct MI355X")
		wantResult(t, rep, "amd.xgmi", health.Pass, "8 GPUs", "7 others")
		wantResult(t, rep, "topo.aligned", health.Pass, "8 GPUs")
	})

	t.Run("gres", func(t *testing.T) {
		out, _, err := gresRun(t, "--demo", m)
		if err != nil {
			t.Fatal(err)
		}
		// One line per GPU in bus order, its render node (renderD128 +
		// 8 per GPU), Slurm cores of its socket, XGMI 1 to each peer.
		for i := range 8 {
			links := make([]string, 8)
			for j := range links {
				links[j] = "1"
			}
			links[i] = "-1"
			w := fmt.Sprintf("Name=gpu Type=mi355x File=/dev/dri/renderD%d Cores=%s Links=%s\n",
				128+8*i, []string{"0-63", "64-127"}[i/4], strings.Join(links, ","))
			if !strings.Contains(out, w) {
				t.Errorf("no line %q in\n%s", w, out)
			}
		}
	})
}

func TestFixtureAMDMI300XCPX(t *testing.T) {
	envCleanEnv(t)
	t.Setenv("SLURM_JOB_GPUS", "")
	const m = "amd-mi300x-cpx"
	nics := []string{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7"}

	t.Run("topo", func(t *testing.T) {
		tp := amdTopoJSON(t, m)
		if len(tp.GPUs) != 8 || len(tp.Warnings) != 0 {
			t.Fatalf("%d GPUs, warnings %q; want 8 physical GPUs, none", len(tp.GPUs), tp.Warnings)
		}
		for g, gpu := range tp.GPUs {
			a := gpu.AMD
			// The GPU's totals stay the GPU's: 304 CUs, 8 XCDs.
			if gpu.BusID != amdRefBus[g] || a.ComputePartition != "CPX" || a.MemoryPartition != "NPS4" ||
				a.ComputeUnits != 304 || a.XCCs != 8 || len(a.Partitions) != 8 {
				t.Fatalf("GPU %d: %s %+v", g, gpu.BusID, a)
			}
			// Partition p of GPU g: KFD node 2+8g+p (CPU nodes 0-1
			// first, a GPU's partitions in a row), HIP device 8g+p,
			// renderD128+8g+p, one XCD of 38 CUs.
			for p, part := range a.Partitions {
				if part.Partition != p || part.KFDNode != 2+8*g+p || part.Ordinal != 8*g+p ||
					part.RenderMinor == nil || *part.RenderMinor != 128+8*g+p || part.ComputeUnits != 38 || part.XCCs != 1 {
					t.Errorf("GPU %d partition %d: %+v", g, p, part)
				}
			}
			// Between GPUs: one XGMI hop (KFD weight 41 = 13+15+13, no
			// bandwidth given); partitions of one GPU are not XGMI peers.
			if len(a.XGMILinks) != 7 {
				t.Errorf("GPU %d: %d XGMI peers, want 7", g, len(a.XGMILinks))
			}
			for _, l := range a.XGMILinks {
				if l.Peer == gpu.BusID || l.Hops != 1 || l.Weight != 41 {
					t.Errorf("GPU %d -> %s: %+v, want another GPU, 1 hop, weight 41", g, l.Peer, l)
				}
			}
		}
		for _, p := range tp.Pairs {
			if fmt.Sprint(p.NICs) != fmt.Sprint([]string{nics[p.GPU]}) || p.Class != "PXB" {
				t.Errorf("pair of GPU %d: %v %s, want [%s] PXB", p.GPU, p.NICs, p.Class, nics[p.GPU])
			}
		}
	})

	t.Run("env", func(t *testing.T) {
		for rank, want := range map[string][]string{
			// Rank r = HIP device r = partition r%8 of GPU r/8; the
			// partitions of a GPU share its NIC and NUMA node.
			"0": {"GPUAFFINITY_GPU='0'", "GPUAFFINITY_HIP_DEVICES='0'", "GPUAFFINITY_PARTITION='0'",
				"GPUAFFINITY_RENDER_NODE='renderD128'", "GPUAFFINITY_NICS='mlx5_0'",
				"GPUAFFINITY_CPUS='0-95,192-287'", "GPUAFFINITY_NUMA='0'", "UCX_NET_DEVICES='mlx5_0:1'"},
			"63": {"GPUAFFINITY_GPU='7'", "GPUAFFINITY_HIP_DEVICES='63'", "GPUAFFINITY_PARTITION='7'",
				"GPUAFFINITY_RENDER_NODE='renderD191'", "GPUAFFINITY_NICS='mlx5_7'",
				"GPUAFFINITY_CPUS='96-191,288-383'", "GPUAFFINITY_NUMA='1'", "UCX_NET_DEVICES='mlx5_7:1'"},
		} {
			out, stderr, err := envRun(t, "--demo", m, "--local-rank", rank)
			if err != nil || stderr != "" {
				t.Fatalf("rank %s: %v %q", rank, err, stderr)
			}
			for _, w := range want {
				if !strings.Contains(out, "export "+w+"\n") {
					t.Errorf("rank %s: no %s in\n%s", rank, w, out)
				}
			}
		}
		// Rank 64 has no HIP device.
		if _, _, err := envRun(t, "--demo", m, "--local-rank", "64"); err == nil {
			t.Error("rank 64: no error")
		}
		// --all-ranks: 64 ranks, 8 per GPU, each with its NIC.
		out, _, err := envRun(t, "--demo", m, "--all-ranks", "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var ranks []struct {
			Rank *int              `json:"local_rank"`
			GPU  *int              `json:"gpu"`
			Vars map[string]string `json:"env"`
		}
		if err := json.Unmarshal([]byte(out), &ranks); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if len(ranks) != 64 {
			t.Fatalf("%d ranks, want 64", len(ranks))
		}
		for r, e := range ranks {
			if e.Rank == nil || *e.Rank != r || e.GPU == nil || *e.GPU != r/8 || e.Vars["GPUAFFINITY_HIP_DEVICES"] != fmt.Sprint(r) || e.Vars["GPUAFFINITY_NICS"] != nics[r/8] {
				t.Errorf("rank %d: GPU %v vars %v", r, e.GPU, e.Vars)
			}
		}
	})

	t.Run("nccl-topo", func(t *testing.T) {
		// RCCL adds <gpu> (one per HIP device) itself; the PCIe part is
		// the board's, as in SPX: the same file as amd-mi300x.
		cpx, _, err := runErr(t, "nccl-topo", "--demo", m)
		if err != nil {
			t.Fatal(err)
		}
		spx, _, err := runErr(t, "nccl-topo", "--demo", "amd-mi300x")
		if err != nil {
			t.Fatal(err)
		}
		if cpx != spx {
			t.Errorf("CPX file differs from amd-mi300x's:\n%s\n---\n%s", cpx, spx)
		}
	})

	t.Run("cpumap", func(t *testing.T) {
		out := mustRun(t, "cpumap", "--demo", m)
		// 64 ranks, one per partition; exclusive: a socket's 96 cores
		// over its 32 partitions, 3 each (siblings +192).
		if n := strings.Count(out, "exclusive"); n != 64 {
			t.Errorf("%d ranks, want 64", n)
		}
		for _, w := range []string{"0 0 0 exclusive 0-2,192-194 0", "8 1 0 exclusive 24-26,216-218 0",
			"32 4 1 exclusive 96-98,288-290 1", "63 7 1 exclusive 189-191,381-383 1"} {
			if !strings.Contains(squash(out), w+"\n") {
				t.Errorf("no row %q in\n%s", w, out)
			}
		}
		// --ranks-per-gpu 1 still maps one rank per physical GPU.
		out = mustRun(t, "cpumap", "--demo", m, "--ranks-per-gpu", "1")
		if n := strings.Count(out, "exclusive"); n != 8 {
			t.Errorf("--ranks-per-gpu 1: %d ranks, want 8", n)
		}
	})

	t.Run("check", func(t *testing.T) {
		rep, code := checkReport(t, "--demo", m)
		if code != 0 {
			t.Errorf("exit %d", code)
		}
		// The 8 physical GPUs are judged; the note counts their 64
		// partitions.
		wantResult(t, rep, "gpu.count", health.Pass, "8 GPUs, AMD Instinct MI300X, 64 compute partitions (CPX)")
		wantResult(t, rep, "amd.xgmi", health.Pass, "7 others")
		wantResult(t, rep, "topo.aligned", health.Pass, "8 GPUs")
	})

	t.Run("gres", func(t *testing.T) {
		out, stderr, err := gresRun(t, "--demo", m)
		if err != nil {
			t.Fatal(err)
		}
		// 64 lines, one per partition's render node in bus then
		// partition order (renderD128..191), the GPU's socket's cores;
		// no Links= (partitions of one GPU have no link count).
		var lines []string
		for l := range strings.Lines(out) {
			if strings.HasPrefix(l, "Name=gpu") {
				lines = append(lines, l)
			}
		}
		if len(lines) != 64 {
			t.Fatalf("%d lines, want 64:\n%s", len(lines), out)
		}
		for k, l := range lines {
			w := fmt.Sprintf("Name=gpu Type=mi300x File=/dev/dri/renderD%d Cores=%s\n", 128+k, []string{"0-95", "96-191"}[k/32])
			if l != w {
				t.Errorf("line %d: %q, want %q", k, l, w)
			}
		}
		if !strings.Contains(stderr, "compute partitions") {
			t.Errorf("no warning on Links=: %q", stderr)
		}
	})
}

// amdNCCLTopo runs nccl-topo and parses the file with NCCL's loader rules.
func amdNCCLTopo(t *testing.T, machine string) *ncclxml.Element {
	t.Helper()
	out, _, err := runErr(t, "nccl-topo", "--demo", machine)
	if err != nil {
		t.Fatal(err)
	}
	root, err := ncclxml.Parse([]byte(out))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if v, _ := root.Value("version"); v != "2" {
		t.Errorf("system version %q, want RCCL's 2", v)
	}
	return root
}

// xmlFindBusID finds the element whose busid is b.
func xmlFindBusID(e *ncclxml.Element, b string) *ncclxml.Element {
	if v, ok := e.Value("busid"); ok && v == b {
		return e
	}
	for _, c := range e.Children {
		if f := xmlFindBusID(c, b); f != nil {
			return f
		}
	}
	return nil
}

// squash collapses runs of spaces, for table rows.
func squash(s string) string {
	var b strings.Builder
	for l := range strings.Lines(s) {
		b.WriteString(strings.Join(strings.Fields(l), " ") + "\n")
	}
	return b.String()
}

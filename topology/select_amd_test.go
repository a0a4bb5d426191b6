package topology

import (
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"testing"
)

// mi300xNode is amd-mi300x's layout, by hand from
// internal/testutil/fakesys/testdata/machines/amd-mi300x.yaml: 8 MI300X in SPX
// mode (amdgpu index i = KFD order = HIP ordinal i) at these bus ids;
// the fixture gives no unique_id, so KFD's is fakesys's default, FNV-1a
// 64 of "unique:<bdf>" (internal/testutil/fakesys/FORMAT.md), and ROCr's UUID is
// "GPU-" and its 16 hex digits.
func mi300xNode() Node {
	var n Node
	for i, bdf := range []string{"0000:05:00.0", "0000:2b:00.0", "0000:5b:00.0", "0000:65:00.0",
		"0000:7d:00.0", "0000:a5:00.0", "0000:d5:00.0", "0000:e7:00.0"} {
		h := fnv.New64a()
		h.Write([]byte("unique:" + bdf))
		n.GPUs = append(n.GPUs, GPU{Index: i, BusID: bdf, Vendor: VendorAMD, UUID: fmt.Sprintf("GPU-%016x", h.Sum64()),
			AMD: &AMDGPU{KFDNodes: []int{i + 1}, Ordinals: []int{i}, ComputePartition: "SPX"}})
	}
	return n
}

// cpxNode: two GPUs in CPX mode, each split into 4 partitions (HIP
// ordinals 0-3 and 4-7), and a third in SPX (ordinal 8).
func cpxNode() Node {
	var n Node
	for i, ords := range [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}, {8}} {
		n.GPUs = append(n.GPUs, GPU{Index: i, Vendor: VendorAMD, UUID: fmt.Sprintf("GPU-%016x", 0xabc0+i),
			AMD: &AMDGPU{Ordinals: ords, ComputePartition: []string{"CPX", "CPX", "SPX"}[i]}})
	}
	return n
}

func strp(s string) *string { return &s }

func TestSelectAMDVisible(t *testing.T) {
	n := mi300xNode()
	// Hand-computed: FNV-1a 64 of "unique:0000:7d:00.0" (GPU 4).
	uuid4 := n.GPUs[4].UUID
	for _, tc := range []struct {
		name      string
		rocr, hip *string
		want      []int
		source    string
		errSub    string
	}{
		{name: "unset", want: []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{name: "rocr", rocr: strp("4,5"), want: []int{4, 5}, source: SelectROCR},
		{name: "rocr order", rocr: strp("7, 2"), want: []int{7, 2}, source: SelectROCR},
		{name: "hip alone", hip: strp("3"), want: []int{3}, source: SelectHIP},
		{name: "hip in rocr", rocr: strp("4,5"), hip: strp("1"), want: []int{5}, source: SelectHIP},
		{name: "hip reorders rocr", rocr: strp("6,4,5"), hip: strp("2,0"), want: []int{5, 6}, source: SelectHIP},
		{name: "rocr uuid", rocr: strp("0,GPU-" + strings.ToUpper(uuid4[4:])), want: []int{0, 4}, source: SelectROCR},
		{name: "hip uuid in rocr", rocr: strp("4,5"), hip: strp(uuid4), want: []int{4}, source: SelectHIP},
		{name: "hip uuid hidden", rocr: strp("5"), hip: strp(uuid4), errSub: "which ROCR_VISIBLE_DEVICES hides"},
		{name: "hip past rocr", rocr: strp("4,5"), hip: strp("2"), errSub: `HIP_VISIBLE_DEVICES="2" entry 0`},
		{name: "rocr bad ordinal", rocr: strp("8"), errSub: "device ordinal 8 is no GPU agent"},
		{name: "rocr garbage", rocr: strp("4,x"), errSub: `ROCR_VISIBLE_DEVICES="4,x" entry 1`},
		{name: "unknown uuid", rocr: strp("GPU-0000000000000000"), errSub: "UUID of no AMD GPU"},
		{name: "twice", rocr: strp("4,4"), errSub: `ROCR_VISIBLE_DEVICES entry 0 ("4") and ROCR_VISIBLE_DEVICES entry 1 ("4") both name GPU 4`},
	} {
		sel, err := VisibleAMDGPUs(n, tc.rocr, tc.hip)
		if tc.errSub != "" {
			if err == nil || !errors.Is(err, ErrSelect) || !strings.Contains(err.Error(), tc.errSub) {
				t.Errorf("%s: err %v, want %q", tc.name, err, tc.errSub)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !slices.Equal(sel.GPUs, tc.want) || sel.Source != tc.source {
			t.Errorf("%s: GPUs %v source %q, want %v %q", tc.name, sel.GPUs, sel.Source, tc.want, tc.source)
		}
	}
	// An empty list hides every GPU.
	sel, err := VisibleAMDGPUs(n, strp(""), nil)
	if err != nil || sel.Count() != 0 || sel.Hidden() == nil {
		t.Errorf("empty: %v %v %v", sel.GPUs, err, sel.Hidden())
	}
}

func TestSelectAMDCPX(t *testing.T) {
	n := cpxNode()
	for _, tc := range []struct {
		rocr, hip *string
		want      []int
		errSub    string
	}{
		// Any partition's ordinal selects its GPU.
		{rocr: strp("5,8,2"), want: []int{1, 2, 0}},
		// HIP counts the 9 agents when ROCr filters nothing: 6 is GPU 1's.
		{hip: strp("6"), want: []int{1}},
		// ROCr exposes ordinals 3 and 8; HIP's 1 is ordinal 8, GPU 2.
		{rocr: strp("3,8"), hip: strp("1"), want: []int{2}},
		{rocr: strp("GPU-000000000000abc1"), want: []int{1}},
		// Two partitions of GPU 0: the same GPU twice.
		{rocr: strp("0,1"), errSub: `ROCR_VISIBLE_DEVICES entry 0 ("0") and ROCR_VISIBLE_DEVICES entry 1 ("1") both name GPU 0`},
		{hip: strp("4,8,7"), errSub: `HIP_VISIBLE_DEVICES entry 0 ("4") and HIP_VISIBLE_DEVICES entry 2 ("7") both name GPU 1`},
		{rocr: strp("9"), errSub: "(9 agent(s))"},
	} {
		sel, err := VisibleAMDGPUs(n, tc.rocr, tc.hip)
		name := fmt.Sprintf("rocr %v hip %v", deref(tc.rocr), deref(tc.hip))
		if tc.errSub != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errSub) {
				t.Errorf("%s: err %v, want %q", name, err, tc.errSub)
			}
			continue
		}
		if err != nil || !slices.Equal(sel.GPUs, tc.want) {
			t.Errorf("%s: %v %v, want %v", name, sel.GPUs, err, tc.want)
		}
	}
}

func deref(p *string) string {
	if p == nil {
		return "<unset>"
	}
	return *p
}

// TestSelectProcessGPUs: CUDA_VISIBLE_DEVICES wins; the ROCm variables
// are read only where every GPU is AMD.
func TestSelectProcessGPUs(t *testing.T) {
	env := func(k string) (string, bool) {
		switch k {
		case SelectROCR:
			return "4,5", true
		case SelectHIP:
			return "1", true
		}
		return "", false
	}
	amd := mi300xNode()
	if sel, err := ProcessGPUs(amd, nil, env); err != nil || !slices.Equal(sel.GPUs, []int{5}) {
		t.Errorf("amd: %v %v", sel.GPUs, err)
	}
	if sel, err := ProcessGPUs(amd, strp("2,3"), env); err != nil || !slices.Equal(sel.GPUs, []int{2, 3}) || sel.Source != SelectCUDA {
		t.Errorf("amd with CUDA_VISIBLE_DEVICES: %v %v", sel.GPUs, err)
	}
	if sel, err := ProcessGPUs(amd, nil, nil); err != nil || sel.Count() != 8 || sel.Source != "" {
		t.Errorf("amd, no lookup: %v %v", sel.GPUs, err)
	}
	// A node with an NVIDIA GPU (selNode: no vendor, as NVIDIA tests
	// build them; and one with an explicit NVIDIA GPU beside the AMD ones).
	mixed := mi300xNode()
	mixed.GPUs = append(mixed.GPUs, GPU{Index: 8, Vendor: VendorNVIDIA})
	for _, n := range []Node{selNode(), mixed} {
		if sel, err := ProcessGPUs(n, nil, env); err != nil || sel.Count() != len(n.GPUs) || sel.Source != "" {
			t.Errorf("%d GPUs: %v %v", len(n.GPUs), sel.GPUs, err)
		}
	}
}

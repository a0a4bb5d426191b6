package topology

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func selNode() Node {
	n := Node{}
	for i, u := range []string{"GPU-aaaa-0000", "GPU-aaaa-1111", "GPU-bbbb-2222", "GPU-cccc-3333"} {
		n.GPUs = append(n.GPUs, GPU{Index: i, UUID: u, BusID: []string{"0000:18:00.0", "0000:2a:00.0", "0000:9b:00.0", "0001:c3:00.0"}[i]})
	}
	return n
}

func TestSelectGPUs(t *testing.T) {
	n := selNode()
	for _, tc := range []struct {
		list, source string
		want         []int
		err          string // "" none
		hidden       string // Hidden() error text; "" none
	}{
		{"3,1", SelectCUDA, []int{3, 1}, "", ""},
		{" 2 , 0", SelectCUDA, []int{2, 0}, "", ""},
		{"GPU-BBBB,gpu-cccc-3333", SelectCUDA, []int{2, 3}, "", ""},
		{"GPU-BBBB,GPU-dddd", SelectCUDA, []int{2}, "", "is the UUID (prefix) of no GPU"},
		{"GPU-bbbb,GPU-cccc", SelectCUDA, []int{2, 3}, "", ""},
		{"GPU-aaaa", SelectCUDA, nil, "matches the UUIDs of GPU 0 and GPU 1", ""},
		{"1,9,0", SelectCUDA, []int{1}, "", "entry 1: cannot select GPUs: GPU index 9 is not on this node"},
		{"1,1", SelectCUDA, []int{1}, "", "GPU 1 is named twice"},
		{"MIG-1234", SelectCUDA, nil, "not supported yet", ""},
		{"0-2", SelectCUDA, nil, `"0-2" is not a GPU index or a GPU-<uuid>`, ""},
		{"", SelectCUDA, []int{}, "", "hides every GPU"},
		{"0-2", SelectFlag, []int{0, 1, 2}, "", ""},
		{"2-1", SelectFlag, nil, "bad GPU range", ""},
		{"0000:9b:00.0,2a:00,0001:c3:00.0", SelectFlag, []int{2, 1, 3}, "", ""},
		{"0,0-1", SelectFlag, nil, "GPU 0 is named twice", ""},
		{"1,3", SelectSlurm, []int{1, 3}, "", ""},
		{"GPU-bbbb", SelectSlurm, nil, "is not a GPU index", ""},
		{"4", SelectSlurm, nil, "GPU index 4 is not on this node", ""},
	} {
		sel, err := SelectGPUs(n, tc.list, tc.source)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrSelect) {
				t.Errorf("%s %q: err %v, want %q", tc.source, tc.list, err, tc.err)
			}
			continue
		case err != nil:
			t.Errorf("%s %q: %v", tc.source, tc.list, err)
			continue
		}
		if !slices.Equal(sel.GPUs, tc.want) {
			t.Errorf("%s %q: GPUs %v, want %v", tc.source, tc.list, sel.GPUs, tc.want)
		}
		if h := sel.Hidden(); (h == nil) != (tc.hidden == "") || (h != nil && !strings.Contains(h.Error(), tc.hidden)) {
			t.Errorf("%s %q: hidden %v, want %q", tc.source, tc.list, h, tc.hidden)
		}
	}
	if _, err := SelectGPUs(n, "MIG-1234", SelectCUDA); !errors.Is(err, ErrMIG) {
		t.Errorf("MIG: %v does not wrap ErrMIG", err)
	}
}

func TestSelectionRank(t *testing.T) {
	n := selNode()
	cvd := func(s string) *string { return &s }
	for _, tc := range []struct {
		cvd       *string
		rank, k   int
		gpu, slot int
		err       string
	}{
		{nil, 2, 1, 2, 0, ""},
		{nil, 5, 2, 2, 1, ""},
		{nil, 4, 1, 0, 0, "CUDA_VISIBLE_DEVICES is unset"},
		{cvd("3,0"), 1, 1, 0, 0, ""},
		{cvd("3,0"), 3, 2, 0, 1, ""},
		{cvd("3,0"), 2, 1, 0, 0, `lists 2 GPU(s)`},
		{cvd("2"), 6, 1, 2, 0, ""}, // one GPU per task: every rank drives it
		{cvd("1,9"), 0, 1, 1, 0, ""},
		{cvd("1,9"), 1, 1, 0, 0, "GPU index 9"},
		{cvd(""), 0, 1, 0, 0, "hides every GPU"},
		{nil, -1, 1, 0, 0, "negative"},
	} {
		sel, err := VisibleGPUs(n, tc.cvd)
		if err != nil {
			t.Fatal(err)
		}
		gpu, slot, err := sel.Rank(n, tc.rank, tc.k)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("cvd %v rank %d k %d: err %v, want %q", tc.cvd, tc.rank, tc.k, err, tc.err)
			}
			continue
		}
		if err != nil || gpu != tc.gpu || slot != tc.slot {
			t.Errorf("cvd %v rank %d k %d: GPU %d slot %d (%v), want %d %d", tc.cvd, tc.rank, tc.k, gpu, slot, err, tc.gpu, tc.slot)
		}
	}
}

func TestJobGPUs(t *testing.T) {
	n := selNode()
	env := func(kv map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
	}
	flag := "0-1"
	for _, tc := range []struct {
		flag *string
		env  map[string]string
		want []int
		ok   bool
		err  string
	}{
		{nil, nil, []int{0, 1, 2, 3}, false, ""},
		{&flag, map[string]string{"SLURM_JOB_GPUS": "3"}, []int{0, 1}, true, ""},
		{nil, map[string]string{"SLURM_JOB_GPUS": "3", "CUDA_VISIBLE_DEVICES": "1"}, []int{3}, true, ""},
		{nil, map[string]string{"SLURM_JOB_GPUS": " ", "CUDA_VISIBLE_DEVICES": "GPU-cccc"}, []int{3}, true, ""},
		{nil, map[string]string{"CUDA_VISIBLE_DEVICES": "2,7"}, nil, true, "GPU index 7"},
	} {
		sel, ok, err := JobGPUs(n, tc.flag, env(tc.env))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: err %v, want %q", tc.env, err, tc.err)
			}
			continue
		}
		if err != nil || ok != tc.ok || !slices.Equal(sel.GPUs, tc.want) {
			t.Errorf("%v: %v %t %v, want %v %t", tc.env, sel.GPUs, ok, err, tc.want, tc.ok)
		}
	}
}

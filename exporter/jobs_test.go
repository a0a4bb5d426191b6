package exporter

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/gpuaffinity/gpuaffinity/audit"
	"github.com/gpuaffinity/gpuaffinity/discover"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
	"github.com/gpuaffinity/gpuaffinity/nvml"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// jobsFixture builds machine, lays the recorded processes of
// ../audit/testdata/<overlay> over it (their /proc entries, KFD's proc
// entries, etc/passwd) and patches the overlay's NVML process lists
// (nvml-processes.json) into the machine's nvml.json as audit's fixture
// tests do: a GPU the file does not name keeps no answer, and its list
// reads ERROR_NOT_SUPPORTED. It returns the root and its discovery.
func jobsFixture(tb testing.TB, machine, overlay string) (string, *topology.Node) {
	tb.Helper()
	dir := fakesystest.JobsOverlay(tb, machine, filepath.Join("../audit/testdata", overlay))
	n, err := discover.Discover(discover.Options{Root: dir})
	if err != nil {
		tb.Fatal(err)
	}
	return dir, &n
}

// jobsExporter is newExporter with the jobs collector on (info adds
// job_info) and NVML replayed from root's nvml.json where it has one.
func jobsExporter(tb testing.TB, root string, node *topology.Node, jobs, info bool) *Exporter {
	tb.Helper()
	lib := replayIfAny(tb, root)
	return newExporter(tb, root, node, lib, func(o *Options) { o.Jobs, o.JobsInfo = jobs, info })
}

func replayIfAny(tb testing.TB, root string) gonvml.Interface {
	tb.Helper()
	if _, err := os.Stat(filepath.Join(root, "nvml.json")); err != nil {
		return nil
	}
	return replay(tb, root)
}

// gpuCounts is one GPU's expected gpu_processes, by verdict; nil for a
// GPU whose list was not read whole and that has no process found.
type gpuCounts map[audit.Verdict]float64

// checkJobSeries holds a scrape's gpu_processes and gpu_processes_listed
// to want (GPU index -> counts; a GPU in unlisted has listed 0 and only
// the verdicts want names).
func checkJobSeries(t *testing.T, r scrapeResult, gpus int, want map[int]gpuCounts, unlisted map[int]bool) {
	t.Helper()
	for g := range gpus {
		gpu := strconv.Itoa(g)
		listed := r.must(t, "gpuaffinity_gpu_processes_listed", l("gpu", gpu))
		if wl := b2f(!unlisted[g]); listed != wl {
			t.Errorf("GPU %d: gpu_processes_listed %v, want %v", g, listed, wl)
		}
		for _, v := range verdictOrder {
			got, ok := r.value(t, "gpuaffinity_gpu_processes", l("gpu", gpu, "verdict", string(v)))
			w, named := want[g][v]
			switch {
			case unlisted[g] && !named:
				if ok {
					t.Errorf("GPU %d (not listed): gpu_processes{verdict=%q} %v sent, want none (not 0)", g, v, got)
				}
			case !ok:
				t.Errorf("GPU %d: no gpu_processes{verdict=%q}", g, v)
			case got != w:
				t.Errorf("GPU %d: gpu_processes{verdict=%q} = %v, want %v", g, v, got, w)
			}
		}
	}
}

// The DGX H100 fixture's recorded processes (audit/testdata/dgx-h100-jobs,
// audit/fixture_test.go TestFixtureDGXH100), GPUs 0-3 local to CPUs
// 0-55,112-167 and GPUs 4-7 to 56-111,168-223 (the DGX H100 user guide,
// as the dgx-h100 spec cites it), read from the overlay's files:
//
//	GPU 0: 4101 (Slurm 4242 step 0, CPUs 0-13,112-125) aligned;
//	       4106 (no job; its thread 4107 on 56-60) partly
//	GPU 1: 4102 (Slurm 4242 step 0, every CPU) unbound
//	GPU 2: 4103 (burstable pod 7f0c1e2a-..., CPUs 56-69,168-181) misaligned
//	GPU 3: lists not recorded (nvml-processes.json does not name it)
//	GPU 4: 4104 (guaranteed pod 2d9e8f70-..., 0-3,56-111,168-223) partly
//	GPU 5: 4105, no /proc entry (ended) unknown
//	GPU 6, 7: empty lists
func TestJobsDGXH100(t *testing.T) {
	t.Parallel()
	root, node := jobsFixture(t, "dgx-h100", "dgx-h100-jobs")
	want := map[int]gpuCounts{
		0: {audit.Aligned: 1, audit.Partly: 1},
		1: {audit.Unbound: 1},
		2: {audit.Misaligned: 1},
		4: {audit.Partly: 1},
		5: {audit.Unknown: 1},
	}
	unlisted := map[int]bool{3: true}

	r := scrape(t, jobsExporter(t, root, node, true, false).Handler())
	checkJobSeries(t, r, 8, want, unlisted)
	if ms := r.find("gpuaffinity_job_info", nil); len(ms) > 0 {
		t.Errorf("job_info sent without JobsInfo: %d series", len(ms))
	}
	// GPU 3's list failed: the collector says so (and keeps its series).
	if v := r.must(t, "gpuaffinity_scrape_collector_success", l("collector", CollectorJobs)); v != 0 {
		t.Errorf("jobs collector success %v with GPU 3 not listed, want 0", v)
	}
	// 7 listed GPUs x 5 verdicts, GPU 3 none; one listed series a GPU.
	if n := len(r.find("gpuaffinity_gpu_processes", nil)); n != 35 {
		t.Errorf("%d gpu_processes series, want 35", n)
	}

	// With JobsInfo: one series per GPU and job step or pod; the
	// processes in neither (4106, 4105) have none.
	ri := scrape(t, jobsExporter(t, root, node, true, true).Handler())
	checkJobSeries(t, ri, 8, want, unlisted)
	wantInfo := []map[string]string{
		l("gpu", "0", "job", "4242", "step", "0", "pod", "", "verdict", "aligned"),
		l("gpu", "1", "job", "4242", "step", "0", "pod", "", "verdict", "unbound"),
		l("gpu", "2", "job", "", "step", "", "pod", "7f0c1e2a-3b4c-4d5e-8f60-718293a4b5c6", "verdict", "misaligned"),
		l("gpu", "4", "job", "", "step", "", "pod", "2d9e8f70-1a2b-4c3d-9e8f-0a1b2c3d4e5f", "verdict", "partly"),
	}
	for _, w := range wantInfo {
		if v := ri.must(t, "gpuaffinity_job_info", w); v != 1 {
			t.Errorf("job_info%v = %v, want 1", w, v)
		}
	}
	if n := len(ri.find("gpuaffinity_job_info", nil)); n != len(wantInfo) {
		t.Errorf("%d job_info series, want %d", n, len(wantInfo))
	}

	// Without Jobs: none of the series, no jobs collector.
	off := scrape(t, jobsExporter(t, root, node, false, true).Handler())
	for _, name := range []string{"gpuaffinity_gpu_processes", "gpuaffinity_gpu_processes_listed", "gpuaffinity_job_info"} {
		if ms := off.find(name, nil); len(ms) > 0 {
			t.Errorf("%s sent without Jobs", name)
		}
	}
	if _, ok := off.value(t, "gpuaffinity_scrape_collector_success", l("collector", CollectorJobs)); ok {
		t.Error("jobs collector ran without Jobs")
	}
}

// The MI300X fixture's recorded KFD processes (audit/testdata/amd-mi300x-jobs,
// audit/fixture_test.go TestFixtureMI300X): NUMA node 0 (CPUs
// 0-95,192-287) has GPUs 0-3, node 1 (96-191,288-383) GPUs 4-7.
//
//	GPU 0: 5201 (Slurm 777 step 0, CPUs 0-23,192-215) aligned
//	GPU 1: 5202 (Slurm 777 step 0, every CPU) unbound
//	GPU 2: 5203 (burstable pod 5a4b3c2d-..., node 1's CPUs) misaligned
//	GPU 3: 5204 (no job, node 0's CPUs, no VRAM: counted) aligned
//	GPU 4: 5205 (Slurm 778 step 0, node 1's CPUs, memory node 0 only) partly
//	GPUs 5-7: none
func TestJobsMI300X(t *testing.T) {
	t.Parallel()
	root, node := jobsFixture(t, "amd-mi300x", "amd-mi300x-jobs")
	r := scrape(t, jobsExporter(t, root, node, true, true).Handler())
	checkJobSeries(t, r, 8, map[int]gpuCounts{
		0: {audit.Aligned: 1},
		1: {audit.Unbound: 1},
		2: {audit.Misaligned: 1},
		3: {audit.Aligned: 1},
		4: {audit.Partly: 1},
	}, nil)
	if v := r.must(t, "gpuaffinity_scrape_collector_success", l("collector", CollectorJobs)); v != 1 {
		t.Errorf("jobs collector success %v, want 1 (every list read)", v)
	}
	wantInfo := []map[string]string{
		l("gpu", "0", "job", "777", "step", "0", "pod", "", "verdict", "aligned"),
		l("gpu", "1", "job", "777", "step", "0", "pod", "", "verdict", "unbound"),
		l("gpu", "2", "job", "", "step", "", "pod", "5a4b3c2d-1e0f-4a9b-8c7d-6e5f4a3b2c1d", "verdict", "misaligned"),
		l("gpu", "4", "job", "778", "step", "0", "pod", "", "verdict", "partly"),
	}
	for _, w := range wantInfo {
		r.must(t, "gpuaffinity_job_info", w)
	}
	if n := len(r.find("gpuaffinity_job_info", nil)); n != len(wantInfo) {
		t.Errorf("%d job_info series, want %d", n, len(wantInfo))
	}

	// KFD's proc directory unreadable (here: not a directory, which
	// answers as EACCES would: the list cannot be read): every AMD GPU
	// says not listed and none reads as 0 processes.
	kfdProc := filepath.Join(root, "sys/class/kfd/kfd/proc")
	if err := os.RemoveAll(kfdProc); err != nil {
		t.Fatal(err)
	}
	writeFile(t, kfdProc, "")
	r = scrape(t, jobsExporter(t, root, node, true, false).Handler())
	all := map[int]bool{}
	for g := range 8 {
		all[g] = true
	}
	checkJobSeries(t, r, 8, nil, all)
	if v := r.must(t, "gpuaffinity_scrape_collector_success", l("collector", CollectorJobs)); v != 0 {
		t.Errorf("jobs collector success %v with KFD unreadable, want 0", v)
	}
}

// NVML answering ERROR_NO_PERMISSION for a GPU's process list (an agent
// that is not root, on drivers that refuse it) is not listed, not 0.
func TestJobsNVMLNoPermission(t *testing.T) {
	t.Parallel()
	root := fakesystest.JobsRoot(t, "dgx-h100", "../audit/testdata/dgx-h100-jobs", []int{4101}, map[int][]int{0: {4101}})
	path := filepath.Join(root, nvml.ReplayFileName)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f nvml.ReplayFile
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	f.Devices[6].ComputeProcesses = &nvml.Answer[[]nvml.ReplayProcess]{Return: "ERROR_NO_PERMISSION"}
	if raw, err = nvml.EncodeReplay(f); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, string(raw))
	n, err := discover.Discover(discover.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	r := scrape(t, jobsExporter(t, root, &n, true, false).Handler())
	checkJobSeries(t, r, 8, map[int]gpuCounts{0: {audit.Aligned: 1}}, map[int]bool{6: true})

	// No NVML at all: every GPU not listed.
	r = scrape(t, newExporter(t, root, &n, nil, func(o *Options) { o.Jobs = true }).Handler())
	all := map[int]bool{}
	for g := range 8 {
		all[g] = true
	}
	checkJobSeries(t, r, 8, nil, all)
}

// The series pass promlint, the info series included.
func TestJobsLint(t *testing.T) {
	t.Parallel()
	root, node := jobsFixture(t, "dgx-h100", "dgx-h100-jobs")
	e := jobsExporter(t, root, node, true, true)
	names := []string{"gpuaffinity_gpu_processes", "gpuaffinity_gpu_processes_listed", "gpuaffinity_job_info"}
	// The families linted are there: 35 + 8 + 4 series (TestJobsDGXH100).
	if n, err := testutil.GatherAndCount(e.Gatherer(), names...); err != nil || n != 47 {
		t.Fatalf("%d series of %v (%v), want 47", n, names, err)
	}
	problems, err := testutil.GatherAndLint(e.Gatherer(), names...)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// Hostile cgroup paths: a step of any characters or length, made by
// whoever may create the cgroup, gives a bounded label, and a GPU's
// info series stay bounded however many jobs run on it.
func TestJobLabelsBounded(t *testing.T) {
	for in, want := range map[string]string{
		strings.Repeat("9", 40):                strings.Repeat("9", 40),
		"0":                                    "0",
		"batch":                                "batch",
		"4242":                                 "4242",
		"7f0c1e2a-3b4c-4d5e-8f60-718293a4b5c6": "7f0c1e2a-3b4c-4d5e-8f60-718293a4b5c6",
		"":                                     "",
		"0\nfake_metric 1":                     "invalid",
		"x\"}":                                 "invalid",
		strings.Repeat("9", 41):                "invalid",
		"é":                                    "invalid",
	} {
		if got := jobLabel(in); got != want {
			t.Errorf("jobLabel(%q) = %q, want %q", in, got, want)
		}
	}

	node := &topology.Node{GPUs: []topology.GPU{{Index: 0, BusID: "0000:18:00.0"}}}
	var rep audit.Report
	for i := range 40 {
		v := audit.Aligned
		if i == 35 {
			v = audit.Misaligned // past the cap: the overflow series says it
		}
		rep.Processes = append(rep.Processes, audit.Process{PID: 100 + i, GPUs: []int{0}, Verdict: v,
			Job: &audit.Job{ID: strconv.Itoa(1000 + i), Step: strings.Repeat("s", 100)}})
	}
	var s sink
	jobMetrics(node, newGPULabelSet(node, "h"), rep, nil, true, &s)
	info := 0
	var other bool
	for _, m := range s.ms {
		if !strings.Contains(m.Desc().String(), "gpuaffinity_job_info") {
			continue
		}
		info++
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		ls := map[string]string{}
		for _, p := range d.GetLabel() {
			ls[p.GetName()] = p.GetValue()
		}
		if ls["step"] != "invalid" && ls["job"] != "other" {
			t.Errorf("step label %q, want invalid", ls["step"])
		}
		if ls["job"] == "other" {
			other = true
			if ls["verdict"] != "misaligned" {
				t.Errorf("overflow series verdict %q, want misaligned (the worst past the cap)", ls["verdict"])
			}
		}
	}
	if info != maxJobInfoPerGPU+1 || !other {
		t.Errorf("%d job_info series (overflow %v), want %d and one job=\"other\"", info, other, maxJobInfoPerGPU+1)
	}
	if len(s.errs) > 0 {
		t.Error(s.errs)
	}
}

// Past maxJobProcesses processes a scrape, the others are not read but
// still counted, as unknown, on their GPUs.
func TestJobProcessesCapped(t *testing.T) {
	var uses []audit.Use
	for pid := 1; pid <= maxJobProcesses+6; pid++ {
		// Two entries for each PID (NVML and KFD), as audit.List gives.
		uses = append(uses, audit.Use{PID: pid, GPUs: []int{0}}, audit.Use{PID: pid, GPUs: []int{pid % 2}})
	}
	keep, over := capJobProcesses(uses)
	if len(keep) != 2*maxJobProcesses || keep[len(keep)-1].PID != maxJobProcesses {
		t.Errorf("kept %d uses up to PID %d, want %d up to %d", len(keep), keep[len(keep)-1].PID, 2*maxJobProcesses, maxJobProcesses)
	}
	if len(over) != 6 || over[0].PID != maxJobProcesses+1 || over[0].Verdict != audit.Unknown {
		t.Fatalf("over %+v, want 6 unknown from PID %d", over, maxJobProcesses+1)
	}
	for _, p := range over {
		want := []int{0}
		if p.PID%2 == 1 {
			want = []int{0, 1}
		}
		if !slices.Equal(p.GPUs, want) {
			t.Errorf("PID %d: GPUs %v, want %v", p.PID, p.GPUs, want)
		}
	}
	if k, o := capJobProcesses(uses[:20]); len(k) != 20 || o != nil {
		t.Errorf("10 processes: kept %d, over %v; want all kept", len(k), o)
	}
}

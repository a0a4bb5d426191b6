package nvml

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// hostileReplay is the hardening issue's file: a retired page count that
// made GetRetiredPages panic (makeslice: len out of range).
const hostileReplay = `{"version":1,"device_count":{"value":1},"devices":[{"pci":{"value":{"bus_id":"00000000:18:00.0"}},"retired_pages":{"value":{"multiple_single_bit":4611686018427387904,"double_bit":0}}}]}`

// repeat joins n copies of s with commas.
func repeat(s string, n int) string { return strings.TrimSuffix(strings.Repeat(s+",", n), ",") }

// loadCheap runs LoadReplay on p and fails unless it errors saying want,
// naming p, within a second and without allocating more than 64 MiB.
// hangGuard is how long a bounded call may take on a loaded CI machine
// under -race before the test calls it a hang (walking 2^40 devices or
// decoding gigabytes takes far longer).
const hangGuard = 30 * time.Second

func loadCheap(t *testing.T, p, want string) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	lib, err := LoadReplay(p)
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), p) {
		t.Errorf("LoadReplay = %v, %v; want an error naming %s and saying %q", lib, err, p, want)
	}
	// A hang guard, not a speed test (benchmarks measure speed): the
	// allocation bound below is what holds the work to the file's size.
	if took > hangGuard {
		t.Errorf("LoadReplay took %v", took)
	}
	if a := after.TotalAlloc - before.TotalAlloc; a > 64<<20 {
		t.Errorf("LoadReplay allocated %d MiB", a>>20)
	}
}

func TestLoadReplayBounds(t *testing.T) {
	dir := t.TempDir()
	dev := func(fields string) string {
		return `{"version":1,"device_count":{"value":1},"devices":[{"pci":{"value":{"bus_id":"00000000:18:00.0"}}` + fields + `}]}`
	}
	links := make([]string, 37)
	for i := range links {
		b, _ := json.Marshal(ReplayNVLink{Link: i})
		links[i] = string(b)
	}
	for _, tc := range []struct{ name, data, want string }{
		{"hostile retired pages", hostileReplay, "nvml.json: devices[0].retired_pages.value.multiple_single_bit: 4611686018427387904 exceeds 65536"},
		{"2^36 retired pages", dev(`,"retired_pages":{"value":{"multiple_single_bit":0,"double_bit":68719476736}}`),
			"devices[0].retired_pages.value.double_bit: 68719476736 exceeds 65536"},
		{"negative retired pages", dev(`,"retired_pages":{"value":{"multiple_single_bit":-1}}`),
			"devices[0].retired_pages.value.multiple_single_bit: -1 is negative"},
		{"20k devices", `{"version":1,"device_count":{"value":20000},"devices":[` + repeat(`{}`, 20000) + `]}`,
			"devices: more than 64 elements"},
		{"device count", `{"version":1,"device_count":{"value":1000000000000}}`, "device_count.value: 1000000000000 exceeds 64"},
		{"4 MB cpu_affinity", dev(`,"cpu_affinity":{"value":[` + repeat("18446744073709551615", 4<<20/21) + `]}`),
			"devices[0].cpu_affinity.value: more than 1024 elements"},
		{"nvlinks", dev(`,"nvlinks":[` + strings.Join(links, ",") + `]`), "devices[0].nvlinks: more than 36 elements"},
		{"link number", dev(`,"nvlinks":[{"link":36}]`), "devices[0].nvlinks[0].link: link 36 is outside 0..35"},
		{"xids", dev(`,"xids":{"value":[` + repeat("79", 1025) + `]}`), "devices[0].xids.value: more than 1024 elements"},
		{"compute processes", dev(`,"compute_processes":{"value":[` + repeat(`{"pid":1}`, 4097) + `]}`),
			"devices[0].compute_processes.value: more than 4096 elements"},
		{"process return", dev(`,"graphics_processes":{"return":"NO_SUCH_RETURN"}`), "graphics_processes"},
		{"other array", `{"version":1,"bogus":[` + repeat("0", 2000) + `]}`, "bogus: more than 1024 elements"},
		{"deep", `{"version":1,"bogus":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, "nested more than 16 deep"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"), ReplayFileName)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(tc.data), 0o644); err != nil {
				t.Fatal(err)
			}
			loadCheap(t, p, tc.want)
		})
	}

	// Bounds hold, one under: a file at every limit loads.
	f := hgxFile()
	f.Devices[0].RetiredPages = okp(ReplayRetiredPages{MultipleSingleBit: MaxReplayRetiredPages, DoubleBit: MaxReplayRetiredPages})
	f.Devices[0].CPUAffinity = ok(make([]uint64, MaxReplayAffinityWords))
	f.Devices[0].XIDs = okp(make([]uint64, MaxReplayXIDs))
	f.Devices[0].NVLinks = nil
	for i := range MaxReplayNVLinks {
		f.Devices[0].NVLinks = append(f.Devices[0].NVLinks, ReplayNVLink{Link: i, State: ok(0)})
	}
	for len(f.Devices) < MaxReplayDevices {
		f.Devices = append(f.Devices, ReplayDevice{Handle: "ERROR_GPU_IS_LOST"})
	}
	f.DeviceCount = ok(len(f.Devices))
	data, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "at-limits.json")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	lib, err := LoadReplay(p)
	if err != nil {
		t.Fatalf("LoadReplay(at the limits) = %v", err)
	}
	res := Read(lib)
	if !res.Available || len(res.GPUs) != MaxReplayDevices || *res.GPUs[0].Health.RetiredPages != 2*MaxReplayRetiredPages {
		t.Errorf("Read(at the limits): available %v, %d GPUs, err %v", res.Available, len(res.GPUs), res.Err)
	}
}

// A file over MaxReplayFileSize is not read.
func TestLoadReplayTooBig(t *testing.T) {
	p := filepath.Join(t.TempDir(), ReplayFileName)
	fh, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := fh.Truncate(MaxReplayFileSize + 1); err != nil { // sparse
		t.Fatal(err)
	}
	fh.Close()
	loadCheap(t, p, "nvml.json unreadable: over the 16777216-byte limit")
}

// nvml.json that is not a regular file (a FIFO, a directory) is an error
// at once, and so is a link out of the root (to /dev/zero), through Open
// as through LoadReplay.
func TestOpenNotRegular(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(p string) error
		want string
	}{
		{"fifo", func(p string) error { return syscall.Mkfifo(p, 0o644) }, "not a regular file"},
		{"symlink to /dev/zero", func(p string) error { return os.Symlink("/dev/zero", p) }, "leads outside the root"},
		{"directory", func(p string) error { return os.Mkdir(p, 0o755) }, "not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			p := filepath.Join(root, ReplayFileName)
			if err := tc.make(p); err != nil {
				t.Skipf("cannot make %s: %v", tc.name, err)
			}
			type opened struct {
				lib    nvml.Interface
				source string
				err    error
			}
			done := make(chan opened, 1)
			go func() {
				lib, source, err := Open(root)
				done <- opened{lib, source, err}
			}()
			select {
			case o := <-done:
				if o.lib != nil || o.source != SourceNone || o.err == nil ||
					!strings.Contains(o.err.Error(), p+" unreadable: ") || !strings.Contains(o.err.Error(), tc.want) {
					t.Errorf("Open = %v, %q, %v; want an error saying %s: %s", o.lib, o.source, o.err, p, tc.want)
				}
			case <-time.After(time.Second):
				t.Fatalf("Open(%s) still running after a second", tc.name)
			}
		})
	}
}

// A replayed call that panics is ERROR_UNKNOWN for the call and NVML
// unavailable, not a crash.
func TestReadRecoversPanic(t *testing.T) {
	lib, dev := mockLib()
	dev.GetUUIDFunc = func() (string, nvml.Return) { panic("boom") }
	res := Read(lib)
	if res.Available || res.GPUs != nil || res.Err == nil ||
		!strings.Contains(res.Err.Error(), "GetUUID: ERROR_UNKNOWN (panic: boom)") {
		t.Errorf("Read(panicking GetUUID): available %v, GPUs %v, err %v", res.Available, res.GPUs, res.Err)
	}
	if len(res.Warnings) == 0 || res.Warnings[len(res.Warnings)-1] != "GetUUID: ERROR_UNKNOWN (panic: boom)" {
		t.Errorf("warnings %q", res.Warnings)
	}
	if len(lib.ShutdownCalls()) != 1 {
		t.Errorf("Shutdown called %d times, want 1", len(lib.ShutdownCalls()))
	}

	// A panic in the replayer itself: a nil slice index, from a ReplayFile
	// that bypassed LoadReplay.
	lib2, _ := mockLib()
	lib2.DeviceGetHandleByIndexFunc = func(int) (nvml.Device, nvml.Return) {
		var devs []nvml.Device
		return devs[3], nvml.SUCCESS
	}
	if res := Read(lib2); res.Err == nil || !strings.Contains(res.Err.Error(), "DeviceGetHandleByIndex: ERROR_UNKNOWN (panic: runtime error: index out of range") {
		t.Errorf("Read(panicking DeviceGetHandleByIndex) err %v", res.Err)
	}
}

// A ReplayFile NewReplay is given directly (no LoadReplay checks) still
// answers hostile counts without a panic or a huge allocation.
func TestNewReplayUncheckedCounts(t *testing.T) {
	f := hgxFile()
	f.Devices[0].RetiredPages = okp(ReplayRetiredPages{MultipleSingleBit: 1 << 62})
	res := Read(NewReplay(f))
	if !res.Available || res.GPUs[0].Health.RetiredPages != nil ||
		!strings.Contains(strings.Join(res.Warnings, "\n"), "GetRetiredPages(MULTIPLE_SINGLE_BIT_ECC_ERRORS): ERROR_UNKNOWN") {
		t.Errorf("Read(1<<62 retired pages): err %v, warnings %q", res.Err, res.Warnings)
	}
	f = hgxFile()
	f.DeviceCount = ok(1 << 40)
	start := time.Now()
	if res := Read(NewReplay(f)); res.Available || res.Err == nil || !strings.Contains(res.Err.Error(), "DeviceGetCount: ERROR_UNKNOWN") {
		t.Errorf("Read(1<<40 devices): available %v, err %v", res.Available, res.Err)
	}
	if took := time.Since(start); took > hangGuard {
		t.Errorf("Read(1<<40 devices) took %v: it walks the count", took)
	}
}

// FuzzLoadReplay: no nvml.json makes LoadReplay, or Read of what it
// returns, panic (Read would hide a panic in Err: that fails too) or
// allocate without bound.
func FuzzLoadReplay(f *testing.F) {
	small := hgxFile()
	small.Devices = small.Devices[:1]
	small.DeviceCount = ok(1)
	seed, err := json.Marshal(small)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(hostileReplay))
	f.Add([]byte(`{"version":1,"device_count":{"value":1},"devices":[{"cpu_affinity":{"value":[1,2]},"xids":{"value":[79]},"nvlinks":[{"link":0},{"link":35}]}]}`))
	p := filepath.Join(f.TempDir(), ReplayFileName)
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		lib, err := LoadReplay(p)
		if err != nil {
			return
		}
		res := Read(lib)
		if res.Err != nil && strings.Contains(res.Err.Error(), "panic") {
			t.Fatalf("Read: %v", res.Err)
		}
		Read(lib, ForScrape())
	})
}

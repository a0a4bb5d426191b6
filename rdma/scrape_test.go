package rdma

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// scrapeRoot writes two devices: mlx5_0 (one InfiniBand port with
// counters/, counters_ext/ and hw_counters/) and mlx5_1 (two Ethernet
// ports, counters/ only), with the class links the kernel makes.
func scrapeRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	d0 := "sys/devices/pci0000:00/0000:00:02.0/0000:03:00.0/infiniband/mlx5_0"
	d1 := "sys/devices/pci0000:00/0000:00:03.0/0000:04:00.0/infiniband/mlx5_1"
	p0 := d0 + "/ports/1"
	files := map[string]string{
		d0 + "/fw_ver":                           "28.39.1002",
		p0 + "/state":                            "4: ACTIVE",
		p0 + "/phys_state":                       "5: LinkUp",
		p0 + "/rate":                             "400 Gb/sec (4X NDR)",
		p0 + "/link_layer":                       "InfiniBand",
		p0 + "/counters/port_rcv_data":           "1000",
		p0 + "/counters/symbol_error":            "7",
		p0 + "/counters/VL15_dropped":            "0",
		p0 + "/counters_ext/port_xmit_data_64":   "55",
		p0 + "/hw_counters/out_of_buffer":        "3",
		p0 + "/hw_counters/lifespan":             "10",
		p0 + "/hw_counters/not_in_node_exporter": "9",
	}
	for _, n := range []string{"1", "2"} {
		p := d1 + "/ports/" + n
		files[p+"/state"] = "1: DOWN"
		files[p+"/phys_state"] = "2: Polling"
		files[p+"/rate"] = "100 Gb/sec (4X EDR)"
		files[p+"/link_layer"] = "Ethernet"
		files[p+"/counters/link_downed"] = n + "1"
	}
	write(t, root, files, map[string]string{
		"sys/class/infiniband/mlx5_0": "../../" + strings.TrimPrefix(d0, "sys/"),
		"sys/class/infiniband/mlx5_1": "../../" + strings.TrimPrefix(d1, "sys/"),
	})
	return root
}

func TestCounterReaderRead(t *testing.T) {
	root := scrapeRoot(t)
	r := &CounterReader{Root: root}
	got, err := r.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Values as the files hold them (data in 4-byte words, not scaled).
	want := []PortSample{
		{
			Device: "mlx5_0", Port: 1, State: "ACTIVE", StateID: 4, PhysState: "LinkUp", PhysStateID: 5,
			RateGbps: 400, LinkLayer: "InfiniBand",
			Counters:    map[string]uint64{"port_rcv_data": 1000, "symbol_error": 7, "VL15_dropped": 0},
			CountersExt: map[string]uint64{"port_xmit_data_64": 55},
			HwCounters:  map[string]uint64{"out_of_buffer": 3, "lifespan": 10, "not_in_node_exporter": 9},
		},
		{
			Device: "mlx5_1", Port: 1, State: "DOWN", StateID: 1, PhysState: "Polling", PhysStateID: 2,
			RateGbps: 100, LinkLayer: "Ethernet", Counters: map[string]uint64{"link_downed": 11},
		},
		{
			Device: "mlx5_1", Port: 2, State: "DOWN", StateID: 1, PhysState: "Polling", PhysStateID: 2,
			RateGbps: 100, LinkLayer: "Ethernet", Counters: map[string]uint64{"link_downed": 21},
		},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Read (-want +got):\n%s", d)
	}
}

// Only the named files are read when a list is given.
func TestCounterReaderWantList(t *testing.T) {
	root := scrapeRoot(t)
	var mu sync.Mutex
	var read []string
	r := &CounterReader{
		Root:       root,
		Counters:   []string{"symbol_error"},
		HwCounters: []string{},
		ReadFile: func(name string) ([]byte, error) {
			mu.Lock()
			read = append(read, name)
			mu.Unlock()
			return os.ReadFile(name)
		},
	}
	got, err := r.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]uint64{"symbol_error": 7}, got[0].Counters); d != "" {
		t.Errorf("counters (-want +got):\n%s", d)
	}
	if len(got[0].HwCounters) != 0 {
		t.Errorf("hw_counters read with an empty list: %v", got[0].HwCounters)
	}
	for _, p := range read {
		if strings.Contains(p, "/hw_counters/") || strings.HasSuffix(p, "port_rcv_data") {
			t.Errorf("read %s, which is not wanted", p)
		}
	}
}

// EINVAL disables the file for good; other ports and files are unaffected.
func TestCounterReaderEINVAL(t *testing.T) {
	root := scrapeRoot(t)
	bad := filepath.Join(root, "sys/class/infiniband/mlx5_0/ports/1/counters/VL15_dropped")
	badHw := filepath.Join(root, "sys/class/infiniband/mlx5_0/ports/1/hw_counters/out_of_buffer")
	reads := map[string]int{}
	var mu sync.Mutex
	r := &CounterReader{Root: root, ReadFile: func(name string) ([]byte, error) {
		mu.Lock()
		reads[name]++
		mu.Unlock()
		if name == bad || name == badHw {
			// The kernel's answer on restricted mlx5 ports; tmpfs cannot
			// produce EINVAL on read.
			return nil, &fs.PathError{Op: "read", Path: name, Err: syscall.EINVAL}
		}
		return os.ReadFile(name)
	}}
	for i := range 3 {
		got, err := r.Read(context.Background())
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		if got[0].Disabled != 2 {
			t.Errorf("read %d: mlx5_0 Disabled = %d, want 2", i, got[0].Disabled)
		}
		if _, ok := got[0].Counters["VL15_dropped"]; ok {
			t.Errorf("read %d: VL15_dropped has a value", i)
		}
		if got[0].Counters["symbol_error"] != 7 || got[1].Disabled != 0 {
			t.Errorf("read %d: other counters or ports affected: %+v", i, got)
		}
	}
	if reads[bad] != 1 || reads[badHw] != 1 {
		t.Errorf("EINVAL files read %d and %d times in 3 reads, want once each", reads[bad], reads[badHw])
	}
	if d := cmp.Diff([]string{bad, badHw}, r.DisabledFiles()); d != "" {
		t.Errorf("DisabledFiles (-want +got):\n%s", d)
	}
}

// "N/A (no PMA)" (iWARP without a PMA), missing and unreadable files are
// absent without an error; a file that is not a number is an error that
// names it, and the port's other counters are kept.
func TestCounterReaderValues(t *testing.T) {
	root := scrapeRoot(t)
	c := filepath.Join(root, "sys/class/infiniband/mlx5_0/ports/1/counters")
	if err := os.WriteFile(filepath.Join(c, "port_rcv_data"), []byte("N/A (no PMA)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c, "symbol_error"), []byte("lots\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	denied := filepath.Join(c, "link_downed")
	r := &CounterReader{Root: root, ReadFile: func(name string) ([]byte, error) {
		if name == denied {
			return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EACCES}
		}
		return os.ReadFile(name)
	}}
	if err := os.WriteFile(denied, []byte("5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := r.Read(context.Background())
	if err == nil || !strings.Contains(err.Error(), filepath.Join(c, "symbol_error")) {
		t.Errorf("error %v, want one naming symbol_error", err)
	}
	if d := cmp.Diff(map[string]uint64{"VL15_dropped": 0}, got[0].Counters); d != "" {
		t.Errorf("counters (-want +got):\n%s", d)
	}
	if len(got) != 3 {
		t.Errorf("%d ports, want 3", len(got))
	}
}

// A device removed between the listing and its reading is left out
// without an error.
func TestCounterReaderDeviceVanishes(t *testing.T) {
	root := scrapeRoot(t)
	victim, err := filepath.EvalSymlinks(filepath.Join(root, "sys/class/infiniband/mlx5_1"))
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	r := &CounterReader{Root: root, ReadFile: func(name string) ([]byte, error) {
		// The first file read is mlx5_0's: mlx5_1 is already listed.
		once.Do(func() {
			if err := os.RemoveAll(victim); err != nil {
				t.Error(err)
			}
		})
		return os.ReadFile(name)
	}}
	got, err := r.Read(context.Background())
	if err != nil {
		t.Fatalf("a vanished device is not an error: %v", err)
	}
	if len(got) != 1 || got[0].Device != "mlx5_0" {
		t.Errorf("got %+v, want mlx5_0 alone", got)
	}
}

// A port whose state or rate is malformed is left out with an error.
func TestCounterReaderMalformedPort(t *testing.T) {
	root := scrapeRoot(t)
	p := filepath.Join(root, "sys/class/infiniband/mlx5_1/ports/2/rate")
	if err := os.WriteFile(p, []byte("fast\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := (&CounterReader{Root: root}).Read(context.Background())
	if err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("error %v, want one naming %s", err, p)
	}
	if len(got) != 2 {
		t.Errorf("%d ports, want the 2 well-formed ones", len(got))
	}
}

func TestCounterReaderNoRDMA(t *testing.T) {
	got, err := (&CounterReader{Root: t.TempDir()}).Read(context.Background())
	if got != nil || err != nil {
		t.Errorf("Read on a root without class/infiniband = %v, %v; want nothing", got, err)
	}
}

func TestCounterReaderCanceled(t *testing.T) {
	root := scrapeRoot(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, err := (&CounterReader{Root: root}).Read(ctx)
	if !errors.Is(err, context.Canceled) || len(got) != 0 {
		t.Errorf("Read after cancel = %d ports, %v", len(got), err)
	}
}

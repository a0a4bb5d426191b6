package discover

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
)

// A FIFO or a device in place of any file discovery reads never blocks
// it and never runs it out of memory: the file is refused with a warning
// naming it (or, for the vendor topology file given by hand, an error),
// and discovery goes on.
func TestFIFOAndDevicesUnderRoot(t *testing.T) {
	root := fakesystest.Root(t, "dgx-h100")
	gpu, err := filepath.EvalSymlinks(filepath.Join(root, "sys/bus/pci/devices/0000:1b:00.0"))
	if err != nil {
		t.Fatal(err)
	}
	port, err := filepath.EvalSymlinks(filepath.Join(root, "sys/class/infiniband/mlx5_0/ports/1"))
	if err != nil {
		t.Fatal(err)
	}
	nvme, err := filepath.EvalSymlinks(filepath.Join(root, "sys/class/nvme/nvme2"))
	if err != nil {
		t.Fatal(err)
	}
	bridge, err := filepath.EvalSymlinks(filepath.Join(root, "sys/bus/pci/devices/0000:17:01.0"))
	if err != nil {
		t.Fatal(err)
	}
	fifos := []string{
		// The storage layer's files: an NVMe attribute, a namespace's
		// size, a bridge's configuration space, the mount table.
		filepath.Join(nvme, "model"),
		filepath.Join(nvme, "nvme2n1", "size"),
		filepath.Join(bridge, "config"),
		filepath.Join(root, "proc/mounts"),
		filepath.Join(gpu, "numa_node"),
		filepath.Join(gpu, "local_cpulist"),
		filepath.Join(port, "state"),
		filepath.Join(port, "link_layer"),
		filepath.Join(root, "proc/cpuinfo"),
		filepath.Join(root, "proc/self/status"),
		filepath.Join(root, "sys/devices/system/node/node0/cpulist"),
	}
	for _, p := range fifos {
		os.Remove(p)
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A FIFO with a writer holding it open answers EAGAIN, not EOF.
	held := filepath.Join(root, "sys/devices/system/cpu/online")
	os.Remove(held)
	if err := syscall.Mkfifo(held, 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(held, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// /dev/zero behind a sysfs name: bounded, refused.
	zero := filepath.Join(gpu, "class")
	os.Remove(zero)
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}

	type result struct {
		warnings []string
		err      error
	}
	done := make(chan result, 1)
	go func() {
		n, err := Discover(Options{Root: root})
		done <- result{n.Warnings, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("discovery blocks on a FIFO under the root")
	}
	if r.err != nil {
		t.Fatalf("discovery failed: %v", r.err)
	}
	all := strings.Join(r.warnings, "\n")
	for _, p := range append(fifos, held) {
		// Named by the path discovery opened (a class link or the device
		// directory): its last two components.
		name := filepath.Join(filepath.Base(filepath.Dir(p)), filepath.Base(p))
		if !strings.Contains(all, name+": not a regular file") {
			t.Errorf("no warning refuses %s:\n%s", name, all)
		}
	}
	// The link to /dev/zero in an attribute's place: refused before it
	// is opened (an attribute is read by name, never through a link).
	if name := filepath.Join(filepath.Base(gpu), "class"); !strings.Contains(all, name+": a link: not a regular file; refused") {
		t.Errorf("no warning refuses %s as a link:\n%s", name, all)
	}
	if !strings.Contains(all, "not a regular file") {
		t.Errorf("no warning says the file is refused:\n%s", all)
	}

	// The vendor topology file given by hand: /dev/zero and a FIFO are
	// errors, at once.
	fifo := filepath.Join(t.TempDir(), "topo.xml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tf := range []string{"/dev/zero", fifo} {
		go func() {
			_, err := Discover(Options{Root: fakesystest.Root(t, "dgx-h100"), TopoFile: tf})
			done <- result{nil, err}
		}()
		select {
		case r = <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("--topo-file %s blocks", tf)
		}
		if r.err == nil || !strings.Contains(r.err.Error(), "not a regular file") {
			t.Errorf("--topo-file %s: %v", tf, r.err)
		}
	}
}

// Every file of a root replaced: each regular file under sys/ and proc/
// and nvml.json becomes, in turn, a FIFO or a link to /dev/zero.
// Discovery must return (an error or a degraded node with warnings)
// within a deadline, without allocating more than a small multiple of a
// normal discovery.
func TestEveryFileHostile(t *testing.T) {
	root := fakesystest.Root(t, "dgx-h100")
	normal := allocated(t, func() {
		if _, err := Discover(Options{Root: root}); err != nil {
			t.Fatal(err)
		}
	})
	var files []string
	for _, top := range []string{"sys", "proc"} {
		filepath.WalkDir(filepath.Join(root, top), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				files = append(files, p)
			}
			return nil
		})
	}
	files = append(files, filepath.Join(root, "nvml.json"))
	for i, p := range files {
		os.Remove(p)
		var err error
		if i%2 == 0 {
			err = syscall.Mkfifo(p, 0o644)
		} else {
			err = os.Symlink("/dev/zero", p)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	var hostile uint64
	done := make(chan error, 1)
	go func() {
		hostile = allocated(t, func() {
			_, err := Discover(Options{Root: root})
			done <- err
		})
		close(done)
	}()
	select {
	case err := <-done:
		t.Logf("%d files replaced; discovery: %v", len(files), err)
	case <-time.After(60 * time.Second):
		t.Fatalf("discovery of a root of %d FIFOs and /dev/zero links does not return", len(files))
	}
	<-done
	if hostile > 4*normal+64<<20 {
		t.Errorf("discovery allocated %d MiB on the hostile root, %d MiB on the normal one", hostile>>20, normal>>20)
	}
}

// allocated is the bytes f allocates (runtime.MemStats.TotalAlloc).
func allocated(t *testing.T, f func()) uint64 {
	t.Helper()
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// Finding 7 of the hardening issue: files and directories that link out
// of the root are refused with a warning naming them, and nothing of what
// they point at reaches the node (its JSON or its warnings).
func TestLinksOutOfRoot(t *testing.T) {
	root := fakesystest.Root(t, "dgx-h100")
	outside := t.TempDir()
	const marker = "SECRET-OUTSIDE-THE-ROOT"
	secret := filepath.Join(outside, "passwd")
	if err := os.WriteFile(secret, []byte(marker+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A whole netdev directory outside, with every attribute a netdev has.
	evil := filepath.Join(outside, "evil0")
	if err := os.MkdirAll(evil, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"operstate", "address", "mtu", "type", "speed"} {
		if err := os.WriteFile(filepath.Join(evil, f), []byte(marker+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	port, err := filepath.EvalSymlinks(filepath.Join(root, "sys/class/infiniband/mlx5_0/ports/1"))
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(port, secret)
	if err != nil {
		t.Fatal(err)
	}
	plant := func(target, name string) {
		t.Helper()
		os.Remove(name)
		if err := os.Symlink(target, name); err != nil {
			t.Fatal(err)
		}
	}
	plant(secret, filepath.Join(port, "link_layer"))                                       // absolute, to a host file
	plant(rel, filepath.Join(port, "rate"))                                                // relative, climbing out
	plant(evil, filepath.Join(root, "sys/class/net/evil0"))                                // a class directory out
	plant("../../../.."+outside, filepath.Join(root, "sys/class/up"))                      // a directory link out
	plant("../../../sys/class/up/passwd", filepath.Join(root, "proc/sys/kernel/hostname")) // through it

	n, err := Discover(Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(js), marker) {
		t.Errorf("a file outside the root reached the node's JSON")
	}
	all := strings.Join(n.Warnings, "\n")
	for _, name := range []string{"ports/1/link_layer", "ports/1/rate", "kernel/hostname"} {
		if !strings.Contains(all, name+": leads outside the root") {
			t.Errorf("no warning refuses %s as leading outside the root:\n%s", name, all)
		}
	}
	if !strings.Contains(all, `netdev "evil0"`) || !strings.Contains(all, "leads outside the root") {
		t.Errorf("no warning refuses the netdev linked out of the root:\n%s", all)
	}
	for _, nic := range n.NICs {
		if nic.Name == "evil0" || slices.Contains(nic.Netdevs, "evil0") {
			t.Errorf("a netdev outside the root is a NIC: %+v", nic)
		}
	}
}

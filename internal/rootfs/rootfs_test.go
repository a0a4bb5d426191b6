package rootfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaffinity/gpuaffinity/internal/sysattr"
)

// tree builds, in a fresh directory, a root and a sibling "host" directory
// whose secret the root's links try to reach.
func tree(t *testing.T) (root, secret string) {
	t.Helper()
	base := t.TempDir()
	root = filepath.Join(base, "root")
	host := filepath.Join(base, "host")
	for _, d := range []string{root + "/sys/class/infiniband/dev/ports/1", root + "/sys/devices/pci/dev0", host} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	secret = filepath.Join(host, "passwd")
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(secret, "root:x:0:0\n")
	write(root+"/sys/devices/pci/dev0/vendor", "0x15b3\n")
	write(root+"/sys/devices/pci/dev0/numa_node", "-1\n")
	write(root+"/sys/devices/long", longText)
	link := func(target, name string) {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	link("../devices/pci/dev0", "sys/class/dev0")                                     // inside: a class link
	link(secret, "sys/class/infiniband/dev/ports/1/link_layer")                       // absolute, to the host
	link("../../../../../../../host/passwd", "sys/class/infiniband/dev/ports/1/rate") // relative, out
	link("../../../../host", "sys/devices/pci/escape")                                // a directory link out
	link(".", "sys/up")                                                               // the Extract trick
	link("up/up/up/../../../host/passwd", "sys/trick")
	link("/dev/zero", "sys/zero")
	if err := syscall.Mkfifo(filepath.Join(root, "sys/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root, secret
}

// modes runs a test on a fresh tree, opened with openat2 and with the
// os.Root walk.
func modes(t *testing.T, fn func(t *testing.T, r *Root, root string)) {
	run := func(t *testing.T) {
		root, _ := tree(t)
		r, err := Open(root)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		fn(t, r, root)
	}
	t.Run("openat2", run)
	t.Run("walk", func(t *testing.T) {
		noOpenat2.Store(true)
		defer noOpenat2.Store(false)
		run(t)
	})
	t.Run("memory", func(t *testing.T) {
		root, _ := tree(t)
		fn(t, fromDisk(t, root), root)
	})
	t.Run("tree", func(t *testing.T) {
		root, _ := tree(t)
		fn(t, fromDiskTree(t, root), root)
	})
}

// fromDiskTree is fromDisk through a TreeBuilder: the tree in pre-order,
// names ascending (as WalkDir walks).
func fromDiskTree(t *testing.T, dir string) *Root {
	t.Helper()
	b := NewTreeBuilder(dir, 0)
	index := map[string]int{".": -1}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		parent := index[filepath.Dir(rel)]
		var mode fs.FileMode
		var data []byte
		var target string
		switch {
		case d.IsDir():
			mode = fs.ModeDir
		case d.Type()&fs.ModeSymlink != 0:
			mode = fs.ModeSymlink
			if target, err = os.Readlink(p); err != nil {
				return err
			}
		case d.Type().IsRegular():
			if data, err = os.ReadFile(p); err != nil {
				return err
			}
		default:
			return nil // a FIFO: a memory root has none
		}
		index[rel] = len(index) - 1
		return b.Add(parent, d.Name(), mode, data, target)
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.Memory().Root()
}

// TreeBuilder refuses what would make a tree no directory listing can
// hold, and adds nothing then; a file added with File afterwards joins
// the listing once.
func TestTreeBuilder(t *testing.T) {
	b := NewTreeBuilder("t", 4)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(b.Add(-1, "sys", fs.ModeDir, nil, ""))   // 0
	must(b.Add(0, "a", 0, []byte("1\n"), ""))     // 1
	must(b.Add(0, "b", fs.ModeSymlink, nil, "a")) // 2
	must(b.Add(0, "c", fs.ModeDir, nil, ""))      // 3
	for _, tc := range []struct {
		parent int
		name   string
		mode   fs.FileMode
		want   string
	}{
		{1, "x", 0, "not an earlier directory"}, // a file as parent
		{9, "x", 0, "not an earlier directory"}, // a later node
		{0, "a", 0, "out of order or twice"},    // twice
		{0, "B", 0, "out of order or twice"},    // before "c" in byte order
		{0, "", 0, "bad name"},
		{0, "..", 0, "bad name"},
		{0, "x/y", 0, "bad name"},
		{0, "x", fs.ModeNamedPipe, "mode"},
	} {
		if err := b.Add(tc.parent, tc.name, tc.mode, nil, ""); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Add(%d, %q, %v) = %v; want %q", tc.parent, tc.name, tc.mode, err, tc.want)
		}
	}
	m := b.Memory()
	m.File("sys/d", []byte("2\n")) // after the tree, in order
	m.File("sys/a", []byte("3\n")) // replaces the builder's file
	r := m.Root()
	entries, err := r.ReadDir("sys")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, " "); got != "a b c d" {
		t.Errorf("sys holds %q; want a b c d", got)
	}
	for rel, want := range map[string]string{"sys/a": "3", "sys/b": "3", "sys/d": "2"} {
		if s, err := r.String(rel); err != nil || s != want {
			t.Errorf("String(%s) = %q, %v; want %q", rel, s, err, want)
		}
	}
	if _, err := r.ReadFile("sys/c/none", 16); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}

// fromDisk copies the tree under dir into a Memory root of the same
// name (FIFOs are left out: a memory root has none).
func fromDisk(t *testing.T, dir string) *Root {
	t.Helper()
	m := NewMemory(dir)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.IsDir():
			m.Dir(rel)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			m.Link(rel, target)
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			m.File(rel, b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m.Root()
}

func TestConfinedReads(t *testing.T) {
	modes(t, func(t *testing.T, r *Root, root string) {

		if s, err := r.String("sys/class/dev0/vendor"); err != nil || s != "0x15b3" {
			t.Errorf("a link inside the root: %q, %v; want 0x15b3", s, err)
		}
		if n, err := r.Int("sys/class/dev0/numa_node"); err != nil || n != -1 {
			t.Errorf("Int: %d, %v", n, err)
		}
		for _, rel := range []string{
			"sys/class/infiniband/dev/ports/1/link_layer", // absolute link to a host file
			"sys/class/infiniband/dev/ports/1/rate",       // relative link out
			"sys/devices/pci/escape/passwd",               // through a directory link out
			"sys/trick",                                   // up -> . then ../..
			"sys/zero",                                    // a link to /dev/zero
			"../host/passwd",                              // a path that climbs
			"/etc/passwd",                                 // an absolute path
		} {
			b, err := r.ReadFile(rel, 1<<20)
			if !errors.Is(err, ErrOutsideRoot) {
				t.Errorf("ReadFile(%s) = %q, %v; want ErrOutsideRoot", rel, b, err)
			}
			if err != nil && !strings.Contains(err.Error(), filepath.Join(root, rel)) && !strings.HasPrefix(rel, "/") {
				t.Errorf("ReadFile(%s): error %q does not name the file", rel, err)
			}
		}
		if _, err := r.ReadDir("sys/devices/pci/escape"); !errors.Is(err, ErrOutsideRoot) {
			t.Errorf("ReadDir through a link out: %v; want ErrOutsideRoot", err)
		}
		if _, err := r.Stat("sys/devices/pci/escape"); !errors.Is(err, ErrOutsideRoot) {
			t.Errorf("Stat through a link out: %v; want ErrOutsideRoot", err)
		}
		if _, err := r.Readlink("sys/devices/pci/escape/x"); err == nil {
			t.Errorf("Readlink through a directory link out succeeded")
		}
	})
}

// longText is a file longer than sysattr's first read and than the
// prefixes TestReadPrefix asks for.
var longText = strings.Repeat("0123456789abcdef", 320) // 5120 bytes

func TestReadPrefix(t *testing.T) {
	modes(t, func(t *testing.T, r *Root, root string) {
		for _, tc := range []struct {
			rel  string
			n    int
			want string
		}{
			{"sys/devices/long", 100, longText[:100]},
			{"sys/devices/long", 4096, longText[:4096]},
			{"sys/devices/long", 1 << 20, longText}, // a shorter file: all of it
			{"sys/class/dev0/vendor", 4, "0x15"},    // through a link inside
			{"sys/class/dev0/vendor", 64, "0x15b3\n"},
		} {
			b, err := r.ReadPrefix(tc.rel, tc.n)
			if err != nil || string(b) != tc.want {
				t.Errorf("ReadPrefix(%s, %d) = %d bytes %.20q…, %v; want %d bytes", tc.rel, tc.n, len(b), b, err, len(tc.want))
			}
		}
		for _, rel := range []string{"sys/zero", "sys/class/infiniband/dev/ports/1/rate"} {
			if b, err := r.ReadPrefix(rel, 16); !errors.Is(err, ErrOutsideRoot) {
				t.Errorf("ReadPrefix(%s) = %q, %v; want ErrOutsideRoot", rel, b, err)
			}
		}
		if _, err := r.ReadPrefix("sys/devices/pci", 16); !errors.Is(err, sysattr.ErrNotRegular) {
			t.Errorf("ReadPrefix(a directory) = %v; want ErrNotRegular", err)
		}
		if r.mem == nil {
			if _, err := r.ReadPrefix("sys/fifo", 16); !errors.Is(err, sysattr.ErrNotRegular) {
				t.Errorf("ReadPrefix(a FIFO) = %v; want ErrNotRegular", err)
			}
		}
	})
}

func TestFIFOIsRefusedAtOnce(t *testing.T) {
	modes(t, func(t *testing.T, r *Root, root string) {
		if r.mem != nil {
			t.Skip("a memory root has no FIFOs")
		}
		done := make(chan error, 1)
		go func() { _, err := r.ReadFile("sys/fifo", 1<<20); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, sysattr.ErrNotRegular) {
				t.Errorf("FIFO: %v; want ErrNotRegular", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("reading a FIFO under the root blocked")
		}
	})
}

func TestDirLinkStat(t *testing.T) {
	modes(t, func(t *testing.T, r *Root, root string) {
		entries, err := r.ReadDir("sys/class")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if got := strings.Join(names, " "); got != "dev0 infiniband" {
			t.Errorf("ReadDir(sys/class) = %q; want sorted %q", got, "dev0 infiniband")
		}
		if tgt, err := r.Readlink("sys/class/dev0"); err != nil || tgt != "../devices/pci/dev0" {
			t.Errorf("Readlink = %q, %v", tgt, err)
		}
		if _, err := r.Readlink("sys/devices/pci/dev0/vendor"); err == nil {
			t.Errorf("Readlink of a regular file succeeded")
		}
		fi, err := r.Lstat("sys/class/dev0")
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("Lstat of a link: %v, %v; want a symlink", fi, err)
		}
		fi, err = r.Stat("sys/class/dev0")
		if err != nil || !fi.IsDir() {
			t.Errorf("Stat through a link inside: %v, %v; want a directory", fi, err)
		}
		if _, err := r.Stat("sys/class/nothing"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Stat of a missing file: %v; want ErrNotExist", err)
		}
		if _, err := r.String("sys/class/nothing"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("String of a missing file: %v; want ErrNotExist", err)
		}
	})
}

func TestLiveRoot(t *testing.T) {
	r, err := Open("/")
	if err != nil {
		t.Fatal(err)
	}
	if !r.Live() {
		t.Fatal("/ is not live")
	}
	b, err := r.ReadFile("proc/self/status", 1<<20)
	if err != nil || !strings.Contains(string(b), "Cpus_allowed_list") {
		t.Errorf("live proc/self/status: %v", err)
	}
}

// A memory root's fast lookups agree with its walk: links to the root
// itself, chains of links, a link as the last component, loops.
func TestMemoryLinkForms(t *testing.T) {
	m := NewMemory("mem")
	m.File("a/b/f", []byte("x"))
	m.Link("up", ".")        // to the root
	m.Link("a/l1", "b")      // to a directory
	m.Link("a/l2", "l1")     // a chain
	m.Link("a/lf", "l2/f")   // to a file, through the chain
	m.Link("loop1", "loop2") // a loop
	m.Link("loop2", "loop1")
	r := m.Root()
	for _, rel := range []string{"a/b/f", "up/a/b/f", "up/up/a/l2/f", "a/lf", "a/l1/f", "up/a/lf"} {
		if b, err := r.ReadFile(rel, 10); err != nil || string(b) != "x" {
			t.Errorf("ReadFile(%s) = %q, %v", rel, b, err)
		}
	}
	if fi, err := r.Stat("up"); err != nil || !fi.IsDir() {
		t.Errorf("Stat(up) = %v, %v; want the root directory", fi, err)
	}
	if tgt, err := r.Readlink("up/a/l2"); err != nil || tgt != "l1" {
		t.Errorf("Readlink(up/a/l2) = %q, %v", tgt, err)
	}
	if _, err := r.ReadFile("loop1/x", 10); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("a loop: %v; want ELOOP", err)
	}
	if _, err := r.ReadFile("a/b/f/g", 10); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("a file as a directory: %v; want ENOTDIR", err)
	}
	if _, err := r.ReadFile("a/../../x", 10); !errors.Is(err, ErrOutsideRoot) {
		t.Errorf("climbing out: %v; want ErrOutsideRoot", err)
	}
}

// A Dir reads its files by name: a link in a file's place is refused, a
// name with a slash is not a name, and the listing is sorted.
func TestDir(t *testing.T) {
	modes(t, func(t *testing.T, r *Root, root string) {
		d, err := r.OpenDir("sys/class/dev0") // through a link inside the root
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if b, err := d.ReadFile("vendor", 64); err != nil || string(b) != "0x15b3\n" {
			t.Errorf("vendor = %q, %v", b, err)
		}
		if _, err := d.ReadFile("../dev0/vendor", 64); err == nil {
			t.Errorf("a path with a slash was read")
		}
		if _, err := d.ReadFile("nothing", 64); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a missing file: %v", err)
		}
		entries, err := d.ReadDir()
		if err != nil || len(entries) != 2 || entries[0].Name() != "numa_node" || entries[1].Name() != "vendor" {
			t.Errorf("ReadDir = %v, %v", entries, err)
		}
		p, err := r.OpenDir("sys/class/infiniband/dev/ports/1")
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if _, err := p.ReadFile("link_layer", 64); !errors.Is(err, sysattr.ErrNotRegular) {
			t.Errorf("a link in a file's place: %v; want ErrNotRegular", err)
		}
		if _, err := r.OpenDir("sys/devices/pci/escape"); !errors.Is(err, ErrOutsideRoot) {
			t.Errorf("OpenDir through a link out: %v", err)
		}
	})
}

func TestDirReadInto(t *testing.T) {
	modes(t, func(t *testing.T, r *Root, root string) {
		d, err := r.OpenDir("sys/devices")
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		buf := make([]byte, 4096)
		for _, size := range []int{100, 4096} {
			n, err := d.ReadInto("long", buf[:size])
			if err != nil || n != size || string(buf[:n]) != longText[:size] {
				t.Errorf("ReadInto(long, %d) = %d, %v", size, n, err)
			}
		}
		big := make([]byte, len(longText)+10)
		if n, err := d.ReadInto("long", big); err != nil || n != len(longText) {
			t.Errorf("ReadInto of a shorter file = %d, %v; want %d", n, err, len(longText))
		}
		if _, err := d.ReadInto("../x", buf); err == nil {
			t.Error("ReadInto(../x) succeeded")
		}
		if _, err := d.ReadInto("pci", buf); !errors.Is(err, sysattr.ErrNotRegular) {
			t.Errorf("ReadInto(a directory) = %v; want ErrNotRegular", err)
		}
		if _, err := d.ReadInto("missing", buf); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("ReadInto(missing) = %v; want ErrNotExist", err)
		}
	})
	modes(t, func(t *testing.T, r *Root, root string) {
		if r.mem != nil {
			return
		}
		d, err := r.OpenDir("sys")
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if _, err := d.ReadInto("fifo", make([]byte, 16)); !errors.Is(err, sysattr.ErrNotRegular) {
			t.Errorf("ReadInto(a FIFO) = %v; want ErrNotRegular", err)
		}
	})
}

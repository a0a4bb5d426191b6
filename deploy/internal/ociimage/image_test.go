package ociimage

import (
	"archive/tar"
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The binaries under test, built once by TestMain the way `make build`
// builds them (three variants; the first is the entrypoint).
var bins struct {
	dir                string
	lean, agent, fleet string
	version            string
	err                error
}

func TestMain(m *testing.M) {
	code := func() int {
		dir, err := os.MkdirTemp("", "ociimage-bins-")
		if err != nil {
			bins.err = err
			return m.Run()
		}
		defer os.RemoveAll(dir)
		bins.dir = dir
		bins.version = "v0.0.0-ociimage-test"
		bins.lean = filepath.Join(dir, "gpuaffinity")
		bins.agent = filepath.Join(dir, "gpuaffinity-agent")
		bins.fleet = filepath.Join(dir, "gpuaffinity-fleet")
		_, file, _, _ := runtime.Caller(0)
		top := filepath.Join(filepath.Dir(file), "..", "..", "..")
		ld := "-X main.version=" + bins.version + " -X main.revision=test"
		for _, b := range []struct{ out, tags string }{{bins.lean, "omit_agent"}, {bins.agent, "agent_only"}, {bins.fleet, ""}} {
			cmd := exec.Command("go", "build", "-tags", b.tags, "-ldflags", ld, "-o", b.out, "./cmd/gpuaffinity")
			cmd.Dir = top
			if out, err := cmd.CombinedOutput(); err != nil {
				bins.err = errors.New("go build: " + err.Error() + "\n" + string(out))
				break
			}
		}
		return m.Run()
	}()
	os.Exit(code)
}

func needBins(t *testing.T) {
	t.Helper()
	if bins.err != nil {
		t.Fatal(bins.err)
	}
}

// ldList is the dynamic loader's own answer: `ld.so --list PROG` prints
// each object it maps ("libc.so.6 => /lib/.../libc.so.6 (0x...)", the
// loader as "/lib64/ld-linux-x86-64.so.2 (0x...)", and the vDSO, which
// has no file). Returned as real paths (symbolic links resolved).
func ldList(t *testing.T, prog string) []string {
	t.Helper()
	f, err := elf.Open(prog)
	if err != nil {
		t.Fatal(err)
	}
	interp, err := interpreter(f)
	f.Close()
	if err != nil || interp == "" {
		t.Fatalf("%s: interpreter %q: %v", prog, interp, err)
	}
	out, err := exec.Command(interp, "--list", prog).Output()
	if err != nil {
		t.Fatalf("%s --list %s: %v", interp, prog, err)
	}
	var got []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.Index(line, "=> "); i >= 0 {
			line = line[i+3:]
		}
		p, _, _ := strings.Cut(line, " (")
		if !strings.HasPrefix(p, "/") {
			continue // linux-vdso.so.1
		}
		got = append(got, realPath(t, p))
	}
	sort.Strings(got)
	return got
}

func realPath(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Loader's answer for the real binaries is the same set of files as the
// dynamic loader's own (ld.so --list), on this host.
func TestLibrariesMatchDynamicLoader(t *testing.T) {
	needBins(t)
	for _, prog := range []string{bins.lean, bins.agent, bins.fleet} {
		libs, err := Loader{}.Libraries(prog)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range libs {
			got = append(got, realPath(t, l))
		}
		sort.Strings(got)
		want := ldList(t, prog)
		if !slices.Equal(got, want) {
			t.Errorf("%s: Loader found %v, ld.so --list maps %v", filepath.Base(prog), got, want)
		}
		if len(want) < 2 {
			t.Errorf("%s: a cgo build maps the loader and libc at least; ld.so lists %v", filepath.Base(prog), want)
		}
	}
}

// A scratch root laid out by hand: ld.so.conf including a conf.d file,
// a first directory holding a libc of another machine (ld.so passes it
// over), the right one in the next, and the loader behind a link. The
// search and the failure messages follow the rules in Loader's comment.
func TestLoaderSearchOrder(t *testing.T) {
	needBins(t)
	hostLibs, err := Loader{}.Libraries(bins.lean)
	if err != nil {
		t.Fatal(err)
	}
	var libc, ldso string
	for _, l := range hostLibs {
		switch {
		case strings.HasPrefix(path.Base(l), "libc.so"):
			libc = l
		case strings.HasPrefix(path.Base(l), "ld-linux"):
			ldso = l
		}
	}
	if libc == "" || ldso == "" {
		t.Fatalf("no libc or loader among %v", hostLibs)
	}
	f, err := elf.Open(bins.lean)
	if err != nil {
		t.Fatal(err)
	}
	interp, _ := interpreter(f)
	f.Close()

	root := t.TempDir()
	write := func(p string, data []byte) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	read := func(p string) []byte {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	write("/etc/ld.so.conf", []byte("# site\ninclude ld.so.conf.d/*.conf\n"))
	write("/etc/ld.so.conf.d/a.conf", []byte("/opt/wrong, /opt/right\n"))
	wrong := append([]byte(nil), read(libc)...)
	// e_machine, at offset 18 of the ELF header (little-endian here):
	// EM_AARCH64 (183) instead of the program's.
	wrong[18], wrong[19] = 183, 0
	write("/opt/wrong/"+path.Base(libc), wrong)
	write("/opt/right/"+path.Base(libc), read(libc))
	write("/opt/right/"+path.Base(ldso), read(ldso))
	if err := os.MkdirAll(filepath.Join(root, path.Dir(interp)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/opt/right/"+path.Base(ldso), filepath.Join(root, interp)); err != nil {
		t.Fatal(err)
	}

	l := Loader{Root: root}
	libs, err := l.Libraries(bins.lean)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{interp, "/opt/right/" + path.Base(libc)}
	if !slices.Equal(libs, want) {
		t.Errorf("Libraries in the scratch root = %v, want %v", libs, want)
	}

	// The image of that root holds the link on the loader's path.
	img, err := Build(Spec{Binaries: []string{bins.lean}, Loader: l})
	if err != nil {
		t.Fatal(err)
	}
	files := imageFiles(t, img)
	if got := files[strings.TrimPrefix(interp, "/")]; got != "-> /opt/right/"+path.Base(ldso) {
		t.Errorf("%s in the image: %q, want the link to /opt/right", interp, got)
	}

	// Without the right directory the error names the object and who
	// needs it.
	write("/etc/ld.so.conf.d/a.conf", []byte("/opt/wrong\n"))
	_, err = Loader{Root: root, Dirs: []string{"/opt/wrong"}}.Libraries(bins.lean)
	if err == nil || !strings.Contains(err.Error(), path.Base(libc)+", needed by "+bins.lean) ||
		!strings.Contains(err.Error(), "not found in /opt/wrong") {
		t.Errorf("missing libc: err = %v", err)
	}
}

// imageFiles lists the flattened file system: path → "dir", "file
// MODE SIZE" or "-> TARGET".
func imageFiles(t *testing.T, img v1.Image) map[string]string {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	files := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := strings.TrimSuffix(h.Name, "/")
		switch h.Typeflag {
		case tar.TypeDir:
			files[p] = "dir"
		case tar.TypeSymlink:
			files[p] = "-> " + h.Linkname
		case tar.TypeReg:
			files[p] = "file " + fs.FileMode(h.Mode).Perm().String()
		default:
			t.Errorf("%s: tar type %c in the image", p, h.Typeflag)
		}
	}
	return files
}

// unpack writes the image's flattened file system under dir.
func unpack(t *testing.T, img v1.Image, dir string) {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, filepath.Clean("/"+h.Name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, fs.FileMode(h.Mode).Perm()); err != nil {
				t.Fatal(err)
			}
		case tar.TypeSymlink:
			if err := os.Symlink(h.Linkname, dst); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, fs.FileMode(h.Mode).Perm())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// The image as `make image` writes it: read back from the tarball, its
// config is what the DaemonSet needs, it holds exactly the binaries, the
// objects ld.so maps for them and the directories and links on their
// paths, and it runs `version` and `topo --demo dgx-h100` in a chroot of
// its own file system.
func TestImage(t *testing.T) {
	needBins(t)
	created := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	img, err := Build(Spec{
		Binaries: []string{bins.lean, bins.agent, bins.fleet},
		Version:  bins.version, Revision: "test", Created: created,
	})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "image.tar")
	ref := Repository + ":" + Release
	if err := Write(file, ref, img); err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	back, err := tarball.ImageFromPath(file, &tag)
	if err != nil {
		t.Fatalf("read %s back as %s: %v", file, ref, err)
	}
	checkConfig(t, back, created)
	checkFiles(t, back)
	if os.Geteuid() != 0 {
		t.Skip("chroot needs root (CI runs as root)")
	}
	root := t.TempDir()
	unpack(t, back, root)
	checkRuns(t, root)
}

func checkConfig(t *testing.T, img v1.Image, created time.Time) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
	}
	// The DaemonSet gives args only (agent, --root=/, ...), and so does
	// the fleet CronJob (fleet labels --apply ...): the entrypoint must be
	// the gpuaffinity command, which runs gpuaffinity-agent or
	// gpuaffinity-fleet installed beside it.
	if !slices.Equal(cf.Config.Entrypoint, []string{"/usr/bin/gpuaffinity"}) || len(cf.Config.Cmd) != 0 {
		t.Errorf("entrypoint %q cmd %q, want [/usr/bin/gpuaffinity] and none", cf.Config.Entrypoint, cf.Config.Cmd)
	}
	want := map[string]string{
		"org.opencontainers.image.title":    "gpuaffinity",
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.source":   "https://github.com/gpuaffinity/gpuaffinity",
		"org.opencontainers.image.version":  bins.version,
		"org.opencontainers.image.revision": "test",
		"org.opencontainers.image.created":  "2026-12-02T00:00:00Z",
	}
	for k, v := range want {
		if cf.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, cf.Config.Labels[k], v)
		}
	}
	if !cf.Created.Time.Equal(created) {
		t.Errorf("created %v, want %v", cf.Created.Time, created)
	}
	if _, ok := cf.Config.ExposedPorts["19400/tcp"]; !ok {
		t.Errorf("exposed ports %v lack the agent's 19400/tcp", cf.Config.ExposedPorts)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 2 {
		t.Errorf("layers: %d, %v; want 2 (libraries, binaries)", len(layers), err)
	}
}

// checkFiles: every regular file in the image is a binary or an object
// ld.so --list maps for one, and each of those is there.
func checkFiles(t *testing.T, img v1.Image) {
	t.Helper()
	files := imageFiles(t, img)
	var got []string
	for p, kind := range files {
		if strings.HasPrefix(kind, "file ") {
			got = append(got, "/"+p)
		}
	}
	sort.Strings(got)
	wantSet := map[string]bool{"/usr/bin/gpuaffinity": true, "/usr/bin/gpuaffinity-agent": true, "/usr/bin/gpuaffinity-fleet": true}
	for _, prog := range []string{bins.lean, bins.agent, bins.fleet} {
		for _, l := range ldList(t, prog) {
			wantSet[l] = true
		}
	}
	var want []string
	for p := range wantSet {
		want = append(want, p)
	}
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("regular files in the image:\n got %v\nwant %v", got, want)
	}
	if files["tmp"] != "dir" {
		t.Errorf("/tmp: %q, want a directory", files["tmp"])
	}
	for _, p := range []string{"usr/bin/gpuaffinity", "usr/bin/gpuaffinity-agent", "usr/bin/gpuaffinity-fleet"} {
		if files[p] != "file -rwxr-xr-x" {
			t.Errorf("%s: %q, want mode 0755", p, files[p])
		}
	}
}

// checkRuns runs the image's binaries chrooted in its unpacked file
// system, with an empty environment, so that nothing of the host's
// file system is reachable: `version` prints the build's version and
// `topo --demo dgx-h100` prints what the same binary prints on the host.
func checkRuns(t *testing.T, root string) {
	t.Helper()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("/usr/bin/gpuaffinity", args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
		cmd.Dir = "/"
		cmd.Env = []string{"PATH=/usr/bin"}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("chroot %s gpuaffinity %s: %v\n%s", root, strings.Join(args, " "), err, stderr.String())
		}
		return string(out)
	}
	if v := run("version"); !strings.HasPrefix(v, "gpuaffinity "+bins.version+" ") {
		t.Errorf("version in the image: %q", v)
	}
	got := run("topo", "--demo", "dgx-h100")
	host, err := exec.Command(bins.lean, "topo", "--demo", "dgx-h100").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got != string(host) {
		t.Errorf("topo --demo dgx-h100 in the image differs from the host's run:\n%s", got)
	}
	// The DGX H100's published layout (NVIDIA DGX H100 User Guide,
	// "Hardware overview"): 8 GPUs, each with 18 NVLinks to the
	// NVSwitches, so every GPU pair is NV18.
	rows := 0
	for _, line := range strings.Split(got, "\n") {
		if strings.HasPrefix(line, "GPU") {
			if n := strings.Count(line, "NV18"); n == 7 {
				rows++
			}
		}
	}
	if rows != 8 {
		t.Errorf("topo in the image: %d GPU rows with 7 NV18 peers, want 8:\n%s", rows, got)
	}
	// The agent binary is where `gpuaffinity agent` finds it, and the
	// fleet binary where `gpuaffinity fleet` (the CronJob's args) does:
	// --prometheus is a flag of every fleet command
	// (cmd/gpuaffinity/fleet.go, fleetFlags.register).
	if out := run("agent", "--help"); !strings.Contains(out, "--web.listen-address") {
		t.Errorf("agent --help in the image lacks --web.listen-address:\n%s", out)
	}
	if out := run("fleet", "labels", "--help"); !strings.Contains(out, "--prometheus string") || !strings.Contains(out, "--apply") {
		t.Errorf("fleet labels --help in the image lacks --prometheus or --apply:\n%s", out)
	}
}

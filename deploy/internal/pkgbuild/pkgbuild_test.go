package pkgbuild

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/testenv"
)

const (
	// repoRoot is the repository, seen from this package's directory.
	repoRoot = "../../.."
	// testDescribe is the Makefile VERSION the test binaries carry
	// (three commits after tag v1.2.0), testPkgVersion Version's rule for
	// it (the table in version.go), testRevision the Makefile's REVISION.
	testDescribe   = "v1.2.0-3-gabc1234"
	testPkgVersion = "1.2.0+git3.abc1234"
	testRevision   = "abc1234"
	// documentedGLIBC is the glibc docs/operations.md ("Packages") says
	// the binaries need: GLIBC_2.34 is the highest version `objdump -p`
	// lists for the cgo build with Go 1.26 on Debian 12 (issue 15, "The
	// cgo build needs GLIBC_2.34"). A toolchain that needs another
	// changes the docs too.
	documentedGLIBC = "2.34"
)

// testMTime is the time the test packages give every file.
var testMTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// needTool finds a program, failing in CI (testenv.InCI) and skipping
// elsewhere when it is missing.
func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/bin", "/bin", "/usr/sbin", "/sbin"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return filepath.Join(dir, name)
		}
	}
	if testenv.InCI() {
		t.Fatalf("%s missing under CI (Debian package %s; make test installs it)", name, pkg)
	}
	t.Skipf("%s not installed (Debian package %s)", name, pkg)
	return ""
}

// built is what every test here inspects: the three binaries, built as
// `make build` builds them, and the packages Build made of them.
type built struct {
	cli, agent, fleet string
	res               Result
}

var (
	buildOnce sync.Once
	theBuild  *built
	buildErr  error
	tmpRoot   string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if tmpRoot != "" {
		os.RemoveAll(tmpRoot)
	}
	os.Exit(code)
}

// packages builds the binaries and the packages once for all tests.
func packages(t *testing.T) *built {
	t.Helper()
	goTool := needTool(t, "go", "golang")
	buildOnce.Do(func() { theBuild, buildErr = buildAll(t, goTool) })
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return theBuild
}

func buildAll(t *testing.T, goTool string) (*built, error) {
	dir, err := os.MkdirTemp("", "pkgbuild-test-")
	if err != nil {
		return nil, err
	}
	tmpRoot = dir
	b := &built{
		cli:   filepath.Join(dir, "bin", "gpuaffinity"),
		agent: filepath.Join(dir, "bin", "gpuaffinity-agent"),
		fleet: filepath.Join(dir, "bin", "gpuaffinity-fleet"),
	}
	mkpkg := filepath.Join(dir, "mkpkg")
	// The Makefile's build target, less -trimpath (which would compile
	// every package again instead of taking them from the cache `make
	// compile` fills; it changes no dependency), and mkpkg, which `make
	// package` runs. mkpkg runs as its own process, built without -race:
	// under the race detector compressing the 44 MB of binaries twice
	// takes 90 s instead of 3.
	ldflags := "-X main.version=" + testDescribe + " -X main.revision=" + testRevision
	start := time.Now()
	// The binaries are built in the product module (the repository's
	// root), mkpkg in this one (deploy/), so that each builds with
	// GOWORK=off too. The three builds share the compiled packages the
	// tags leave alone, so the second and third cost little more than
	// cmd/gpuaffinity's compile and a link.
	for _, step := range []struct {
		dir  string
		args []string
	}{
		{repoRoot, []string{"build", "-tags", "omit_agent", "-ldflags", ldflags, "-o", b.cli, "./cmd/gpuaffinity"}},
		{repoRoot, []string{"build", "-tags", "agent_only", "-ldflags", ldflags, "-o", b.agent, "./cmd/gpuaffinity"}},
		{repoRoot, []string{"build", "-ldflags", ldflags, "-o", b.fleet, "./cmd/gpuaffinity"}},
		{".", []string{"build", "-o", mkpkg, "./mkpkg"}},
	} {
		args := step.args
		cmd := exec.Command(goTool, args...)
		cmd.Dir = step.dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1", "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	t.Logf("go build, the three binaries and mkpkg: %s", time.Since(start).Round(time.Millisecond))

	// make package's command line, from the repository's root. nFPM
	// takes every file's time from SOURCE_DATE_EPOCH
	// (reproducible-builds.org's variable).
	start = time.Now()
	cmd := exec.Command(mkpkg, "-version", testDescribe, "-out", filepath.Join(dir, "dist"), b.cli, b.agent, b.fleet)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), fmt.Sprintf("SOURCE_DATE_EPOCH=%d", testMTime.Unix()))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("mkpkg: %v\n%s", err, stderr.Bytes())
	}
	t.Logf("mkpkg (.deb and .rpm): %s", time.Since(start).Round(time.Millisecond))
	// mkpkg/main.go prints the figures and then the two paths.
	m := regexp.MustCompile(`^package version (\S+) \(from (\S+)\); the binaries need glibc >= ([0-9.]+)\n(\S+\.deb)\n(\S+\.rpm)\n$`).FindSubmatch(out)
	if m == nil {
		return nil, fmt.Errorf("mkpkg printed %q", out)
	}
	if string(m[1]) != testPkgVersion || string(m[2]) != testDescribe {
		return nil, fmt.Errorf("mkpkg: package version %s from %s, want %s from %s", m[1], m[2], testPkgVersion, testDescribe)
	}
	b.res = Result{GLIBC: string(m[3]), Deb: string(m[4]), RPM: string(m[5])}
	return b, nil
}

func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.Bytes())
	}
	return out
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// entry is one member of a package's file archive.
type entry struct {
	typ          byte
	mode         fs.FileMode
	uname, gname string
	mtime        time.Time
	data         []byte
}

// readTar reads a tar stream into entries by absolute path.
func readTar(t *testing.T, r io.Reader) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		name := "/" + strings.TrimPrefix(strings.TrimSuffix(h.Name, "/"), "./")
		out[name] = entry{h.Typeflag, fs.FileMode(h.Mode).Perm(), h.Uname, h.Gname, h.ModTime, data}
	}
}

// wantFile is what one packaged file must be: its mode, and its bytes
// (same), or its bytes once gunzipped (gunzipped), or text it must hold
// (contains, for generated completions).
type wantFile struct {
	mode      fs.FileMode
	same      []byte
	gunzipped []byte
	contains  string
}

// wantFiles is every regular file a package must hold, and nothing else.
// The paths are this package's constants written out, so that a changed
// constant fails here.
func wantFiles(t *testing.T, b *built, format string) map[string]wantFile {
	t.Helper()
	repo := func(p string) []byte { return readFile(t, filepath.Join(repoRoot, p)) }
	defaults := append(repo("systemd/gpuaffinity.default"), repo("deploy/slurm/gpuaffinity.default")...)
	w := map[string]wantFile{
		"/usr/bin/gpuaffinity":                             {mode: 0o755, same: readFile(t, b.cli)},
		"/usr/bin/gpuaffinity-agent":                       {mode: 0o755, same: readFile(t, b.agent)},
		"/usr/bin/gpuaffinity-fleet":                       {mode: 0o755, same: readFile(t, b.fleet)},
		"/usr/lib/systemd/system/gpuaffinity.service":      {mode: 0o644, same: repo("systemd/gpuaffinity.service")},
		"/usr/lib/systemd/system/gpuaffinity.socket":       {mode: 0o644, same: repo("systemd/gpuaffinity.socket")},
		"/usr/libexec/gpuaffinity/gpuaffinity-prolog":      {mode: 0o755, same: repo("deploy/slurm/gpuaffinity-prolog.sh")},
		"/usr/libexec/gpuaffinity/gpuaffinity-healthcheck": {mode: 0o755, same: repo("deploy/slurm/gpuaffinity-healthcheck.sh")},
		"/usr/share/gpuaffinity/gpuaffinity.nhc":           {mode: 0o644, same: repo("deploy/slurm/gpuaffinity.nhc")},
		"/etc/default/gpuaffinity":                         {mode: 0o644, same: defaults},
		// cobra's generators (spf13/cobra v1.10: bash_completionsV2.go ends
		// with this complete line, zsh_completions.go starts with #compdef,
		// fish_completions.go registers with complete -c).
		"/usr/share/bash-completion/completions/gpuaffinity":    {mode: 0o644, contains: "\n    complete -o default -F __start_gpuaffinity gpuaffinity\n"},
		"/usr/share/fish/vendor_completions.d/gpuaffinity.fish": {mode: 0o644, contains: "\ncomplete -c gpuaffinity "},
	}
	zsh := map[string]string{"deb": "/usr/share/zsh/vendor-completions/_gpuaffinity", "rpm": "/usr/share/zsh/site-functions/_gpuaffinity"}[format]
	w[zsh] = wantFile{mode: 0o644, contains: "#compdef gpuaffinity\n"}
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "man", "*.1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, must := range []string{"gpuaffinity.1", "gpuaffinity-agent.1", "gpuaffinity-check.1"} {
		if !slices.Contains(pages, filepath.Join(repoRoot, "docs", "man", must)) {
			t.Errorf("docs/man/%s missing", must)
		}
	}
	for _, p := range pages {
		w["/usr/share/man/man1/"+filepath.Base(p)+".gz"] = wantFile{mode: 0o644, gunzipped: readFile(t, p)}
	}
	if lic, err := licence(repoRoot); err != nil {
		t.Fatal(err)
	} else if lic != "" {
		dst := map[string]string{"deb": "/usr/share/doc/gpuaffinity/copyright", "rpm": "/usr/share/licenses/gpuaffinity/" + filepath.Base(lic)}[format]
		w[dst] = wantFile{mode: 0o644, same: readFile(t, lic)}
	}
	return w
}

// checkFiles holds a package's archive to want: the same regular files,
// owned by root, with their modes, bytes and the test's time.
func checkFiles(t *testing.T, got map[string]entry, want map[string]wantFile) {
	t.Helper()
	for path, e := range got {
		if e.uname != "root" || e.gname != "root" {
			t.Errorf("%s: owner %s:%s, want root:root", path, e.uname, e.gname)
		}
		if !e.mtime.Equal(testMTime) {
			t.Errorf("%s: time %s, want %s", path, e.mtime, testMTime)
		}
		switch e.typ {
		case tar.TypeDir:
			if e.mode != 0o755 {
				t.Errorf("%s/: mode %o, want 755", path, e.mode)
			}
		case tar.TypeReg:
			if _, ok := want[path]; !ok {
				t.Errorf("%s: not a file the package should hold", path)
			}
		default:
			t.Errorf("%s: tar type %q, want a file or a directory", path, e.typ)
		}
	}
	for path, w := range want {
		e, ok := got[path]
		if !ok || e.typ != tar.TypeReg {
			t.Errorf("%s: missing", path)
			continue
		}
		if e.mode != w.mode {
			t.Errorf("%s: mode %o, want %o", path, e.mode, w.mode)
		}
		switch {
		case w.same != nil && !bytes.Equal(e.data, w.same):
			t.Errorf("%s: %d bytes differ from their source's %d", path, len(e.data), len(w.same))
		case w.gunzipped != nil:
			z, err := gzip.NewReader(bytes.NewReader(e.data))
			if err != nil {
				t.Errorf("%s: %v", path, err)
				continue
			}
			page, err := io.ReadAll(z)
			if err != nil || !bytes.Equal(page, w.gunzipped) {
				t.Errorf("%s: does not gunzip to its docs/man page (%v)", path, err)
			}
			// Debian Policy 12.1: gzip -9n, so no name and no time.
			if z.Name != "" || !z.ModTime.IsZero() {
				t.Errorf("%s: gzip header carries name %q, time %s", path, z.Name, z.ModTime)
			}
		case w.contains != "" && !bytes.Contains(e.data, []byte(w.contains)):
			t.Errorf("%s: no %q in it", path, w.contains)
		}
	}
}

// The .deb: its control fields, conffiles, maintainer scripts and files.
func TestDeb(t *testing.T) {
	b := packages(t)
	dpkgDeb := needTool(t, "dpkg-deb", "dpkg")
	deb := b.res.Deb
	if got, want := filepath.Base(deb), "gpuaffinity_"+testPkgVersion+"_amd64.deb"; got != want {
		t.Errorf("file name %s, want %s (dpkg-name(1)'s convention)", got, want)
	}
	for field, want := range map[string]string{
		"Package":      "gpuaffinity",
		"Version":      testPkgVersion,
		"Architecture": "amd64",
		"Depends":      "libc6 (>= " + documentedGLIBC + ")",
		"Section":      "admin",
		"Priority":     "optional",
	} {
		if got := strings.TrimSpace(string(run(t, dpkgDeb, "--field", deb, field))); got != want {
			t.Errorf("control %s: %q, want %q", field, got, want)
		}
	}
	control := t.TempDir()
	run(t, dpkgDeb, "--control", deb, control)
	if got, want := string(readFile(t, filepath.Join(control, "conffiles"))), "/etc/default/gpuaffinity\n"; got != want {
		t.Errorf("conffiles %q, want %q", got, want)
	}
	for _, s := range []string{"postinst", "prerm", "postrm"} {
		p := filepath.Join(control, s)
		fi, err := os.Stat(p)
		if err != nil {
			t.Errorf("no %s: %v", s, err)
			continue
		}
		if fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: mode %o, want 755", s, fi.Mode().Perm())
		}
		if !bytes.Equal(readFile(t, p), readFile(t, filepath.Join("scripts", s))) {
			t.Errorf("%s differs from scripts/%s", s, s)
		}
	}
	if _, err := os.Stat(filepath.Join(control, "preinst")); err == nil {
		t.Errorf("a preinst: the package needs none (no user to create: DynamicUser)")
	}
	tarball := run(t, dpkgDeb, "--fsys-tarfile", deb)
	checkFiles(t, readTar(t, bytes.NewReader(tarball)), wantFiles(t, b, "deb"))
}

// The .deb unpacked into a scratch root: the binaries run from it,
// systemd-analyze verify accepts the installed units there, and the
// installed agent serves on a socket passed as gpuaffinity.socket would.
func TestDebUnpacked(t *testing.T) {
	b := packages(t)
	dpkg := needTool(t, "dpkg", "dpkg")
	root := t.TempDir()
	run(t, dpkg, "-x", b.res.Deb, root)
	cli := filepath.Join(root, "usr", "bin", "gpuaffinity")

	// cmd/gpuaffinity/version.go: "gpuaffinity VERSION (revision REVISION, ...".
	out := run(t, cli, "version")
	if want := "gpuaffinity " + testDescribe + " (revision " + testRevision + ", "; !strings.HasPrefix(string(out), want) {
		t.Errorf("gpuaffinity version: %q, want it to start %q", out, want)
	}
	// The launch-path build runs the agent build installed beside it
	// (PATH empty: not one found elsewhere); --demo list is the agent's.
	cmd := exec.Command(cli, "agent", "--demo", "list")
	cmd.Env = []string{"PATH="}
	if out, err := cmd.CombinedOutput(); err != nil || !slices.Contains(strings.Fields(string(out)), "dgx-h100") {
		t.Errorf("installed gpuaffinity agent --demo list: %v\n%s", err, out)
	}
	// Likewise `fleet`, which runs the fleet build installed beside it;
	// and that build, run itself, has the fleet command in process.
	// --prometheus is a flag of every fleet command
	// (cmd/gpuaffinity/fleet.go, fleetFlags.register).
	for _, argv := range [][]string{
		{cli, "fleet", "--help"},
		{filepath.Join(root, "usr", "bin", "gpuaffinity-fleet"), "fleet", "--help"},
	} {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = []string{"PATH="}
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "--prometheus string") {
			t.Errorf("installed %s: %v\n%s", strings.Join(argv, " "), err, out)
		}
	}

	t.Run("verify", func(t *testing.T) { verifyInRoot(t, root) })
	t.Run("socket", func(t *testing.T) { socketActivation(t, cli) })
}

// verifyInRoot runs systemd-analyze verify --root on the installed units.
// The scratch root gets what a Debian system under them has: systemd's
// targets the units' default dependencies name, and /bin/kill
// (ExecReload=) with /bin a link to usr/bin as Debian 12 has it.
func verifyInRoot(t *testing.T, root string) {
	analyze := needTool(t, "systemd-analyze", "systemd")
	units := filepath.Join(root, "usr", "lib", "systemd", "system")
	hostUnits := "/usr/lib/systemd/system"
	if _, err := os.Stat(filepath.Join(hostUnits, "sysinit.target")); err != nil {
		hostUnits = "/lib/systemd/system"
	}
	for _, u := range []string{"sysinit.target", "shutdown.target", "basic.target", "sockets.target",
		"multi-user.target", "network-online.target"} {
		if err := os.WriteFile(filepath.Join(units, u), readFile(t, filepath.Join(hostUnits, u)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	kill, err := exec.LookPath("kill")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "usr", "bin", "kill"), readFile(t, kill), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("usr/bin", filepath.Join(root, "bin")); err != nil {
		t.Fatal(err)
	}
	verify := func() ([]byte, error) {
		return exec.Command(analyze, "verify", "--root="+root, "gpuaffinity.service", "gpuaffinity.socket").CombinedOutput()
	}
	out, err := verify()
	if err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("systemd-analyze verify --root: %v\n%s", err, out)
	}
	// It does look in the root: without the installed binary it fails
	// (systemd 252: "Command /usr/bin/gpuaffinity is not executable").
	bin := filepath.Join(root, "usr", "bin", "gpuaffinity")
	if err := os.Rename(bin, bin+".away"); err != nil {
		t.Fatal(err)
	}
	defer os.Rename(bin+".away", bin)
	if out, err := verify(); err == nil || !strings.Contains(string(out), "/usr/bin/gpuaffinity is not executable") {
		t.Errorf("verify without /usr/bin/gpuaffinity in the root: %v\n%s", err, out)
	}
}

// socketActivation starts the installed agent as systemd does with
// gpuaffinity.socket, through systemd-socket-activate (systemd's tool
// for this: it listens, passes the socket as fd 3 with LISTEN_FDS and
// LISTEN_PID, and execs the command on the first connection), with the
// flag the socket needs. The agent answers there, and not on
// --web.listen-address, which the socket replaces. A free port stands in
// for the unit's 19400, which another agent on this machine may hold.
func socketActivation(t *testing.T, cli string) {
	activate := needTool(t, "systemd-socket-activate", "systemd")
	port, unused := freePorts(t)
	cmd := exec.Command(activate, "--listen=127.0.0.1:"+port, cli, "agent", "--web.systemd-socket",
		"--demo", "dgx-h100", "--state-dir=", "--web.listen-address=127.0.0.1:"+unused)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + t.TempDir()}
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}()
	client := &http.Client{Timeout: 5 * time.Second}
	var status int
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		resp, err := client.Get("http://127.0.0.1:" + port + "/healthz")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if status = resp.StatusCode; status == http.StatusOK {
				break
			}
		}
	}
	if status != http.StatusOK {
		t.Fatalf("/healthz on the passed socket: status %d\n%s", status, log.Bytes())
	}
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+unused, time.Second); err == nil {
		c.Close()
		t.Errorf("the agent also listens on --web.listen-address with --web.systemd-socket")
	}
}

// freePorts returns two distinct ports free a moment ago: both listeners
// are held until both are known.
func freePorts(t *testing.T) (string, string) {
	t.Helper()
	var ports []string
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		_, port, err := net.SplitHostPort(l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, port)
	}
	return ports[0], ports[1]
}

// The .rpm read back with rpm itself: name, version, file list with
// modes, owners and config flags, Requires, scriptlets, digests; and its
// payload (rpm2archive) holds the same files as the .deb.
func TestRPM(t *testing.T) {
	b := packages(t)
	rpmTool := needTool(t, "rpm", "rpm")
	rpm2archive := needTool(t, "rpm2archive", "rpm2cpio")
	pkg := b.res.RPM
	if got, want := filepath.Base(pkg), "gpuaffinity-"+testPkgVersion+"-1.x86_64.rpm"; got != want {
		t.Errorf("file name %s, want %s (NAME-VERSION-RELEASE.ARCH.rpm)", got, want)
	}
	q := func(args ...string) string {
		return string(run(t, rpmTool, append([]string{"-qp", pkg}, args...)...))
	}
	if got, want := q("--qf", "%{NAME} %{VERSION} %{RELEASE} %{ARCH}"), "gpuaffinity "+testPkgVersion+" 1 x86_64"; got != want {
		t.Errorf("rpm -q: %q, want %q", got, want)
	}
	// The licence: the repository's LICENSE is Apache-2.0, and the rpm
	// says so (an empty License tag before it had one).
	if got := q("--qf", "%{LICENSE}"); got != "Apache-2.0" {
		t.Errorf("rpm License %q, want Apache-2.0", got)
	}
	if lic, err := licence(repoRoot); err != nil || !strings.Contains(string(readFile(t, lic)), "Apache License\n                           Version 2.0, January 2004") {
		t.Errorf("the repository's licence %q (%v) is not the Apache License 2.0", lic, err)
	}
	if got := string(run(t, rpmTool, "-K", "--nosignature", pkg)); !strings.HasSuffix(strings.TrimSpace(got), "digests OK") {
		t.Errorf("rpm -K: %s", got)
	}

	// Requires: glibc, and the rpmlib() features rpm adds for the
	// package's format (rpm's lib/rpmds.c), nothing else.
	var requires []string
	for _, r := range strings.Split(strings.TrimSpace(q("--requires")), "\n") {
		if !strings.HasPrefix(r, "rpmlib(") {
			requires = append(requires, r)
		}
	}
	if want := []string{"glibc >= " + documentedGLIBC}; !slices.Equal(requires, want) {
		t.Errorf("Requires %q, want %q", requires, want)
	}

	// FILEFLAGS: c config, n noreplace (rpm's fflags format).
	type fileRow struct{ mode, user, group, flags string }
	got := map[string]fileRow{}
	for _, line := range strings.Split(q("--qf", "[%{FILENAMES}\t%{FILEMODES:octal}\t%{FILEUSERNAME}\t%{FILEGROUPNAME}\t%{FILEFLAGS:fflags}\n]"), "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 5 {
			t.Fatalf("rpm file line %q", line)
		}
		got[f[0]] = fileRow{f[1], f[2], f[3], f[4]}
	}
	want := map[string]fileRow{
		"/usr/libexec/gpuaffinity": {"40755", "root", "root", ""},
		"/usr/share/gpuaffinity":   {"40755", "root", "root", ""},
	}
	files := wantFiles(t, b, "rpm")
	for path, w := range files {
		flags := ""
		if path == "/etc/default/gpuaffinity" {
			flags = "cn"
		} else if strings.HasPrefix(path, "/usr/share/licenses/") {
			flags = "l"
		}
		want[path] = fileRow{fmt.Sprintf("100%o", w.mode), "root", "root", flags}
	}
	for path, w := range want {
		if g, ok := got[path]; !ok {
			t.Errorf("rpm: %s missing", path)
		} else if g != w {
			t.Errorf("rpm: %s: %+v, want %+v", path, g, w)
		}
	}
	for path := range got {
		if _, ok := want[path]; !ok {
			t.Errorf("rpm: %s: not a file the package should hold", path)
		}
	}

	// The scriptlets are the scripts, run by /bin/sh.
	for tag, file := range map[string]string{"POSTIN": "postinst", "PREUN": "prerm", "POSTUN": "postrm"} {
		if prog := q("--qf", "%{"+tag+"PROG}"); prog != "/bin/sh" {
			t.Errorf("%s interpreter %q, want /bin/sh", tag, prog)
		}
		body := q("--qf", "%{"+tag+"}")
		if strings.TrimRight(body, "\n") != strings.TrimRight(string(readFile(t, filepath.Join("scripts", file))), "\n") {
			t.Errorf("%s scriptlet differs from scripts/%s:\n%s", tag, file, body)
		}
	}
	if pre := q("--qf", "%{PREIN}"); pre != "(none)" {
		t.Errorf("a %%pre scriptlet: %q", pre)
	}

	// rpm2archive writes the payload as a gzip'ed tar; gzip -d (not Go's
	// gzip, which the race detector slows tenfold) unpacks it.
	tarball := run(t, "/bin/sh", "-c", `"$0" - < "$1" | gzip -dc`, rpm2archive, pkg)
	checkFiles(t, readTar(t, bytes.NewReader(tarball)), files)
}

// The maintainer scripts run under dash (Debian's /bin/sh) with each
// argument dpkg and rpm give them, against a systemctl that records its
// arguments. The one path that says whether systemd runs,
// /run/systemd/system (sd_booted(3)), is pointed at a directory that
// exists or not; nothing reaches the host's systemd.
func TestMaintainerScripts(t *testing.T) {
	dash := needTool(t, "dash", "dash")
	fake := t.TempDir()
	logFile := filepath.Join(fake, "log")
	if err := os.WriteFile(filepath.Join(fake, "systemctl"),
		[]byte("#!/bin/sh\nprintf '%s\\n' \"$*\" >> \""+logFile+"\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	noSystemctl := t.TempDir()
	running := t.TempDir()
	notRunning := filepath.Join(t.TempDir(), "absent")

	const (
		reload  = "daemon-reload"
		restart = "try-restart gpuaffinity.service"
		stop    = "stop gpuaffinity.socket gpuaffinity.service"
		disable = "--no-reload disable gpuaffinity.socket gpuaffinity.service"
	)
	for _, tc := range []struct {
		script    string
		args      []string
		systemd   bool
		systemctl bool
		want      []string
	}{
		// deb-postinst(5): configure with the old version on an upgrade.
		{"postinst", []string{"configure", ""}, true, true, []string{reload}},
		{"postinst", []string{"configure", "1.1.0"}, true, true, []string{reload, restart}},
		{"postinst", []string{"configure", "1.1.0"}, false, true, nil},
		{"postinst", []string{"abort-upgrade", "1.3.0"}, true, true, []string{reload}},
		// rpm %post: instances after the transaction.
		{"postinst", []string{"1"}, true, true, []string{reload}},
		{"postinst", []string{"2"}, true, true, []string{reload, restart}},
		{"postinst", []string{"2"}, false, true, nil},
		// deb-prerm(5): remove; upgrade NEW-VERSION. rpm %preun: 0 or 1.
		{"prerm", []string{"remove"}, true, true, []string{stop, disable}},
		{"prerm", []string{"remove"}, false, true, []string{disable}},
		{"prerm", []string{"remove"}, false, false, nil},
		{"prerm", []string{"upgrade", "1.3.0"}, true, true, nil},
		{"prerm", []string{"0"}, true, true, []string{stop, disable}},
		{"prerm", []string{"1"}, true, true, nil},
		// deb-postrm(5): remove, purge, upgrade; rpm %postun: 0 or 1.
		{"postrm", []string{"remove"}, true, true, []string{reload}},
		{"postrm", []string{"purge"}, true, true, []string{reload}},
		{"postrm", []string{"purge"}, false, true, nil},
		{"postrm", []string{"0"}, true, true, []string{reload}},
	} {
		name := fmt.Sprintf("%s %q systemd=%t systemctl=%t", tc.script, tc.args, tc.systemd, tc.systemctl)
		body := string(readFile(t, filepath.Join("scripts", tc.script)))
		if n := strings.Count(body, "/run/systemd/system"); n != 1 {
			t.Fatalf("scripts/%s names /run/systemd/system %d times, want once", tc.script, n)
		}
		dir := notRunning
		if tc.systemd {
			dir = running
		}
		script := filepath.Join(t.TempDir(), tc.script)
		if err := os.WriteFile(script, []byte(strings.ReplaceAll(body, "/run/systemd/system", dir)), 0o755); err != nil {
			t.Fatal(err)
		}
		os.Remove(logFile)
		path := fake
		if !tc.systemctl {
			path = noSystemctl
		}
		cmd := exec.Command(dash, append([]string{script}, tc.args...)...)
		cmd.Env = []string{"PATH=" + path}
		if out, err := cmd.CombinedOutput(); err != nil || len(out) != 0 {
			t.Errorf("%s: %v, output %q (want exit 0, silent)", name, err, out)
		}
		var got []string
		if b, err := os.ReadFile(logFile); err == nil {
			got = strings.Split(strings.TrimSpace(string(b)), "\n")
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: systemctl calls %q, want %q", name, got, tc.want)
		}
	}
	for _, s := range []string{"postinst", "prerm", "postrm"} {
		for _, sh := range []string{dash, "/bin/sh"} {
			if out, err := exec.Command(sh, "-n", filepath.Join("scripts", s)).CombinedOutput(); err != nil {
				t.Errorf("%s -n scripts/%s: %v\n%s", sh, s, err, out)
			}
		}
	}
}

// The shipped /etc/default/gpuaffinity changes nothing until edited:
// every line is a comment or blank, as both systemd (an EnvironmentFile,
// systemd.exec(5)) and the Slurm scripts (sh) read it.
func TestDefaultsCommented(t *testing.T) {
	for _, p := range []string{"systemd/gpuaffinity.default", "deploy/slurm/gpuaffinity.default"} {
		for i, line := range strings.Split(string(readFile(t, filepath.Join(repoRoot, p))), "\n") {
			if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
				t.Errorf("%s:%d: %q is a setting; the shipped file holds only comments", p, i+1, line)
			}
		}
	}
	// The agent's example, once uncommented, is what the unit reads.
	if !regexp.MustCompile(`(?m)^#GPUAFFINITY_AGENT_ARGS="--web.systemd-socket"$`).Match(readFile(t, filepath.Join(repoRoot, "systemd/gpuaffinity.default"))) {
		t.Error(`systemd/gpuaffinity.default lost the #GPUAFFINITY_AGENT_ARGS="--web.systemd-socket" example`)
	}
}

// GLIBC agrees with objdump -p (binutils), read independently of
// debug/elf, and with the figure the docs state.
func TestGLIBC(t *testing.T) {
	b := packages(t)
	objdump := needTool(t, "objdump", "binutils")
	if b.res.GLIBC != documentedGLIBC {
		t.Errorf("mkpkg: glibc %s, want %s (docs/operations.md, \"Packages\")", b.res.GLIBC, documentedGLIBC)
	}
	re := regexp.MustCompile(`\sGLIBC_([0-9.]+)\n`)
	for _, bin := range []string{b.cli, b.agent, b.fleet} {
		got, err := GLIBC(bin)
		if err != nil {
			t.Fatal(err)
		}
		var versions []string
		for _, m := range re.FindAllStringSubmatch(string(run(t, objdump, "-p", bin)), -1) {
			versions = append(versions, m[1])
		}
		sort.Slice(versions, func(i, j int) bool { return compareDotted(versions[i], versions[j]) < 0 })
		if len(versions) == 0 || got != versions[len(versions)-1] {
			t.Errorf("%s: GLIBC %q, objdump -p lists %q", filepath.Base(bin), got, versions)
		}
	}
}

// A static binary (no cgo) needs no glibc.
func TestGLIBCStatic(t *testing.T) {
	goTool := needTool(t, "go", "golang")
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "static")
	cmd := exec.Command(goTool, "build", "-o", bin, src)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GO111MODULE=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if got, err := GLIBC(bin); err != nil || got != "" {
		t.Errorf("GLIBC(static) = %q, %v; want \"\", nil", got, err)
	}
	if _, err := GLIBC(src); err == nil {
		t.Error("GLIBC of a Go source file: no error")
	}
	// The same binary marked for another machine (e_machine, offset 18 of
	// the ELF header, little-endian: EM_AARCH64 = 183) is refused: the
	// packages are amd64 and glibcLibraries are x86-64's.
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	data[18], data[19] = 183, 0
	arm := filepath.Join(dir, "arm64")
	if err := os.WriteFile(arm, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := GLIBC(arm); err == nil || !strings.Contains(err.Error(), "amd64") {
		t.Errorf("GLIBC of an arm64 binary: %v; want it refused for amd64 packages", err)
	}
}

func TestGLIBCRelease(t *testing.T) {
	for name, want := range map[string]string{
		"GLIBC_2.34":        "2.34",
		"GLIBC_2.2.5":       "2.2.5",
		"GLIBC_ABI_DT_RELR": "2.36", // glibc NEWS, 2.36
		"GCC_3.0":           "",     // libgcc_s's, not glibc's
	} {
		if got, err := glibcRelease(name); err != nil || got != want {
			t.Errorf("glibcRelease(%s) = %q, %v; want %q", name, got, err, want)
		}
	}
	for _, name := range []string{"GLIBC_PRIVATE", "GLIBC_2.x"} {
		if _, err := glibcRelease(name); err == nil {
			t.Errorf("glibcRelease(%s): no error", name)
		}
	}
	for _, tc := range []struct {
		a, b string
		want int
	}{{"2.3.2", "2.32", -1}, {"2.34", "2.32", 1}, {"2.34", "2.34", 0}, {"2.2.5", "2.2", 1}, {"2.9", "2.10", -1}} {
		if got := compareDotted(tc.a, tc.b); got != tc.want {
			t.Errorf("compareDotted(%s, %s) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestLicence(t *testing.T) {
	dir := t.TempDir()
	if got, err := licence(dir); err != nil || got != "" {
		t.Errorf("licence(empty dir) = %q, %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "COPYING"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := licence(dir); err != nil || got != filepath.Join(dir, "COPYING") {
		t.Errorf("licence(dir with COPYING) = %q, %v", got, err)
	}
}

// Build refuses binaries that are not the three it packages, each for
// its own reason (the messages Build writes), before it reads any: the
// files here are not ELF, which GLIBC would refuse otherwise.
func TestBuildRefuses(t *testing.T) {
	dir := t.TempDir()
	bin := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("x"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cli, agent, fleet := bin("gpuaffinity"), bin("gpuaffinity-agent"), bin("gpuaffinity-fleet")
	sub := filepath.Join(dir, "sub")
	if err := os.MkdirAll(filepath.Join(sub, "gpuaffinity-fleet"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Version: "1.0", CLI: cli, Agent: filepath.Join(sub, "gpuaffinity-agent"), Fleet: fleet, OutDir: dir}, "no such file"},
		{Options{Version: "1.0", CLI: cli, Agent: cli, Fleet: fleet, OutDir: dir}, "want one named gpuaffinity-agent"},
		{Options{Version: "1.0", CLI: cli, Agent: agent, OutDir: dir}, `binary "": want one named gpuaffinity-fleet`},
		{Options{Version: "1.0", CLI: cli, Agent: agent, Fleet: agent, OutDir: dir}, "want one named gpuaffinity-fleet"},
		{Options{Version: "1.0", CLI: cli, Agent: agent, Fleet: filepath.Join(sub, "gpuaffinity-fleet"), OutDir: dir}, "is not a file"},
		{Options{CLI: cli, Agent: agent, Fleet: fleet, OutDir: dir}, "no version"},
	} {
		if _, err := Build(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Build(%+v): %v, want an error saying %q", tc.o, err, tc.want)
		}
	}
	// All three named and present, they pass the checks and reach GLIBC,
	// which refuses a file that is not ELF.
	if _, err := Build(Options{Version: "1.0", CLI: cli, Agent: agent, Fleet: fleet, OutDir: dir}); err == nil ||
		!strings.Contains(err.Error(), "read "+cli) {
		t.Errorf("Build of three named non-ELF files: %v, want GLIBC's error reading %s", err, cli)
	}
}

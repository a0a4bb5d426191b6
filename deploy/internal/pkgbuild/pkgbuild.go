// Package pkgbuild builds gpuaffinity's .deb and .rpm packages with
// nFPM (github.com/goreleaser/nfpm/v2) from the three binaries `make build`
// writes and the files under systemd/, deploy/slurm/ and docs/man/.
// `make package` runs it through ./deploy/internal/pkgbuild/mkpkg.
//
// What goes where, and why, is the table in contents; docs/operations.md
// ("Packages") is the operator's view of it. The packages depend on the
// glibc the binaries need, read from the binaries themselves (GLIBC).
package pkgbuild

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/deb"
	"github.com/goreleaser/nfpm/v2/files"
	"github.com/goreleaser/nfpm/v2/rpm"
)

// The maintainer scripts, the same for both formats (each tells dpkg's
// arguments from rpm's): scripts/postinst, scripts/prerm, scripts/postrm.
var (
	//go:embed scripts/postinst
	postInst []byte
	//go:embed scripts/prerm
	preRm []byte
	//go:embed scripts/postrm
	postRm []byte
)

// Name is the package name in both formats.
const Name = "gpuaffinity"

// Where the packages put things (the Filesystem Hierarchy Standard 3.0
// and each distribution's packaging rules).
const (
	// BinDir holds the three binaries: gpuaffinity runs gpuaffinity-agent
	// (for `agent`) and gpuaffinity-fleet (for `fleet`) from beside it
	// (cmd/gpuaffinity/agent_omitted.go), and the unit's ExecStart names
	// /usr/bin/gpuaffinity.
	BinDir = "/usr/bin"
	// UnitDir is the distribution's unit directory, where package units go
	// (systemd.unit(5); /etc/systemd/system is the administrator's).
	UnitDir = "/usr/lib/systemd/system"
	// LibexecDir holds the Slurm Prolog and HealthCheckProgram: programs
	// slurmd runs, not commands for a user's PATH, which is what FHS 3.0
	// §4.7 gives /usr/libexec to (Debian Policy 9.1.1 follows FHS 3.0).
	// They lose their .sh, named as docs/slurm.md installs them (and as
	// Debian Policy 10.4 asks of scripts on a PATH).
	LibexecDir = "/usr/libexec/gpuaffinity"
	// DataDir holds gpuaffinity.nhc, which is not run but sourced by NHC
	// from /etc/nhc/scripts/ (NHC's own directory, not the package's):
	// architecture-independent data (FHS §4.11) to link or copy there.
	DataDir = "/usr/share/gpuaffinity"
	// DefaultsFile is read by the unit (EnvironmentFile=) and the Slurm
	// scripts; a conffile an upgrade leaves alone once edited.
	DefaultsFile = "/etc/default/gpuaffinity"
)

// Options says what to package.
type Options struct {
	// Version is the package version, made by Version from the
	// Makefile's VERSION.
	Version string
	// CLI, Agent and Fleet are `make build`'s bin/gpuaffinity (the
	// launch-path build, -tags omit_agent), bin/gpuaffinity-agent (the
	// daemon's build, -tags agent_only: agent and version only) and
	// bin/gpuaffinity-fleet (the untagged build, every command in
	// process, which `gpuaffinity fleet` runs).
	CLI, Agent, Fleet string
	// Source is the repository's root: systemd/, deploy/slurm/, docs/man/
	// and a licence file there are packaged.
	Source string
	// OutDir receives the packages, under nFPM's conventional names
	// (gpuaffinity_VERSION_amd64.deb, gpuaffinity-VERSION-1.x86_64.rpm).
	OutDir string
	// Maintainer is the deb's Maintainer and the rpm's Packager.
	Maintainer string
	// MTime is every file's and directory's time. Zero is nFPM's rule:
	// $SOURCE_DATE_EPOCH where set, else each file's own modification
	// time and the build's time for directories.
	MTime time.Time
}

// Result is what Build made.
type Result struct {
	// GLIBC is the lowest glibc release that runs all three binaries ("2.34"),
	// the figure in the deb's Depends and the rpm's Requires; "" for
	// static binaries, which depend on nothing.
	GLIBC string
	// Deb and RPM are the paths of the packages written.
	Deb, RPM string
}

// Build writes the .deb and the .rpm into o.OutDir.
func Build(o Options) (Result, error) {
	if o.Version == "" {
		return Result{}, errors.New("pkgbuild: no version")
	}
	for _, b := range []struct{ path, want string }{
		{o.CLI, "gpuaffinity"}, {o.Agent, "gpuaffinity-agent"}, {o.Fleet, "gpuaffinity-fleet"},
	} {
		if filepath.Base(b.path) != b.want {
			return Result{}, fmt.Errorf("pkgbuild: binary %q: want one named %s", b.path, b.want)
		}
		if fi, err := os.Stat(b.path); err != nil {
			return Result{}, fmt.Errorf("pkgbuild: %w (make build writes it)", err)
		} else if !fi.Mode().IsRegular() {
			return Result{}, fmt.Errorf("pkgbuild: %s is not a file", b.path)
		}
	}
	glibc, err := GLIBC(o.CLI, o.Agent, o.Fleet)
	if err != nil {
		return Result{}, fmt.Errorf("pkgbuild: %w", err)
	}
	stage, err := os.MkdirTemp("", "gpuaffinity-pkg-")
	if err != nil {
		return Result{}, fmt.Errorf("pkgbuild: %w", err)
	}
	defer os.RemoveAll(stage)
	common, err := contents(o, stage)
	if err != nil {
		return Result{}, fmt.Errorf("pkgbuild: %w", err)
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return Result{}, fmt.Errorf("pkgbuild: %w", err)
	}
	res := Result{GLIBC: glibc}
	for _, f := range []struct {
		name     string
		packager nfpm.Packager
		depends  string
		out      *string
	}{
		// deb-control(5): "libc6 (>= 2.34)"; rpm's spec syntax:
		// "glibc >= 2.34". glibc's package is libc6 on Debian and Ubuntu
		// (amd64), glibc on Fedora, RHEL, SUSE.
		{"deb", deb.Default, "libc6 (>= " + glibc + ")", &res.Deb},
		{"rpm", rpm.DefaultRPM, "glibc >= " + glibc, &res.RPM},
	} {
		info := packageInfo(o, stage, common)
		if glibc != "" {
			info.Depends = []string{f.depends}
		}
		path := filepath.Join(o.OutDir, f.packager.ConventionalFileName(info))
		if err := writePackage(f.packager, info, path); err != nil {
			return Result{}, fmt.Errorf("pkgbuild: %s: %w", path, err)
		}
		*f.out = path
	}
	return res, nil
}

func writePackage(p nfpm.Packager, info *nfpm.Info, path string) error {
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := p.Package(info, out); err != nil {
		out.Close()
		os.Remove(path)
		return err
	}
	return out.Close()
}

// packageInfo is one package's metadata; each format gets its own, as
// Package rewrites the contents it is given.
// License is the packages' licence, as an SPDX identifier (the rpm's
// License tag); the text is the repository's LICENSE, installed as the
// deb's copyright file and in the rpm's %license directory.
const License = "Apache-2.0"

func packageInfo(o Options, stage string, common files.Contents) *nfpm.Info {
	c := make(files.Contents, 0, len(common))
	for _, x := range common {
		cc := *x
		fi := *x.FileInfo
		cc.FileInfo = &fi
		c = append(c, &cc)
	}
	maintainer := o.Maintainer
	if maintainer == "" {
		maintainer = "gpuaffinity maintainers <https://github.com/gpuaffinity/gpuaffinity/issues>"
	}
	return nfpm.WithDefaults(&nfpm.Info{
		Name:     Name,
		Arch:     "amd64",
		Platform: "linux",
		Version:  o.Version,
		// Version is already in both formats' syntax (Version); nFPM's
		// semver parsing would turn 1.2.0+git3.abc into 1.2.0~... pieces.
		VersionSchema: "none",
		Section:       "admin",
		Priority:      "optional",
		Maintainer:    maintainer,
		License:       License,
		Homepage:      "https://github.com/gpuaffinity/gpuaffinity",
		Description: `GPU/NIC topology, NCCL environment and health gate for GPU servers
gpuaffinity reads a node's GPUs, NICs, NUMA nodes and their PCIe and
NVLink paths, and turns them into what launchers need: CPU and NIC
bindings per rank, NCCL environment and topology files, Slurm gres.conf
lines. gpuaffinity check gates a node's health for Slurm (Prolog,
HealthCheckProgram, NHC); gpuaffinity agent (gpuaffinity.service) keeps
the files current under /run/gpuaffinity and exports Prometheus metrics
on port 19400.`,
		MTime: o.MTime,
		Overridables: nfpm.Overridables{
			Contents: c,
			Scripts: nfpm.Scripts{
				PostInstall: filepath.Join(stage, "scripts", "postinst"),
				PreRemove:   filepath.Join(stage, "scripts", "prerm"),
				PostRemove:  filepath.Join(stage, "scripts", "postrm"),
			},
			RPM: nfpm.RPM{Group: "System Environment/Daemons"},
		},
	})
}

// file is one packaged file: where it comes from, where it goes, its
// mode, and its nFPM type ("" a plain file).
type file struct {
	src, dst string
	mode     fs.FileMode
	typ      string
	packager string // "" both formats, else "deb" or "rpm"
}

// contents stages what is generated (maintainer scripts, the defaults
// file, compressed man pages, completions) under stage and returns every
// file of both packages; all are owned by root.
func contents(o Options, stage string) (files.Contents, error) {
	src := func(p ...string) string { return filepath.Join(append([]string{o.Source}, p...)...) }
	put := func(rel string, data []byte) (string, error) {
		p := filepath.Join(stage, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		return p, os.WriteFile(p, data, 0o644)
	}
	for name, body := range map[string][]byte{"postinst": postInst, "prerm": preRm, "postrm": postRm} {
		if _, err := put(filepath.Join("scripts", name), body); err != nil {
			return nil, err
		}
	}

	fl := []file{
		{o.CLI, BinDir + "/gpuaffinity", 0o755, "", ""},
		{o.Agent, BinDir + "/gpuaffinity-agent", 0o755, "", ""},
		{o.Fleet, BinDir + "/gpuaffinity-fleet", 0o755, "", ""},
		{src("systemd", "gpuaffinity.service"), UnitDir + "/gpuaffinity.service", 0o644, "", ""},
		{src("systemd", "gpuaffinity.socket"), UnitDir + "/gpuaffinity.socket", 0o644, "", ""},
		{src("deploy", "slurm", "gpuaffinity-prolog.sh"), LibexecDir + "/gpuaffinity-prolog", 0o755, "", ""},
		{src("deploy", "slurm", "gpuaffinity-healthcheck.sh"), LibexecDir + "/gpuaffinity-healthcheck", 0o755, "", ""},
		{src("deploy", "slurm", "gpuaffinity.nhc"), DataDir + "/gpuaffinity.nhc", 0o644, "", ""},
	}

	// /etc/default/gpuaffinity: the agent's part, then the Slurm scripts'.
	var defaults []byte
	for _, p := range []string{src("systemd", "gpuaffinity.default"), src("deploy", "slurm", "gpuaffinity.default")} {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		defaults = append(defaults, b...)
	}
	p, err := put("gpuaffinity.default", defaults)
	if err != nil {
		return nil, err
	}
	fl = append(fl, file{p, DefaultsFile, 0o644, files.TypeConfigNoReplace, ""})

	// Man pages, gzip -9 without a name or time in the header (Debian
	// Policy 12.1; Fedora's brp-compress does the same for rpms).
	pages, err := filepath.Glob(src("docs", "man", "*.1"))
	if err != nil {
		return nil, err
	}
	if len(pages) == 0 {
		return nil, fmt.Errorf("no man pages in %s", src("docs", "man"))
	}
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			return nil, err
		}
		z, err := gzipBytes(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", page, err)
		}
		name := filepath.Base(page) + ".gz"
		p, err := put(filepath.Join("man", name), z)
		if err != nil {
			return nil, err
		}
		fl = append(fl, file{p, "/usr/share/man/man1/" + name, 0o644, "", ""})
	}

	// Completions from the binary itself, into the directories each shell
	// loads them from without configuration: bash-completion's
	// completions dir (both), zsh's vendor-completions (Debian's zsh) or
	// site-functions (Fedora's), fish's vendor_completions.d (both).
	for _, c := range []struct{ shell, rel, dst, packager string }{
		{"bash", "gpuaffinity.bash", "/usr/share/bash-completion/completions/gpuaffinity", ""},
		{"zsh", "_gpuaffinity", "/usr/share/zsh/vendor-completions/_gpuaffinity", "deb"},
		{"zsh", "_gpuaffinity", "/usr/share/zsh/site-functions/_gpuaffinity", "rpm"},
		{"fish", "gpuaffinity.fish", "/usr/share/fish/vendor_completions.d/gpuaffinity.fish", ""},
	} {
		script, err := completion(o.CLI, c.shell)
		if err != nil {
			return nil, err
		}
		p, err := put(filepath.Join("completion", c.rel), script)
		if err != nil {
			return nil, err
		}
		fl = append(fl, file{p, c.dst, 0o644, "", c.packager})
	}

	// The licence, where the repository has one: Debian's place and
	// name (Policy 12.5), rpm's %license directory.
	if lic, err := licence(o.Source); err != nil {
		return nil, err
	} else if lic != "" {
		fl = append(fl,
			file{lic, "/usr/share/doc/gpuaffinity/copyright", 0o644, "", "deb"},
			file{lic, "/usr/share/licenses/gpuaffinity/" + filepath.Base(lic), 0o644, files.TypeRPMLicense, "rpm"})
	}

	var out files.Contents
	for _, f := range fl {
		out = append(out, &files.Content{
			Source: f.src, Destination: f.dst, Type: f.typ, Packager: f.packager,
			FileInfo: &files.ContentFileInfo{Owner: "root", Group: "root", Mode: f.mode, MTime: o.MTime},
		})
	}
	// Directories only this package puts files in, owned so that rpm
	// removes them with it (dpkg tracks every directory itself).
	for _, d := range []string{LibexecDir, DataDir} {
		out = append(out, &files.Content{
			Destination: d, Type: files.TypeDir, Packager: "rpm",
			FileInfo: &files.ContentFileInfo{Owner: "root", Group: "root", Mode: 0o755, MTime: o.MTime},
		})
	}
	sort.Sort(out)
	return out, nil
}

// licenceNames are the files a licence is looked for in, in order.
var licenceNames = []string{"LICENSE", "LICENSE.md", "LICENSE.txt", "COPYING", "LICENCE"}

// licence returns the repository's licence file, or "" when it has none.
func licence(source string) (string, error) {
	for _, n := range licenceNames {
		p := filepath.Join(source, n)
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		if fi.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", nil
}

// completion runs `gpuaffinity completion SHELL` (cobra's generator),
// with an empty environment so that nothing of the builder's leaks in.
func completion(cli, shell string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(cli, "completion", shell)
	cmd.Env = []string{}
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s completion %s: %w: %s", cli, shell, err, strings.TrimSpace(stderr.String()))
	}
	if stdout.Len() == 0 {
		return nil, fmt.Errorf("%s completion %s: no output", cli, shell)
	}
	return stdout.Bytes(), nil
}

func gzipBytes(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	z, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := z.Write(b); err != nil {
		return nil, err
	}
	if err := z.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

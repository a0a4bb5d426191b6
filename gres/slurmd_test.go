package gres

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/testenv"
)

// slurmdLayout is a fixture's CPU layout for slurm.conf, written by hand
// from the fixture spec (not this machine's, not our discovery's).
type slurmdLayout struct {
	host                                    string
	sockets, coresPerSocket, threadsPerCore int
}

var slurmdMachines = map[string]slurmdLayout{
	"dgx-h100":         {"dgx-h100-01", 2, 56, 2},
	"dgx-b200":         {"dgx-b200-01", 2, 56, 2},
	"azure-nd-h100-v5": {"ndv5-vm-0", 2, 48, 1}, // SMT off
	"aws-p5":           {"ip-10-1-33-207", 2, 48, 2},
	"grace-hopper":     {"gh200-01", 1, 72, 1},
	"gb200-nvl72-tray": {"gb200-r01-ct04", 2, 72, 1},
	"h200-vm":          {"h200-vm", 1, 16, 1},
	// AMD: File=/dev/dri/renderD<N>, Links= from XGMI.
	"amd-mi300x": {"mi300x-01", 2, 96, 2},
	"amd-mi355x": {"mi355x-01", 2, 64, 2},
	// CPX: 64 lines, one per partition's render node, no Links= (one
	// warning says why).
	"amd-mi300x-cpx": {"mi300x-01", 2, 96, 2},
}

// requireSlurmd returns slurmd's path, or skips the test (fails it where
// env CI is set: the CI installs slurmd and runs as root).
func requireSlurmd(t *testing.T) string {
	t.Helper()
	why := ""
	path, err := exec.LookPath("slurmd")
	if err != nil {
		for _, p := range []string{"/usr/sbin/slurmd", "/usr/local/sbin/slurmd"} {
			if _, err2 := os.Stat(p); err2 == nil {
				path, err = p, nil
				break
			}
		}
	}
	switch {
	case err != nil:
		why = "slurmd not installed (Debian/Ubuntu: apt-get install slurmd)"
	case os.Geteuid() != 0:
		why = "not root: the stand-in device nodes need mknod"
	}
	if why != "" {
		if testenv.InCI() {
			t.Fatalf("CI is set but slurmd cannot run: %s", why)
		}
		t.Skip(why)
	}
	return path
}

// gresLine matches what slurmd -G logs per GRES device (Slurm 22.05's
// print_gres_conf: "Gres Name=gpu Type=h100 Count=1 Index=0 ID=7696487
// File=/dev/nvidia0 Cores=0-55 CoreCnt=224 Links=-1,18,..."; glibc's
// "(null)" in place of Links= where a line has none).
var gresLine = regexp.MustCompile(`Gres Name=(\S+) Type=(\S*) Count=(\d+) Index=(-?\d+) ID=\d+ File=(\S+)(?: Cores=(\S+) CoreCnt=(\d+))?(?: Links=(\S+)| \(null\))?\s*$`)

// TestSlurmdAcceptsGresConf has the real slurmd parse our gres.conf for a
// fixture (slurmd -G: print the GRES configuration and exit) and checks
// that it reports every GPU with the expected File, Type, Cores and Links
// and no error: Slurm converts Cores= through its core-index map of the
// configured layout and fails those that do not fit it (OS CPU ids on an
// SMT machine, say).
func TestSlurmdAcceptsGresConf(t *testing.T) {
	slurmd := requireSlurmd(t)
	for machine, lay := range slurmdMachines {
		t.Run(machine, func(t *testing.T) {
			n := node(t, machine)
			dir := t.TempDir()
			devDir := filepath.Join(dir, "dev")
			for _, d := range []string{devDir, filepath.Join(dir, "spool"), filepath.Join(dir, "state")} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			lines, warns, err := GresConf(n, Options{DevDir: devDir})
			if err != nil {
				t.Fatal(err)
			}
			if len(warns) != 0 && !(machine == "amd-mi300x-cpx" && len(warns) == 1 && strings.Contains(warns[0], "compute partitions")) {
				t.Errorf("warnings: %q", warns)
			}
			// slurmd stats File= and wants a character or block device:
			// stand-ins with /dev/null's numbers (1:3), in a private
			// directory; no real /dev entry is made or touched.
			for _, l := range lines {
				if err := os.MkdirAll(filepath.Dir(l.File), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := unix.Mknod(l.File, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))); err != nil {
					t.Fatalf("mknod %s: %v", l.File, err)
				}
			}
			var gres bytes.Buffer
			if err := Write(&gres, lines); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "gres.conf"), gres.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			conf := slurmConf(dir, lay, lines[0].Type, len(lines))
			if err := os.WriteFile(filepath.Join(dir, "slurm.conf"), []byte(conf), 0o644); err != nil {
				t.Fatal(err)
			}

			out := runSlurmd(t, slurmd, dir, lay.host)
			t.Logf("gres.conf:\n%sslurmd -G:\n%s", gres.String(), out)

			got := map[string][]string{}
			for _, ln := range strings.Split(string(out), "\n") {
				if strings.Contains(ln, "error:") || strings.Contains(ln, "fatal:") {
					t.Errorf("slurmd: %s", ln)
				}
				if m := gresLine.FindStringSubmatch(ln); m != nil {
					got[m[5]] = m[1:]
				}
			}
			cpus := lay.sockets * lay.coresPerSocket * lay.threadsPerCore
			for _, l := range lines {
				m, ok := got[l.File]
				if !ok {
					t.Errorf("slurmd printed no GRES for %s", l.File)
					continue
				}
				want := []string{"gpu", l.Type, "1", strings.TrimLeft(filepath.Base(l.File), "nvidiarenD"), l.File,
					l.Cores.String(), fmt.Sprint(cpus), linksString(l.Links)}
				if strings.Join(m, " ") != strings.Join(want, " ") {
					t.Errorf("slurmd: %q\nwant      %q", m, want)
				}
			}
			if len(got) != len(lines) {
				t.Errorf("slurmd printed %d GRES, want %d", len(got), len(lines))
			}
		})
	}
}

// TestSlurmdRejectsCPUIDs is the control: the same check sees the error
// when Cores= holds OS CPU ids (0-55,112-167 on the SMT DGX H100) rather
// than core indices, so the check above has teeth.
func TestSlurmdRejectsCPUIDs(t *testing.T) {
	slurmd := requireSlurmd(t)
	lay := slurmdMachines["dgx-h100"]
	dir := t.TempDir()
	dev := filepath.Join(dir, "nvidia0")
	if err := unix.Mknod(dev, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatalf("mknod %s: %v", dev, err)
	}
	for _, d := range []string{"spool", "state"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	gres := "AutoDetect=off\nName=gpu Type=h100 File=" + dev + " Cores=0-55,112-167\n"
	if err := os.WriteFile(filepath.Join(dir, "gres.conf"), []byte(gres), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "slurm.conf"), []byte(slurmConf(dir, lay, "h100", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out := runSlurmd(t, slurmd, dir, lay.host)
	if !strings.Contains(out, "error: Invalid GRES data for gpu, Cores=0-55,112-167") {
		t.Errorf("slurmd accepted CPU ids as Cores=:\n%s", out)
	}
}

// runSlurmd runs slurmd -G on dir/slurm.conf (gres.conf beside it) as
// node host and returns what it printed (it logs to stderr).
func runSlurmd(t *testing.T, slurmd, dir, host string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conf := filepath.Join(dir, "slurm.conf")
	cmd := exec.CommandContext(ctx, slurmd, "-G", "-f", conf, "-N", host)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SLURM_CONF="+conf)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("slurmd -G: %v\n%s", err, out)
	}
	return string(out)
}

func linksString(l []int) string {
	s := make([]string, len(l))
	for i, v := range l {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, ",")
}

// slurmConf is the least slurm.conf slurmd -G reads: the fixture's layout
// with SlurmdParameters=config_overrides, without which slurmd maps
// Cores= through this machine's own hwloc topology and rejects the
// fixture's core indices.
func slurmConf(dir string, lay slurmdLayout, typ string, gpus int) string {
	return fmt.Sprintf(`ClusterName=gpuaffinitytest
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
SlurmdSpoolDir=%[1]s/spool
StateSaveLocation=%[1]s/state
SlurmdPidFile=%[1]s/slurmd.pid
SlurmdLogFile=%[1]s/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
GresTypes=gpu
SlurmdParameters=config_overrides
NodeName=%[2]s NodeHostname=localhost CPUs=%[3]d Sockets=%[4]d CoresPerSocket=%[5]d ThreadsPerCore=%[6]d RealMemory=1024 Gres=gpu:%[7]s:%[8]d
PartitionName=test Nodes=%[2]s Default=YES State=UP
`, dir, lay.host, lay.sockets*lay.coresPerSocket*lay.threadsPerCore, lay.sockets, lay.coresPerSocket, lay.threadsPerCore, typ, gpus)
}

package discover

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/nvml"
	"github.com/gpuaffinity/gpuaffinity/pci"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// The NVIDIA driver's own files (open-gpu-kernel-modules
// kernel-open/nvidia/nv-procfs.c), read where NVML is absent.
const (
	procDriverVersion = "proc/driver/nvidia/version" // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  <date>"
	sysModuleVersion  = "sys/module/nvidia/version"  // "550.54.15"
	procGPUs          = "proc/driver/nvidia/gpus"    // <bus id>/information
)

// maxProcFile bounds the driver's procfs files (a few hundred bytes).
const maxProcFile = 64 << 10

var driverVersionRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?:^|\s)(\d{3,4}\.\d{1,3}(?:\.\d{1,3})?)(?:\s|$)`) })

// driverInfo is the NVIDIA driver's version: NVML's answer, else the
// version procfs prints, else the module's sysfs version.
func driverInfo(root *rootfs.Root, res nvml.Result, warn func(...error)) topology.DriverInfo {
	if res.Available && res.DriverVersion != "" {
		return topology.DriverInfo{Version: res.DriverVersion, Source: "nvml"}
	}
	if b, err := root.ReadFile(procDriverVersion, maxProcFile); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		if m := driverVersionRE().FindStringSubmatch(line); m != nil {
			return topology.DriverInfo{Version: m[1], Source: "/" + procDriverVersion}
		}
		warn(fmt.Errorf("%s: no driver version in %q", "/"+procDriverVersion, line))
	} else if !errors.Is(err, fs.ErrNotExist) {
		warn(fmt.Errorf("read /%s: %w", procDriverVersion, err))
	}
	if v, err := root.String(sysModuleVersion); err == nil {
		if m := driverVersionRE().FindStringSubmatch(v); m != nil {
			return topology.DriverInfo{Version: m[1], Source: "/" + sysModuleVersion}
		}
		warn(fmt.Errorf("%s: %q is not a driver version", "/"+sysModuleVersion, v))
	} else if !errors.Is(err, fs.ErrNotExist) {
		warn(fmt.Errorf("read /%s: %w", sysModuleVersion, err))
	}
	return topology.DriverInfo{}
}

// fillFromProcfs gives GPUs that NVML did not describe their model, UUID
// and minor number from /proc/driver/nvidia/gpus/<bus id>/information.
func fillFromProcfs(root *rootfs.Root, gs []topology.GPU, warn func(...error)) {
	for i := range gs {
		g := &gs[i]
		if g.Model != "" || g.Minor != nil {
			if g.InfoSource == "" {
				g.InfoSource = "nvml"
			}
			continue
		}
		rel := path.Join(procGPUs, g.BusID, "information")
		b, err := root.ReadFile(rel, maxProcFile)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			warn(fmt.Errorf("GPU %s: read /%s: %w", g.BusID, rel, err))
			continue
		}
		for line := range strings.Lines(string(b)) {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			v = strings.TrimSpace(v)
			switch strings.TrimSpace(k) {
			case "Model":
				g.Model = v
			case "GPU UUID":
				if g.UUID == "" {
					g.UUID = v
				}
			case "Device Minor":
				if m, err := strconv.Atoi(v); err == nil && m >= 0 && m < 1<<20 {
					g.Minor = &m
				} else {
					warn(fmt.Errorf("GPU %s: /%s: Device Minor %q is not a number", g.BusID, rel, v))
				}
			}
		}
		if g.Model != "" || g.Minor != nil {
			g.InfoSource = "procfs"
		}
	}
}

// acceleratorNames are the PCI ids of accelerators known by name
// (pci.ids; ROCm system-acceptance-docs topology-mapping.md).
var acceleratorNames = map[string]string{
	"0x1002:0x74a0": "AMD Instinct MI300A",
	"0x1002:0x74a1": "AMD Instinct MI300X",
	"0x1002:0x74a2": "AMD Instinct MI308X",
	"0x1002:0x74a5": "AMD Instinct MI325X",
	"0x1002:0x74b5": "AMD Instinct MI300X VF",
	"0x1002:0x75a0": "AMD Instinct MI350X",
	"0x1002:0x75a3": "AMD Instinct MI355X",
	"0x1002:0x740c": "AMD Instinct MI250X/MI250",
	"0x1002:0x740f": "AMD Instinct MI210",
	"0x1da3:0x1000": "Intel Gaudi",
	"0x1da3:0x1020": "Intel Gaudi 2",
}

// isUnsupportedAccelerator: a processing accelerator (class 0x12), or a
// 3D / other display controller (0x0302, 0x0380) of a vendor other than
// NVIDIA. VGA controllers (0x0300) are left out: every server's BMC has
// one.
func isUnsupportedAccelerator(d *pci.Device) bool {
	if isGPU(d) || isAMDGPU(d) {
		return false
	}
	sub := d.Class >> 8
	return d.Class>>16 == 0x12 || (d.Vendor != 0x10de && (sub == 0x0302 || sub == 0x0380))
}

func unsupported(devs []pci.Device) []topology.Accelerator {
	out := []topology.Accelerator{}
	for i := range devs {
		d := &devs[i]
		if !isUnsupportedAccelerator(d) {
			continue
		}
		a := topology.Accelerator{BusID: d.Address.String(), Vendor: fmt.Sprintf("0x%04x", d.Vendor),
			Device: fmt.Sprintf("0x%04x", d.DeviceID), Class: fmt.Sprintf("0x%06x", d.Class),
			Driver: d.Driver, NUMANode: d.NUMANode}
		a.Name = acceleratorNames[a.Vendor+":"+a.Device]
		out = append(out, a)
	}
	return out
}

// netPluginMarks are the files whose presence says an NCCL network plugin
// is installed: Google's gIB images install set_nccl_env.sh beside the
// plugin in /usr/local/gib (cluster-toolkit a3-ultragpu-8g run scripts
// source it).
var netPluginMarks = []struct{ name, path string }{
	{"gIB", "usr/local/gib/scripts/set_nccl_env.sh"},
}

func netPlugins(root *rootfs.Root) []string {
	out := []string{}
	for _, m := range netPluginMarks {
		if fi, err := root.Stat(m.path); err == nil && fi.Mode().IsRegular() {
			out = append(out, m.name)
		}
	}
	return out
}

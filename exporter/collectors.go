package exporter

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// The collectors Options.Collectors and RegisterCollectorFlags switch, as
// node_exporter switches its own. All are enabled by default.
const (
	// CollectorNVML renders the GPUs read from NVML at scrape time:
	// gpuaffinity_nvml_up and gpuaffinity_gpu_* (but the XID series,
	// which the agent's event watch counts).
	CollectorNVML = "nvml"
	// CollectorNVLink renders the GPUs' NVLinks read from NVML at scrape
	// time: gpuaffinity_nvlink_*. It is part of the nvml collector's read;
	// on its own (nvml disabled) it runs as a collector named nvlink.
	CollectorNVLink = "nvlink"
	// CollectorAMDGPU renders the AMD Instinct GPUs (which have no NVML):
	// their RAS error counts, PCIe replay count and link, read from
	// amdgpu's sysfs at scrape time, and their XGMI links and KFD
	// description from the last discovery: gpu_info, gpu_amd_*,
	// gpu_ras_errors_total, gpu_xgmi_* and the gpu_pcie_* families for
	// those GPUs. It runs only where the last discovery has an AMD GPU.
	CollectorAMDGPU = "amdgpu"
	// CollectorRDMA renders the RDMA ports read from sysfs at scrape time:
	// gpuaffinity_rdma_*.
	CollectorRDMA = "rdma"
	// CollectorTopology renders the last good discovery's GPU to NIC
	// pairing, NVLink domains and IMEX state: gpuaffinity_topology_*.
	CollectorTopology = "topology"
	// CollectorStorage renders the last good discovery's storage layer:
	// NVMe controllers, each GPU's nearest NVMe and storage NICs, what the
	// node offers GPUDirect Storage and the mounts it serves:
	// gpuaffinity_storage_*.
	CollectorStorage = "storage"
)

// collectorHelp describes each collector for its flag.
var collectorHelp = []struct{ name, help string }{
	{CollectorNVML, "GPUs read from NVML at scrape time (gpuaffinity_gpu_*, gpuaffinity_nvml_up)"},
	{CollectorNVLink, "NVLink state and error counters read from NVML at scrape time (gpuaffinity_nvlink_*)"},
	{CollectorAMDGPU, "AMD GPUs read from amdgpu sysfs at scrape time: RAS, PCIe, XGMI links (gpuaffinity_gpu_* of AMD GPUs)"},
	{CollectorRDMA, "RDMA port state and counters read from sysfs at scrape time (gpuaffinity_rdma_*)"},
	{CollectorTopology, "the last discovery's GPU to NIC pairing, NVLink domains and IMEX (gpuaffinity_topology_*)"},
	{CollectorStorage, "the last discovery's NVMe, GPU to storage pairing and GPUDirect Storage state (gpuaffinity_storage_*)"},
}

// CollectorNames returns the names of the collectors that can be switched
// off (Options.Collectors, RegisterCollectorFlags).
func CollectorNames() []string {
	out := make([]string, len(collectorHelp))
	for i, c := range collectorHelp {
		out[i] = c.name
	}
	return out
}

// enabledCollectors resolves Options.Collectors: every name's switch, true
// unless the map says false. A name that is no collector is an error.
func enabledCollectors(m map[string]bool) (map[string]bool, error) {
	names := CollectorNames()
	var unknown []string
	for n := range m {
		if !slices.Contains(names, n) {
			unknown = append(unknown, strconv.Quote(n))
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, fmt.Errorf("exporter: unknown collector %s (collectors: %s)", strings.Join(unknown, ", "), strings.Join(names, ", "))
	}
	out := make(map[string]bool, len(names))
	for _, n := range names {
		on, set := m[n]
		out[n] = on || !set
	}
	return out, nil
}

// CollectorFlags are the collector switches of a command line, in
// node_exporter's style: --collector.NAME and --no-collector.NAME for each
// collector of CollectorNames, and --collector.disable-defaults. Where a
// collector is switched more than once, the last switch wins.
type CollectorFlags struct {
	disableDefaults bool
	set             map[string]bool // the collectors switched on the command line
}

// RegisterCollectorFlags registers the collector switches on fs and
// returns them; after fs.Parse, Collectors gives Options.Collectors:
//
//	--collector.NAME              enable the collector (the default)
//	--no-collector.NAME           disable it (same as --collector.NAME=false)
//	--collector.disable-defaults  disable every collector not enabled by
//	                              its --collector.NAME
//
// The --no-collector.NAME flags are hidden from the usage; each
// --collector.NAME's usage names it.
func RegisterCollectorFlags(fs *pflag.FlagSet) *CollectorFlags {
	f := &CollectorFlags{set: map[string]bool{}}
	fs.BoolVar(&f.disableDefaults, "collector.disable-defaults", false,
		"Disable every collector by default; enable the wanted ones with --collector.NAME")
	for _, c := range collectorHelp {
		on := fs.VarPF(collectorSwitch{f, c.name, true}, "collector."+c.name, "",
			fmt.Sprintf("Enable the %s collector: %s (--no-collector.%s disables it)", c.name, c.help, c.name))
		on.NoOptDefVal = "true"
		off := fs.VarPF(collectorSwitch{f, c.name, false}, "no-collector."+c.name, "",
			fmt.Sprintf("Disable the %s collector", c.name))
		off.NoOptDefVal = "true"
		// Only an error for a flag that does not exist.
		_ = fs.MarkHidden(off.Name)
	}
	return f
}

// Collectors returns the switches the command line asked for, for
// Options.Collectors: every collector of CollectorNames, true when it is
// enabled.
func (f *CollectorFlags) Collectors() map[string]bool {
	out := make(map[string]bool, len(collectorHelp))
	for _, c := range collectorHelp {
		on, set := f.set[c.name]
		if !set {
			on = !f.disableDefaults
		}
		out[c.name] = on
	}
	return out
}

// collectorSwitch is the pflag.Value of --collector.NAME (enable true)
// and --no-collector.NAME (enable false): both write the one switch.
type collectorSwitch struct {
	f      *CollectorFlags
	name   string
	enable bool
}

func (s collectorSwitch) Set(v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return err
	}
	s.f.set[s.name] = b == s.enable
	return nil
}

// String is the flag's value: as switched on the command line, else its
// default (true for --collector.NAME, false for --no-collector.NAME).
func (s collectorSwitch) String() string {
	on, set := s.f.set[s.name]
	if !set {
		return strconv.FormatBool(s.enable)
	}
	return strconv.FormatBool(on == s.enable)
}

// Type says "bool", so the usage shows no value for the switch.
func (s collectorSwitch) Type() string { return "bool" }

// IsBoolFlag makes the switch a boolean flag where pflag hands it to the
// standard flag package.
func (s collectorSwitch) IsBoolFlag() bool { return true }

package nvml

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuaffinity/gpuaffinity/pci"
)

// Result is what Read gathered from NVML, as plain data.
type Result struct {
	// Available is true when Init and DeviceGetCount succeeded.
	Available bool
	// Err says why NVML is not available. It wraps ErrLibraryNotFound or
	// ErrUnavailable, and the failed nvml.Return where there was one.
	Err               error
	DriverVersion     string // SystemGetDriverVersion, "580.159.04"
	NVMLVersion       string // SystemGetNVMLVersion, "13.580.159.04"
	CUDADriverVersion int    // SystemGetCudaDriverVersion, 13000 for 13.0
	GPUs              []GPU  // in NVML index order
	// Warnings lists every call that failed other than with
	// ERROR_NOT_SUPPORTED, naming the GPU (index and bus id) and the call.
	Warnings []string
}

// GPU states.
const (
	StateOK    = "ok"
	StateLost  = "lost"  // a call answered ERROR_GPU_IS_LOST
	StateError = "error" // DeviceGetHandleByIndex, GetPciInfo, GetUUID or GetName failed
)

// GPU is one GPU as NVML reports it. Zero values and nil mean NVML did not
// say: the call failed or answered ERROR_NOT_SUPPORTED.
type GPU struct {
	Index int    // NVML index
	BusID string // GetPciInfo, sysfs form "0000:18:00.0"
	State string // StateOK, StateLost or StateError
	Err   string // the call that made State not ok, and its answer
	UUID  string // GetUUID
	Name  string // GetName, "NVIDIA H200"
	Minor *int   // GetMinorNumber (/dev/nvidiaN)
	// NUMANode is GetNumaNodeId: set only where the GPU's memory is a NUMA
	// node of its own (coherent Grace platforms); nil elsewhere.
	NUMANode     *int
	CPUAffinity  []int // GetCpuAffinity, CPU numbers in ascending order
	PCIeGen      int   // GetCurrPcieLinkGeneration
	PCIeMaxGen   int   // GetMaxPcieLinkGeneration
	PCIeWidth    int   // GetCurrPcieLinkWidth
	PCIeMaxWidth int   // GetMaxPcieLinkWidth
	// NVLinkVisible is true when GetNvLinkState succeeded for some link;
	// false where every link answers NOT_SUPPORTED (VMs, PCIe cards).
	NVLinkVisible bool
	// NVLinks lists the links whose GetNvLinkState succeeded.
	NVLinks []NVLink
	// Health holds the health calls' answers.
	Health Health
	// Fabric is the GPU's NVLink fabric registration; nil outside a fabric.
	Fabric *Fabric
	// Platform is the GPU's rack position (Blackwell and newer); nil
	// where NVML does not say. Not read with ForScrape.
	Platform *Platform
}

// Health is what NVML says of a GPU's health. A nil field means NVML did
// not say: the call answered ERROR_NOT_SUPPORTED or failed (a failure is
// also a warning). Its fields match topology.GPUHealth's one for one.
type Health struct {
	Persistence *bool // GetPersistenceMode is FEATURE_ENABLED
	// GetTotalEccErrors(MEMORY_ERROR_TYPE_UNCORRECTED, VOLATILE_ECC / AGGREGATE_ECC).
	ECCUncorrectedVolatile  *uint64
	ECCUncorrectedAggregate *uint64
	// GetRemappedRows: corrRows, uncRows, isPending, failureOccurred.
	RemappedRowsCorrectable   *int
	RemappedRowsUncorrectable *int
	RemapPending              *bool
	RemapFailure              *bool
	// RetiredPages counts GetRetiredPages' pages of both causes; nil when
	// either cause fails.
	RetiredPages        *int
	RetiredPagesPending *bool // GetRetiredPagesPendingStatus is FEATURE_ENABLED
	// GetGpuFabricInfo's State (1 not started, 2 in progress, 3 completed)
	// and Status (an nvml.Return, set only once State is completed). Both
	// are nil where State is GPU_FABRIC_STATE_NOT_SUPPORTED (0), as on
	// GPUs outside an NVSwitch fabric.
	FabricState  *int
	FabricStatus *int
	// RecoveryAction is GetFieldValues' FI_DEV_GET_GPU_RECOVERY_ACTION.
	RecoveryAction *int
	PCIeReplay     *uint64 // GetPcieReplayCounter
}

// NVLink remote types.
const (
	RemoteGPU      = "gpu"
	RemoteNVSwitch = "nvswitch"
	RemoteOther    = "other" // IBM NPU or a type this package does not know
)

// NVLink is one link of a GPU. Version and the remote end are read only for
// an active link, and not with ForScrape; the error counters for every link listed, active or not
// (a link that went down keeps the counts that took it down).
type NVLink struct {
	Link        int
	Active      bool   // GetNvLinkState is FEATURE_ENABLED
	Version     int    // GetNvLinkVersion; 0 unknown
	RemoteBusID string // GetNvLinkRemotePciInfo, sysfs form; an NVSwitch's own on NVSwitch systems
	RemoteType  string // GetNvLinkRemoteDeviceType: RemoteGPU, RemoteNVSwitch, RemoteOther; "" unknown
	// Error counters, GetNvLinkErrorCounter(link, counter): counts since
	// the driver loaded or the counters were last reset. nil when the call
	// answered ERROR_NOT_SUPPORTED or failed (a failure is also a warning).
	CRCFlitErrors  *uint64 // NVLINK_ERROR_DL_CRC_FLIT: data link receive flow control digit CRC errors
	CRCDataErrors  *uint64 // NVLINK_ERROR_DL_CRC_DATA: data link receive data CRC errors
	ReplayErrors   *uint64 // NVLINK_ERROR_DL_REPLAY: data link transmit replays
	RecoveryErrors *uint64 // NVLINK_ERROR_DL_RECOVERY: data link transmit recoveries
}

// minAffinityCPUs is the fewest CPUs GetCpuAffinity is asked about.
const minAffinityCPUs = 1024

// affinityCPUs is the numCPUs argument for GetCpuAffinity. go-nvml turns it
// into (numCPUs-1)/8+1 words of 64 CPUs each (it divides by the word's
// size in bytes), so asking for n CPUs covers at least n, also if go-nvml
// ever divides by 64.
func affinityCPUs() int { return max(runtime.NumCPU(), minAffinityCPUs) }

// ReadOption changes what Read asks NVML.
type ReadOption func(*readOptions)

type readOptions struct {
	skipDiscovery bool // ForScrape
	// symbols holds the newer entry points the library has
	// (symFabricInfoV4, symPlatformInfo), asked once per Read.
	symbols map[string]bool
}

// has says whether the library has the NVML entry point sym.
func (o readOptions) has(sym string) bool { return o.symbols[sym] }

// lookupSymbols asks lib's symbol table for each of syms; a library
// without one (a mock) has none of them.
func lookupSymbols(lib nvml.Interface, syms ...string) map[string]bool {
	out := map[string]bool{}
	ext := lib.Extensions()
	if ext == nil {
		return out
	}
	for _, s := range syms {
		out[s] = ext.LookupSymbol(s) == nil
	}
	return out
}

// ForScrape makes Read skip the calls whose answers only discovery uses,
// for a metrics scrape that runs often: SystemGetDriverVersion,
// SystemGetNVMLVersion, SystemGetCudaDriverVersion, GetMinorNumber,
// GetNumaNodeId, GetCpuAffinity, GetPersistenceMode, and an active link's
// GetNvLinkVersion, GetNvLinkRemotePciInfo and GetNvLinkRemoteDeviceType.
// Their fields (DriverVersion, NVMLVersion, CUDADriverVersion, Minor,
// NUMANode, CPUAffinity, Health.Persistence, NVLink.Version, RemoteBusID,
// RemoteType) stay zero or nil, and a skipped call gives no warning. Every
// other call is made as without the option, by the same code, and fills
// the same fields.
func ForScrape() ReadOption {
	return func(o *readOptions) { o.skipDiscovery = true }
}

// Read asks lib about the node: Init, the versions, every GPU, Shutdown.
// It never panics on an NVML answer and never stops at one GPU's failure:
// a failed call becomes a warning and, for a required call, the GPU's
// State. When Init fails nothing else is called (live go-nvml would call
// into a library that is not loaded). A nil lib reads as no NVML. opts
// may leave out calls (ForScrape).
//
// A call that panics (a replay of a ReplayFile no LoadReplay checked, a
// broken mock) does not crash the caller: Read answers as if the call had
// returned ERROR_UNKNOWN and NVML were unavailable, with Err and a warning
// naming the call and the panic, and no GPUs. A DeviceGetCount above
// MaxReplayDevices (NVML cannot answer one) is ERROR_UNKNOWN too.
func Read(lib nvml.Interface, opts ...ReadOption) (res Result) {
	defer func() {
		if p := recover(); p != nil {
			call := panickedCall()
			res.Available, res.GPUs = false, nil
			res.Err = fmt.Errorf("%w: %s: %w (panic: %v)", ErrUnavailable, call, retErr(nvml.ERROR_UNKNOWN), p)
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s: %s (panic: %v)", call, returnName(nvml.ERROR_UNKNOWN), p))
		}
	}()
	var o readOptions
	for _, opt := range opts {
		opt(&o)
	}
	if lib == nil {
		res.Err = fmt.Errorf("%w: no NVML source", ErrLibraryNotFound)
		return res
	}
	if r := lib.Init(); r != nvml.SUCCESS {
		if r == nvml.ERROR_LIBRARY_NOT_FOUND {
			res.Err = fmt.Errorf("%w: Init: %w", ErrLibraryNotFound, retErr(r))
		} else {
			res.Err = fmt.Errorf("%w: Init: %w", ErrUnavailable, retErr(r))
		}
		return res
	}
	defer func() {
		if r := lib.Shutdown(); r != nvml.SUCCESS {
			res.Warnings = append(res.Warnings, "Shutdown: "+returnName(r))
		}
	}()

	warn := func(call string, r nvml.Return) bool {
		if r != nvml.SUCCESS && r != nvml.ERROR_NOT_SUPPORTED {
			res.Warnings = append(res.Warnings, call+": "+returnName(r))
		}
		return r == nvml.SUCCESS
	}
	if !o.skipDiscovery {
		if v, r := lib.SystemGetDriverVersion(); warn("SystemGetDriverVersion", r) {
			res.DriverVersion = v
		}
		if v, r := lib.SystemGetNVMLVersion(); warn("SystemGetNVMLVersion", r) {
			res.NVMLVersion = v
		}
		if v, r := lib.SystemGetCudaDriverVersion(); warn("SystemGetCudaDriverVersion", r) {
			res.CUDADriverVersion = v
		}
	}
	n, r := lib.DeviceGetCount()
	if r == nvml.SUCCESS && (n < 0 || n > MaxReplayDevices) {
		res.Err = fmt.Errorf("%w: DeviceGetCount: %w (%d devices, outside 0..%d)", ErrUnavailable, retErr(nvml.ERROR_UNKNOWN), n, MaxReplayDevices)
		return res
	}
	if r != nvml.SUCCESS {
		res.Err = fmt.Errorf("%w: DeviceGetCount: %w", ErrUnavailable, retErr(r))
		return res
	}
	res.Available = true
	o.symbols = lookupSymbols(lib, symFabricInfoV4, symPlatformInfo)
	for i := range n {
		g := gpuReader{gpu: GPU{Index: i, State: StateOK}, opts: o}
		g.read(lib)
		res.GPUs = append(res.GPUs, g.gpu)
		res.Warnings = append(res.Warnings, g.warnings...)
	}
	return res
}

// readerFuncs are the functions of this package that call into NVML for
// Read; panickedCall names the callee of the innermost one.
var readerFuncs = []string{
	readPkg + ".Read", readPkg + ".(*gpuReader).", readPkg + ".recoveryAction",
}

// readPkg is this package's import path as runtime writes function names.
const readPkg = "github.com/gpuaffinity/gpuaffinity/nvml"

// panickedCall names the NVML call that panicked, from a deferred
// recover in Read: the method Read's code called ("GetRetiredPages"), or
// "Read" when the panic is in Read's own code.
func panickedCall() string {
	pcs := make([]uintptr, 128)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
	call, panicking := "", false
	for {
		fr, more := frames.Next()
		name := fr.Function
		if i := strings.Index(name, "[...]"); i >= 0 { // a generic function
			name = name[:i] + name[i+len("[...]"):]
		}
		reader := false
		for _, p := range readerFuncs {
			reader = reader || strings.HasPrefix(name, p)
		}
		switch {
		case name == "runtime.gopanic":
			panicking = true // the frames below are the deferred recover's
		case !panicking || strings.HasPrefix(name, "runtime."):
		case reader && call != "":
			return call
		case reader:
			return "Read"
		case name != "":
			call = methodName(name)
		}
		if !more {
			return "NVML call"
		}
	}
}

// methodName is a runtime function name's last element, without closure
// suffixes: "GetCpuAffinity" for "pkg.(*replayDevice).GetCpuAffinity.func1".
func methodName(name string) string {
	parts := strings.Split(name[strings.LastIndex(name, "/")+1:], ".")
	for len(parts) > 1 && strings.Trim(strings.TrimPrefix(parts[len(parts)-1], "func"), "0123456789") == "" {
		parts = parts[:len(parts)-1]
	}
	return parts[len(parts)-1]
}

// gpuReader reads one GPU and keeps its warnings.
type gpuReader struct {
	gpu      GPU
	opts     readOptions
	warnings []string
}

// fail notes a failed call: a warning naming the GPU and the call, and for
// ERROR_GPU_IS_LOST or a required call the GPU's State and Err.
func (g *gpuReader) fail(call string, r nvml.Return, required bool) {
	g.note(call+": "+returnName(r), r == nvml.ERROR_GPU_IS_LOST, required)
}

// note records msg as a warning and, when lost or required, in State and
// Err; the first reason stays in Err unless the GPU is lost later.
func (g *gpuReader) note(msg string, lost, required bool) {
	who := fmt.Sprintf("GPU %d", g.gpu.Index)
	if g.gpu.BusID != "" {
		who += " (" + g.gpu.BusID + ")"
	}
	g.warnings = append(g.warnings, who+": "+msg)
	switch {
	case lost:
		g.gpu.State, g.gpu.Err = StateLost, msg
	case required && g.gpu.State == StateOK:
		g.gpu.State, g.gpu.Err = StateError, msg
	}
}

// ok reports whether an optional call succeeded; ERROR_NOT_SUPPORTED is an
// answer, not a warning.
func (g *gpuReader) ok(call string, r nvml.Return) bool {
	if r != nvml.SUCCESS && r != nvml.ERROR_NOT_SUPPORTED {
		g.fail(call, r, false)
	}
	return r == nvml.SUCCESS
}

// okAt is ok for call(arg): the name is made only for a warning (a
// scrape asks hundreds of link calls).
func (g *gpuReader) okAt(call string, arg int, r nvml.Return) bool {
	return g.okCall(r, func() string { return call + "(" + strconv.Itoa(arg) + ")" })
}

// okCall is ok with the call's name made only for a warning.
func (g *gpuReader) okCall(r nvml.Return, call func() string) bool {
	if r != nvml.SUCCESS && r != nvml.ERROR_NOT_SUPPORTED {
		g.fail(call(), r, false)
	}
	return r == nvml.SUCCESS
}

// must reports whether a required call succeeded; any failure, NOT_SUPPORTED
// included, makes the GPU's State "error".
func (g *gpuReader) must(call string, r nvml.Return) bool {
	if r != nvml.SUCCESS {
		g.fail(call, r, true)
	}
	return r == nvml.SUCCESS
}

func (g *gpuReader) lost() bool { return g.gpu.State == StateLost }

// read asks the GPU's calls (ForScrape's subset where set), in an order that names the bus id in
// as many warnings as possible, and stops once the GPU is lost.
func (g *gpuReader) read(lib nvml.Interface) {
	dev, r := lib.DeviceGetHandleByIndex(g.gpu.Index)
	if !g.must("DeviceGetHandleByIndex", r) {
		return
	}
	if info, r := dev.GetPciInfo(); g.must("GetPciInfo", r) {
		id := cString(info.BusId[:])
		bus, err := pci.Canonical(id)
		if err != nil {
			g.note(fmt.Sprintf("GetPciInfo: unreadable bus id %q", id), false, true)
		}
		g.gpu.BusID = bus
	}
	steps := []func(){
		func() {
			if v, r := dev.GetUUID(); g.must("GetUUID", r) {
				g.gpu.UUID = v
			}
		},
		func() {
			if v, r := dev.GetName(); g.must("GetName", r) {
				g.gpu.Name = v
			}
		},
	}
	if !g.opts.skipDiscovery {
		steps = append(steps, g.discoverySteps(dev)...)
	}
	steps = append(steps,
		func() {
			if v, r := dev.GetCurrPcieLinkGeneration(); g.ok("GetCurrPcieLinkGeneration", r) {
				g.gpu.PCIeGen = v
			}
		},
		func() {
			if v, r := dev.GetMaxPcieLinkGeneration(); g.ok("GetMaxPcieLinkGeneration", r) {
				g.gpu.PCIeMaxGen = v
			}
		},
		func() {
			if v, r := dev.GetCurrPcieLinkWidth(); g.ok("GetCurrPcieLinkWidth", r) {
				g.gpu.PCIeWidth = v
			}
		},
		func() {
			if v, r := dev.GetMaxPcieLinkWidth(); g.ok("GetMaxPcieLinkWidth", r) {
				g.gpu.PCIeMaxWidth = v
			}
		},
		func() { g.readNVLinks(dev) },
	)
	steps = append(steps, g.healthSteps(dev)...)
	for _, step := range steps {
		if g.lost() {
			return
		}
		step()
	}
}

// discoverySteps are the steps that fill Minor, NUMANode and CPUAffinity,
// which ForScrape skips.
func (g *gpuReader) discoverySteps(dev nvml.Device) []func() {
	return []func(){
		func() {
			if v, r := dev.GetMinorNumber(); g.ok("GetMinorNumber", r) {
				g.gpu.Minor = &v
			}
		},
		func() {
			if v, r := dev.GetNumaNodeId(); g.ok("GetNumaNodeId", r) && v >= 0 {
				g.gpu.NUMANode = &v
			}
		},
		func() { g.readPlatform(dev) },
		func() {
			n := affinityCPUs()
			if words, r := dev.GetCpuAffinity(n); g.okAt("GetCpuAffinity", n, r) {
				g.gpu.CPUAffinity = cpusOf(words)
			}
		},
	}
}

func enabled(s nvml.EnableState) *bool { b := s == nvml.FEATURE_ENABLED; return &b }

// healthSteps are the steps that fill Health; ForScrape leaves out
// Persistence.
func (g *gpuReader) healthSteps(dev nvml.Device) []func() {
	h := &g.gpu.Health
	var steps []func()
	if !g.opts.skipDiscovery {
		steps = append(steps, func() {
			if v, r := dev.GetPersistenceMode(); g.ok("GetPersistenceMode", r) {
				h.Persistence = enabled(v)
			}
		})
	}
	return append(steps,
		func() {
			if v, r := dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC); g.ok("GetTotalEccErrors(UNCORRECTED, VOLATILE)", r) {
				h.ECCUncorrectedVolatile = &v
			}
		},
		func() {
			if v, r := dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.AGGREGATE_ECC); g.ok("GetTotalEccErrors(UNCORRECTED, AGGREGATE)", r) {
				h.ECCUncorrectedAggregate = &v
			}
		},
		func() {
			if corr, unc, pending, failure, r := dev.GetRemappedRows(); g.ok("GetRemappedRows", r) {
				h.RemappedRowsCorrectable, h.RemappedRowsUncorrectable = &corr, &unc
				h.RemapPending, h.RemapFailure = &pending, &failure
			}
		},
		func() {
			single, r := dev.GetRetiredPages(nvml.PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)
			if !g.ok("GetRetiredPages(MULTIPLE_SINGLE_BIT_ECC_ERRORS)", r) || g.lost() {
				return
			}
			double, r := dev.GetRetiredPages(nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
			if g.ok("GetRetiredPages(DOUBLE_BIT_ECC_ERROR)", r) {
				n := len(single) + len(double)
				h.RetiredPages = &n
			}
		},
		func() {
			if v, r := dev.GetRetiredPagesPendingStatus(); g.ok("GetRetiredPagesPendingStatus", r) {
				h.RetiredPagesPending = enabled(v)
			}
		},
		func() { g.readFabric(dev) },
		func() {
			if v, r := recoveryAction(dev); g.ok("GetFieldValues(FI_DEV_GET_GPU_RECOVERY_ACTION)", r) {
				h.RecoveryAction = &v
			}
		},
		func() {
			if v, r := dev.GetPcieReplayCounter(); g.ok("GetPcieReplayCounter", r) && v >= 0 {
				n := uint64(v)
				h.PCIeReplay = &n
			}
		},
	)
}

// readNVLinks asks links 0..NVLINK_MAX_LINKS-1 and stops at the first
// ERROR_INVALID_ARGUMENT (past the device's last link).
func (g *gpuReader) readNVLinks(dev nvml.Device) {
	for n := range nvml.NVLINK_MAX_LINKS {
		state, r := dev.GetNvLinkState(n)
		if r == nvml.ERROR_INVALID_ARGUMENT {
			return
		}
		if !g.okAt("GetNvLinkState", n, r) {
			if g.lost() {
				return
			}
			continue
		}
		g.gpu.NVLinkVisible = true
		link := NVLink{Link: n, Active: state == nvml.FEATURE_ENABLED}
		if link.Active && !g.opts.skipDiscovery {
			g.readLinkEnds(dev, &link)
		}
		if !g.lost() {
			g.readLinkErrors(dev, &link)
		}
		if g.lost() {
			return
		}
		g.gpu.NVLinks = append(g.gpu.NVLinks, link)
	}
}

// readLinkEnds asks an active link's version and remote end.
func (g *gpuReader) readLinkEnds(dev nvml.Device, link *NVLink) {
	n := link.Link
	if v, r := dev.GetNvLinkVersion(n); g.okAt("GetNvLinkVersion", n, r) {
		link.Version = int(v)
	}
	if g.lost() {
		return
	}
	if info, r := dev.GetNvLinkRemotePciInfo(n); g.okAt("GetNvLinkRemotePciInfo", n, r) {
		id := cString(info.BusId[:])
		if bus, err := pci.Canonical(id); err == nil {
			link.RemoteBusID = bus
		} else {
			g.note(fmt.Sprintf("GetNvLinkRemotePciInfo(%d): unreadable bus id %q", n, id), false, false)
		}
	}
	if g.lost() {
		return
	}
	if t, r := dev.GetNvLinkRemoteDeviceType(n); g.okAt("GetNvLinkRemoteDeviceType", n, r) {
		link.RemoteType = remoteType(t)
	}
}

// nvlinkCounters are the error counters NVLink has, in the order Read asks
// them, with the name warnings give them.
var nvlinkCounters = []struct {
	counter nvml.NvLinkErrorCounter
	name    string
	field   func(*NVLink) **uint64
}{
	{nvml.NVLINK_ERROR_DL_CRC_FLIT, "DL_CRC_FLIT", func(l *NVLink) **uint64 { return &l.CRCFlitErrors }},
	{nvml.NVLINK_ERROR_DL_CRC_DATA, "DL_CRC_DATA", func(l *NVLink) **uint64 { return &l.CRCDataErrors }},
	{nvml.NVLINK_ERROR_DL_REPLAY, "DL_REPLAY", func(l *NVLink) **uint64 { return &l.ReplayErrors }},
	{nvml.NVLINK_ERROR_DL_RECOVERY, "DL_RECOVERY", func(l *NVLink) **uint64 { return &l.RecoveryErrors }},
}

// readLinkErrors asks a link's error counters.
func (g *gpuReader) readLinkErrors(dev nvml.Device, link *NVLink) {
	for _, c := range nvlinkCounters {
		v, r := dev.GetNvLinkErrorCounter(link.Link, c.counter)
		if g.okCall(r, func() string { return fmt.Sprintf("GetNvLinkErrorCounter(%d, %s)", link.Link, c.name) }) {
			*c.field(link) = &v
		}
		if g.lost() {
			return
		}
	}
}

func remoteType(t nvml.IntNvLinkDeviceType) string {
	switch t {
	case nvml.NVLINK_DEVICE_TYPE_GPU:
		return RemoteGPU
	case nvml.NVLINK_DEVICE_TYPE_SWITCH:
		return RemoteNVSwitch
	default:
		return RemoteOther
	}
}

// cpusOf lists the CPUs set in GetCpuAffinity's words: bit j of word i is
// CPU 64*i+j. An empty mask gives nil.
func cpusOf(words []uint) []int {
	var cpus []int
	for i, w := range words {
		for j := range 64 {
			if uint64(w)&(1<<j) != 0 {
				cpus = append(cpus, 64*i+j)
			}
		}
	}
	return cpus
}

package nvml

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuaffinity/gpuaffinity/internal/sysattr"
	"github.com/gpuaffinity/gpuaffinity/pci"
)

// replayLib answers go-nvml's nvml.Interface from a ReplayFile.
//
// The calls the format records are methods below. Every other method of
// nvml.Interface comes from the embedded notSupportedLib (generated from
// go-nvml's interface, notsupported_gen.go), which answers zero values and
// ERROR_NOT_SUPPORTED, so an unrecorded call never panics.
type replayLib struct {
	notSupportedLib

	file    ReplayFile
	devices []*replayDevice

	mu    sync.Mutex
	inits int // Init's reference count, kept as NVML keeps it
	// pending holds, per device, the XID codes no event set has delivered
	// yet (replay_events.go).
	pending [][]uint64
}

// replayDevice answers go-nvml's nvml.Device for one recorded GPU, the same
// way replayLib answers the Interface.
type replayDevice struct {
	notSupportedDevice

	lib   *replayLib
	index int
	rec   *ReplayDevice
}

var (
	_ nvml.Interface = (*replayLib)(nil)
	_ nvml.Device    = (*replayDevice)(nil)
)

// NewReplay returns an nvml.Interface that answers what f recorded, so the
// code that reads live NVML (Read, Record, or anything written against
// go-nvml) runs unchanged on a recorded node.
//
// Like NVML, the replayer answers ERROR_UNINITIALIZED until Init succeeds
// and after the matching Shutdown; Init answers f.Init. A link missing from
// a device's NVLinks answers ERROR_INVALID_ARGUMENT when its number is above
// every recorded link (NVML's answer past a device's last link), and
// ERROR_NOT_SUPPORTED otherwise. A Return name NewReplay does not know
// replays as ERROR_UNKNOWN; LoadReplay rejects such files instead.
//
// Every nvml.Interface and nvml.Device method the format does not record
// answers zero values and ERROR_NOT_SUPPORTED, never a panic, with two
// limits. Extensions().LookupSymbol reports every symbol as missing. The
// methods that return a handler (DeviceGetNvLinkInfo, GetGpuFabricInfoV,
// GetTemperatureV, GpmQueryDeviceSupportV, ...) return go-nvml's zero
// handler, whose V1()/V2() methods call libnvidia-ml directly: on a host
// without the library that kills the process. Callers that probe
// LookupSymbol before such calls (as go-nvlib does) stay safe.
//
// Unrecorded calls keep nothing: a long-running process may make them in a
// loop.
func NewReplay(f ReplayFile) nvml.Interface {
	l := &replayLib{file: f}
	for i := range l.file.Devices {
		d := &replayDevice{lib: l, index: i, rec: &l.file.Devices[i]}
		l.devices = append(l.devices, d)
		var xids []uint64
		if x := d.rec.XIDs; x != nil && ret(x.Return) == nvml.SUCCESS {
			xids = append(xids, x.Value...)
		}
		l.pending = append(l.pending, xids)
	}
	return l
}

// LoadReplay reads an nvml.json file (docs/nvml-replay.md) and returns its
// replayer. It rejects anything but a regular file of at most
// MaxReplayFileSize bytes (a FIFO or device is not read), a version other
// than ReplayVersion, unknown fields, Return names it does not know, a
// device count that does not match the devices listed, and counts and
// sizes over the MaxReplay bounds; every error names the file.
func LoadReplay(path string) (nvml.Interface, error) {
	data, err := sysattr.ReadFileLimit(path, MaxReplayFileSize)
	return loadReplay(path, data, err)
}

// DecodeReplay decodes and checks an nvml.json file already read, as
// LoadReplay does; name names it in errors.
func DecodeReplay(name string, data []byte) (ReplayFile, error) {
	f, err := decodeReplay(data)
	if err != nil {
		return ReplayFile{}, fmt.Errorf("nvml: replay %s: %w", name, err)
	}
	return f, nil
}

// loadReplay decodes what reading the file named path gave.
func loadReplay(path string, data []byte, err error) (nvml.Interface, error) {
	if err != nil {
		return nil, fmt.Errorf("nvml: replay %s unreadable: %w", path, readError(path, err))
	}
	f, err := DecodeReplay(path, data)
	if err != nil {
		return nil, err
	}
	return NewReplay(f), nil
}

// decodeReplay decodes and checks nvml.json. The file is decoded once; the
// version is checked first only when something fails (a file of another
// version may fail on fields this build does not know, and should say so).
func decodeReplay(data []byte) (ReplayFile, error) {
	var f ReplayFile
	err := checkShape(data)
	if err == nil {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		err = dec.Decode(&f)
		if err == nil && len(bytes.TrimSpace(data[dec.InputOffset():])) > 0 {
			// Trailing data: json.Unmarshal below names it.
			err = errors.New("data after the top-level value")
		}
	}
	if err != nil {
		var head struct {
			Version int `json:"version"`
		}
		if herr := json.Unmarshal(data, &head); herr != nil {
			return ReplayFile{}, herr
		}
		f.Version = head.Version
	}
	if f.Version != ReplayVersion {
		return ReplayFile{}, fmt.Errorf("unsupported version %d (this build reads version %d)", f.Version, ReplayVersion)
	}
	if err != nil {
		return ReplayFile{}, err
	}
	return f, f.validate()
}

// validate reports every Return name it does not know, a device count
// that disagrees with the devices listed, and every count or size over the
// MaxReplay bounds (checkBounds).
func (f *ReplayFile) validate() error {
	errs := f.checkBounds()
	if len(f.Devices) > MaxReplayDevices {
		return errors.Join(errs...)
	}
	// where is called only for a name that fails: the file's thousands of
	// answers are mostly "" and none pays for its place's text.
	check := func(where func() string, name string) {
		if _, err := parseReturn(name); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where(), err))
		}
	}
	top := func(field string) func() string { return func() string { return field } }
	check(top("init"), f.Init)
	check(top("driver_version"), f.DriverVersion.Return)
	check(top("nvml_version"), f.NVMLVersion.Return)
	check(top("cuda_driver_version"), f.CUDADriverVersion.Return)
	check(top("device_count"), f.DeviceCount.Return)
	if f.DeviceCount.Return == "" && f.DeviceCount.Value != len(f.Devices) {
		errs = append(errs, fmt.Errorf("device_count is %d but %d devices are listed", f.DeviceCount.Value, len(f.Devices)))
	}
	for i, d := range f.Devices {
		at := func(field string) func() string {
			return func() string { return fmt.Sprintf("devices[%d].%s", i, field) }
		}
		check(at("handle"), d.Handle)
		for _, a := range []struct{ field, ret string }{
			{"pci", d.PCI.Return}, {"uuid", d.UUID.Return}, {"name", d.Name.Return},
			{"minor", d.Minor.Return}, {"numa_node", d.NUMANode.Return},
			{"cpu_affinity", d.CPUAffinity.Return}, {"pcie_gen", d.PCIeGen.Return},
			{"pcie_max_gen", d.PCIeMaxGen.Return}, {"pcie_width", d.PCIeWidth.Return},
			{"pcie_max_width", d.PCIeMaxWidth.Return},
		} {
			check(at(a.field), a.ret)
		}
		for _, a := range []struct {
			field string
			ret   *string
		}{
			{"persistence", retOf(d.Persistence)},
			{"ecc_uncorrected_volatile", retOf(d.ECCUncorrectedVolatile)},
			{"ecc_uncorrected_aggregate", retOf(d.ECCUncorrectedAggregate)},
			{"remapped_rows", retOf(d.RemappedRows)},
			{"retired_pages", retOf(d.RetiredPages)},
			{"retired_pages_pending", retOf(d.RetiredPagesPending)},
			{"fabric", retOf(d.Fabric)},
			{"recovery_action", retOf(d.RecoveryAction)},
			{"pcie_replay", retOf(d.PCIeReplay)},
			{"platform", retOf(d.Platform)},
			{"xids", retOf(d.XIDs)},
		} {
			if a.ret != nil {
				check(at(a.field), *a.ret)
			}
		}
		seen := map[int]bool{}
		for j, l := range d.NVLinks {
			lat := func(field string) func() string {
				return func() string { return at(fmt.Sprintf("nvlinks[%d].%s", j, field))() }
			}
			if l.Link < 0 || seen[l.Link] {
				errs = append(errs, fmt.Errorf("%s: link %d is negative or listed twice", lat("link")(), l.Link))
			}
			seen[l.Link] = true
			check(lat("state"), l.State.Return)
			check(lat("version"), l.Version.Return)
			check(lat("remote"), l.Remote.Return)
			check(lat("remote_type"), l.RemoteType.Return)
			if e := l.Errors; e != nil {
				for _, a := range []struct {
					field string
					ret   *string
				}{
					{"crc_flit", retOf(e.CRCFlit)}, {"crc_data", retOf(e.CRCData)},
					{"replay", retOf(e.Replay)}, {"recovery", retOf(e.Recovery)},
				} {
					if a.ret != nil {
						check(lat("errors."+a.field), *a.ret)
					}
				}
			}
		}
	}
	return errors.Join(errs...)
}

// ret is a recorded Return name as an nvml.Return.
func ret(name string) nvml.Return {
	r, err := parseReturn(name)
	if err != nil {
		return nvml.ERROR_UNKNOWN
	}
	return r
}

// answer replays a: its value on success, the zero value and the recorded
// Return otherwise.
func answer[T any](a Answer[T]) (T, nvml.Return) {
	if r := ret(a.Return); r != nvml.SUCCESS {
		var zero T
		return zero, r
	}
	return a.Value, nvml.SUCCESS
}

// answerAs replays a through conv, for answers whose recorded type differs
// from go-nvml's (int for nvml.EnableState, ...).
func answerAs[T, U any](a Answer[T], r nvml.Return, conv func(T) U) (U, nvml.Return) {
	if r == nvml.SUCCESS {
		var v T
		v, r = answer(a)
		if r == nvml.SUCCESS {
			return conv(v), r
		}
	}
	var zero U
	return zero, r
}

// retOf is an optional answer's Return, nil when the file does not record
// the call.
func retOf[T any](a *Answer[T]) *string {
	if a == nil {
		return nil
	}
	return &a.Return
}

// optional is the answer of a call the file may leave out: a missing one
// answers ERROR_NOT_SUPPORTED.
func optional[T any](a *Answer[T]) Answer[T] {
	if a == nil {
		return Answer[T]{Return: returnName(nvml.ERROR_NOT_SUPPORTED)}
	}
	return *a
}

// ready answers ERROR_UNINITIALIZED unless Init has succeeded more often
// than Shutdown.
func (l *replayLib) ready() nvml.Return {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inits == 0 {
		return nvml.ERROR_UNINITIALIZED
	}
	return nvml.SUCCESS
}

// Init answers the recorded Init.
func (l *replayLib) Init() nvml.Return {
	r := ret(l.file.Init)
	if r == nvml.SUCCESS {
		l.mu.Lock()
		l.inits++
		l.mu.Unlock()
	}
	return r
}

// InitWithFlags answers as Init; the flags change nothing in a replay.
func (l *replayLib) InitWithFlags(uint32) nvml.Return { return l.Init() }

// Shutdown drops one reference taken by Init.
func (l *replayLib) Shutdown() nvml.Return {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inits == 0 {
		return nvml.ERROR_UNINITIALIZED
	}
	l.inits--
	return nvml.SUCCESS
}

// ErrorString answers libnvidia-ml's text for r where known, else its name.
func (l *replayLib) ErrorString(r nvml.Return) string {
	for _, e := range returnTable {
		if e.ret == r && e.text != "" {
			return e.text
		}
	}
	if r == nvml.SUCCESS {
		return "SUCCESS"
	}
	return returnName(r)
}

// Extensions answers a symbol table that has only the newer entry points
// the replay answers from the file (replayedSymbols), so callers that
// check for any other newer entry point skip it.
func (l *replayLib) Extensions() nvml.ExtendedInterface { return replayExtensions{} }

type replayExtensions struct{}

// replayedSymbols are the entry points a reader asks LookupSymbol for
// that the replay answers itself, from nvml.json.
var replayedSymbols = []string{symFabricInfoV4, symPlatformInfo}

func (replayExtensions) LookupSymbol(name string) error {
	if slices.Contains(replayedSymbols, name) {
		return nil
	}
	return fmt.Errorf("%s: not in the NVML replay", name)
}

func (l *replayLib) SystemGetDriverVersion() (string, nvml.Return) {
	return answerAs(l.file.DriverVersion, l.ready(), same[string])
}

func (l *replayLib) SystemGetNVMLVersion() (string, nvml.Return) {
	return answerAs(l.file.NVMLVersion, l.ready(), same[string])
}

func (l *replayLib) SystemGetCudaDriverVersion() (int, nvml.Return) {
	return answerAs(l.file.CUDADriverVersion, l.ready(), same[int])
}

func (l *replayLib) DeviceGetCount() (int, nvml.Return) {
	return answerAs(l.file.DeviceCount, l.ready(), same[int])
}

// DeviceGetHandleByIndex answers the recorded handle of device i, and
// ERROR_INVALID_ARGUMENT for an index past the recorded devices.
func (l *replayLib) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	if r := l.ready(); r != nvml.SUCCESS {
		return nil, r
	}
	if i < 0 || i >= len(l.devices) {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	if r := ret(l.devices[i].rec.Handle); r != nvml.SUCCESS {
		return nil, r
	}
	return l.devices[i], nvml.SUCCESS
}

// DeviceGetHandleByUUID finds the device whose recorded UUID is uuid.
func (l *replayLib) DeviceGetHandleByUUID(uuid string) (nvml.Device, nvml.Return) {
	return l.find(func(d *ReplayDevice) bool { return d.UUID.Return == "" && d.UUID.Value == uuid })
}

// DeviceGetHandleByPciBusId finds the device whose recorded bus id is id,
// in NVML's or the sysfs form.
func (l *replayLib) DeviceGetHandleByPciBusId(id string) (nvml.Device, nvml.Return) {
	want, err := pci.Canonical(id)
	if err != nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return l.find(func(d *ReplayDevice) bool {
		got, err := pci.Canonical(d.PCI.Value.BusID)
		return d.PCI.Return == "" && err == nil && got == want
	})
}

func (l *replayLib) find(match func(*ReplayDevice) bool) (nvml.Device, nvml.Return) {
	if r := l.ready(); r != nvml.SUCCESS {
		return nil, r
	}
	for _, d := range l.devices {
		if match(d.rec) {
			if r := ret(d.rec.Handle); r != nvml.SUCCESS {
				return nil, r
			}
			return d, nvml.SUCCESS
		}
	}
	return nil, nvml.ERROR_NOT_FOUND
}

// The Interface-level forms of the replayed device calls ask the device, as
// go-nvml's own library does.

func (l *replayLib) DeviceGetPciInfo(d nvml.Device) (nvml.PciInfo, nvml.Return) {
	if d == nil {
		return nvml.PciInfo{}, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetPciInfo()
}

func (l *replayLib) DeviceGetUUID(d nvml.Device) (string, nvml.Return) {
	if d == nil {
		return "", nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetUUID()
}

func (l *replayLib) DeviceGetName(d nvml.Device) (string, nvml.Return) {
	if d == nil {
		return "", nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetName()
}

func (l *replayLib) DeviceGetMinorNumber(d nvml.Device) (int, nvml.Return) {
	if d == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetMinorNumber()
}

func (l *replayLib) DeviceGetIndex(d nvml.Device) (int, nvml.Return) {
	if d == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetIndex()
}

func (l *replayLib) DeviceGetNumaNodeId(d nvml.Device) (int, nvml.Return) {
	if d == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetNumaNodeId()
}

func (l *replayLib) DeviceGetCpuAffinity(d nvml.Device, numCPUs int) ([]uint, nvml.Return) {
	if d == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetCpuAffinity(numCPUs)
}

func (l *replayLib) DeviceGetCurrPcieLinkGeneration(d nvml.Device) (int, nvml.Return) {
	if d == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetCurrPcieLinkGeneration()
}

func (l *replayLib) DeviceGetMaxPcieLinkGeneration(d nvml.Device) (int, nvml.Return) {
	if d == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetMaxPcieLinkGeneration()
}

func (l *replayLib) DeviceGetCurrPcieLinkWidth(d nvml.Device) (int, nvml.Return) {
	if d == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetCurrPcieLinkWidth()
}

func (l *replayLib) DeviceGetMaxPcieLinkWidth(d nvml.Device) (int, nvml.Return) {
	if d == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetMaxPcieLinkWidth()
}

func (l *replayLib) DeviceGetNvLinkState(d nvml.Device, link int) (nvml.EnableState, nvml.Return) {
	if d == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetNvLinkState(link)
}

func (l *replayLib) DeviceGetNvLinkVersion(d nvml.Device, link int) (uint32, nvml.Return) {
	if d == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetNvLinkVersion(link)
}

func (l *replayLib) DeviceGetNvLinkRemotePciInfo(d nvml.Device, link int) (nvml.PciInfo, nvml.Return) {
	if d == nil {
		return nvml.PciInfo{}, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetNvLinkRemotePciInfo(link)
}

func (l *replayLib) DeviceGetNvLinkRemoteDeviceType(d nvml.Device, link int) (nvml.IntNvLinkDeviceType, nvml.Return) {
	if d == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetNvLinkRemoteDeviceType(link)
}

func (l *replayLib) DeviceGetNvLinkErrorCounter(d nvml.Device, link int, c nvml.NvLinkErrorCounter) (uint64, nvml.Return) {
	if d == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetNvLinkErrorCounter(link, c)
}

func (l *replayLib) DeviceGetPersistenceMode(d nvml.Device) (nvml.EnableState, nvml.Return) {
	if d == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetPersistenceMode()
}

func (l *replayLib) DeviceGetTotalEccErrors(d nvml.Device, t nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
	if d == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetTotalEccErrors(t, c)
}

func (l *replayLib) DeviceGetRemappedRows(d nvml.Device) (int, int, bool, bool, nvml.Return) {
	if d == nil {
		return 0, 0, false, false, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetRemappedRows()
}

func (l *replayLib) DeviceGetRetiredPages(d nvml.Device, cause nvml.PageRetirementCause) ([]uint64, nvml.Return) {
	if d == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetRetiredPages(cause)
}

func (l *replayLib) DeviceGetRetiredPagesPendingStatus(d nvml.Device) (nvml.EnableState, nvml.Return) {
	if d == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetRetiredPagesPendingStatus()
}

func (l *replayLib) DeviceGetGpuFabricInfo(d nvml.Device) (nvml.GpuFabricInfo, nvml.Return) {
	if d == nil {
		return nvml.GpuFabricInfo{}, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetGpuFabricInfo()
}

func (l *replayLib) DeviceGetPcieReplayCounter(d nvml.Device) (int, nvml.Return) {
	if d == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetPcieReplayCounter()
}

func (l *replayLib) DeviceGetFieldValues(d nvml.Device, values []nvml.FieldValue) nvml.Return {
	if d == nil {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetFieldValues(values)
}

// ready answers ERROR_INVALID_ARGUMENT for a nil device and
// ERROR_UNINITIALIZED while the library is not initialised.
func (d *replayDevice) ready() nvml.Return {
	if d == nil || d.rec == nil {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	return d.lib.ready()
}

func (d *replayDevice) GetPciInfo() (nvml.PciInfo, nvml.Return) {
	r := d.ready()
	if r != nvml.SUCCESS {
		return nvml.PciInfo{}, r
	}
	return answerAs(d.rec.PCI, r, pciInfo)
}

func (d *replayDevice) GetUUID() (string, nvml.Return) {
	r := d.ready()
	if r != nvml.SUCCESS {
		return "", r
	}
	return answerAs(d.rec.UUID, r, same[string])
}

func (d *replayDevice) GetName() (string, nvml.Return) {
	r := d.ready()
	if r != nvml.SUCCESS {
		return "", r
	}
	return answerAs(d.rec.Name, r, same[string])
}

func (d *replayDevice) GetMinorNumber() (int, nvml.Return) {
	r := d.ready()
	if r != nvml.SUCCESS {
		return 0, r
	}
	return answerAs(d.rec.Minor, r, same[int])
}

// GetIndex answers the device's place in the file, which is NVML's index.
func (d *replayDevice) GetIndex() (int, nvml.Return) {
	if r := d.ready(); r != nvml.SUCCESS {
		return 0, r
	}
	return d.index, nvml.SUCCESS
}

func (d *replayDevice) GetNumaNodeId() (int, nvml.Return) {
	r := d.ready()
	if r != nvml.SUCCESS {
		return 0, r
	}
	return answerAs(d.rec.NUMANode, r, same[int])
}

// GetCpuAffinity answers the recorded words, whatever numCPUs asks for:
// every CPU the recording host had is in them.
func (d *replayDevice) GetCpuAffinity(numCPUs int) ([]uint, nvml.Return) {
	r := d.ready()
	if r != nvml.SUCCESS {
		return nil, r
	}
	return answerAs(d.rec.CPUAffinity, r, func(w []uint64) []uint {
		out := make([]uint, len(w))
		for i, x := range w {
			out[i] = uint(x)
		}
		return out
	})
}

func (d *replayDevice) GetCurrPcieLinkGeneration() (int, nvml.Return) {
	r := d.ready()
	if r != nvml.SUCCESS {
		return 0, r
	}
	return answerAs(d.rec.PCIeGen, r, same[int])
}

func (d *replayDevice) GetMaxPcieLinkGeneration() (int, nvml.Return) {
	r := d.ready()
	if r != nvml.SUCCESS {
		return 0, r
	}
	return answerAs(d.rec.PCIeMaxGen, r, same[int])
}

func (d *replayDevice) GetCurrPcieLinkWidth() (int, nvml.Return) {
	r := d.ready()
	if r != nvml.SUCCESS {
		return 0, r
	}
	return answerAs(d.rec.PCIeWidth, r, same[int])
}

func (d *replayDevice) GetMaxPcieLinkWidth() (int, nvml.Return) {
	r := d.ready()
	if r != nvml.SUCCESS {
		return 0, r
	}
	return answerAs(d.rec.PCIeMaxWidth, r, same[int])
}

// link finds the recorded link n. A link above every recorded one answers
// ERROR_INVALID_ARGUMENT, as NVML does past a device's last link; a gap
// answers ERROR_NOT_SUPPORTED.
func (d *replayDevice) link(n int) (*ReplayNVLink, nvml.Return) {
	if r := d.ready(); r != nvml.SUCCESS {
		return nil, r
	}
	last := -1
	for i := range d.rec.NVLinks {
		l := &d.rec.NVLinks[i]
		if l.Link == n {
			return l, nvml.SUCCESS
		}
		last = max(last, l.Link)
	}
	if n < 0 || n > last {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return nil, nvml.ERROR_NOT_SUPPORTED
}

func (d *replayDevice) GetNvLinkState(n int) (nvml.EnableState, nvml.Return) {
	l, r := d.link(n)
	if r != nvml.SUCCESS {
		return 0, r
	}
	return answerAs(l.State, r, func(v int) nvml.EnableState { return nvml.EnableState(v) })
}

func (d *replayDevice) GetNvLinkVersion(n int) (uint32, nvml.Return) {
	l, r := d.link(n)
	if r != nvml.SUCCESS {
		return 0, r
	}
	return answerAs(l.Version, r, func(v int) uint32 { return uint32(v) })
}

func (d *replayDevice) GetNvLinkRemotePciInfo(n int) (nvml.PciInfo, nvml.Return) {
	l, r := d.link(n)
	if r != nvml.SUCCESS {
		return nvml.PciInfo{}, r
	}
	return answerAs(l.Remote, r, pciInfo)
}

func (d *replayDevice) GetNvLinkRemoteDeviceType(n int) (nvml.IntNvLinkDeviceType, nvml.Return) {
	l, r := d.link(n)
	if r != nvml.SUCCESS {
		return 0, r
	}
	return answerAs(l.RemoteType, r, func(v int) nvml.IntNvLinkDeviceType { return nvml.IntNvLinkDeviceType(v) })
}

// GetNvLinkErrorCounter answers the link's recorded count of c:
// ERROR_NOT_SUPPORTED where the file has none (and for
// NVLINK_ERROR_DL_ECC_DATA, which the format does not keep),
// ERROR_INVALID_ARGUMENT for a counter NVML does not define.
func (d *replayDevice) GetNvLinkErrorCounter(n int, c nvml.NvLinkErrorCounter) (uint64, nvml.Return) {
	l, r := d.link(n)
	if r != nvml.SUCCESS {
		return 0, r
	}
	if c < 0 || c >= nvml.NVLINK_ERROR_COUNT {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return answerAs(optional(l.Errors.counter(c)), r, same[uint64])
}

func (d *replayDevice) GetPersistenceMode() (nvml.EnableState, nvml.Return) {
	return answerAs(optional(recField(d, func(h *ReplayDevice) *Answer[int] { return h.Persistence })), d.ready(),
		func(v int) nvml.EnableState { return nvml.EnableState(v) })
}

// GetTotalEccErrors answers the recorded uncorrected counts; corrected
// errors are not recorded and answer ERROR_NOT_SUPPORTED.
func (d *replayDevice) GetTotalEccErrors(t nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
	r := d.ready()
	if r != nvml.SUCCESS {
		return 0, r
	}
	var a *Answer[uint64]
	switch {
	case t != nvml.MEMORY_ERROR_TYPE_UNCORRECTED:
	case c == nvml.VOLATILE_ECC:
		a = d.rec.ECCUncorrectedVolatile
	case c == nvml.AGGREGATE_ECC:
		a = d.rec.ECCUncorrectedAggregate
	}
	return answerAs(optional(a), r, same[uint64])
}

func (d *replayDevice) GetRemappedRows() (int, int, bool, bool, nvml.Return) {
	v, r := answerAs(optional(recField(d, func(h *ReplayDevice) *Answer[ReplayRemappedRows] { return h.RemappedRows })),
		d.ready(), same[ReplayRemappedRows])
	return v.Correctable, v.Uncorrectable, v.Pending, v.Failure, r
}

// GetRetiredPages answers as many made-up page addresses as the file
// records for cause.
func (d *replayDevice) GetRetiredPages(cause nvml.PageRetirementCause) ([]uint64, nvml.Return) {
	v, r := answerAs(optional(recField(d, func(h *ReplayDevice) *Answer[ReplayRetiredPages] { return h.RetiredPages })),
		d.ready(), same[ReplayRetiredPages])
	if r != nvml.SUCCESS {
		return nil, r
	}
	var n int
	switch cause {
	case nvml.PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS:
		n = v.MultipleSingleBit
	case nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR:
		n = v.DoubleBit
	default:
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	if n > MaxReplayRetiredPages { // only a ReplayFile LoadReplay did not check
		return nil, nvml.ERROR_UNKNOWN
	}
	pages := make([]uint64, max(n, 0))
	for i := range pages {
		pages[i] = uint64(cause)<<40 | uint64(i+1)<<12
	}
	return pages, nvml.SUCCESS
}

func (d *replayDevice) GetRetiredPagesPendingStatus() (nvml.EnableState, nvml.Return) {
	return answerAs(optional(recField(d, func(h *ReplayDevice) *Answer[int] { return h.RetiredPagesPending })), d.ready(),
		func(v int) nvml.EnableState { return nvml.EnableState(v) })
}

func (d *replayDevice) GetGpuFabricInfo() (nvml.GpuFabricInfo, nvml.Return) {
	return answerAs(optional(recField(d, func(h *ReplayDevice) *Answer[ReplayFabric] { return h.Fabric })), d.ready(),
		func(f ReplayFabric) nvml.GpuFabricInfo {
			uuid, _ := parseClusterUUID(f.ClusterUUID) // LoadReplay checked it
			return nvml.GpuFabricInfo{State: uint8(f.State), Status: uint32(f.Status), ClusterUuid: uuid, CliqueId: f.CliqueID}
		})
}

// GetGpuFabricInfo_v4 answers the recorded fabric with one unicast-pointer
// clique entry, the recorded clique.
func (d *replayDevice) GetGpuFabricInfo_v4() (nvml.GpuFabricInfo_v4, nvml.Return) {
	return answerAs(optional(recField(d, func(h *ReplayDevice) *Answer[ReplayFabric] { return h.Fabric })), d.ready(),
		func(f ReplayFabric) nvml.GpuFabricInfo_v4 {
			uuid, _ := parseClusterUUID(f.ClusterUUID)
			info := nvml.GpuFabricInfo_v4{State: uint8(f.State), Status: uint32(f.Status), ClusterUuid: uuid,
				HealthMask: f.HealthMask, HealthSummary: uint8(f.HealthSummary), NumCliques: 1}
			info.Cliques[0] = nvml.GpuFabricClique_v1{Type: nvml.GPU_FABRIC_CLIQUE_TYPE_UNICAST_POINTER, Id: f.CliqueID}
			return info
		})
}

func (l *replayLib) DeviceGetGpuFabricInfo_v4(d nvml.Device) (nvml.GpuFabricInfo_v4, nvml.Return) {
	if d == nil {
		return nvml.GpuFabricInfo_v4{}, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetGpuFabricInfo_v4()
}

func (d *replayDevice) GetPlatformInfo() (nvml.PlatformInfo, nvml.Return) {
	return answerAs(optional(recField(d, func(h *ReplayDevice) *Answer[ReplayPlatform] { return h.Platform })), d.ready(),
		func(p ReplayPlatform) nvml.PlatformInfo {
			info := nvml.PlatformInfo{Version: nvml.STRUCT_VERSION(nvml.PlatformInfo{}, 1),
				SlotNumber: uint8(p.Slot), TrayIndex: uint8(p.Tray), HostId: uint8(p.Host),
				PeerType: uint8(p.PeerType), ModuleId: uint8(p.Module)}
			guid, _ := hex.DecodeString(p.IBGUID)
			copy(info.IbGuid[:], guid)
			copy(info.ChassisSerialNumber[:], p.ChassisSerial)
			return info
		})
}

func (l *replayLib) DeviceGetPlatformInfo(d nvml.Device) (nvml.PlatformInfo, nvml.Return) {
	if d == nil {
		return nvml.PlatformInfo{}, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetPlatformInfo()
}

func (d *replayDevice) GetPcieReplayCounter() (int, nvml.Return) {
	return answerAs(optional(recField(d, func(h *ReplayDevice) *Answer[int] { return h.PCIeReplay })), d.ready(), same[int])
}

// GetFieldValues answers FI_DEV_GET_GPU_RECOVERY_ACTION (scope 0) from the
// file, as an unsigned int; every other field gets nvmlReturn
// ERROR_NOT_SUPPORTED. The call itself succeeds once the library is
// initialised and values is not empty.
func (d *replayDevice) GetFieldValues(values []nvml.FieldValue) nvml.Return {
	if r := d.ready(); r != nvml.SUCCESS {
		return r
	}
	if len(values) == 0 {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	for i := range values {
		fv := &values[i]
		fv.NvmlReturn, fv.ValueType, fv.Value = uint32(nvml.ERROR_NOT_SUPPORTED), 0, [8]byte{}
		if fv.FieldId != nvml.FI_DEV_GET_GPU_RECOVERY_ACTION || fv.ScopeId != 0 {
			continue
		}
		v, r := answer(optional(d.rec.RecoveryAction))
		if v < 0 {
			v = 0
		}
		fv.NvmlReturn = uint32(r)
		if r == nvml.SUCCESS {
			fv.ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_INT)
			binary.LittleEndian.PutUint32(fv.Value[:4], uint32(v))
		}
	}
	return nvml.SUCCESS
}

// recField reads one optional answer of the device; nil for a nil device
// (whose ready answers the error).
func recField[T any](d *replayDevice, get func(*ReplayDevice) *Answer[T]) *Answer[T] {
	if d == nil || d.rec == nil {
		return nil
	}
	return get(d.rec)
}

func same[T any](v T) T { return v }

// pciInfo builds go-nvml's PciInfo from a recorded one: BusId as recorded,
// and Domain, Bus, Device and BusIdLegacy derived from it as NVML fills
// them.
func pciInfo(p ReplayPCI) nvml.PciInfo {
	info := nvml.PciInfo{PciDeviceId: p.PCIDeviceID, PciSubSystemId: p.PCISubsystemID}
	putCString(info.BusId[:], p.BusID)
	if a, err := pci.ParseAddress(p.BusID); err == nil {
		info.Domain, info.Bus, info.Device = a.Domain, uint32(a.Bus), uint32(a.Device)
		putCString(info.BusIdLegacy[:], strings.ToUpper(a.String())) // NVML's "%04X:%02X:%02X.%X"
	}
	return info
}

// replayPCI is pciInfo's inverse: what the format keeps of a PciInfo.
func replayPCI(info nvml.PciInfo) ReplayPCI {
	return ReplayPCI{
		BusID:          cString(info.BusId[:]),
		PCIDeviceID:    info.PciDeviceId,
		PCISubsystemID: info.PciSubSystemId,
	}
}

// putCString copies s into the NUL-terminated C char array dst, truncating.
func putCString(dst []int8, s string) {
	for i := 0; i < len(s) && i < len(dst)-1; i++ {
		dst[i] = int8(s[i])
	}
}

// cString reads a NUL-terminated C char array.
func cString(src []int8) string {
	var b strings.Builder
	for _, c := range src {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	return b.String()
}

package nvml

import (
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// replayLib answers go-nvml's nvml.Interface from a ReplayFile.
//
// The calls the format records are its methods (replay_lib.go; a
// device's are replayDevice's, replay_device.go). Every other method of
// nvml.Interface comes from the embedded notSupportedLib (generated from
// go-nvml's interface, notsupported_gen.go), which answers zero values and
// ERROR_NOT_SUPPORTED, so an unrecorded call never panics. The file is
// read and checked by replay_load.go; answers are replayed through
// replay_answer.go's helpers.
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

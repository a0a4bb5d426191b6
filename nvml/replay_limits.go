package nvml

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuaffinity/gpuaffinity/internal/sysattr"
)

// Bounds on what an nvml.json may hold (docs/nvml-replay.md, "Bounds").
// Each is far above what NVML answers on a real node, so that LoadReplay
// rejects a hostile or corrupt file before it allocates from a number in
// it.
const (
	// MaxReplayFileSize is the largest nvml.json LoadReplay reads: 16 MiB.
	// A recorded 8-GPU HGX H100 with 18 NVLinks per GPU is about 116 KB.
	MaxReplayFileSize = 16 << 20
	// MaxReplayDevices bounds device_count and devices: twice the NVIDIA
	// kernel driver's NV_MAX_DEVICES (32 GPUs per system, nvlimits.h).
	MaxReplayDevices = 64
	// MaxReplayNVLinks bounds a device's nvlinks and their link numbers
	// (0..MaxReplayNVLinks-1): go-nvml's NVLINK_MAX_LINKS (nvml.h), the
	// links Record and Read ask.
	MaxReplayNVLinks = nvml.NVLINK_MAX_LINKS
	// MaxReplayRetiredPages bounds each retired_pages count. The driver
	// retires a GPU's pages by the dozen at most before the GPU is
	// replaced; 65536 pages (512 KiB of addresses per cause) is far above.
	MaxReplayRetiredPages = 1 << 16
	// MaxReplayAffinityWords bounds cpu_affinity: 1024 64-bit words, 65536
	// CPUs.
	MaxReplayAffinityWords = 1024
	// MaxReplayXIDs bounds a device's xids list.
	MaxReplayXIDs = 1024
	// MaxReplayProcesses bounds each of a device's process lists: far
	// above the processes one GPU runs (CUDA MPS serves a few dozen
	// clients per GPU).
	MaxReplayProcesses = 4096
	// maxReplayDepth bounds JSON nesting; the format nests 7 deep.
	maxReplayDepth = 16
	// maxReplayOtherArray bounds an array anywhere else; the format has
	// none, so the decoder rejects it, and this only caps the work.
	maxReplayOtherArray = 1024
)

// readError says why the replay file could not be read, without naming
// it again (the caller does).
func readError(path string, err error) error {
	switch {
	case errors.Is(err, sysattr.ErrTooLarge):
		return fmt.Errorf("over the %d-byte limit", MaxReplayFileSize)
	case errors.Is(err, sysattr.ErrNotRegular):
		return sysattr.ErrNotRegular
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

// arrayLimits bounds the format's arrays, by path without indices.
var arrayLimits = map[string]int{
	"devices":                          MaxReplayDevices,
	"devices.nvlinks":                  MaxReplayNVLinks,
	"devices.cpu_affinity.value":       MaxReplayAffinityWords,
	"devices.xids.value":               MaxReplayXIDs,
	"devices.compute_processes.value":  MaxReplayProcesses,
	"devices.graphics_processes.value": MaxReplayProcesses,
}

// checkShape walks data's JSON tokens before it is decoded: no array is
// longer than arrayLimits allows (maxReplayOtherArray elsewhere) and
// nesting is at most maxReplayDepth, so decoding allocates in proportion
// to the bounds, not to the file. Syntax errors are left to the decoder,
// which reports them better.
func checkShape(data []byte) error {
	// A byte scanner, not json.Decoder.Token (which allocates a value
	// per token and was a tenth of a discovery): strings are skipped
	// with their escapes, an array counts an element where a value
	// starts after '[' or ','.
	type frame struct {
		array     bool
		key       []byte // object: the current member (a slice of data)
		wantKey   bool   // object: the next string is a key
		needValue bool   // array: the next value starts an element
		n         int    // array: elements so far
		limit     int    // array: most elements
	}
	var stack []frame
	path := func() string { // the current place, with indices
		var b strings.Builder
		for _, f := range stack {
			switch {
			case f.array:
				fmt.Fprintf(&b, "[%d]", f.n-1)
			case len(f.key) > 0:
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.Write(f.key)
			}
		}
		return b.String()
	}
	pattern := func() string { // the current place, without indices
		var keys []string
		for _, f := range stack {
			if !f.array {
				keys = append(keys, string(f.key))
			}
		}
		return strings.Join(keys, ".")
	}
	// value notes that a value starts here: in an array, a new element.
	value := func() error {
		if len(stack) == 0 {
			return nil
		}
		top := &stack[len(stack)-1]
		if !top.array || !top.needValue {
			return nil
		}
		top.needValue = false
		top.n++
		if top.n > top.limit {
			limit := top.limit
			stack = stack[:len(stack)-1] // path() is then the array's
			return fmt.Errorf("%s: more than %d elements", path(), limit)
		}
		return nil
	}
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case ' ', '\t', '\n', '\r', ':':
		case '"':
			j := i + 1
			for j < len(data) && data[j] != '"' {
				if data[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(data) {
				return nil // a syntax error, for the decoder to report
			}
			if n := len(stack); n > 0 && !stack[n-1].array && stack[n-1].wantKey {
				stack[n-1].key, stack[n-1].wantKey = data[i+1:j], false
			} else if err := value(); err != nil {
				return err
			}
			i = j
		case '{', '[':
			if err := value(); err != nil {
				return err
			}
			if len(stack) >= maxReplayDepth {
				return fmt.Errorf("%s: nested more than %d deep", path(), maxReplayDepth)
			}
			if c == '{' {
				stack = append(stack, frame{wantKey: true})
				continue
			}
			limit, ok := arrayLimits[pattern()]
			if !ok {
				limit = maxReplayOtherArray
			}
			stack = append(stack, frame{array: true, needValue: true, limit: limit})
		case '}', ']':
			if len(stack) == 0 {
				return nil // a syntax error
			}
			stack = stack[:len(stack)-1]
		case ',':
			if n := len(stack); n > 0 {
				if stack[n-1].array {
					stack[n-1].needValue = true
				} else {
					stack[n-1].wantKey = true
				}
			}
		default: // a number, true, false, null (its later bytes change nothing)
			if err := value(); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkBounds reports every count and size in f over the bounds above, so
// that neither the replayer nor Read allocates from a hostile number.
func (f *ReplayFile) checkBounds() []error {
	var errs []error
	over := func(where string, v, limit int) {
		switch {
		case v < 0:
			errs = append(errs, fmt.Errorf("%s: %d is negative", where, v))
		case v > limit:
			errs = append(errs, fmt.Errorf("%s: %d exceeds %d", where, v, limit))
		}
	}
	if f.DeviceCount.Return == "" {
		over("device_count.value", f.DeviceCount.Value, MaxReplayDevices)
	}
	if len(f.Devices) > MaxReplayDevices {
		errs = append(errs, fmt.Errorf("devices: %d devices, more than %d", len(f.Devices), MaxReplayDevices))
		return errs
	}
	for i, d := range f.Devices {
		at := func(field string) string { return fmt.Sprintf("devices[%d].%s", i, field) }
		if n := len(d.CPUAffinity.Value); n > MaxReplayAffinityWords {
			errs = append(errs, fmt.Errorf("%s: %d words, more than %d", at("cpu_affinity.value"), n, MaxReplayAffinityWords))
		}
		if p := d.RetiredPages; p != nil {
			over(at("retired_pages.value.multiple_single_bit"), p.Value.MultipleSingleBit, MaxReplayRetiredPages)
			over(at("retired_pages.value.double_bit"), p.Value.DoubleBit, MaxReplayRetiredPages)
		}
		if fa := d.Fabric; fa != nil {
			if _, err := parseClusterUUID(fa.Value.ClusterUUID); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", at("fabric.value"), err))
			}
			over(at("fabric.value.state"), fa.Value.State, 255)
			over(at("fabric.value.health_summary"), fa.Value.HealthSummary, 255)
		}
		if p := d.Platform; p != nil {
			v := p.Value
			for _, f := range []struct {
				name string
				v    int
			}{{"slot", v.Slot}, {"tray", v.Tray}, {"host", v.Host}, {"peer_type", v.PeerType}, {"module", v.Module}} {
				over(at("platform.value."+f.name), f.v, 255)
			}
			if g, err := hex.DecodeString(v.IBGUID); err != nil || len(g) > 16 {
				errs = append(errs, fmt.Errorf("%s: %q is not up to 16 bytes of hex", at("platform.value.ib_guid"), v.IBGUID))
			}
			if len(v.ChassisSerial) > 16 || printable([]byte(v.ChassisSerial)) != v.ChassisSerial {
				errs = append(errs, fmt.Errorf("%s: %q is not up to 16 printable bytes", at("platform.value.chassis_serial"), v.ChassisSerial))
			}
		}
		if x := d.XIDs; x != nil && len(x.Value) > MaxReplayXIDs {
			errs = append(errs, fmt.Errorf("%s: %d codes, more than %d", at("xids.value"), len(x.Value), MaxReplayXIDs))
		}
		for _, p := range []struct {
			field string
			a     *Answer[[]ReplayProcess]
		}{{"compute_processes", d.ComputeProcesses}, {"graphics_processes", d.GraphicsProcesses}} {
			if p.a != nil && len(p.a.Value) > MaxReplayProcesses {
				errs = append(errs, fmt.Errorf("%s: %d processes, more than %d", at(p.field+".value"), len(p.a.Value), MaxReplayProcesses))
			}
		}
		if n := len(d.NVLinks); n > MaxReplayNVLinks {
			errs = append(errs, fmt.Errorf("%s: %d links, more than %d", at("nvlinks"), n, MaxReplayNVLinks))
			continue
		}
		for j, l := range d.NVLinks {
			if l.Link >= MaxReplayNVLinks {
				errs = append(errs, fmt.Errorf("%s: link %d is outside 0..%d", at(fmt.Sprintf("nvlinks[%d].link", j)), l.Link, MaxReplayNVLinks-1))
			}
		}
	}
	return errs
}

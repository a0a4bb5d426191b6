package nvml

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuaffinity/gpuaffinity/internal/sysattr"
)

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
			{"compute_processes", retOf(d.ComputeProcesses)},
			{"graphics_processes", retOf(d.GraphicsProcesses)},
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

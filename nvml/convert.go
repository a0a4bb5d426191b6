package nvml

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// probeAnswer is one answer in the probe's JSON: {"value": ..., "ns": ...}
// on success, {"err": "Not Supported", "ns": ...} on failure, where err is
// libnvidia-ml's nvmlErrorString text.
type probeAnswer[T any] struct {
	Value T      `json:"value"`
	Err   string `json:"err"`
}

// probePCI is the part of a PciInfo the probe wrote (pci_raw, and remote
// if it ever succeeds) that the format keeps.
type probePCI struct {
	BusID          []int8 `json:"BusId"`
	PCIDeviceID    uint32 `json:"PciDeviceId"`
	PCISubsystemID uint32 `json:"PciSubSystemId"`
}

type probeNVLink struct {
	Link       int                           `json:"link"`
	State      *probeAnswer[int]             `json:"state"`
	Version    *probeAnswer[int]             `json:"version"`
	Remote     *probeAnswer[json.RawMessage] `json:"remote"`
	RemoteType *probeAnswer[int]             `json:"remote_type"`
	// GetNvLinkErrorCounter: the H200 capture asks crc_flit and replay.
	CRCFlit  *probeAnswer[uint64] `json:"crc_flit"`
	CRCData  *probeAnswer[uint64] `json:"crc_data"`
	Replay   *probeAnswer[uint64] `json:"replay"`
	Recovery *probeAnswer[uint64] `json:"recovery"`
}

type probeDevice struct {
	PCI          *probeAnswer[string]   `json:"pci"`
	PCIRaw       *probeAnswer[probePCI] `json:"pci_raw"`
	UUID         *probeAnswer[string]   `json:"uuid"`
	Name         *probeAnswer[string]   `json:"name"`
	Minor        *probeAnswer[int]      `json:"minor"`
	NUMA         *probeAnswer[int]      `json:"numa"`
	CPUAffinity  *probeAnswer[[]uint64] `json:"cpu_affinity"`
	PCIeGen      *probeAnswer[int]      `json:"pcie_gen_cur"`
	PCIeMaxGen   *probeAnswer[int]      `json:"pcie_gen_max"`
	PCIeWidth    *probeAnswer[int]      `json:"pcie_width_cur"`
	PCIeMaxWidth *probeAnswer[int]      `json:"pcie_width_max"`
	NVLinks      []probeNVLink          `json:"nvlinks"`

	Persistence *probeAnswer[int]    `json:"persistence"`
	ECCVolatile *probeAnswer[uint64] `json:"ecc_uncorrected_volatile"`
	// RemappedRows is GetRemappedRows' four results as an array:
	// [corrRows, uncRows, isPending, failureOccurred].
	RemappedRows *probeAnswer[json.RawMessage] `json:"remapped_rows"`
	Fabric       *probeAnswer[probeFabric]     `json:"fabric"`
	PCIeReplay   *probeAnswer[int]             `json:"pcie_replay"`
}

// probeFabric is the part of GpuFabricInfo the format keeps.
type probeFabric struct {
	State  int `json:"State"`
	Status int `json:"Status"`
}

type probeFile struct {
	Driver  *probeAnswer[string] `json:"driver"`
	NVML    *probeAnswer[string] `json:"nvml"`
	CUDA    *probeAnswer[int]    `json:"cuda"`
	Devices []probeDevice        `json:"devices"`
}

// ConvertProbe turns the JSON written by the project's NVML probe (a
// go-nvml program that asks each call and writes its value or error text;
// shared/fixtures/h200-vm/nvml-probe.json is one) into an nvml.json.
//
// Error texts ("Not Supported", "GPU is lost") become Return names through
// the table of go-nvml's Return constants; a text it does not know is an
// error. What the probe does not record gets an answer all the same: Init,
// DeviceGetCount and each handle are taken as successful (the probe listed
// the devices), and a call the probe did not make (GetNvLinkRemoteDeviceType,
// or any key missing from a device) answers ERROR_NOT_SUPPORTED, as a call
// nvml.json does not record does. Of the health calls the probe records
// persistence, ecc_uncorrected_volatile, remapped_rows (an array of the
// four results), fabric (the GpuFabricInfo struct) and pcie_replay; the
// aggregate ECC count, retired pages and the recovery action answer
// ERROR_NOT_SUPPORTED. Probe keys the format has no place for
// (temperatures, power, timings) are dropped. A link's crc_flit, crc_data,
// replay and recovery answers (GetNvLinkErrorCounter; the H200 capture has
// crc_flit and replay) become its errors, the ones not asked
// ERROR_NOT_SUPPORTED; a link with none of them has no errors. The probe
// records no XID events: xids is left out (ERROR_NOT_SUPPORTED). NVLink entries must be numbered
// 0..NVLINK_MAX_LINKS-1, each once; the H200 capture lists 36, links 0-35,
// which is go-nvml's NVLINK_MAX_LINKS.
func ConvertProbe(r io.Reader) (ReplayFile, error) {
	var p probeFile
	if err := json.NewDecoder(r).Decode(&p); err != nil {
		return ReplayFile{}, fmt.Errorf("nvml: probe: %w", err)
	}
	c := converter{}
	f := ReplayFile{
		Version:           ReplayVersion,
		DriverVersion:     convAnswer(&c, "driver", p.Driver, same[string]),
		NVMLVersion:       convAnswer(&c, "nvml", p.NVML, same[string]),
		CUDADriverVersion: convAnswer(&c, "cuda", p.CUDA, same[int]),
		DeviceCount:       Answer[int]{Value: len(p.Devices)},
	}
	for i, pd := range p.Devices {
		f.Devices = append(f.Devices, c.device(i, pd))
	}
	if err := errors.Join(c.errs...); err != nil {
		return ReplayFile{}, fmt.Errorf("nvml: probe: %w", err)
	}
	return f, nil
}

// converter collects every conversion error, so one run names them all.
type converter struct{ errs []error }

func (c *converter) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

// convAnswer converts one probe answer; a missing one answers
// ERROR_NOT_SUPPORTED.
func convAnswer[T, U any](c *converter, where string, a *probeAnswer[T], conv func(T) U) Answer[U] {
	if a == nil {
		return Answer[U]{Return: returnName(nvml.ERROR_NOT_SUPPORTED)}
	}
	if a.Err != "" {
		r, err := parseReturn(a.Err)
		if err != nil {
			c.fail("%s: %w", where, err)
		}
		return Answer[U]{Return: returnName(r)}
	}
	return Answer[U]{Value: conv(a.Value)}
}

func (c *converter) device(i int, pd probeDevice) ReplayDevice {
	at := func(key string) string { return fmt.Sprintf("devices[%d].%s", i, key) }
	d := ReplayDevice{
		PCI:          c.pci(at("pci"), pd.PCI, pd.PCIRaw),
		UUID:         convAnswer(c, at("uuid"), pd.UUID, same[string]),
		Name:         convAnswer(c, at("name"), pd.Name, same[string]),
		Minor:        convAnswer(c, at("minor"), pd.Minor, same[int]),
		NUMANode:     convAnswer(c, at("numa"), pd.NUMA, same[int]),
		CPUAffinity:  convAnswer(c, at("cpu_affinity"), pd.CPUAffinity, same[[]uint64]),
		PCIeGen:      convAnswer(c, at("pcie_gen_cur"), pd.PCIeGen, same[int]),
		PCIeMaxGen:   convAnswer(c, at("pcie_gen_max"), pd.PCIeMaxGen, same[int]),
		PCIeWidth:    convAnswer(c, at("pcie_width_cur"), pd.PCIeWidth, same[int]),
		PCIeMaxWidth: convAnswer(c, at("pcie_width_max"), pd.PCIeMaxWidth, same[int]),
	}
	ptr := func(a Answer[int]) *Answer[int] { return &a }
	vol := convAnswer(c, at("ecc_uncorrected_volatile"), pd.ECCVolatile, same[uint64])
	agg := convAnswer(c, at("ecc_uncorrected_aggregate"), (*probeAnswer[uint64])(nil), same[uint64])
	rows := c.remappedRows(at("remapped_rows"), pd.RemappedRows)
	pages := convAnswer(c, at("retired_pages"), (*probeAnswer[ReplayRetiredPages])(nil), same[ReplayRetiredPages])
	fabric := convAnswer(c, at("fabric"), pd.Fabric, func(f probeFabric) ReplayFabric {
		return ReplayFabric{State: f.State, Status: f.Status}
	})
	d.Persistence = ptr(convAnswer(c, at("persistence"), pd.Persistence, same[int]))
	d.ECCUncorrectedVolatile, d.ECCUncorrectedAggregate = &vol, &agg
	d.RemappedRows, d.RetiredPages = &rows, &pages
	d.RetiredPagesPending = ptr(convAnswer(c, at("retired_pages_pending"), (*probeAnswer[int])(nil), same[int]))
	d.Fabric = &fabric
	d.RecoveryAction = ptr(convAnswer(c, at("recovery_action"), (*probeAnswer[int])(nil), same[int]))
	d.PCIeReplay = ptr(convAnswer(c, at("pcie_replay"), pd.PCIeReplay, same[int]))

	seen := map[int]bool{}
	for j, pl := range pd.NVLinks {
		lat := func(key string) string { return at(fmt.Sprintf("nvlinks[%d].%s", j, key)) }
		if pl.Link < 0 || pl.Link >= nvml.NVLINK_MAX_LINKS || seen[pl.Link] {
			c.fail("%s: link %d is outside 0..%d or listed twice", lat("link"), pl.Link, nvml.NVLINK_MAX_LINKS-1)
		}
		seen[pl.Link] = true
		d.NVLinks = append(d.NVLinks, ReplayNVLink{
			Link:       pl.Link,
			State:      convAnswer(c, lat("state"), pl.State, same[int]),
			Version:    convAnswer(c, lat("version"), pl.Version, same[int]),
			Remote:     c.remote(lat("remote"), pl.Remote),
			RemoteType: convAnswer(c, lat("remote_type"), pl.RemoteType, same[int]),
			Errors:     c.linkErrors(lat, pl),
		})
	}
	return d
}

// linkErrors converts a link's error counters: nil when the probe asked
// none, else all four, a counter it did not ask answering
// ERROR_NOT_SUPPORTED.
func (c *converter) linkErrors(lat func(string) string, pl probeNVLink) *ReplayNVLinkErrors {
	if pl.CRCFlit == nil && pl.CRCData == nil && pl.Replay == nil && pl.Recovery == nil {
		return nil
	}
	conv := func(key string, a *probeAnswer[uint64]) *Answer[uint64] {
		v := convAnswer(c, lat(key), a, same[uint64])
		return &v
	}
	return &ReplayNVLinkErrors{
		CRCFlit:  conv("crc_flit", pl.CRCFlit),
		CRCData:  conv("crc_data", pl.CRCData),
		Replay:   conv("replay", pl.Replay),
		Recovery: conv("recovery", pl.Recovery),
	}
}

// remappedRows converts GetRemappedRows' answer, which the probe writes as
// the array [corrRows, uncRows, isPending, failureOccurred].
func (c *converter) remappedRows(where string, a *probeAnswer[json.RawMessage]) Answer[ReplayRemappedRows] {
	return convAnswer(c, where, a, func(raw json.RawMessage) ReplayRemappedRows {
		var parts []json.RawMessage
		var rows ReplayRemappedRows
		if err := json.Unmarshal(raw, &parts); err != nil || len(parts) != 4 {
			c.fail("%s: value is not an array of 4 results: %s", where, raw)
			return rows
		}
		for i, dst := range []any{&rows.Correctable, &rows.Uncorrectable, &rows.Pending, &rows.Failure} {
			if err := json.Unmarshal(parts[i], dst); err != nil {
				c.fail("%s[%d]: %w", where, i, err)
			}
		}
		return rows
	})
}

// pci builds GetPciInfo's answer from the probe's "pci" (the bus id) and
// "pci_raw" (the whole PciInfo, for the device ids).
func (c *converter) pci(where string, bus *probeAnswer[string], raw *probeAnswer[probePCI]) Answer[ReplayPCI] {
	a := convAnswer(c, where, bus, func(id string) ReplayPCI { return ReplayPCI{BusID: id} })
	if raw != nil && raw.Err == "" {
		rp := raw.Value.replayPCI()
		if bus == nil {
			a = Answer[ReplayPCI]{Value: rp}
		}
		if a.Return == "" {
			a.Value.PCIDeviceID, a.Value.PCISubsystemID = rp.PCIDeviceID, rp.PCISubsystemID
		}
	}
	return a
}

// remote converts GetNvLinkRemotePciInfo's answer, which the probe may
// write as a bus id string or as the PciInfo struct.
func (c *converter) remote(where string, a *probeAnswer[json.RawMessage]) Answer[ReplayPCI] {
	return convAnswer(c, where, a, func(raw json.RawMessage) ReplayPCI {
		var id string
		if err := json.Unmarshal(raw, &id); err == nil {
			return ReplayPCI{BusID: id}
		}
		var p probePCI
		if err := json.Unmarshal(raw, &p); err != nil {
			c.fail("%s: value is neither a bus id nor a PciInfo: %w", where, err)
		}
		return p.replayPCI()
	})
}

func (p probePCI) replayPCI() ReplayPCI {
	return ReplayPCI{BusID: cString(p.BusID), PCIDeviceID: p.PCIDeviceID, PCISubsystemID: p.PCISubsystemID}
}

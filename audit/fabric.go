package audit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/rdma"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// The fabric balance: while GPUs are busy, which of their compute NICs
// transmit nothing, and which storage NICs transmit as much as the
// compute fabric does. Two samples of every RDMA port's transmit data
// counter, an interval apart, give each port's rate (FabricBalance, a
// pure function, so a test replays recorded counters); FabricSampler
// takes a sample through rdma.CounterReader, the agent's scrape-time
// reader, under the audit's root. The rule and its limits:
// docs/audit.md, "Fabric balance".

// The transmit data counters, in the order they are preferred. Both
// count 4-byte words (sysfs-class-infiniband ABI; IBTA PortXmitData is
// "octets divided by 4"): counters_ext/port_xmit_data_64 is the 64-bit
// PortCountersExtended value kernels before 4.5 kept apart; since 4.5,
// counters/port_xmit_data shows that 64-bit value where the adapter has
// it. The exporter exports both (gpuaffinity_rdma_legacy_data_transmitted_bytes_total,
// gpuaffinity_rdma_port_data_transmitted_bytes_total).
const (
	xmitFileExt   = "port_xmit_data_64"
	xmitFile      = "port_xmit_data"
	xmitWordBytes = 4
)

// saturated32 is where a 32-bit IBTA PortCounters data counter stops:
// it saturates rather than wraps, so a rate across it is wrong.
const saturated32 = math.MaxUint32

// The thresholds of the rule (docs/audit.md, "Fabric balance").
const (
	// activeShare of the busiest compute port's signalling rate is the
	// least it must transmit for the compute fabric to count as carrying
	// traffic: 1% (500 MB/s on a 400 Gb/s NDR port). An idle port sends
	// only management datagrams (subnet manager sweeps, SA queries,
	// perfquery: 256-byte MADs, a few per second), kilobytes per second.
	activeShare = 0.01
	// activeFloorBytes is that floor where the port's rate is unknown or
	// low (1 Gb/s).
	activeFloorBytes = 125e6
	// idleShare of the busiest compute port's transmit rate is below
	// what a port transmits that a job uses: NCCL spreads a collective
	// over every NIC it is given, within a few times of each other, never
	// a hundredfold apart.
	idleShare = 0.01
)

// FabricSample is one reading of every RDMA port's transmit data
// counter.
type FabricSample struct {
	// At is when the reading started.
	At time.Time
	// Ports are the ports read, in device and port order.
	Ports []PortCounter
	// Unread names what the reader could not read, each naming the file.
	Unread []string
}

// PortCounter is one RDMA port's transmit data counter at one sample.
type PortCounter struct {
	Device string
	Port   int
	// State is the port's state text ("ACTIVE"); Active is state 4.
	State  string
	Active bool
	// RateGbps is the port's signalling rate (ports/N/rate).
	RateGbps float64
	// File is the counter file read (named under the root); "" where
	// the port has neither transmit data counter (EFA keeps only
	// hw_counters).
	File string
	// Words is the file's value: 4-byte words.
	Words uint64
}

// FabricSampler reads the RDMA ports' transmit data counters under a
// root. It keeps one rdma.CounterReader, so a counter file that answers
// EINVAL is read once, not at every sample. Safe for concurrent use.
type FabricSampler struct {
	root *rootfs.Root
	r    *rdma.CounterReader
	// Now gives a sample's time; nil means time.Now. Tests set it.
	Now func() time.Time
}

// NewFabricSampler returns a sampler reading under root (which it does
// not close).
func NewFabricSampler(root *rootfs.Root) *FabricSampler {
	return &FabricSampler{root: root, r: &rdma.CounterReader{
		FS:          root,
		Counters:    []string{xmitFile},
		CountersExt: []string{xmitFileExt},
		HwCounters:  []string{},
	}}
}

// Sample reads every port once. It stops at ctx's end with what it read.
func (s *FabricSampler) Sample(ctx context.Context) FabricSample {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	at := now()
	ports, err := s.r.Read(ctx)
	return SampleOf(s.root, at, ports, err)
}

// SampleOf turns the ports an rdma.CounterReader read at time at (and
// its error) into a FabricSample; root names the files (nil: relative
// to the root).
func SampleOf(root *rootfs.Root, at time.Time, ports []rdma.PortSample, err error) FabricSample {
	out := FabricSample{At: at, Ports: make([]PortCounter, 0, len(ports)), Unread: errLines(err)}
	for _, p := range ports {
		pc := PortCounter{Device: p.Device, Port: p.Port, State: p.State, Active: p.StateID == 4, RateGbps: p.RateGbps}
		dir := path.Join("sys/class/infiniband", p.Device, "ports", strconv.Itoa(p.Port))
		if v, ok := p.CountersExt[xmitFileExt]; ok {
			pc.File, pc.Words = path.Join(dir, rdma.DirCountersExt, xmitFileExt), v
		} else if v, ok := p.Counters[xmitFile]; ok {
			pc.File, pc.Words = path.Join(dir, rdma.DirCounters, xmitFile), v
		}
		if pc.File != "" && root != nil {
			pc.File = root.Path(pc.File)
		}
		out.Ports = append(out.Ports, pc)
	}
	return out
}

// errLines splits a joined error into its lines.
func errLines(err error) []string {
	if err == nil {
		return nil
	}
	var j interface{ Unwrap() []error }
	if errors.As(err, &j) {
		var out []string
		for _, e := range j.Unwrap() {
			out = append(out, errLines(e)...)
		}
		return out
	}
	return []string{err.Error()}
}

// Fabric is the fabric balance over one interval. It is gpuaffinity.audit/v1's
// "fabric" object.
type Fabric struct {
	// Seconds is the interval between the two samples.
	Seconds float64 `json:"interval_seconds"`
	// BusyGPUs are the GPUs with a running process (GPU.Index values).
	BusyGPUs []int `json:"busy_gpus"`
	// Active says the compute fabric carried traffic while GPUs were
	// busy: its busiest port (Busiest, at BusiestBytesPerSecond)
	// transmitted at least FloorBytesPerSecond. Nothing is reported
	// otherwise.
	Active                bool    `json:"active"`
	Busiest               string  `json:"busiest,omitempty"` // "mlx5_0:1"
	BusiestBytesPerSecond float64 `json:"busiest_bytes_per_second"`
	FloorBytesPerSecond   float64 `json:"floor_bytes_per_second"`
	// IdleBelowBytesPerSecond is the rate under which a busy GPU's
	// compute port counts as idle; StorageFromBytesPerSecond the rate from
	// which a storage port carries the compute fabric's volume (the
	// median of the compute ports above IdleBelow). Both 0 when not
	// Active.
	IdleBelowBytesPerSecond   float64 `json:"idle_below_bytes_per_second"`
	StorageFromBytesPerSecond float64 `json:"storage_from_bytes_per_second"`
	// GPUs has one entry per busy GPU, or per busy GPUs that share their
	// compute NICs, with the ports the pairing gives them and those they
	// leave idle.
	GPUs []FabricGPUs `json:"gpus"`
	// Ports are the compute and storage NICs' ports, in NIC (bus) and
	// port order.
	Ports []FabricPort `json:"ports"`
	// Degraded names each port whose rate could not be taken this
	// interval, with the device, the file and why (a counter reset or
	// saturated, a port gone, a counter unreadable), and what either sample
	// could not read (each naming its file): never a guessed rate.
	Degraded []string `json:"degraded"`
}

// FabricGPUs is one busy GPU, or busy GPUs sharing their compute NICs.
type FabricGPUs struct {
	GPUs []int `json:"gpus"`
	// Ports are its compute NICs' ports ("mlx5_0:1"), the pairing's
	// (topology.Node.Pairs, the NICs env gives the GPU).
	Ports []string `json:"ports"`
	// Idle are those it leaves idle.
	Idle []string `json:"idle"`
}

// FabricPort is one compute or storage port over the interval.
type FabricPort struct {
	Device string        `json:"device"`
	Port   int           `json:"port"`
	Role   topology.Role `json:"role"`
	// GPUs are the GPUs the pairing gives this compute NIC.
	GPUs []int `json:"gpus"`
	// BytesPerSecond is its transmit rate; nil when not measured
	// (Degraded or Note says why).
	BytesPerSecond *float64 `json:"bytes_per_second"`
	// Idle: a compute port of a busy GPU that transmitted less than
	// IdleBelowBytesPerSecond while the fabric was Active.
	Idle bool `json:"idle"`
	// ComputeTraffic: a storage port that transmitted at least
	// StorageFromBytesPerSecond while the fabric was Active.
	ComputeTraffic bool `json:"compute_traffic"`
	// Note says why a port is not judged though its state is known: not
	// ACTIVE, or no transmit data counter.
	Note string `json:"note,omitempty"`
}

// Name is the port as NCCL_IB_HCA names it: "mlx5_0:1".
func (p FabricPort) Name() string { return p.Device + ":" + strconv.Itoa(p.Port) }

// FabricBalance judges node n's fabric between samples prev and cur
// while the GPUs of uses run processes. The compute and storage NICs are
// the topology's roles; a GPU's compute NICs are the pairing's
// (n.Pairs), the NICs `gpuaffinity env` gives it. It does no I/O.
//
// A compute port of a busy GPU is idle when, over the interval, it
// transmitted less than 1% of the busiest compute port's rate, while
// that busiest port transmitted at least 1% of its signalling rate
// (1 Gb/s where that is unknown or lower): an idle fabric reports
// nothing. A storage port carries the compute fabric's volume when it
// transmitted at least the median rate of the compute ports that are
// not idle. A port whose counter went down (a reset; a 32-bit counter
// saturates instead, and one at its maximum is not used), vanished,
// appeared or could not be read is Degraded, named with its file: it
// gets no rate and is never judged.
func FabricBalance(n topology.Node, uses []Use, prev, cur FabricSample) Fabric {
	f := Fabric{BusyGPUs: busyGPUs(uses), GPUs: []FabricGPUs{}, Ports: []FabricPort{}, Degraded: []string{}}
	f.Seconds = cur.At.Sub(prev.At).Seconds()
	for _, u := range prev.Unread {
		f.Degraded = append(f.Degraded, "first sample: "+u)
	}
	for _, u := range cur.Unread {
		f.Degraded = append(f.Degraded, "second sample: "+u)
	}

	pairGPUs := map[string][]int{} // NIC name -> GPUs paired with it
	for _, p := range n.Pairs {
		for _, nic := range p.NICs {
			pairGPUs[nic] = append(pairGPUs[nic], p.GPU)
		}
	}
	before, after := portMap(prev), portMap(cur)
	type measured struct {
		at   int // index in f.Ports
		rate float64
		link float64 // signalling rate, bytes/s
	}
	var compute, storage []measured
	for _, nic := range n.NICs {
		if nic.RDMADevice == "" || (nic.Role != topology.RoleCompute && nic.Role != topology.RoleStorage) {
			continue
		}
		ports := portsOf(nic.RDMADevice, prev, cur)
		if len(ports) == 0 {
			f.Degraded = append(f.Degraded, fmt.Sprintf("%s (%s NIC): no port read in either sample (gone, or its state unreadable: see the sample's errors)", nic.RDMADevice, nic.Role))
			continue
		}
		for _, port := range ports {
			fp := FabricPort{Device: nic.RDMADevice, Port: port, Role: nic.Role, GPUs: []int{}}
			if nic.Role == topology.RoleCompute {
				fp.GPUs = append(fp.GPUs, pairGPUs[nic.Name]...)
				slices.Sort(fp.GPUs)
			}
			key := portKey{nic.RDMADevice, port}
			rate, link, degraded, note := portRate(before[key], after[key], f.Seconds, fp.Name())
			fp.Note = note
			if degraded != "" {
				f.Degraded = append(f.Degraded, degraded)
			}
			if rate != nil {
				fp.BytesPerSecond = rate
				m := measured{at: len(f.Ports), rate: *rate, link: link}
				if note == "" && nic.Role == topology.RoleCompute {
					compute = append(compute, m)
				} else if note == "" {
					storage = append(storage, m)
				}
			}
			f.Ports = append(f.Ports, fp)
		}
	}

	// The busiest compute port, any GPU's: a job on GPUs 4-7 that sends
	// through GPU 0's NIC leaves its own idle all the same.
	var busiest *measured
	for i := range compute {
		if busiest == nil || compute[i].rate > busiest.rate {
			busiest = &compute[i]
		}
	}
	f.FloorBytesPerSecond = activeFloorBytes
	if busiest != nil {
		f.Busiest = f.Ports[busiest.at].Name()
		f.BusiestBytesPerSecond = busiest.rate
		f.FloorBytesPerSecond = max(activeShare*busiest.link, activeFloorBytes)
	}
	f.Active = len(f.BusyGPUs) > 0 && busiest != nil && busiest.rate >= f.FloorBytesPerSecond
	if !f.Active {
		f.GPUs = gpuGroups(n, f.BusyGPUs, f.Ports)
		return f
	}
	f.IdleBelowBytesPerSecond = idleShare * busiest.rate
	var busy []float64
	for _, m := range compute {
		fp := &f.Ports[m.at]
		if m.rate >= f.IdleBelowBytesPerSecond {
			busy = append(busy, m.rate)
			continue
		}
		fp.Idle = slices.ContainsFunc(fp.GPUs, func(g int) bool { return slices.Contains(f.BusyGPUs, g) })
	}
	f.StorageFromBytesPerSecond = median(busy)
	for _, m := range storage {
		f.Ports[m.at].ComputeTraffic = m.rate >= f.StorageFromBytesPerSecond
	}
	f.GPUs = gpuGroups(n, f.BusyGPUs, f.Ports)
	return f
}

// portRate is one port's transmit rate over seconds between a and b
// (nil when the sample lacks it), with its signalling rate in bytes/s;
// degraded says why no rate could be taken where that is a fault, note
// where the port is not judged by nature (not ACTIVE, no counter).
func portRate(a, b *PortCounter, seconds float64, name string) (rate *float64, link float64, degraded, note string) {
	switch {
	case a == nil:
		return nil, 0, fmt.Sprintf("%s: absent from the first sample (appeared, or its state was unreadable then): no rate this interval", name), ""
	case b == nil:
		return nil, 0, fmt.Sprintf("%s: gone between the samples (the device or port vanished, or its state became unreadable): no rate this interval", name), ""
	case b.File == "" && a.File == "":
		return nil, 0, "", "no transmit data counter (counters/port_xmit_data, counters_ext/port_xmit_data_64): not measured"
	case b.File == "":
		return nil, 0, fmt.Sprintf("%s: its transmit data counter %s could not be read in the second sample: no rate this interval", name, a.File), ""
	case a.File == "":
		return nil, 0, fmt.Sprintf("%s: its transmit data counter %s could not be read in the first sample: no rate this interval", name, b.File), ""
	case a.File != b.File:
		return nil, 0, fmt.Sprintf("%s: the samples read different counters (%s, then %s): no rate this interval", name, a.File, b.File), ""
	case seconds <= 0:
		return nil, 0, fmt.Sprintf("%s: %s: the samples are %gs apart: no rate", name, b.File, seconds), ""
	case b.Words < a.Words:
		return nil, 0, fmt.Sprintf("%s: %s went down from %d to %d: the counter was reset (driver reload, perfquery -R) between the samples: no rate this interval", name, b.File, a.Words, b.Words), ""
	case b.Words == saturated32 || a.Words == saturated32:
		return nil, 0, fmt.Sprintf("%s: %s holds %d, where a 32-bit port counter saturates: no rate (kernel before 4.5 without counters_ext, or an adapter without extended counters)", name, b.File, uint64(saturated32)), ""
	}
	r := float64(b.Words-a.Words) * xmitWordBytes / seconds
	if !b.Active {
		note = "port " + or(b.State, "state unknown") + ", not ACTIVE: not judged (check reports down ports)"
	}
	return &r, b.RateGbps * 1e9 / 8, "", note
}

type portKey struct {
	dev  string
	port int
}

func portMap(s FabricSample) map[portKey]*PortCounter {
	m := make(map[portKey]*PortCounter, len(s.Ports))
	for i := range s.Ports {
		p := &s.Ports[i]
		m[portKey{p.Device, p.Port}] = p
	}
	return m
}

// portsOf lists dev's port numbers in either sample, ascending.
func portsOf(dev string, a, b FabricSample) []int {
	var out []int
	for _, s := range []FabricSample{a, b} {
		for _, p := range s.Ports {
			if p.Device == dev && !slices.Contains(out, p.Port) {
				out = append(out, p.Port)
			}
		}
	}
	slices.Sort(out)
	return out
}

// busyGPUs are the GPUs of uses, ascending.
func busyGPUs(uses []Use) []int {
	out := []int{}
	for _, u := range uses {
		for _, g := range u.GPUs {
			if !slices.Contains(out, g) {
				out = append(out, g)
			}
		}
	}
	slices.Sort(out)
	return out
}

// gpuGroups gives each busy GPU, or busy GPUs paired with the same
// compute NICs, its ports and those idle. A busy GPU without a compute
// NIC has no entry.
func gpuGroups(n topology.Node, busy []int, ports []FabricPort) []FabricGPUs {
	out := []FabricGPUs{}
	byKey := map[string]int{}
	for _, p := range n.Pairs {
		if !slices.Contains(busy, p.GPU) || len(p.NICs) == 0 {
			continue
		}
		key := strings.Join(p.NICs, ",")
		i, ok := byKey[key]
		if !ok {
			i = len(out)
			byKey[key] = i
			g := FabricGPUs{Ports: []string{}, Idle: []string{}}
			for _, fp := range ports {
				if fp.Role == topology.RoleCompute && slices.ContainsFunc(p.NICs, func(nic string) bool { return nicDevice(n, nic) == fp.Device }) {
					g.Ports = append(g.Ports, fp.Name())
					if fp.Idle {
						g.Idle = append(g.Idle, fp.Name())
					}
				}
			}
			out = append(out, g)
		}
		out[i].GPUs = append(out[i].GPUs, p.GPU)
	}
	for i := range out {
		slices.Sort(out[i].GPUs)
	}
	return out
}

// nicDevice is the RDMA device of the NIC named name.
func nicDevice(n topology.Node, name string) string {
	for _, nic := range n.NICs {
		if nic.Name == name {
			return nic.RDMADevice
		}
	}
	return ""
}

// median of v (the mean of the middle two for an even count); 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

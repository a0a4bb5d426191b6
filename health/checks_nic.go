package health

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/rdma"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

func (in *Input) computeCount() int {
	c := 0
	for _, n := range in.Node.NICs {
		if n.Role == topology.RoleCompute {
			c++
		}
	}
	return c
}

func checkNICCount(_ context.Context, in *Input) Result {
	if in.Node.NoPCIBus {
		return noPCIBus("compute NICs")
	}
	if in.GPUs != nil {
		var bad []string
		for _, g := range in.gpus {
			if !slicesHasPair(in.Node.Pairs, g.Index) {
				bad = append(bad, fmt.Sprintf("%s has no compute NIC", gpuName(g)))
			}
		}
		return verdictOf(bad, Fail, "a compute NIC is missing or down at the PCI level; check lspci and the mlx5/efa driver",
			fmt.Sprintf("%s paired with the %d selected GPUs", plural(len(in.nics), "compute NIC"), len(in.gpus)))
	}
	have := in.computeCount()
	if e := in.Expect; e != nil && e.NICs.Fabric != "" {
		var bad []string
		for _, c := range in.Node.NICs {
			if c.Role == topology.RoleCompute && string(c.Fabric) != e.NICs.Fabric {
				bad = append(bad, fmt.Sprintf("compute NIC %s is %s, expected %s", c.Name, c.Fabric, e.NICs.Fabric))
			}
		}
		if len(bad) > 0 {
			return verdictOf(bad, Fail, "the node is not the hardware the expectations were learned on, or a NIC's link layer changed (mlxconfig LINK_TYPE)", "")
		}
	}
	if e := in.Expect; e != nil && e.NICs.ComputeCount > 0 {
		if have != e.NICs.ComputeCount {
			return Result{Verdict: Fail, Reason: fmt.Sprintf("%d compute NICs, expected %d", have, e.NICs.ComputeCount),
				Hint: "a NIC is missing from the PCI bus or its driver did not bind (dmesg | grep mlx5)"}
		}
		return Result{Verdict: Pass, Reason: fmt.Sprintf("%s as expected", plural(have, "compute NIC"))}
	}
	if have == 0 {
		if len(in.Node.GPUs) == 0 {
			return skip("no GPUs and no compute NICs")
		}
		return Result{Verdict: Fail, Reason: fmt.Sprintf("no compute NIC for %s", plural(len(in.Node.GPUs), "GPU")),
			Hint: "multi-node jobs need an RDMA NIC; name them with --compute-nics if discovery missed them"}
	}
	return Result{Verdict: Pass, Reason: plural(have, "compute NIC")}
}

func slicesHasPair(pairs []topology.Pair, gpu int) bool {
	for _, p := range pairs {
		if p.GPU == gpu && len(p.NICs) > 0 {
			return true
		}
	}
	return false
}

func checkPortState(_ context.Context, in *Input) Result {
	if len(in.nics) == 0 {
		return skip("no compute NIC")
	}
	var bad []string
	ports := 0
	for _, c := range in.nics {
		if len(c.Ports) == 0 {
			for _, i := range c.Interfaces {
				if i.OperState == "" {
					continue
				}
				ports++
				if i.OperState != "up" {
					bad = append(bad, fmt.Sprintf("NIC %s (%s) netdev %s is %s", c.Name, c.BusID, i.Name, i.OperState))
				}
			}
			continue
		}
		for _, p := range c.Ports {
			ports++
			if p.StateID != 4 || p.PhysStateID != 5 {
				bad = append(bad, fmt.Sprintf("NIC %s (%s) port %d is %s/%s, want ACTIVE/LinkUp%s",
					c.Name, c.BusID, p.Port, orUnknown(p.State), orUnknown(p.PhysState), in.usersOf(c.Name)))
			}
		}
	}
	if ports == 0 {
		return skip("compute NICs report no port state")
	}
	return verdictOf(bad, Fail, "check the cable and switch port (ibstat); Polling means no link partner, INIT means no subnet manager",
		fmt.Sprintf("%s ACTIVE/LinkUp", plural(ports, "port")))
}

// usersOf says which GPUs the layout gives a down compute NIC and what
// they use meanwhile (" (GPU 2's NIC; GPU 2 uses mlx5_0 meanwhile)"); ""
// when no GPU is given it.
func (in *Input) usersOf(nic string) string {
	var gpus, uses []string
	for _, p := range in.Node.Pairs {
		if slices.Contains(p.DownNICs, nic) {
			gpus = append(gpus, fmt.Sprintf("GPU %d", p.GPU))
			u := "no NIC"
			if len(p.NICs) > 0 {
				u = strings.Join(p.NICs, ",")
			}
			uses = append(uses, fmt.Sprintf("GPU %d uses %s", p.GPU, u))
		}
	}
	if len(gpus) == 0 {
		return ""
	}
	return fmt.Sprintf(" (the NIC of %s; meanwhile %s)", strings.Join(gpus, ", "), strings.Join(uses, ", "))
}

func checkRate(_ context.Context, in *Input) Result {
	if len(in.nics) == 0 {
		return skip("no compute NIC")
	}
	var want float64
	if in.Expect != nil {
		want = in.Expect.NICs.RateGbps
	}
	if want == 0 {
		for _, c := range in.Node.NICs {
			if c.Role == topology.RoleCompute {
				want = max(want, nicRate(c))
			}
		}
	}
	if want == 0 {
		return skip("compute NICs report no rate")
	}
	var bad []string
	for _, c := range in.nics {
		switch r := nicRate(c); {
		case r > 0 && r < want:
			bad = append(bad, fmt.Sprintf("NIC %s (%s) at %s Gb/s, expected %s", c.Name, c.BusID, fmtRate(r), fmtRate(want)))
		case r == 0 && c.Healthy() && in.Expect != nil && in.Expect.NICs.RateGbps > 0:
			// Up, or of unknown state, yet no rate: the expectation
			// cannot be held (a down port is nic.port_state's).
			bad = append(bad, fmt.Sprintf("NIC %s (%s) reports no rate, expected %s Gb/s: cannot verify", c.Name, c.BusID, fmtRate(want)))
		}
	}
	return verdictOf(bad, Fail, "the link trained down: reseat or replace the cable/transceiver, check the switch port speed",
		fmt.Sprintf("%s at %s Gb/s or more", plural(len(in.nics), "compute NIC"), fmtRate(want)))
}

// nicRate is the best rate of an RDMA port that is up; the netdev speed
// only where the NIC has no RDMA port (an IPoIB netdev can report the
// nominal speed of a link that trained down). A down port's rate (10 Gb/s
// SDR on InfiniBand, 40 Gb/s QDR on RoCE) says nothing of the link:
// nic.port_state reports it, and its rate counts as 0.
func nicRate(c topology.NIC) float64 {
	if len(c.Ports) > 0 {
		return c.UpRateGbps()
	}
	return c.RateGbps()
}

func fmtRate(r float64) string { return strconv.FormatFloat(r, 'f', -1, 64) }

type portKey struct {
	dev  string
	port int
}

func checkNICErrors(ctx context.Context, in *Input) Result {
	if in.Interval <= 0 {
		return skip("--interval 0: counters not sampled")
	}
	var keys []portKey
	for _, c := range in.nics {
		if c.RDMADevice == "" {
			continue
		}
		for _, p := range c.Ports {
			keys = append(keys, portKey{c.RDMADevice, p.Port})
		}
	}
	if len(keys) == 0 {
		return skip("no RDMA port on the compute NICs")
	}
	first := map[portKey]map[string]uint64{}
	for _, k := range keys {
		if v, err := in.Reader.PortCounters(k.dev, k.port, rdma.ErrorCounters); err == nil {
			first[k] = v
		}
	}
	if len(first) == 0 {
		return skip("no port exposes error counters (EFA and some RoCE drivers keep hw_counters only)")
	}
	if err := in.Sleep(ctx, in.Interval); err != nil {
		return Result{Verdict: Fail, Reason: "timed out between counter reads"}
	}
	var bad []string
	for _, k := range keys {
		a, ok := first[k]
		if !ok {
			continue
		}
		b, err := in.Reader.PortCounters(k.dev, k.port, rdma.ErrorCounters)
		if err != nil {
			bad = append(bad, fmt.Sprintf("NIC %s port %d: counters unreadable on the second read: %v", k.dev, k.port, err))
			continue
		}
		var inc []string
		for _, name := range rdma.ErrorCounters {
			if b[name] > a[name] {
				inc = append(inc, fmt.Sprintf("%s +%d", name, b[name]-a[name]))
			}
		}
		if len(inc) > 0 {
			bad = append(bad, fmt.Sprintf("NIC %s port %d: %s in %s", k.dev, k.port, strings.Join(inc, ", "), in.Interval))
		}
	}
	return verdictOf(bad, Fail, "a flapping or noisy link: check the cable and transceiver (mlxlink), then the switch port",
		fmt.Sprintf("no error counter increase on %s over %s", plural(len(first), "port"), in.Interval))
}

func checkFirmware(_ context.Context, in *Input) Result {
	byVer := map[string][]string{}
	for _, c := range in.nics {
		if c.FirmwareVersion != "" {
			byVer[c.FirmwareVersion] = append(byVer[c.FirmwareVersion], c.Name)
		}
	}
	want := ""
	if in.Expect != nil {
		want = in.Expect.NICs.Firmware
	}
	if len(byVer) == 0 {
		if want != "" && len(in.nics) > 0 {
			return Result{Verdict: Fail, Reason: fmt.Sprintf("compute NICs report no firmware version, expected %s: cannot verify", want),
				Hint: "fw_ver is unreadable under class/infiniband: check the RDMA driver"}
		}
		return skip("compute NICs report no firmware version")
	}
	if want == "" {
		// The majority version is taken as the right one.
		for v, names := range byVer {
			if len(names) > len(byVer[want]) || (len(names) == len(byVer[want]) && v > want) {
				want = v
			}
		}
	}
	var vers []string
	for v := range byVer {
		vers = append(vers, v)
	}
	sort.Strings(vers)
	var bad []string
	for _, v := range vers {
		if v == want {
			continue
		}
		for _, name := range byVer[v] {
			bad = append(bad, fmt.Sprintf("NIC %s runs firmware %s, others %s", name, v, want))
		}
	}
	return verdictOf(bad, Fail, "flash every compute NIC to one firmware (mlxfwreset after flint/mlxup)",
		fmt.Sprintf("%s on firmware %s", plural(len(byVer[want]), "compute NIC"), want))
}

func checkAligned(_ context.Context, in *Input) Result {
	if in.computeCount() == 0 {
		return skip("no compute NIC to align with")
	}
	if len(in.gpus) == 0 {
		return skip("no supported GPU to align")
	}
	var bad, warn, notes []string
	for _, g := range in.gpus {
		var p *topology.Pair
		for i := range in.Node.Pairs {
			if in.Node.Pairs[i].GPU == g.Index {
				p = &in.Node.Pairs[i]
			}
		}
		if p == nil || len(p.NICs) == 0 {
			bad = append(bad, gpuName(g)+" has no compute NIC")
			continue
		}
		nic := strings.Join(p.NICs, ",")
		switch p.Class {
		case topology.ClassPIX, topology.ClassPXB:
		case topology.ClassPHB, topology.ClassNODE:
			if !p.Decided {
				notes = append(notes, fmt.Sprintf("GPU %d→%s %s (switches hidden, best possible)", g.Index, nic, p.Class))
			} else {
				warn = append(warn, fmt.Sprintf("%s's nearest compute NIC %s is at %s, not under its PCIe switch", gpuName(g), nic, p.Class))
			}
		case topology.ClassSYS:
			bad = append(bad, fmt.Sprintf("%s's nearest compute NIC %s is across sockets (SYS)", gpuName(g), nic))
		default:
			bad = append(bad, fmt.Sprintf("%s's path to %s is unknown", gpuName(g), nic))
		}
	}
	hint := "GPU traffic crosses the CPU interconnect: fix NIC placement or --compute-nics; on VMs ask for a NUMA-aligned size"
	if len(bad) > 0 {
		return verdictOf(bad, Fail, hint, "")
	}
	if len(warn) > 0 {
		return verdictOf(warn, Warn, "GPUDirect RDMA goes through the host bridge: expect lower bandwidth", "")
	}
	ok := fmt.Sprintf("%s with a compute NIC at PXB or better", plural(len(in.gpus), "GPU"))
	if len(notes) > 0 {
		ok = fmt.Sprintf("%s aligned; note: %s", plural(len(in.gpus), "GPU"), notes[0])
		if len(notes) > 1 {
			ok += fmt.Sprintf(" (and %d more)", len(notes)-1)
		}
	}
	return Result{Verdict: Pass, Reason: ok}
}

// checkGDR: GPUDirect RDMA needs nvidia_peermem loaded, or dma-buf: an
// NVIDIA driver of R515 or later with a kernel of 5.12 or later
// (ib_umem_dmabuf). EFA carries its own GPUDirect support. The modules,
// kernel release and driver version are discovery's (Node.Kernel,
// Node.Driver). AMD GPUs have rules of their own (amdGDR); a mixed node
// gets both verdicts, each part named.
func checkGDR(_ context.Context, in *Input) Result {
	var rdmaNICs []topology.NIC
	efa := true
	for _, c := range in.nics {
		if c.Fabric.RDMA() {
			rdmaNICs = append(rdmaNICs, c)
			efa = efa && c.Fabric == topology.FabricEFA
		}
	}
	if len(rdmaNICs) == 0 {
		return skip("no RDMA compute NIC")
	}
	if len(in.gpus) == 0 {
		return skip("no NVIDIA GPU")
	}
	nv, amd := byVendor(in.gpus)
	var rs []Result
	if len(nv) > 0 {
		rs = append(rs, nvidiaGDR(in.Node, efa))
	}
	if len(amd) > 0 {
		r := amdGDR(in.Node)
		if len(nv) > 0 {
			r.Reason = "AMD GPUs: " + r.Reason
			rs[0].Reason = "NVIDIA GPUs: " + rs[0].Reason
		}
		rs = append(rs, r)
	}
	return mergeVendors(rs...)
}

// nvidiaGDR is topo.gdr for NVIDIA GPUs.
func nvidiaGDR(n topology.Node, efa bool) Result {
	if slices.Contains(n.Kernel.Modules, "nvidia_peermem") {
		return Result{Verdict: Pass, Reason: "nvidia_peermem loaded"}
	}
	if efa {
		return Result{Verdict: Pass, Reason: "EFA: GPUDirect RDMA through the efa driver (nvidia_peermem not needed)"}
	}
	drv := driverMajor(n.Driver.Version)
	kmaj, kmin, kok := kernelVersion(n.Kernel.Release)
	if drv >= 515 && kok && (kmaj > 5 || kmaj == 5 && kmin >= 12) {
		return Result{Verdict: Pass, Reason: fmt.Sprintf("dma-buf: driver %s (%s), kernel %d.%d (nvidia_peermem not loaded)", n.Driver.Version, n.Driver.Source, kmaj, kmin)}
	}
	why := "nvidia_peermem not loaded"
	switch {
	case drv == 0:
		why += " and the driver version is unknown"
	case drv < 515:
		why += fmt.Sprintf(" and driver %s is older than R515 (no dma-buf)", n.Driver.Version)
	case !kok:
		why += " and the kernel version is unknown (dma-buf needs 5.12+)"
	default:
		why += fmt.Sprintf(" and kernel %d.%d is older than 5.12 (no dma-buf)", kmaj, kmin)
	}
	return Result{Verdict: Fail, Reason: why, Hint: "modprobe nvidia_peermem (and add it to /etc/modules-load.d), or upgrade to a dma-buf capable driver and kernel"}
}

func driverMajor(v string) int {
	s, _, _ := strings.Cut(v, ".")
	n, _ := strconv.Atoi(s)
	return n
}

// kernelVersion is the major and minor number of a kernel release
// ("5.15.0-1042-nvidia"); ok is false for "" or a release that does not
// start with them.
func kernelVersion(release string) (int, int, bool) {
	f := strings.FieldsFunc(strings.TrimSpace(release), func(r rune) bool { return r == '.' || r == '-' })
	if len(f) < 2 {
		return 0, 0, false
	}
	a, err1 := strconv.Atoi(f[0])
	b2, err2 := strconv.Atoi(f[1])
	return a, b2, err1 == nil && err2 == nil
}

package nccl

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/topology"
)

// Statuses of an EnvCheck.
const (
	// EnvOK: the value selects what env would set for the process's GPUs.
	EnvOK = "ok"
	// EnvWrong: it selects a NIC or interface env would not (a storage or
	// management NIC), leaves out one env would give, or names GPUs the
	// process does not drive; Problem says which.
	EnvWrong = "wrong"
	// EnvUnset: the variable is not set; Problem says what the library
	// then does where that matters (NCCL uses every RDMA device).
	EnvUnset = "unset"
	// EnvUnchecked: the value cannot be held to the node from outside
	// (device ordinals in a pod or Slurm job may count its own GPUs).
	EnvUnchecked = "unchecked"
)

// EnvCheck is one variable of a running process's environment held to
// what env would set for the GPUs it drives.
type EnvCheck struct {
	Name  string `json:"name"`
	Value string `json:"value,omitempty"`
	// Want is what env sets for those GPUs; "" where env sets nothing.
	Want    string `json:"want,omitempty"`
	Status  string `json:"status"`
	Problem string `json:"problem,omitempty"`
}

// CheckRequest is the process CheckEnv holds to the node.
type CheckRequest struct {
	// GPUs are the GPU.Index values of the GPUs the process drives.
	GPUs []int
	// Lookup is the process's environment (/proc/PID/environ).
	Lookup func(name string) (string, bool)
	// Confined is set where the process's device ordinals may count
	// only the GPUs it was given: a Kubernetes pod's container, or a Slurm
	// job (with ConstrainDevices=yes Slurm numbers the job's GPUs from 0
	// in CUDA_VISIBLE_DEVICES; gres.conf(5)). A list of UUIDs is checked
	// all the same; ordinals are then left unchecked.
	Confined bool
}

// CheckEnv holds a running process's CUDA_VISIBLE_DEVICES (or, for AMD
// GPUs, ROCR_VISIBLE_DEVICES), NCCL_IB_HCA, NCCL_SOCKET_IFNAME and
// UCX_NET_DEVICES to what BuildEnv gives for the GPUs it drives: the same
// rules, one answer (gpuaffinity audit). The values are read with the
// libraries' own list syntax: NCCL's '^' (exclude) and '=' (exact)
// prefixes and prefix matching otherwise (src/misc/socket.cc
// matchIfList, src/transport/net_ib.cc ncclIbInit with
// src/misc/utils.cc parseStringList, "name[:port]"), UCX's exact
// "device:port" or interface names and "all" (ucs/config, UCX_NET_DEVICES
// in the UCX FAQ). It does no I/O.
func CheckEnv(n topology.Node, req CheckRequest) []EnvCheck {
	lookup := req.Lookup
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	node, _ := BuildEnv(n, EnvRequest{NoPlatform: true})
	var out []EnvCheck
	amd := len(req.GPUs) > 0 && slices.ContainsFunc(req.GPUs, func(i int) bool {
		g, ok := gpuByIndex(n, i)
		return ok && g.IsAMD()
	})
	out = append(out, checkVisible(n, req, lookup, "CUDA_VISIBLE_DEVICES"))
	if amd {
		out = append(out, checkVisible(n, req, lookup, "ROCR_VISIBLE_DEVICES"))
	}
	want, _ := node.Get("NCCL_IB_HCA")
	out = append(out, checkIBHCA(n, lookup, want))
	want, _ = node.Get("NCCL_SOCKET_IFNAME")
	out = append(out, checkSocket(lookup, want))
	out = append(out, checkUCX(n, lookup, ucxWant(n, req.GPUs)))
	return out
}

// gpuByIndex is the GPU with GPU.Index i.
func gpuByIndex(n topology.Node, i int) (topology.GPU, bool) {
	for _, g := range n.GPUs {
		if g.Index == i {
			return g, true
		}
	}
	return topology.GPU{}, false
}

// checkVisible holds a device list (CUDA_VISIBLE_DEVICES, or
// ROCR_VISIBLE_DEVICES for AMD GPUs) to the GPUs the process drives:
// every one of them must be in it. It resolves the list as env does
// (topology.ProcessGPUs).
func checkVisible(n topology.Node, req CheckRequest, lookup func(string) (string, bool), name string) EnvCheck {
	c := EnvCheck{Name: name}
	v, ok := lookup(name)
	if !ok {
		c.Status = EnvUnset
		return c
	}
	c.Value = v
	if req.Confined && !allUUIDs(v) {
		c.Status = EnvUnchecked
		c.Problem = "device ordinals in a pod or a Slurm job may count only the GPUs it was given: not held to the node's"
		return c
	}
	var sel topology.Selection
	var err error
	if name == "CUDA_VISIBLE_DEVICES" {
		sel, err = topology.ProcessGPUs(n, &v, lookup)
	} else {
		sel, err = topology.VisibleAMDGPUs(n, &v, nil)
	}
	if err == nil {
		err = sel.Hidden()
	}
	if err != nil {
		c.Status, c.Problem = EnvWrong, err.Error()
		return c
	}
	var missing []string
	for _, g := range req.GPUs {
		if !slices.Contains(sel.GPUs, g) {
			missing = append(missing, strconv.Itoa(g))
		}
	}
	if len(missing) > 0 {
		c.Status = EnvWrong
		c.Problem = fmt.Sprintf("selects GPU(s) %s, but the process drives GPU %s", intList(sel.GPUs), strings.Join(missing, ","))
		return c
	}
	c.Status = EnvOK
	return c
}

// allUUIDs reports whether every entry of a device list is a UUID
// ("GPU-…", "MIG-…"), which means the same inside and outside a container.
func allUUIDs(v string) bool {
	for e := range strings.SplitSeq(v, ",") {
		e = strings.TrimSpace(e)
		if !strings.HasPrefix(e, "GPU-") && !strings.HasPrefix(e, "MIG-") {
			return false
		}
	}
	return true
}

// ncclList is a parsed NCCL device or interface list.
type ncclList struct {
	exclude, exact bool
	entries        []ncclEntry
}

type ncclEntry struct {
	name string
	port int // -1: any port
}

// parseNCCLList parses NCCL's list syntax: an optional '^' (the list
// excludes), an optional '=' (names match exactly, else as prefixes), then
// comma-separated "name[:port]" entries (src/misc/utils.cc
// parseStringList; ports only where withPort).
func parseNCCLList(v string, withPort bool) ncclList {
	var l ncclList
	if strings.HasPrefix(v, "^") {
		l.exclude, v = true, v[1:]
	}
	if strings.HasPrefix(v, "=") {
		l.exact, v = true, v[1:]
	}
	for e := range strings.SplitSeq(v, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		ent := ncclEntry{name: e, port: -1}
		if withPort {
			if i := strings.LastIndexByte(e, ':'); i >= 0 {
				if p, err := strconv.Atoi(e[i+1:]); err == nil {
					ent.name, ent.port = e[:i], p
				}
			}
		}
		l.entries = append(l.entries, ent)
	}
	return l
}

// selects reports whether the list selects name (and port, -1 for an
// interface).
func (l ncclList) selects(name string, port int) bool {
	hit := false
	for _, e := range l.entries {
		match := name == e.name || (!l.exact && strings.HasPrefix(name, e.name))
		if match && (e.port < 0 || port < 0 || e.port == port) {
			hit = true
			break
		}
	}
	return hit != l.exclude
}

// nicRole names a NIC's role for a message: "mlx5_8 (storage)".
func nicRole(nic topology.NIC) string {
	return fmt.Sprintf("%s (%s)", nic.Name, nic.Role)
}

// checkIBHCA holds NCCL_IB_HCA to env's: the RDMA ports it selects must
// be compute NICs' ports, and every compute port env names selected.
func checkIBHCA(n topology.Node, lookup func(string) (string, bool), want string) EnvCheck {
	c := EnvCheck{Name: "NCCL_IB_HCA", Want: want}
	v, ok := lookup(c.Name)
	var others []string
	if !ok {
		c.Status = EnvUnset
		for _, nic := range n.NICs {
			if nic.RDMADevice != "" && nic.Role != topology.RoleCompute {
				others = append(others, nicRole(nic))
			}
		}
		if len(others) > 0 {
			c.Problem = "NCCL then uses every RDMA device, " + strings.Join(others, ", ") + " included"
		}
		return c
	}
	c.Value = v
	l := parseNCCLList(v, true)
	var selected []string
	for _, nic := range n.NICs {
		if nic.RDMADevice == "" {
			continue
		}
		for _, p := range nic.Ports {
			if !l.selects(nic.RDMADevice, p.Port) {
				continue
			}
			selected = append(selected, nic.RDMADevice+":"+strconv.Itoa(p.Port))
			if nic.Role != topology.RoleCompute && !slices.Contains(others, nicRole(nic)) {
				others = append(others, nicRole(nic))
			}
		}
	}
	var missing []string
	for _, e := range parseNCCLList(want, true).entries {
		if !l.selects(e.name, e.port) {
			missing = append(missing, e.name+":"+strconv.Itoa(e.port))
		}
	}
	var problems []string
	if len(selected) == 0 {
		problems = append(problems, "selects no RDMA device of this node")
	}
	if len(others) > 0 {
		problems = append(problems, "selects "+strings.Join(others, ", "))
	}
	if len(missing) > 0 {
		problems = append(problems, "leaves out compute port(s) "+strings.Join(missing, ","))
	}
	c.Status, c.Problem = status(problems)
	return c
}

// checkSocket holds NCCL_SOCKET_IFNAME to env's: it must select every
// interface env names (the node's socket interface).
func checkSocket(lookup func(string) (string, bool), want string) EnvCheck {
	c := EnvCheck{Name: "NCCL_SOCKET_IFNAME", Want: want}
	v, ok := lookup(c.Name)
	if !ok {
		c.Status = EnvUnset
		return c
	}
	c.Value = v
	l := parseNCCLList(v, false)
	var missing []string
	for _, e := range parseNCCLList(want, false).entries {
		if !l.selects(e.name, -1) {
			missing = append(missing, e.name)
		}
	}
	var problems []string
	if len(missing) > 0 {
		problems = append(problems, "does not select "+strings.Join(missing, ",")+", the node's socket interface")
	}
	c.Status, c.Problem = status(problems)
	return c
}

// ucxWant is UCX_NET_DEVICES as env sets it for the GPUs: each GPU's
// rank's value, joined without repeats.
func ucxWant(n topology.Node, gpus []int) string {
	var out []string
	for r := range n.GPUs {
		e, err := BuildEnv(n, EnvRequest{Rank: &r, RanksPerGPU: 1, NoPlatform: true})
		if err != nil || e.GPU == nil || !slices.Contains(gpus, *e.GPU) {
			continue
		}
		v, _ := e.Get("UCX_NET_DEVICES")
		for d := range strings.SplitSeq(v, ",") {
			if d != "" && !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
	}
	return strings.Join(out, ",")
}

// checkUCX holds UCX_NET_DEVICES to env's: every device it names must be
// one env gives the GPUs ("all" names every device, storage NICs
// included).
func checkUCX(n topology.Node, lookup func(string) (string, bool), want string) EnvCheck {
	c := EnvCheck{Name: "UCX_NET_DEVICES", Want: want}
	v, ok := lookup(c.Name)
	if !ok {
		c.Status = EnvUnset
		return c
	}
	c.Value = v
	wantSet := strings.Split(want, ",")
	var problems []string
	for e := range strings.SplitSeq(v, ",") {
		e = strings.TrimSpace(e)
		switch {
		case e == "":
		case e == "all":
			problems = append(problems, "all: every device, whatever its role")
		case slices.Contains(wantSet, e):
		default:
			if nic, ok := ucxNIC(n, e); ok {
				problems = append(problems, fmt.Sprintf("names %s of %s, not one of the GPU's NICs", e, nicRole(nic)))
			} else {
				problems = append(problems, "names "+e+", not a device of this node")
			}
		}
	}
	c.Status, c.Problem = status(problems)
	return c
}

// ucxNIC finds the NIC of a UCX device name: "mlx5_0:1" or a netdev.
func ucxNIC(n topology.Node, e string) (topology.NIC, bool) {
	dev := e
	if i := strings.LastIndexByte(e, ':'); i >= 0 {
		dev = e[:i]
	}
	for _, nic := range n.NICs {
		if nic.RDMADevice == dev || slices.Contains(nic.Netdevs, dev) {
			return nic, true
		}
	}
	return topology.NIC{}, false
}

func status(problems []string) (string, string) {
	if len(problems) == 0 {
		return EnvOK, ""
	}
	return EnvWrong, strings.Join(problems, "; ")
}

func intList(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

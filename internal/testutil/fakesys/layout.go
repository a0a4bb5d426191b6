package fakesys

import (
	"slices"

	"github.com/gpuaffinity/gpuaffinity/cpuset"
)

// layout is the CPU and NUMA arrangement a Spec implies, computed once.
type layout struct {
	ncpu    int // possible CPUs (nr_cpu_ids)
	cores   int // sockets * cores_per_socket
	online  cpuset.Set
	offline cpuset.Set
	allowed cpuset.Set
	// nodes in spec order, with their (online) CPUs.
	nodeIDs  []int
	nodeCPUs map[int]cpuset.Set
	// nodeOf is each CPU's node; -1 for none.
	nodeOf    []int
	distances [][]int
}

// socketOf and coreOf give the placement of CPU n: CPU numbers run
// socket-major within one SMT thread, threads follow each other.
func (l *layout) socketOf(spec *Spec, n int) int {
	return (n % l.cores) / spec.CPU.CoresPerSocket
}

func (l *layout) coreOf(spec *Spec, n int) int { return n % spec.CPU.CoresPerSocket }

// siblings is the SMT siblings of CPU n (core_cpus).
func (l *layout) siblings(spec *Spec, n int) cpuset.Set {
	base := n % l.cores
	c := make([]int, 0, spec.CPU.ThreadsPerCore)
	for t := range spec.CPU.ThreadsPerCore {
		c = append(c, base+t*l.cores)
	}
	return cpuset.Of(c...)
}

// socketCPUs is every CPU of socket s (package_cpus).
func (l *layout) socketCPUs(spec *Spec, s int) cpuset.Set {
	cps := spec.CPU.CoresPerSocket
	var c []int
	for t := range spec.CPU.ThreadsPerCore {
		for k := range cps {
			c = append(c, t*l.cores+s*cps+k)
		}
	}
	return cpuset.Of(c...)
}

// layout computes the CPU/NUMA layout and validates the cpu and numa
// sections.
func (s *Spec) layout() (*layout, error) {
	c := s.CPU
	l := &layout{cores: c.Sockets * c.CoresPerSocket}
	l.ncpu = l.cores * c.ThreadsPerCore
	if l.ncpu > cpuset.MaxCPU {
		return nil, specErr("cpu: %d CPUs is too many", l.ncpu)
	}
	all := cpuset.Range(0, l.ncpu-1)
	off, err := cpuset.Parse(c.Offline)
	if err != nil {
		return nil, specErr("cpu.offline: %v", err)
	}
	if !off.Difference(all).IsEmpty() {
		return nil, specErr("cpu.offline %s names CPUs beyond %d", off, l.ncpu-1)
	}
	if off.Contains(0) {
		return nil, specErr("cpu.offline: CPU 0 cannot be offline")
	}
	l.offline = off
	l.online = all.Difference(off)
	l.allowed = l.online
	if c.Allowed != "" {
		a, err := cpuset.Parse(c.Allowed)
		if err != nil {
			return nil, specErr("cpu.allowed: %v", err)
		}
		if !a.Difference(l.online).IsEmpty() || a.IsEmpty() {
			return nil, specErr("cpu.allowed %s must be a non-empty subset of the online CPUs %s", a, l.online)
		}
		l.allowed = a
	}

	if len(s.NUMA.Nodes) == 0 {
		return nil, specErr("numa: no nodes")
	}
	l.nodeCPUs = map[int]cpuset.Set{}
	l.nodeOf = slices.Repeat([]int{-1}, l.ncpu)
	bySocket := map[int][]int{} // socket -> node indexes, spec order
	for i, n := range s.NUMA.Nodes {
		if n.ID < 0 || n.ID > 1023 {
			return nil, specErr("numa node id %d out of range", n.ID)
		}
		if _, dup := l.nodeCPUs[n.ID]; dup {
			return nil, specErr("numa node %d listed twice", n.ID)
		}
		if n.MemoryGiB < 0 {
			return nil, specErr("numa node %d: negative memory", n.ID)
		}
		l.nodeIDs = append(l.nodeIDs, n.ID)
		l.nodeCPUs[n.ID] = cpuset.Set{}
		if n.Socket != nil {
			if *n.Socket < 0 || *n.Socket >= c.Sockets {
				return nil, specErr("numa node %d: socket %d does not exist", n.ID, *n.Socket)
			}
			if n.CPUs == "" {
				bySocket[*n.Socket] = append(bySocket[*n.Socket], i)
			}
		}
	}
	for _, n := range s.NUMA.Nodes {
		if n.CPUs == "" {
			continue
		}
		set, err := cpuset.Parse(n.CPUs)
		if err != nil {
			return nil, specErr("numa node %d cpus: %v", n.ID, err)
		}
		if !set.Difference(all).IsEmpty() {
			return nil, specErr("numa node %d cpus %s name CPUs beyond %d", n.ID, set, l.ncpu-1)
		}
		l.nodeCPUs[n.ID] = set
	}
	for sock, idx := range bySocket {
		cps := c.CoresPerSocket
		for k, i := range idx {
			lo, hi := k*cps/len(idx), (k+1)*cps/len(idx)
			var cpus []int
			for t := range c.ThreadsPerCore {
				for core := lo; core < hi; core++ {
					cpus = append(cpus, t*l.cores+sock*cps+core)
				}
			}
			l.nodeCPUs[s.NUMA.Nodes[i].ID] = cpuset.Of(cpus...)
		}
	}
	for _, id := range l.nodeIDs {
		for _, cpu := range l.nodeCPUs[id].CPUs() {
			if l.nodeOf[cpu] != -1 {
				return nil, specErr("cpu %d is in numa nodes %d and %d", cpu, l.nodeOf[cpu], id)
			}
			l.nodeOf[cpu] = id
		}
		// The kernel lists only online CPUs in a node's cpulist.
		l.nodeCPUs[id] = l.nodeCPUs[id].Intersect(l.online)
	}
	for cpu, n := range l.nodeOf {
		if n == -1 {
			return nil, specErr("cpu %d is in no numa node", cpu)
		}
	}

	nn := len(l.nodeIDs)
	if d := s.NUMA.Distances; d != nil {
		if len(d) != nn {
			return nil, specErr("numa.distances has %d rows for %d nodes", len(d), nn)
		}
		for i, row := range d {
			if len(row) != nn {
				return nil, specErr("numa.distances row %d has %d entries for %d nodes", i, len(row), nn)
			}
			for _, v := range row {
				if v <= 0 || v > 255 {
					return nil, specErr("numa.distances: %d out of range", v)
				}
			}
		}
		l.distances = d
	} else {
		l.distances = make([][]int, nn)
		for i := range nn {
			l.distances[i] = make([]int, nn)
			for j := range nn {
				l.distances[i][j] = 21
				if i == j {
					l.distances[i][j] = 10
				}
			}
		}
	}
	return l, nil
}

// nodeCPUSet returns the online CPUs of node n; all online CPUs for -1.
func (l *layout) nodeCPUSet(n int) cpuset.Set {
	if n < 0 {
		return l.online
	}
	return l.nodeCPUs[n]
}

package topology

import (
	"encoding/json"
	"fmt"
)

// Class is the PCIe path class between two devices, with the legend of
// `nvidia-smi topo -m`. Lower is closer.
type Class int

const (
	ClassUnknown Class = iota
	ClassPIX           // at most one PCIe switch between them
	ClassPXB           // several PCIe switches, no host bridge
	ClassPHB           // through one PCIe host bridge
	ClassNODE          // across host bridges within one NUMA node
	ClassSYS           // across the SMP interconnect between NUMA nodes
)

var classNames = [...]string{"UNKNOWN", "PIX", "PXB", "PHB", "NODE", "SYS"}

func (c Class) String() string {
	if c < 0 || int(c) >= len(classNames) {
		return fmt.Sprintf("Class(%d)", int(c))
	}
	return classNames[c]
}

// SharesSwitch reports whether the class is a path inside PCIe switches
// (PIX, PXB): peer traffic can stay below the root complex, where ACS
// would redirect it and where cuFile needs no dynamic routing.
func (c Class) SharesSwitch() bool { return c == ClassPIX || c == ClassPXB }

// ParseClass reads a class name as String prints it.
func ParseClass(s string) (Class, error) {
	for i, n := range classNames {
		if n == s {
			return Class(i), nil
		}
	}
	return ClassUnknown, fmt.Errorf("unknown path class %q", s)
}

// MarshalText writes the class name, which JSON encodes as a string.
func (c Class) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

func (c *Class) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := ParseClass(s)
	*c = v
	return err
}

// Path is the class between one GPU and one NIC.
type Path struct {
	GPU int    `json:"gpu"` // GPU index
	NIC string `json:"nic"` // NIC name
	// Class is the class of the NIC's data path: from its Data Direct
	// function where it has one, as NCCL sees it.
	Class Class `json:"class"`
	// PFClass is, for a NIC with a Data Direct function only, the class
	// of its own PCI function, as `nvidia-smi topo -m` prints it.
	PFClass Class `json:"pf_class,omitempty"`
	// Inferred is set where the PCI tree alone could not place the two
	// devices (unknown NUMA node) and locality came from CPU lists.
	Inferred bool `json:"inferred,omitempty"`
}

// GPUPath is the connection between two GPUs.
type GPUPath struct {
	A     int   `json:"a"`
	B     int   `json:"b"`
	Class Class `json:"class"` // PCIe class
	// NVLinks is the number of NVLinks joining them (directly or through
	// NVSwitches): `NV#` in nvidia-smi; 0 for none.
	NVLinks int `json:"nvlinks"`
	// XGMI is the number of direct XGMI links joining two AMD GPUs (1
	// per linked pair on MI300X): XGMI in rocm-smi --showtopotype.
	XGMI int `json:"xgmi,omitempty"`
}

// Pair is the NIC choice of one GPU.
type Pair struct {
	GPU   int      `json:"gpu"`
	NICs  []string `json:"nics"`
	Class Class    `json:"class"`
	Note  string   `json:"note,omitempty"`
	// DownNICs are the compute NICs the layout gives the GPU whose ports
	// are down; NICs then holds the healthy NICs it uses instead.
	DownNICs []string `json:"down_nics"`
	// Decided is false where several NICs tie at NODE or SYS class and the
	// choice among them is by order only (VMs that hide PCIe switches).
	Decided bool `json:"decided"`
}

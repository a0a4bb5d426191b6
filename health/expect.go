package health

import (
	"bytes"
	"fmt"

	// YAML 1.1 v2, not v3: the agent reads --expect, and v2 is the YAML
	// library it links anyway (exporter-toolkit's web configuration), so
	// v3 would add a second one to the daemon's resident code. An
	// expectations file is two maps of integers, strings and a number,
	// which both read alike.
	"go.yaml.in/yaml/v2"

	"github.com/gpuaffinity/gpuaffinity/topology"
)

// Expect is what a healthy node of this kind looks like, as `check
// --learn` prints it. Zero fields are not checked.
type Expect struct {
	GPUs struct {
		Count         int    `yaml:"count" json:"count"`
		Model         string `yaml:"model,omitempty" json:"model,omitempty"`
		NVLinksPerGPU int    `yaml:"nvlinks_per_gpu,omitempty" json:"nvlinks_per_gpu,omitempty"`
		PCIeWidth     int    `yaml:"pcie_width,omitempty" json:"pcie_width,omitempty"`
	} `yaml:"gpus" json:"gpus"`
	NICs struct {
		ComputeCount int     `yaml:"compute_count" json:"compute_count"`
		Fabric       string  `yaml:"fabric,omitempty" json:"fabric,omitempty"`
		RateGbps     float64 `yaml:"rate_gbps,omitempty" json:"rate_gbps,omitempty"`
		Firmware     string  `yaml:"firmware,omitempty" json:"firmware,omitempty"`
	} `yaml:"nics" json:"nics"`
}

// Learn records the node as it is now.
func Learn(n topology.Node) Expect {
	var e Expect
	e.GPUs.Count = len(n.GPUs)
	for _, g := range n.GPUs {
		if e.GPUs.Model == "" {
			e.GPUs.Model = g.Model
		}
		if g.NVLinkVisible {
			e.GPUs.NVLinksPerGPU = max(e.GPUs.NVLinksPerGPU, activeLinks(g))
		}
		e.GPUs.PCIeWidth = max(e.GPUs.PCIeWidth, g.PCIe.MaxWidth)
	}
	for _, c := range n.NICs {
		if c.Role != topology.RoleCompute {
			continue
		}
		e.NICs.ComputeCount++
		if e.NICs.Fabric == "" {
			e.NICs.Fabric = string(c.Fabric)
		}
		e.NICs.RateGbps = max(e.NICs.RateGbps, nicRate(c))
		if e.NICs.Firmware == "" {
			e.NICs.Firmware = c.FirmwareVersion
		}
	}
	return e
}

// YAML renders e with a comment header.
func (e Expect) YAML() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("# gpuaffinity check --expect: learned expectations; edit and keep with the node image\n")
	enc := yaml.NewEncoder(&b) // v2 indents by two spaces
	if err := enc.Encode(e); err != nil {
		return nil, err
	}
	return b.Bytes(), enc.Close()
}

// ParseExpect parses an expectations file's contents (as Expect.YAML
// writes them; the caller reads the file); name names it in errors.
// Unknown keys are an error.
func ParseExpect(data []byte, name string) (*Expect, error) {
	var e Expect
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.SetStrict(true)
	if err := dec.Decode(&e); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &e, nil
}

func activeLinks(g topology.GPU) int {
	a := 0
	for _, l := range g.NVLinks {
		if l.Active {
			a++
		}
	}
	return a
}

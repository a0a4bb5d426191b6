package fakesys

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuaffinity/gpuaffinity/internal/demo"
	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
)

//go:embed testdata/machines/*.yaml
var machineFS embed.FS

//go:embed testdata/machines-expect/*.yaml
var expectFS embed.FS

// filesFS holds the files specs copy into roots (Spec.Files).
//
//go:embed testdata/files
var filesFS embed.FS

// ErrUnknownMachine is wrapped when a machine name is neither a spec nor
// a capture. It is demo's, so that a test checks one error whichever
// package named the machine.
var ErrUnknownMachine = demo.ErrUnknownMachine

// H200VM is the name of the real capture (see BuildH200).
const H200VM = "h200-vm"

// Machines returns every machine name BuildMachine accepts, sorted: the
// specs in testdata/machines and the captures (h200-vm).
func Machines() []string {
	names := []string{H200VM}
	entries, _ := fs.ReadDir(machineFS, "testdata/machines")
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".yaml"); ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// Machine parses the embedded spec testdata/machines/<name>.yaml. The
// h200-vm capture has no spec; Machine returns ErrUnknownMachine for it.
func Machine(name string) (Spec, error) {
	data, p, err := machineData(name)
	if err != nil {
		return Spec{}, err
	}
	s, err := Parse(p, data)
	if err != nil {
		return Spec{}, err
	}
	if s.Name != name {
		return Spec{}, fmt.Errorf("%s: %w: name %q differs from the file name", p, ErrSpec, s.Name)
	}
	return s, nil
}

// Expectation returns the hand-written expectations of a machine: the
// spec's expect block, or testdata/machines-expect/<name>.yaml for a
// capture.
func Expectation(name string) (Expect, error) {
	p := path.Join("testdata/machines-expect", name+".yaml")
	if data, err := expectFS.ReadFile(p); err == nil {
		return ParseExpect(p, data)
	}
	s, err := Machine(name)
	if err != nil {
		return Expect{}, err
	}
	return s.Expect, nil
}

// BuildMachineMemory builds any machine of Machines() in memory, with
// the NVML replay of its nvml.json (nil when it has none). It loads the
// machine's prebuilt image (demo.Memory, what --demo uses), and builds
// from the spec only a machine that has none yet.
func BuildMachineMemory(name string) (*rootfs.Root, gonvml.Interface, error) {
	if r, lib, err := demo.Memory(name); !errors.Is(err, demo.ErrUnknownMachine) {
		return r, lib, err
	}
	if name == H200VM {
		return BuildH200Memory()
	}
	s, err := Machine(name)
	if err != nil {
		return nil, nil, err
	}
	return BuildMemory(s)
}

// BuildMachine builds any machine of Machines() into dir.
func BuildMachine(name, dir string) error {
	if name == H200VM {
		return BuildH200(dir)
	}
	s, err := Machine(name)
	if err != nil {
		return err
	}
	return Build(s, dir)
}

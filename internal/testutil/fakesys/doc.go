// Package fakesys builds fake machine roots for tests: a directory with
// sys/, proc/ and nvml.json that the project's readers, hwloc
// (HWLOC_FSROOT), node_exporter (--path.sysfs) and procfs read as they
// would a live node. It is test tooling, never linked into the binary:
// `gpuaffinity topo --demo NAME` loads the prebuilt images of package
// internal/demo, which this package writes.
//
// Machines come from two places:
//
//   - specs: one YAML file per machine in testdata/machines (format in
//     FORMAT.md), parsed strictly by Parse/Machine and written by Build;
//     a fault machine extends one of them with faults (GPUs lost or with
//     NVLinks down, XIDs, RDMA ports down), without copying it;
//   - captures: the real H200 KVM guest in testdata/h200-vm, unpacked by
//     BuildH200 with nvml.json converted from its NVML probe.
//
// Machines lists both, BuildMachine builds any of them (fakesystest.Root
// into a test's temp dir), and Expectation returns the hand-written
// expected pairing of each (never derived from the program's output).
//
// BuildMachineMemory loads a machine from its prebuilt image instead
// (demo.Memory, what --demo uses), internal/demo/images/NAME.img.gz: the
// same tree and NVML answers in a compact form, a millisecond to load
// where building from the spec took tens. go generate
// ./internal/testutil/fakesys writes the images (BuildImage);
// TestImagesMatchSpecs fails while one differs from what its spec or
// capture builds, TestMachinesHaveImages while a machine has none, so a
// changed spec, capture or builder needs a go generate in the same
// change. Tests build from the specs directly.
//
// What Build writes follows the kernel's formats (see
// ../shared/research/fake-sysfs.md): every attribute ends with a newline,
// links are relative as sysfs_get_target_path() writes them, masks have as
// many 32-bit words as nr_cpu_ids needs, PCI functions carry a 256-byte
// config space with a PCIe capability (hwloc needs it to recognise
// bridges). Per-CPU cache files are not written: hwloc does not need them
// to place devices, and Build must stay fast.
//
// Errors: a bad spec yields an error wrapping ErrSpec that names the file
// and the offending device; an unknown name wraps ErrUnknownMachine; an
// unsafe capture archive wraps ErrUnsafePath; I/O failures are the
// *os.PathError of the file concerned. Nothing panics on a bad spec.
//
// This package is for tests only: nothing in the agent reads its output
// on a live node, and cmd/gpuaffinity's TestBinaryLinksNoFixtures fails
// if the binary links it.
package fakesys

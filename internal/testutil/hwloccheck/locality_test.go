package hwloccheck

import (
	"errors"
	"os/exec"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuaffinity/gpuaffinity/cpuset"
)

func TestParseBitmap(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want cpuset.Set
	}{
		{"0x0000ffff", cpuset.Range(0, 15)},
		{"0x00000001", cpuset.Of(0)},
		// hwloc prints all-zero words as empty ones.
		{"0x00010000,,,0x00000001", cpuset.Of(0, 112)},
		{"0x000000ff,0xffffffff,0xffff0000,,0x00ffffff,0xffffffff", cpuset.Range(0, 55).Union(cpuset.Range(112, 167))},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseBitmap(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(tc.want) {
				t.Errorf("parseBitmap(%q) = %s, want %s", tc.in, got, tc.want)
			}
		})
	}
	if _, err := parseBitmap("0xf...f,0x00000001"); err == nil {
		t.Error("infinite bitmap accepted")
	}
}

// A two-node machine: one host bridge under each package, one at machine
// level, and a one-node case where the machine and the node coincide.
const twoNodes = `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x0000000f">
    <object type="Package" os_index="0" cpuset="0x00000003">
      <object type="NUMANode" os_index="0" cpuset="0x00000003"/>
      <object type="Bridge" bridge_type="0-1" depth="0" bridge_pci="0000:[15-1b]">
        <object type="Bridge" pci_busid="0000:15:01.0" bridge_type="1-1" depth="1">
          <object type="PCIDev" pci_busid="0000:1B:00.0"/>
        </object>
      </object>
    </object>
    <object type="Package" os_index="1" cpuset="0x0000000c">
      <object type="NUMANode" os_index="1" cpuset="0x0000000c"/>
      <object type="Bridge" bridge_type="0-1" depth="0">
        <object type="PCIDev" pci_busid="0000:9a:00.0">
          <object type="OSDev" name="mlx5_6" osdev_type="3"/>
        </object>
      </object>
    </object>
    <object type="Bridge" bridge_type="0-1" depth="0">
      <object type="PCIDev" pci_busid="0000:00:06.0"/>
    </object>
  </object>
</topology>`

func TestParseLocality(t *testing.T) {
	got, err := parseObjects([]byte(twoNodes))
	if err != nil {
		t.Fatal(err)
	}
	want := []PCIObject{
		{"0000:15:01.0", "Bridge", 0},
		{"0000:1b:00.0", "PCIDev", 0},
		{"0000:9a:00.0", "PCIDev", 1},
		{"0000:00:06.0", "PCIDev", -1}, // machine level on a two-node machine
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("locality (-want +got):\n%s", d)
	}
	if _, err := parseObjects([]byte("<topology/>")); err == nil {
		t.Error("empty topology accepted")
	}
}

func TestLocalityMissingTool(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Locality(t.TempDir())
	if !errors.Is(err, exec.ErrNotFound) {
		t.Fatalf("Locality without hwloc: %v, want exec.ErrNotFound", err)
	}
}

package fakesys

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// minimal is a valid one-GPU spec the table below breaks one way at a time.
const minimal = `
name: tiny
cpu: {sockets: 1, cores_per_socket: 4, threads_per_core: 2}
numa:
  nodes: [{id: 0, socket: 0, memory_gib: 16}]
pci:
  - host_bridge: "0000:10"
    numa: 0
    devices:
      - bdf: "0000:10:01.0"
        kind: bridge
        children:
          - bdf: "0000:11:00.0"
            kind: gpu
            gpu: {index: 0, nvlinks: 0}
          - bdf: "0000:11:00.1"
            kind: nic
            netdevs: [{name: eth0}]
`

func TestParseMinimal(t *testing.T) {
	s, err := Parse("tiny.yaml", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range s.Functions() {
		got = append(got, f.BDF+"/"+f.Kind+"/"+f.Parent)
	}
	want := []string{"0000:10:01.0/bridge/", "0000:11:00.0/gpu/0000:10:01.0", "0000:11:00.1/nic/0000:10:01.0"}
	if !slices.Equal(got, want) {
		t.Errorf("Functions() = %v, want %v", got, want)
	}
}

func TestParseRejects(t *testing.T) {
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"unknown field (typo)", "kind: gpu", "kind: gpu\n            vendr: \"0x10de\"", "vendr"},
		{"unknown kind", "kind: nic", "kind: nick", "unknown kind"},
		{"empty kind", "kind: nic", "kind: \"\"", "kind is empty"},
		{"duplicate bdf", `"0000:11:00.1"`, `"0000:11:00.0"`, "duplicate bdf"},
		{"child on the parent's bus", `"0000:11:00.0"`, `"0000:10:00.0"`, "buses"},
		{"children on two buses", `"0000:11:00.1"`, `"0000:12:00.1"`, "one secondary bus"},
		{"child bus below the bridge", "- bdf: \"0000:11:00.0\"\n            kind: gpu\n            gpu: {index: 0, nvlinks: 0}\n          - bdf: \"0000:11:00.1\"", "- bdf: \"0000:0f:00.0\"\n            kind: gpu\n            gpu: {index: 0, nvlinks: 0}\n          - bdf: \"0000:0f:00.1\"", "above"},
		{"device on the wrong root bus", `bdf: "0000:10:01.0"`, `bdf: "0000:20:01.0"`, "sits on bus"},
		{"non-canonical bdf", `"0000:11:00.1"`, `"0:11:00.1"`, "bdf"},
		{"children of an endpoint", "netdevs: [{name: eth0}]", "netdevs: [{name: eth0}]\n            children: [{bdf: \"0000:12:00.0\", kind: nic}]", "only bridges"},
		{"unknown numa node", "numa: 0", "numa: 3", "numa 3"},
		{"bad vendor", "kind: nic", "kind: nic\n            vendor: \"15b3\"", "0x-prefixed"},
		{"bad link speed", "kind: nic", "kind: nic\n            link: {speed: fast}", "link speed"},
		{"nvlinks word", "nvlinks: 0", "nvlinks: lots", "not-supported"},
		{"health fabric state", "nvlinks: 0}", "nvlinks: 0, health: {fabric_state: 4}}", "health.fabric_state 4"},
		{"health unknown field", "nvlinks: 0}", "nvlinks: 0, health: {ecc: 1}}", "ecc"},
		{"gpu peers missing", "nvlinks: 0", "nvlinks: 2, nvlink_remote: gpu", "nvlink_peers"},
		{"duplicate netdev", "netdevs: [{name: eth0}]", "netdevs: [{name: eth0}, {name: eth0}]", "eth0"},
		{"no sockets", "sockets: 1", "sockets: 0", "sockets"},
		{"cpu in two nodes", "nodes: [{id: 0, socket: 0, memory_gib: 16}]", "nodes: [{id: 0, socket: 0}, {id: 1, cpus: \"0-1\"}]", "numa nodes 0 and 1"},
		{"distances shape", "memory_gib: 16}]", "memory_gib: 16}]\n  distances: [[10, 20]]", "distances"},
		{"offline cpu 0", "threads_per_core: 2}", "threads_per_core: 2, offline: \"0\"}", "CPU 0"},
		{"second document", "name: tiny", "name: tiny\n---\nname: again", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(minimal, tc.old) {
				t.Fatalf("test case does not apply: %q not in the minimal spec", tc.old)
			}
			_, err := Parse("tiny.yaml", []byte(strings.Replace(minimal, tc.old, tc.new, 1)))
			if err == nil {
				t.Fatal("Parse accepted a bad spec")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "tiny.yaml") {
				t.Errorf("error %q does not name the file and %q", err, tc.want)
			}
		})
	}
}

// Validation errors wrap ErrSpec so callers can tell a bad spec from I/O.
func TestValidateWrapsErrSpec(t *testing.T) {
	_, err := Parse("tiny.yaml", []byte(strings.Replace(minimal, "kind: nic", "kind: bogus", 1)))
	if !errors.Is(err, ErrSpec) {
		t.Errorf("error %v does not wrap ErrSpec", err)
	}
	if err := Build(Spec{Name: "x"}, t.TempDir()); !errors.Is(err, ErrSpec) {
		t.Errorf("Build of an empty spec: %v, want ErrSpec", err)
	}
}

func TestMachines(t *testing.T) {
	names := Machines()
	if !slices.IsSorted(names) {
		t.Errorf("Machines() not sorted: %v", names)
	}
	for _, want := range []string{"dgx-h100", "grace-hopper", H200VM} {
		if !slices.Contains(names, want) {
			t.Errorf("Machines() = %v lacks %s", names, want)
		}
	}
	for _, n := range names {
		if n == H200VM {
			if _, err := Machine(n); !errors.Is(err, ErrUnknownMachine) {
				t.Errorf("Machine(%s) = %v, want ErrUnknownMachine (a capture has no spec)", n, err)
			}
			continue
		}
		s, err := Machine(n)
		if err != nil {
			t.Errorf("Machine(%s): %v", n, err)
			continue
		}
		if len(s.Sources) == 0 {
			t.Errorf("%s cites no sources", n)
		}
		if len(s.Expect.Pairs) == 0 && s.Expect.Unsupported == 0 {
			t.Errorf("%s has no expected pairs", n)
		}
		if s.Expect.Roles == nil {
			t.Errorf("%s has no expected roles", n)
		}
	}
	for _, bad := range []string{"nope", "../machines/dgx-h100", ""} {
		if err := BuildMachine(bad, t.TempDir()); !errors.Is(err, ErrUnknownMachine) {
			t.Errorf("BuildMachine(%q) = %v, want ErrUnknownMachine", bad, err)
		}
	}
}

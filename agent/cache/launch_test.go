package cache

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/discover"
	"github.com/gpuaffinity/gpuaffinity/internal/compact"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys"
	"github.com/gpuaffinity/gpuaffinity/nvml"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// Every example machine's launch view comes back from LaunchFile as it
// went in, field for field (nil lists apart from empty ones).
func TestLaunchRoundTrip(t *testing.T) {
	for _, name := range fakesys.Machines() {
		t.Run(name, func(t *testing.T) {
			root, lib, err := fakesys.BuildMachineMemory(name)
			if err != nil {
				t.Fatal(err)
			}
			opts := discover.Options{FS: root}
			if lib != nil {
				opts.NVML, opts.NVMLSource = lib, nvml.SourceReplay
			}
			n, err := discover.Discover(opts)
			if err != nil {
				t.Fatal(err)
			}
			data, err := EncodeLaunch(n)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeLaunch("x", data)
			if err != nil {
				t.Fatal(err)
			}
			if want := n.ForLaunch(); !reflect.DeepEqual(got, want) {
				t.Errorf("the launch view changed on the way")
			}
		})
	}
}

// A launch file of another layout is ErrOtherBuild (Load then reads
// topology.json); a damaged one, a bad schema or no header is an error
// that names the file.
func TestDecodeLaunchRefusals(t *testing.T) {
	good, err := EncodeLaunch(topology.Node{Schema: topology.Schema})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeLaunch("f", good); err != nil {
		t.Fatalf("good: %v", err)
	}
	body, _ := compact.Append(nil, topology.Node{Schema: "gpuaffinity.topology/v0"})
	for name, tc := range map[string]struct {
		data []byte
		is   error
		text string
	}{
		"other layout": {[]byte(launchMagic + "0123abcd\n" + string(good[len(launchMagic)+len(launchLayout)+1:])), ErrOtherBuild, ""},
		"no header":    {[]byte("gpuaffinity-launch-node"), nil, "no header line"},
		"cut":          {good[:len(good)-1], compact.ErrMalformed, ""},
		"schema":       {append([]byte(launchMagic+launchLayout+"\n"), body...), nil, `schema "gpuaffinity.topology/v0"`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := DecodeLaunch("/state/launch.node", tc.data)
			if err == nil || !strings.Contains(err.Error(), "/state/launch.node") ||
				(tc.is != nil && !errors.Is(err, tc.is)) || !strings.Contains(err.Error(), tc.text) {
				t.Errorf("decodeLaunch = %v; want an error naming the file (%v, %q)", err, tc.is, tc.text)
			}
		})
	}
}

// Load takes topology.json where LaunchFile is another build's.
func TestLoadOtherBuildFallsBack(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(LaunchFile, launchMagic+"feedface\nwhatever")
	write(TopologyFile, `{"schema": "`+topology.Schema+`", "hostname": "from-topology-json"}`)
	n, err := Load(Options{Dir: dir, Root: t.TempDir(), TrustWithoutBoot: true, Launch: true})
	if err != nil || n.Hostname != "from-topology-json" {
		t.Errorf("Load = %q, %v; want the node of topology.json", n.Hostname, err)
	}
	write(LaunchFile, launchMagic+launchLayout+"\n\x01")
	if _, err := Load(Options{Dir: dir, Root: t.TempDir(), TrustWithoutBoot: true, Launch: true}); !errors.Is(err, compact.ErrMalformed) {
		t.Errorf("a damaged launch file of this build: %v; want ErrMalformed, not a silent fallback", err)
	}
}

// launchLayout is the digest of topology.Node as it is: a changed node
// with an old constant would let a launcher decode another build's file
// into the wrong fields.
func TestLaunchLayout(t *testing.T) {
	if got := layoutDigest(); got != launchLayout {
		t.Errorf("topology.Node's layout digest is %q, launchLayout says %q: set launchLayout = %q in agent/cache/launch.go", got, launchLayout, got)
	}
}

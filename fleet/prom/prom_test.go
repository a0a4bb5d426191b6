package prom_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuaffinity/gpuaffinity/fleet"
	"github.com/gpuaffinity/gpuaffinity/fleet/prom"
	"github.com/gpuaffinity/gpuaffinity/internal/promtest"
)

// Three targets, written by hand in the exposition format the agent
// serves: n1, a tray with a clique, two tiers and an IMEX list; a second
// target calling itself n1 too (a cloned image keeps its hostname); and
// a target whose placement series has no hostname label.
const (
	targetN1 = `# TYPE gpuaffinity_node_placement_info gauge
gpuaffinity_node_placement_info{hostname="n1",model="GB200 NVL",gpu_model="NVIDIA GB200",cloud="baremetal",tier0="leaf1",tier1="spine1",tier2="",host_id="",clique="u1.7",gpu_memory_fabric="",chassis_serial="C1",slot="2",tray="1",source="site"} 1
# TYPE gpuaffinity_node_layout_info gauge
gpuaffinity_node_layout_info{hostname="n1",model="GB200 NVL",gpu_model="NVIDIA GB200",layout="00000000000000aa",firmware="00000000000000bb"} 1
# TYPE gpuaffinity_topology_imex_config_nodes gauge
gpuaffinity_topology_imex_config_nodes 18
# TYPE gpuaffinity_gpu_info gauge
gpuaffinity_gpu_info{gpu="0",UUID="GPU-0",pci_bus_id="0000:01:00.0",model_name="NVIDIA GB200",Hostname="n1",uuid="GPU-0",bus_id="0000:01:00.0",model="NVIDIA GB200",numa_node="0"} 1
gpuaffinity_gpu_info{gpu="1",UUID="GPU-1",pci_bus_id="0000:02:00.0",model_name="NVIDIA GB200",Hostname="n1",uuid="GPU-1",bus_id="0000:02:00.0",model="NVIDIA GB200",numa_node="0"} 1
# TYPE gpuaffinity_topology_pair_info gauge
gpuaffinity_topology_pair_info{gpu="0",UUID="GPU-0",pci_bus_id="0000:01:00.0",model_name="NVIDIA GB200",Hostname="n1",nic="mlx5_0",class="PIX"} 1
gpuaffinity_topology_pair_info{gpu="0",UUID="GPU-0",pci_bus_id="0000:01:00.0",model_name="NVIDIA GB200",Hostname="n1",nic="mlx5_1",class="PIX"} 1
# TYPE gpuaffinity_rdma_info gauge
gpuaffinity_rdma_info{device="mlx5_0",port="1",link_layer="InfiniBand",fabric="infiniband",role="compute",netdev="ib0",bus_id="0000:03:00.0",firmware="28.39.1002"} 1
gpuaffinity_rdma_info{device="mlx5_1",port="1",link_layer="InfiniBand",fabric="infiniband",role="compute",netdev="ib1",bus_id="0000:04:00.0",firmware="28.39.1002"} 1
gpuaffinity_rdma_info{device="mlx5_9",port="1",link_layer="Ethernet",fabric="",role="",netdev="",bus_id="",firmware="1.0"} 1
`
	targetNoName = `# TYPE gpuaffinity_node_placement_info gauge
gpuaffinity_node_placement_info{model="M",gpu_model="G",cloud="gcp"} 1
`
)

func serve(t *testing.T, body string) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		io.WriteString(w, body)
	}))
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

// Read against a real Prometheus scraping the three targets: n1's
// placement and the facts rebuilt from its GPU, pair and RDMA series
// (GPU 1 without a pair is "none"; mlx5_9, a device without a role, is
// not a fact); the second n1 and the nameless target are left out with
// a warning each; instance names drop the port; a selector matching
// nothing is ErrNoNodes; an unreachable server is an error naming it.
func TestRead(t *testing.T) {
	promtest.Binary(t)
	a, dup, noName := serve(t, targetN1), serve(t, targetN1), serve(t, targetNoName)
	srv := promtest.Start(t, "agents", a, dup, noName)
	srv.WaitScrapes(t, 1, 30*time.Second)
	ctx := context.Background()

	nodes, warns, err := prom.Read(ctx, prom.Options{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 1 {
		t.Fatalf("nodes %+v, want n1 alone", nodes)
	}
	n := nodes[0]
	first := a
	if dup < a {
		first = dup // the first target in target order keeps the name
	}
	want := fleet.Node{
		Name: "n1", Target: "agents/" + first, Model: "GB200 NVL", GPUModel: "NVIDIA GB200", Cloud: "baremetal",
		Tiers: []string{"leaf1", "spine1"}, Clique: "u1.7", ChassisSerial: "C1", Slot: "2", Tray: "1", IMEXNodes: 18,
		Layout: "00000000000000aa", Firmware: "00000000000000bb",
		Facts: []fleet.Fact{
			{Key: "gpu0.model", Value: "NVIDIA GB200"},
			{Key: "gpu0.nics", Value: "mlx5_0,mlx5_1 PIX"},
			{Key: "gpu1.model", Value: "NVIDIA GB200"},
			{Key: "gpu1.nics", Value: "none"},
			{Key: "gpus", Value: "2"},
			{Key: "nic.mlx5_0.fabric", Value: "infiniband"},
			{Key: "nic.mlx5_0.firmware", Value: "28.39.1002"},
			{Key: "nic.mlx5_0.role", Value: "compute"},
			{Key: "nic.mlx5_1.fabric", Value: "infiniband"},
			{Key: "nic.mlx5_1.firmware", Value: "28.39.1002"},
			{Key: "nic.mlx5_1.role", Value: "compute"},
		},
	}
	if d := cmp.Diff(want, n); d != "" {
		t.Errorf("n1 (-want +got):\n%s", d)
	}
	joined := strings.Join(warns, "\n")
	for _, w := range []string{`node name "n1"`, "no hostname label"} {
		if !strings.Contains(joined, w) {
			t.Errorf("warnings lack %q:\n%s", w, joined)
		}
	}
	if len(warns) != 2 {
		t.Errorf("%d warnings, want 2:\n%s", len(warns), joined)
	}

	// instance: every target is 127.0.0.1:PORT, one name once the port
	// is dropped; the first target keeps it, the others are left out.
	nodes, warns, err = prom.Read(ctx, prom.Options{URL: srv.URL, NodeLabel: "instance"})
	if err != nil || len(nodes) != 1 || nodes[0].Name != "127.0.0.1" || strings.Count(strings.Join(warns, "\n"), `node name "127.0.0.1" is`) != 2 {
		t.Errorf("instance names: %d nodes (%v), warnings %q, err %v; want one 127.0.0.1 and two targets left out", len(nodes), nodes, warns, err)
	}

	_, _, err = prom.Read(ctx, prom.Options{URL: srv.URL, Selector: `{job="nothing"}`})
	if !errors.Is(err, prom.ErrNoNodes) || !strings.Contains(err.Error(), srv.URL) || !strings.Contains(err.Error(), `job="nothing"`) {
		t.Errorf("selector matching nothing: %v, want ErrNoNodes naming the server and selector", err)
	}
	_, _, err = prom.Read(ctx, prom.Options{URL: "http://127.0.0.1:1", Timeout: 2 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("unreachable server: %v, want an error naming it", err)
	}
}

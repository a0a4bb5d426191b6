package prom_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuaffinity/gpuaffinity/fleet"
	"github.com/gpuaffinity/gpuaffinity/fleet/nodeview"
	"github.com/gpuaffinity/gpuaffinity/fleet/prom"
	"github.com/gpuaffinity/gpuaffinity/internal/testutil/promtest"
)

// n1's series, written by hand in the exposition format the agent
// serves: a tray with a clique, two tiers and an IMEX list; two GPUs,
// GPU 0 paired with two NICs, GPU 1 with none; two compute NICs and a
// device without a role (not a fact). The digests are those of the
// facts these series give (nodeview.Digest; checked below, so that the
// reader's integrity check accepts them).
const (
	n1Layout   = "f5b2a8e2b1d0c2d4"
	n1Firmware = "7c0b0c64ca8c1e1f"
	targetN1   = `# TYPE gpuaffinity_node_placement_info gauge
gpuaffinity_node_placement_info{hostname="n1",model="GB200 NVL",gpu_model="NVIDIA GB200",cloud="baremetal",tier0="leaf1",tier1="spine1",tier2="",host_id="",clique="u1.7",gpu_memory_fabric="",chassis_serial="C1",slot="2",tray="1",source="site"} 1
# TYPE gpuaffinity_node_layout_info gauge
gpuaffinity_node_layout_info{hostname="n1",model="GB200 NVL",gpu_model="NVIDIA GB200",layout="LAYOUT",firmware="FIRMWARE"} 1
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
)

// n1Facts are the facts n1's series give, written from them by hand.
var n1Facts = []fleet.Fact{
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
}

// digests are nodeview.Digest of n1Facts' layout and firmware facts.
func digests() (layout, firmware string) {
	var l, f []fleet.Fact
	for _, x := range n1Facts {
		if strings.HasSuffix(x.Key, ".firmware") {
			f = append(f, x)
		} else {
			l = append(l, x)
		}
	}
	return nodeview.Digest(l), nodeview.Digest(f)
}

// n1Body is n1's exposition with its digests, under host name host.
func n1Body(host string) string {
	l, f := digests()
	return strings.NewReplacer("LAYOUT", l, "FIRMWARE", f, `hostname="n1"`, `hostname="`+host+`"`).Replace(targetN1)
}

// exposition serves body at /metrics while up holds, 503 otherwise.
type exposition struct {
	srv *httptest.Server
	up  atomic.Bool
}

func serve(t *testing.T, body string) *exposition {
	t.Helper()
	e := &exposition{}
	e.up.Store(true)
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !e.up.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		io.WriteString(w, body)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *exposition) addr() string { return strings.TrimPrefix(e.srv.URL, "http://") }

// Read against a real Prometheus: n1, named by its target's node label,
// with its placement and (Report) its digests, IMEX count and the facts
// rebuilt from its GPU, pair and RDMA series; the targets refused: two
// that name one node (both), one whose agent reports another host (a
// spoof: it names itself "victim"), one that names no node (an address
// for an instance, no node label); a selector matching nothing; an
// unreachable server.
func TestRead(t *testing.T) {
	promtest.Binary(t)
	a := serve(t, n1Body("n1"))
	dupA, dupB := serve(t, n1Body("n2")), serve(t, n1Body("n2"))
	spoof := serve(t, n1Body("victim"))
	victim := serve(t, n1Body("victim"))
	noName := serve(t, n1Body("n9"))
	srv := promtest.StartTargets(t, "agents",
		promtest.Target{Addr: a.addr(), Labels: map[string]string{"node": "n1"}},
		promtest.Target{Addr: dupA.addr(), Labels: map[string]string{"node": "n2"}},
		promtest.Target{Addr: dupB.addr(), Labels: map[string]string{"node": "n2"}},
		promtest.Target{Addr: spoof.addr(), Labels: map[string]string{"node": "impostor"}},
		promtest.Target{Addr: victim.addr(), Labels: map[string]string{"node": "victim"}},
		promtest.Target{Addr: noName.addr()},
	)
	srv.WaitScrapes(t, 1, 60*time.Second)
	ctx := context.Background()

	f, err := prom.Read(ctx, prom.Options{URL: srv.URL, Report: true})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range f.Nodes {
		names = append(names, n.Name)
	}
	if !cmp.Equal(names, []string{"n1", "victim"}) {
		t.Fatalf("nodes %q, want n1 and victim (the impostor refused)", names)
	}
	layout, firmware := digests()
	want := fleet.Node{
		Name: "n1", Target: "agents/" + a.addr(), Model: "GB200 NVL", GPUModel: "NVIDIA GB200", Cloud: "baremetal",
		Tiers: []string{"leaf1", "spine1"}, Clique: "u1.7", ChassisSerial: "C1", Slot: "2", Tray: "1", IMEXNodes: 18,
		Layout: layout, Firmware: firmware, Source: "site", Facts: n1Facts,
	}
	if d := cmp.Diff(want, f.Nodes[0]); d != "" {
		t.Errorf("n1 (-want +got):\n%s", d)
	}
	// victim and n1 have the same digests and group: one variant, whose
	// facts one of them (n1, first by name) carries.
	if f.Nodes[1].Facts != nil {
		t.Errorf("victim has facts %v; one node of a variant carries them", f.Nodes[1].Facts)
	}
	refused := map[string]string{}
	for _, r := range f.Refused {
		refused[strings.TrimPrefix(r.Target, "agents/")] = r.String()
	}
	for addr, want := range map[string]string{
		dupA.addr():   `all name this node: each is refused`,
		dupB.addr():   `all name this node: each is refused`,
		spoof.addr():  `its agent reports host name "victim": refused`,
		noName.addr(): `is an address, which names no node`,
	} {
		if !strings.Contains(refused[addr], want) {
			t.Errorf("target %s: refusal %q, want one saying %q", addr, refused[addr], want)
		}
	}
	if len(f.Refused) != 4 {
		t.Errorf("refused %v, want 4", f.Refused)
	}
	if !cmp.Equal(f.Unresolved, []string{"impostor", "n2"}) {
		t.Errorf("unresolved %q, want the names the refused targets give", f.Unresolved)
	}

	// --node-label instance: every target is 127.0.0.1:PORT, which names
	// no node; all refused.
	f, err = prom.Read(ctx, prom.Options{URL: srv.URL, NodeLabel: "instance"})
	if err != nil || len(f.Nodes) != 0 || len(f.Refused) != 6 {
		t.Errorf("instance names: nodes %v, %d refused, err %v; want every target refused", f.Nodes, len(f.Refused), err)
	}
	// A label the targets lack names nothing: the agents' own labels are
	// not target labels.
	f, err = prom.Read(ctx, prom.Options{URL: srv.URL, NodeLabel: "hostname"})
	if err != nil || len(f.Nodes) != 0 || !strings.Contains(f.Refused[0].Reason, "no hostname target label on its up series") {
		t.Errorf("hostname label: nodes %v, refused %v, err %v; want all refused, no target label", f.Nodes, f.Refused, err)
	}

	_, err = prom.Read(ctx, prom.Options{URL: srv.URL, Selector: `{job="nothing"}`})
	if !errors.Is(err, prom.ErrNoNodes) || !strings.Contains(err.Error(), srv.URL) || !strings.Contains(err.Error(), `job="nothing"`) {
		t.Errorf("selector matching nothing: %v, want ErrNoNodes naming the server and selector", err)
	}
	_, err = prom.Read(ctx, prom.Options{URL: "http://user:s3cret@127.0.0.1:1", Timeout: 2 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("unreachable server: %v, want an error naming it without its password", err)
	}
}

// A target not scraped now (its agent restarting: Prometheus has marked
// its series stale) keeps its placement for the lookback, marked stale,
// and is not asked for facts; past the lookback it is gone.
func TestReadLookback(t *testing.T) {
	promtest.Binary(t)
	a, b := serve(t, n1Body("n1")), serve(t, n1Body("n2"))
	srv := promtest.StartTargets(t, "agents",
		promtest.Target{Addr: a.addr(), Labels: map[string]string{"node": "n1"}},
		promtest.Target{Addr: b.addr(), Labels: map[string]string{"node": "n2"}},
	)
	srv.WaitScrapes(t, 1, 60*time.Second)
	b.up.Store(false)
	waitDown(t, srv, "n2", 2)

	f, err := prom.Read(context.Background(), prom.Options{URL: srv.URL, Report: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Nodes) != 2 || f.Nodes[1].Name != "n2" || !f.Nodes[1].Stale || f.Nodes[0].Stale {
		t.Fatalf("nodes %+v, want n1 live and n2 stale", f.Nodes)
	}
	if n2 := f.Nodes[1]; !cmp.Equal(n2.Tiers, []string{"leaf1", "spine1"}) || n2.Clique != "u1.7" || n2.Layout != "" || n2.Facts != nil {
		t.Errorf("n2 %+v: want its last placement, no digests or facts", n2)
	}
	// Evaluated after the lookback has passed, n2 is gone.
	f, err = prom.Read(context.Background(), prom.Options{URL: srv.URL, Lookback: time.Minute, Time: time.Now().Add(70 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range f.Nodes {
		if n.Name == "n2" {
			t.Errorf("n2 read %v after its lookback", n)
		}
	}
}

// waitDown waits until Prometheus has scraped node's target down n
// times in a row.
func waitDown(t *testing.T, srv *promtest.Server, node string, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err := srv.Query(`count_over_time((up{node="` + node + `"} == 0)[30s:1s]) and up{node="` + node + `"} == 0`)
		if err == nil && len(got) == 1 && got[0].Value >= float64(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("target of %s not down %d scrapes within 60 s (%v, %v); Prometheus's log:\n%s", node, n, got, err, srv.Logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/gpuaffinity/gpuaffinity/fleet"
	"github.com/gpuaffinity/gpuaffinity/fleet/nodeview"
)

// Composition of the fleet: shares of N, and the sizes of the groups the
// placement tiers name.
const (
	shareGB200 = 0.40 // in whole racks of rackTrays
	shareDGX   = 0.30
	shareAWS   = 0.10
	shareGCP   = 0.10 // OCI takes the rest
	shareDrift = 0.02
	shareGap   = 0.01

	rackTrays       = 18 // GB200 NVL72: 18 compute trays, one NVLink domain
	racksPerLeaf    = 2  // GB200: a leaf holds 2 racks' trays
	dgxPerLeaf      = 32 // DGX H100 SuperPOD-like: 32-node leaves
	leavesPerSpine  = 16 // both site fabrics
	gcpPerSubBlock  = 16
	gcpSubBlocks    = 8 // per block
	ociPerLocal     = 16
	ociLocalBlocks  = 8 // per network block
	ociNetworkBlock = 4 // per HPC island
)

// composition counts the nodes of each kind.
type composition struct {
	racks, gb200, dgx, aws, gcp, oci int
	drifted, gapped                  int
}

func compose(n int) composition {
	round := func(f float64) int { return int(math.Round(f)) }
	c := composition{racks: round(shareGB200 * float64(n) / rackTrays)}
	c.racks = min(c.racks, n/rackTrays)
	c.gb200 = c.racks * rackTrays
	rest := n - c.gb200
	c.dgx = min(round(shareDGX*float64(n)), rest)
	rest -= c.dgx
	c.aws = min(round(shareAWS*float64(n)), rest)
	rest -= c.aws
	c.gcp = min(round(shareGCP*float64(n)), rest)
	c.oci = rest - c.gcp
	c.drifted, c.gapped = round(shareDrift*float64(n)), round(shareGap*float64(n))
	return c
}

func (c composition) String() string {
	return fmt.Sprintf("%d %s (%d racks), %d %s, %d %s, %d %s, %d %s; %d drifted, %d gapped",
		c.gb200, gb200.short, c.racks, c.dgx, dgxH100.short, c.aws, awsP5.short, c.gcp, gcpA3Ultra.short,
		c.oci, ociH100.short, c.drifted, c.gapped)
}

// node is one synthetic node: its agent's facts and placement.
type node struct {
	m        *machine
	name     string
	instance string // the scrape target's address, "<IPv4>:19400"
	tiers    []string
	source   string // placement's source label
	hostID   string
	clique   string
	chassis  string
	slot     string
	tray     string
	uuids    []string   // per GPU
	pairs    [][]string // per GPU: its NICs (the machine's, unless drifted)
	class    []string   // per GPU: its pair's class
	firmware []string   // per machine NIC
	drift    string     // what drifted: "" none
	gapped   bool       // absent since gapStart
	layout   string     // nodeview.Digest of the layout facts
	fwDigest string     // nodeview.Digest of the firmware facts
}

// generate builds the fleet of n nodes; seed and n decide everything.
func generate(n int, seed uint64) ([]*node, composition) {
	c := compose(n)
	r := rand.New(rand.NewPCG(seed, uint64(n)))
	nodes := make([]*node, 0, n)
	add := func(m *machine, name string) *node {
		i := len(nodes) + 1
		nd := &node{m: m, name: name, instance: fmt.Sprintf("10.%d.%d.%d:19400", i>>16&255, i>>8&255, i&255)}
		for _, g := range m.gpus {
			nd.uuids = append(nd.uuids, "GPU-"+uuid(r))
			nd.pairs = append(nd.pairs, g.nics)
			nd.class = append(nd.class, m.class)
		}
		for _, nic := range m.nics {
			nd.firmware = append(nd.firmware, nic.firmware)
		}
		nodes = append(nodes, nd)
		return nd
	}

	for rack := range c.racks {
		clique := uuid(r) + ".32766"
		serial := strconv.Itoa(1821725000000 + rack)
		leaf := rack / racksPerLeaf
		for t := range rackTrays {
			nd := add(gb200, fmt.Sprintf("gb200-r%04d-ct%02d", rack+1, t+1))
			nd.tiers = []string{fmt.Sprintf("gb-leaf-%04d", leaf+1), fmt.Sprintf("gb-spine-%03d", leaf/leavesPerSpine+1)}
			nd.source, nd.clique, nd.chassis = "site", clique, serial
			// NVL72: 10 compute trays, the 9 NVLink switch trays, 8 more.
			slot := t + 1
			if t >= 10 {
				slot += 9
			}
			nd.slot, nd.tray = strconv.Itoa(slot), strconv.Itoa(t)
		}
	}
	for i := range c.dgx {
		nd := add(dgxH100, fmt.Sprintf("dgx-h100-%05d", i+1))
		leaf := i / dgxPerLeaf
		nd.tiers = []string{fmt.Sprintf("ib-leaf-%04d", leaf+1), fmt.Sprintf("ib-spine-%03d", leaf/leavesPerSpine+1)}
		nd.source = "site"
	}
	for range c.aws {
		i := len(nodes) + 1
		add(awsP5, fmt.Sprintf("ip-10-%d-%d-%d", i>>16&255, i>>8&255, i&255)) // AWS names a host after its address
	}
	var block, sub string
	for i := range c.gcp {
		if i%(gcpPerSubBlock*gcpSubBlocks) == 0 {
			block = hex(r, 32)
		}
		if i%gcpPerSubBlock == 0 {
			sub = hex(r, 32)
		}
		nd := add(gcpA3Ultra, fmt.Sprintf("a3ultra-%05d", i+1))
		nd.tiers, nd.hostID, nd.source = []string{sub, block}, hex(r, 32), "gcp-metadata"
	}
	var island, network, local string
	for i := range c.oci {
		if i%(ociPerLocal*ociLocalBlocks*ociNetworkBlock) == 0 {
			island = ocid(r, "computehpcisland")
		}
		if i%(ociPerLocal*ociLocalBlocks) == 0 {
			network = ocid(r, "computenetworkblock")
		}
		if i%ociPerLocal == 0 {
			local = ocid(r, "computelocalblock")
		}
		nd := add(ociH100, fmt.Sprintf("gpu-h100-%05d", i+1))
		nd.tiers, nd.hostID, nd.source = []string{local, network, island}, ocid(r, "computebaremetalhost"), "oci-imds"
	}

	// Drifted and gapped nodes: disjoint, drawn from one permutation.
	perm := r.Perm(n)
	for k, i := range perm[:min(c.drifted, n)] {
		nd := nodes[i]
		if k%2 == 0 {
			// One compute NIC's firmware differs.
			j := slices.IndexFunc(nd.m.nics, func(s nicSpec) bool { return s.role == "compute" })
			nd.firmware[j] = "28.41.1000"
			nd.drift = "firmware of " + nd.m.nics[j].dev
		} else {
			// One GPU is paired with the NICs of a GPU on the other
			// socket (its own NIC's port is down).
			g := r.IntN(len(nd.m.gpus))
			other := (g + len(nd.m.gpus)/2) % len(nd.m.gpus)
			nd.pairs[g], nd.class[g] = nd.m.gpus[other].nics, "SYS"
			nd.drift = "pairing of gpu " + strconv.Itoa(g)
		}
	}
	for _, i := range perm[min(c.drifted, n):min(c.drifted+c.gapped, n)] {
		nodes[i].gapped = true
	}
	for _, nd := range nodes {
		layout, firmware := nd.facts()
		nd.layout, nd.fwDigest = nodeview.Digest(layout), nodeview.Digest(firmware)
	}
	return nodes, c
}

// facts are the node's layout and firmware facts as nodeview.NodeFacts
// itemizes them.
func (nd *node) facts() (layout, firmware []fleet.Fact) {
	layout = append(layout, fleet.Fact{Key: nodeview.KeyGPUs, Value: strconv.Itoa(len(nd.m.gpus))})
	for i := range nd.m.gpus {
		gpu := strconv.Itoa(i)
		layout = append(layout,
			fleet.Fact{Key: nodeview.GPUKey(gpu, "model"), Value: nd.m.gpuModel},
			fleet.Fact{Key: nodeview.GPUKey(gpu, "nics"), Value: nodeview.PairFact(nd.pairs[i], nd.class[i])})
	}
	for i, nic := range nd.m.nics {
		layout = append(layout,
			fleet.Fact{Key: nodeview.NICKey(nic.dev, "role"), Value: nic.role},
			fleet.Fact{Key: nodeview.NICKey(nic.dev, "fabric"), Value: nic.fabric})
		firmware = append(firmware, fleet.Fact{Key: nodeview.NICKey(nic.dev, "firmware"), Value: nd.firmware[i]})
	}
	return layout, firmware
}

// uuid is a random version 4 UUID.
func uuid(r *rand.Rand) string {
	h := hex(r, 32)
	return h[:8] + "-" + h[8:12] + "-4" + h[13:16] + "-8" + h[17:20] + "-" + h[20:]
}

// hex is n random lower-case hex digits.
func hex(r *rand.Rand, n int) string {
	const digits = "0123456789abcdef"
	b := make([]byte, n)
	for i := range b {
		b[i] = digits[r.IntN(16)]
	}
	return string(b)
}

// ocid is an OCI identifier of the given resource type in region iad:
// 92 characters or so, as OCI's IMDS gives them.
func ocid(r *rand.Rand, kind string) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
	b := make([]byte, 52)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return "ocid1." + kind + ".oc1.iad.anuwcljr" + string(b)
}

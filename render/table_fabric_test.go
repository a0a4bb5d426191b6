package render

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gpuaffinity/gpuaffinity/topology"
)

func TestTableFabric(t *testing.T) {
	zero, bad, major, nodes := 0, 999, 234, 18
	healthy := uint32(2 | 2<<2 | 2<<4 | 2<<6 | 1<<8 | 1<<12 | 1<<14)
	broken := uint32(1 | 2<<2 | 2<<4 | 2<<6 | 5<<8 | 1<<12 | 1<<14) // degraded_bw, insufficient_nvlinks
	summary, unhealthy := 1, 2
	uuid := "9277d399-0674-44a9-b64e-d85bb19ce2b0"
	n := topology.Node{
		GPUs: []topology.GPU{
			{Index: 0, BusID: "0008:01:00.0", Fabric: &topology.GPUFabric{State: 3, Status: &zero, ClusterUUID: uuid, CliqueID: 32766, HealthMask: &healthy, HealthSummary: &summary},
				Platform: &topology.GPUPlatform{ChassisSerial: "1821224000123", Slot: 7, Tray: 4, Module: 1}},
			{Index: 1, BusID: "0009:01:00.0", Fabric: &topology.GPUFabric{State: 3, Status: &bad, ClusterUUID: uuid, CliqueID: 32766, HealthMask: &broken, HealthSummary: &unhealthy}},
			{Index: 2, BusID: "0018:01:00.0", Fabric: &topology.GPUFabric{State: 2}},
		},
		NVLinkFabric: topology.NVLinkFabric{MultiNode: true,
			Domains: []topology.NVLinkDomain{{ClusterUUID: uuid, CliqueID: 32766, GPUs: []int{0, 1}}},
			IMEX: topology.IMEX{DeviceMajor: &major, Channels: []topology.IMEXChannel{{Number: 0, Problem: "major 237, but the driver's nvidia-caps-imex-channels major is 234"}},
				Config: &topology.IMEXConfig{Path: "/etc/nvidia-imex/config.cfg", Nodes: &nodes}}},
	}
	var buf bytes.Buffer
	if err := Table(&buf, n); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"NVLink fabric:",
		"completed", "success", uuid + ".32766",
		"healthy",
		"chassis 1821224000123 slot 7 tray 4 host 0 module 1",
		"error 999",
		"degraded_bw=true, incorrect_configuration=insufficient_nvlinks",
		"in progress",
		"Domains (multi-node): GPUs 0,1 in " + uuid + ".32766",
		"IMEX: major 234; channel0 unusable: major 237",
		"config /etc/nvidia-imex/config.cfg (18 nodes)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// A node without fabric, platform or IMEX prints no section.
	buf.Reset()
	if err := Table(&buf, topology.Node{GPUs: []topology.GPU{{Index: 0}}}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "NVLink fabric") {
		t.Errorf("section printed without fabric:\n%s", buf.String())
	}
}

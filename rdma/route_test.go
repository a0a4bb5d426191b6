package rdma

import "testing"

func TestParseRoute(t *testing.T) {
	const table = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
		"ens32\t00000000\t0100A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n" +
		"eth9\t00000000\t0100A8C0\t0002\t0\t0\t0\t00000000\t0\t0\t0\n" + // not up
		"eth0\t00000000\t010200C0\t0003\t0\t0\t50\t00000000\t0\t0\t0\n" +
		"eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
	got, err := parseRoute([]byte(table), "route")
	if err != nil || got != "eth0" {
		t.Fatalf("got %q, %v; want eth0 (lowest metric among up default routes)", got, err)
	}
	if got, err := parseRoute([]byte("Iface\tDestination\n"), "route"); got != "" || err != nil {
		t.Errorf("no default route: %q %v", got, err)
	}
	if _, err := parseRoute([]byte("h\nx\t00000000\tg\tzz\t0\t0\tq\t00000000\n"), "route"); err == nil {
		t.Error("garbage flags must be an error")
	}
}

//go:build linux

package rdma

import (
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// TestCrossCheckNetns runs the live netlink source against a veth pair in
// a fresh network namespace: real rtnetlink, no host interface touched.
func TestCrossCheckNetns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	ns, err := netns.New() // moves this thread into the new namespace
	if err != nil {
		t.Skipf("cannot create a network namespace here: %v", err)
	}
	defer ns.Close()
	defer netns.Set(orig)
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "gpa0", MTU: 9000}, PeerName: "gpa1"}
	if err := h.LinkAdd(veth); err != nil {
		t.Skipf("veth not available: %v", err)
	}
	a, _ := h.LinkByName("gpa0")
	b, _ := h.LinkByName("gpa1")
	if err := h.LinkSetUp(a); err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetUp(b); err != nil {
		t.Fatal(err)
	}
	addr, err := netlink.ParseAddr("10.10.1.5/16")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.AddrAdd(a, addr); err != nil {
		t.Fatal(err)
	}
	nl := NewNetlinkAt(h)
	nds := []Netdev{
		{Name: "gpa0", OperState: "down", MTU: 1500}, // stale sysfs view
		{Name: "gpa1", OperState: "up", MTU: 1500},
		{Name: "gone0", OperState: "up", MTU: 1500}, // vanished interface
	}
	if got, err := nl.IPv4("gpa0"); err != nil || len(got) != 1 || got[0] != "10.10.1.5/16" {
		t.Errorf("IPv4(gpa0) = %v, %v; want [10.10.1.5/16]", got, err)
	}
	if got, err := nl.IPv4("gpa1"); err != nil || len(got) != 0 {
		t.Errorf("IPv4(gpa1) = %v, %v; want none", got, err)
	}
	if _, err := nl.IPv4("gone0"); err == nil {
		t.Error("IPv4 of a vanished interface succeeded")
	}
	errs := CrossCheck(nds, nl)
	if nds[0].OperState != "up" || nds[0].MTU != 9000 {
		t.Errorf("gpa0 after cross-check = %+v", nds[0])
	}
	if nds[2].OperState != "up" {
		t.Errorf("a vanished netdev must keep its sysfs values: %+v", nds[2])
	}
	all := ""
	for _, e := range errs {
		all += e.Error() + "\n"
	}
	if !strings.Contains(all, `"gpa0": sysfs says down mtu 1500, netlink says up mtu 9000`) || !strings.Contains(all, `"gone0": netlink`) {
		t.Errorf("errors = %s", all)
	}
}

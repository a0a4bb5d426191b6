package rdma

import "fmt"

// LinkState is what netlink says of one interface now.
type LinkState struct {
	OperState string
	MTU       int
}

// Netlink is the two questions discovery asks of rtnetlink. The live
// implementation is NewNetlink (Linux); tests use a real one inside a
// network namespace.
type Netlink interface {
	LinkState(name string) (LinkState, error)
	// IPv4 lists the interface's IPv4 addresses in CIDR form
	// ("10.10.1.5/16"), primary first as the kernel orders them.
	IPv4(name string) ([]string, error)
}

// CrossCheck replaces the sysfs operstate and MTU of each netdev by
// netlink's, and reports every disagreement (a link that changed between
// the two reads, or a sysfs that lags). A netdev netlink does not know (it
// vanished, or lives in another namespace) keeps its sysfs values and is
// reported.
func CrossCheck(nds []Netdev, nl Netlink) (errs []error) {
	for i := range nds {
		st, err := nl.LinkState(nds[i].Name)
		if err != nil {
			errs = append(errs, fmt.Errorf("netdev %q: netlink: %w", nds[i].Name, err))
			continue
		}
		if st.OperState != nds[i].OperState || st.MTU != nds[i].MTU {
			errs = append(errs, fmt.Errorf("netdev %q: sysfs says %s mtu %d, netlink says %s mtu %d; using netlink",
				nds[i].Name, nds[i].OperState, nds[i].MTU, st.OperState, st.MTU))
			nds[i].OperState, nds[i].MTU = st.OperState, st.MTU
		}
	}
	return errs
}

package fakesys

import (
	"regexp"
)

// lagName is the kernel's name of a RoCE LAG RDMA device
// (drivers/infiniband/hw/mlx5/main.c mlx5_ib_stage_ib_reg_init:
// "mlx5_bond_%d" while LAG is active).
var lagName = regexp.MustCompile(`^mlx5_bond_[0-9]+$`)

// isBond reports whether name is a bond of the spec.
func (s *Spec) isBond(name string) bool {
	for _, b := range s.Bonds {
		if b.Name == name {
			return true
		}
	}
	return false
}

// checkLAG holds a RoCE LAG device to the kernel's layout: mlx5 names
// the RDMA device mlx5_bond_N only while its adapter's ports are bonded
// with LAG active, registers it on the adapter's first PF alone
// (drivers/net/ethernet/mellanox/mlx5/core/lag/lag.c removes every PF's
// IB device and re-adds the first one's), and the bond's slaves are
// those PFs' netdevs.
func (s *Spec) checkLAG() error {
	fns := s.Functions()
	for _, fn := range fns {
		d := fn.Device
		if d.RDMA == nil || !lagName.MatchString(d.RDMA.Name) {
			continue
		}
		if len(d.Netdevs) == 0 || !s.isBond(d.Netdevs[0].Master) {
			return specErr("device %s: RDMA device %s: the kernel names a device mlx5_bond_N only for a RoCE LAG: its netdev must be enslaved to a bond of the spec", fn.BDF, d.RDMA.Name)
		}
		bond := d.Netdevs[0].Master
		a, _ := parseBDF(fn.BDF)
		slaves := 0
		for _, o := range fns {
			for _, nd := range o.Device.Netdevs {
				if nd.Master != bond {
					continue
				}
				slaves++
				b, _ := parseBDF(o.BDF)
				if b.Domain != a.Domain || b.Bus != a.Bus || b.Dev != a.Dev {
					return specErr("bond %s: member %s is on %s, not a function of %s's adapter: mlx5 LAG bonds the ports of one adapter", bond, nd.Name, o.BDF, d.RDMA.Name)
				}
				if o.BDF != fn.BDF && o.Device.RDMA != nil {
					return specErr("device %s: RDMA device %s: with RoCE LAG active the adapter's other PFs have no RDMA device of their own", o.BDF, o.Device.RDMA.Name)
				}
			}
		}
		if slaves < 2 {
			return specErr("bond %s: RoCE LAG needs two ports of the adapter enslaved, has %d", bond, slaves)
		}
	}
	return nil
}

// gidNetdev is the netdev a RoCE port's GID entries name: the port's
// netdev, or the bond it is enslaved to. The kernel gives a bond
// slave's default and IP GIDs to its master, LAG or not
// (drivers/infiniband/core/roce_gid_mgmt.c is_ndev_for_default_gid_filter,
// "bonding master netdevice should be considered for default GIDs").
func (s *Spec) gidNetdev(d *Device, ndev string) string {
	for _, nd := range d.Netdevs {
		if nd.Name == ndev && nd.Master != "" && s.isBond(nd.Master) {
			return nd.Master
		}
	}
	return ndev
}

package nccl

import "strings"

// efaRDMAFamilies are the instance families whose EFA does RDMA reads and
// writes (FI_EFA_USE_DEVICE_RDMA=1 is valid there): aws-ofi-nccl's GDR
// platforms (src/platform-aws.cpp) and the EFA documentation.
var efaRDMAFamilies = []string{"p4d", "p4de", "p5", "p6", "trn"}

func envEFARDMA(instanceType string) bool {
	family, _, _ := strings.Cut(strings.ToLower(instanceType), ".")
	for _, f := range efaRDMAFamilies {
		switch f {
		case "p4d", "p4de":
			if family == f {
				return true
			}
		default:
			if strings.HasPrefix(family, f) {
				return true
			}
		}
	}
	return false
}

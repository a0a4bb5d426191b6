package ncclxml

import "fmt"

// Dialect is the library a topology file is written for. AMD's RCCL is a
// fork of NCCL with NCCL's reader (src/graph/xml.cc) and the same
// NCCL_TOPO_FILE variable, but it reads a different version of the file
// (ROCm/rccl@0cbce2a, RCCL 2.21.5):
//
//   - the root must be <system version="2"> (src/graph/xml.h
//     NCCL_TOPO_XML_VERSION 2, since 7e3d8a31, 2020); any other version
//     fails communicator init ("XML Topology has wrong version",
//     ncclInvalidUsage, xml.cc ncclTopoXmlLoadSystem), so a file written
//     for NCCL (version 1) breaks RCCL and one written for RCCL breaks
//     NCCL;
//   - a <gpu> holds <xgmi> links (xml.cc ncclTopoXmlLoadGpu), not
//     <nvlink> or <c2c>; a <pci> holds pci, gpu and nic, no pcilink
//     (ncclTopoXmlLoadPci);
//   - its limits are MAX_SUBS 512 children (xml.h, "for CPX mode") and
//     NCCL_TOPO_XML_MAX_NODES 8192 elements (src/graph/topo.h).
type Dialect int

const (
	// NCCL is NVIDIA's NCCL: <system version="1">.
	NCCL Dialect = iota
	// RCCL is AMD's RCCL: <system version="2">.
	RCCL
)

// RCCL's fixed limits (ROCm/rccl@0cbce2a src/graph/xml.h, topo.h).
const (
	RCCLMaxSubs  = 512
	RCCLMaxNodes = 8192
)

func (d Dialect) String() string {
	switch d {
	case NCCL:
		return "NCCL"
	case RCCL:
		return "RCCL"
	}
	return fmt.Sprintf("Dialect(%d)", int(d))
}

// Version is the <system version> the dialect's loader requires.
func (d Dialect) Version() int {
	if d == RCCL {
		return 2
	}
	return 1
}

// limits are the dialect's MaxSubs and MaxNodes.
func (d Dialect) limits() (subs, nodes int) {
	if d == RCCL {
		return RCCLMaxSubs, RCCLMaxNodes
	}
	return MaxSubs, MaxNodes
}

// children lists the elements the dialect's loader reads under each
// element (ncclTopoXmlLoad* in xml.cc); it skips anything else.
func (d Dialect) children() map[string][]string {
	if d == RCCL {
		return rcclChildren
	}
	return children
}

var rcclChildren = map[string][]string{
	"system": {"cpu"},
	"cpu":    {"pci", "nic"},
	"pci":    {"pci", "gpu", "nic"},
	"gpu":    {"xgmi"},
	"nic":    {"net"},
	"xgmi":   nil,
	"net":    nil,
}

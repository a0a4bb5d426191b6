package rdma

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrorCounters are the port counters whose increase means a sick link
// (NVIDIA NVSentinel's fatal set, IBTA PortCounters).
var ErrorCounters = []string{
	"symbol_error",
	"link_downed",
	"excessive_buffer_overrun_errors",
	"local_link_integrity_errors",
}

// ReadPortCounters reads the named counters of one port from
// <root>/sys/class/infiniband/<dev>/ports/<port>/counters/<name>. A
// counter whose file is missing (EFA and some RoCE drivers keep only
// hw_counters) is left out of the map; a file that does not hold a
// number is an error. It returns an error when none could be read.
func ReadPortCounters(root, dev string, port int, names []string) (map[string]uint64, error) {
	dir := filepath.Join(root, "sys/class/infiniband", dev, "ports", strconv.Itoa(port), "counters")
	out := make(map[string]uint64, len(names))
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return out, err
		}
		v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return out, fmt.Errorf("%s: %w", filepath.Join(dir, n), err)
		}
		out[n] = v
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no counters: %w", dir, os.ErrNotExist)
	}
	return out, nil
}

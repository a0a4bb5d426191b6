package rdma

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
)

// DefaultRouteInterface returns the interface of the IPv4 default route
// in <root>/proc/net/route (destination and mask 00000000, flag RTF_UP);
// the lowest metric wins. A root without the file (fixtures) answers ""
// and no error.
func DefaultRouteInterface(root *rootfs.Root) (string, error) {
	const rel = "proc/net/route"
	p := root.Path(rel)
	b, err := root.ReadFile(rel, 4<<20)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return parseRoute(b, p)
}

func parseRoute(b []byte, name string) (string, error) {
	best, bestMetric := "", -1
	for i, line := range bytes.Split(b, []byte("\n")) {
		f := strings.Fields(string(line))
		if i == 0 || len(f) < 8 {
			continue // header, blank
		}
		if f[1] != "00000000" || f[7] != "00000000" {
			continue
		}
		var flags, metric int
		if _, err := fmt.Sscanf(f[3]+" "+f[6], "%x %d", &flags, &metric); err != nil {
			return "", fmt.Errorf("%s: line %d: %w", name, i+1, err)
		}
		if flags&1 == 0 { // RTF_UP
			continue
		}
		if bestMetric < 0 || metric < bestMetric {
			best, bestMetric = f[0], metric
		}
	}
	return best, nil
}

package pci

import (
	"math"
	"strconv"
	"strings"
)

// A link speed is the text of current_link_speed or max_link_speed as
// sysfs writes it ("32.0 GT/s PCIe", "8.0 GT/s", "2.5 GT/s PCIe",
// "Unknown"). Gen and ParseSpeed are the only readers of that text: the
// model, the health checks and the exporter ask them rather than parse it
// again (TestSpeedParsersOwned).

// speedField is the number a link speed starts with, as text: what comes
// before the first space.
func speedField(speed string) string {
	f, _, _ := strings.Cut(strings.TrimSpace(speed), " ")
	return f
}

// Gen maps a link speed as sysfs writes it ("32.0 GT/s PCIe", "8.0 GT/s",
// "2.5 GT/s PCIe") to its PCIe generation; 0 when unknown ("Unknown",
// empty, garbage).
func Gen(speed string) int {
	switch speedField(speed) {
	case "2.5":
		return 1
	case "5.0", "5":
		return 2
	case "8.0", "8":
		return 3
	case "16.0", "16":
		return 4
	case "32.0", "32":
		return 5
	case "64.0", "64":
		return 6
	}
	return 0
}

// ParseSpeed reads the transfer rate a link speed starts with, in GT/s
// ("32.0 GT/s PCIe" is 32). ok is false when the speed names none
// ("Unknown", empty, garbage) or a rate that is not a positive finite
// number, so that callers treat such a link as unreported.
func ParseSpeed(speed string) (gts float64, ok bool) {
	v, err := strconv.ParseFloat(speedField(speed), 64)
	if err != nil || !(v > 0) || math.IsInf(v, 1) {
		return 0, false
	}
	return v, true
}

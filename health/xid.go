package health

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// FatalXIDs fail gpu.xid: DCGM's health-watch FAIL set
// (modules/health/DcgmHealthWatch.cpp: 48 DBE, 64 row-remap failure,
// 74 NVLink error, 79 fallen off the bus, 95 uncontained ECC, 119/120 GSP
// errors, 140 unrecovered ECC).
var FatalXIDs = []int{48, 64, 74, 79, 95, 119, 120, 140}

// WarnXIDs warn in gpu.xid: the rest of aznhc's hardware list
// (customTests/azure_gpu_xid.nhc) plus DCGM's contained-ECC 94.
var WarnXIDs = []int{56, 57, 58, 62, 63, 65, 68, 69, 73, 80, 81, 92, 94}

// XIDEvent is one NVRM Xid line of the kernel log.
type XIDEvent struct {
	BusID string // "0000:18:00.0"
	XID   int
	Line  string // the message after the kmsg prefix
}

var xidRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`NVRM: Xid \(PCI:([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.[0-7])?\): (\d+)`)
})

// ParseKmsg finds the XID events in kernel log records, in /dev/kmsg
// format ("PRI,SEQ,USEC,FLAGS;MESSAGE", continuation lines start with a
// space) or plain dmesg lines.
func ParseKmsg(data []byte) []XIDEvent {
	var out []XIDEvent
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		if len(line) == 0 || line[0] == ' ' {
			continue
		}
		msg := string(line)
		if i := strings.IndexByte(msg, ';'); i >= 0 && strings.Count(msg[:i], ",") >= 3 {
			msg = msg[i+1:]
		}
		m := xidRE().FindStringSubmatch(msg)
		if m == nil {
			continue
		}
		x, err := strconv.Atoi(m[2])
		if err != nil {
			continue
		}
		out = append(out, XIDEvent{BusID: strings.ToLower(m[1]) + ".0", XID: x, Line: strings.TrimSpace(msg)})
	}
	return out
}

func checkXID(ctx context.Context, in *Input) Result {
	data, err := in.Reader.KernelLog(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return Result{Verdict: Fail, Reason: "timed out reading the kernel log"}
		}
		if errors.Is(err, fs.ErrNotExist) {
			if pe := (*pathError)(nil); errors.As(err, &pe) {
				return skip("no kernel log at %s", pe.path)
			}
			return skip("no kernel log: %v", err)
		}
		r := skip("cannot read the kernel log: %v", err)
		if errors.Is(err, fs.ErrPermission) { // EACCES, EPERM
			r.Reason += " (run as root, or allow CAP_SYSLOG)"
		}
		return r
	}
	sel := map[string]selGPU{}
	for _, g := range in.gpus {
		sel[g.BusID] = selGPU{g.Index, g.BusID}
	}
	var fatal, warn []string
	seen := map[string]bool{}
	for _, ev := range ParseKmsg(data) {
		g, ok := sel[ev.BusID]
		if !ok {
			continue
		}
		key := fmt.Sprint(ev.BusID, ev.XID)
		if seen[key] {
			continue
		}
		seen[key] = true
		msg := fmt.Sprintf("GPU %d (%s) XID %d: %s", g.index, g.bus, ev.XID, trimXIDLine(ev.Line))
		switch {
		case slices.Contains(FatalXIDs, ev.XID):
			fatal = append(fatal, msg)
		case slices.Contains(WarnXIDs, ev.XID):
			warn = append(warn, msg)
		}
	}
	if len(fatal) > 0 {
		return verdictOf(fatal, Fail, "a fatal XID needs a GPU reset or node reboot; drain the node (see NVIDIA's XID catalog)", "")
	}
	if len(warn) > 0 {
		return verdictOf(warn, Warn, "hardware XID since boot; watch for repeats", "")
	}
	return Result{Verdict: Pass, Reason: fmt.Sprintf("no fatal XID since boot for %s", plural(len(in.gpus), "GPU"))}
}

type selGPU struct {
	index int
	bus   string
}

// trimXIDLine keeps the text after the XID number and pid, cut to fit a
// one-line reason.
func trimXIDLine(s string) string {
	if i := strings.LastIndex(s, ", "); i >= 0 && i+2 < len(s) {
		s = s[i+2:]
	}
	if len(s) > 60 {
		s = s[:60]
	}
	return s
}

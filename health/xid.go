package health

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
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

var xidRE = regexp.MustCompile(`NVRM: Xid \(PCI:([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.[0-7])?\): (\d+)`)

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
		m := xidRE.FindStringSubmatch(msg)
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

// kmsgPath is where gpu.xid reads the kernel log.
func (in *Input) kmsgPath() string {
	if in.Kmsg != "" {
		return in.Kmsg
	}
	return filepath.Join(in.Root, "dev/kmsg")
}

// ReadKmsg reads every record in a kernel log without blocking: it opens
// path O_RDONLY|O_NONBLOCK and reads until EAGAIN (the live /dev/kmsg,
// one record per read) or end of file (a fixture). EPIPE (records
// overwritten while reading) is skipped. The os package is not used: it
// would park a nonblocking character device in the poller and wait.
func ReadKmsg(ctx context.Context, path string) ([]byte, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &pathError{path, err}
	}
	defer syscall.Close(fd)
	var out []byte
	buf := make([]byte, 64<<10)
	for {
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		n, err := syscall.Read(fd, buf)
		switch {
		case errors.Is(err, syscall.EAGAIN):
			return out, nil
		case errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.EINTR):
			continue
		case err != nil:
			return out, &pathError{path, err}
		case n == 0:
			return out, nil
		}
		out = append(out, buf[:n]...)
		if len(out) > 0 && out[len(out)-1] != '\n' && n < len(buf) {
			// /dev/kmsg records end in a newline; keep records apart anyway.
			out = append(out, '\n')
		}
	}
}

type pathError struct {
	path string
	err  error
}

func (e *pathError) Error() string { return e.path + ": " + e.err.Error() }
func (e *pathError) Unwrap() error { return e.err }

func checkXID(ctx context.Context, in *Input) Result {
	path := in.kmsgPath()
	data, err := ReadKmsg(ctx, path)
	if err != nil {
		if ctx.Err() != nil {
			return Result{Verdict: Fail, Reason: "timed out reading " + path}
		}
		if errors.Is(err, syscall.ENOENT) {
			return skip("no kernel log at %s", path)
		}
		r := skip("cannot read the kernel log: %v", err)
		if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) {
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

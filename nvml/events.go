package nvml

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuaffinity/gpuaffinity/pci"
)

// ErrNoXIDEvents is wrapped by WatchXID's error when no GPU could be
// registered for XID events: none answers a handle, or every one answers
// RegisterEvents with ERROR_NOT_SUPPORTED, ERROR_GPU_IS_LOST or another
// failure. The error lists each GPU's answer.
var ErrNoXIDEvents = errors.New("no GPU delivers XID events")

// XIDEvent is one XID (an error the NVIDIA driver reports, the code that
// also appears as "NVRM: Xid" in the kernel log) as NVML delivered it.
type XIDEvent struct {
	GPU   int       // NVML index; -1 when the event names no GPU WatchXID registered
	BusID string    // GetPciInfo, sysfs form "0000:18:00.0"; "" when unknown
	XID   uint64    // EventData.EventData of an EventTypeXidCriticalError event
	Time  time.Time // when WatchXID received it (NVML gives no time stamp)
}

// XIDOption configures WatchXID.
type XIDOption func(*xidOptions)

type xidOptions struct {
	warn func(string)
}

// XIDWarnings has WatchXID report to warn, on WatchXID's own goroutine,
// each GPU it does not watch (with the call and its answer, e.g. "GPU 7:
// DeviceGetHandleByIndex: ERROR_GPU_IS_LOST") once registration is done,
// and each new failure of Wait (a failure repeating the previous one is not
// reported again).
func XIDWarnings(warn func(string)) XIDOption {
	return func(o *xidOptions) { o.warn = warn }
}

// Timing of WatchXID's loop.
const (
	xidWaitMs      = 500 // EventSet.Wait's timeout: how long ctx may go unnoticed
	xidBackoffMin  = 500 * time.Millisecond
	xidBackoffMax  = 30 * time.Second
	xidRecordLimit = 4096 // Record: most events drained from one set
)

// xidGPU is a GPU WatchXID registered.
type xidGPU struct {
	index int
	dev   nvml.Device
	uuid  string // GetUUID; "" when it failed
	busID string // sysfs form; "" when GetPciInfo failed
}

// WatchXID calls fn for each XID event of the node's GPUs until ctx is
// done, then returns nil.
//
// It takes its own NVML reference: it calls lib.Init first and
// lib.Shutdown last, so lib may or may not be initialised by the caller
// (NVML counts Init and Shutdown; a caller's Read keeps working alongside).
// When Init fails it calls nothing else and returns an error wrapping
// ErrLibraryNotFound or ErrUnavailable, as Read reports them; a nil lib is
// ErrLibraryNotFound.
//
// It creates one event set and registers every GPU on it for
// nvml.EventTypeXidCriticalError. A GPU whose handle or registration fails
// (ERROR_NOT_SUPPORTED on a VM or old GPU, ERROR_GPU_IS_LOST, ...) is
// skipped and reported through XIDWarnings; when no GPU is registered
// WatchXID returns an error wrapping ErrNoXIDEvents right away. Otherwise it
// loops on the set's Wait with a 500 ms timeout, so it notices ctx within
// about that long; ERROR_TIMEOUT just loops, any other failure of Wait
// (ERROR_GPU_IS_LOST once a registered GPU falls off the bus) is waited out
// with a backoff from 0.5 s doubling to 30 s, never a busy loop. The set is
// freed before WatchXID returns.
//
// fn runs on WatchXID's goroutine, one event at a time, with the event's
// GPU found by handle, then UUID, then PCI bus id among the registered
// GPUs; NVML queues events meanwhile, so fn should return promptly.
// WatchXID starts no goroutine.
func WatchXID(ctx context.Context, lib nvml.Interface, fn func(XIDEvent), opts ...XIDOption) error {
	var o xidOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.warn == nil {
		o.warn = func(string) {}
	}
	if lib == nil {
		return fmt.Errorf("nvml: watch XID: %w: no NVML source", ErrLibraryNotFound)
	}
	if ctx.Err() != nil {
		return nil
	}
	if r := lib.Init(); r != nvml.SUCCESS {
		if r == nvml.ERROR_LIBRARY_NOT_FOUND {
			return fmt.Errorf("nvml: watch XID: %w: Init: %w", ErrLibraryNotFound, retErr(r))
		}
		return fmt.Errorf("nvml: watch XID: %w: Init: %w", ErrUnavailable, retErr(r))
	}
	defer lib.Shutdown()

	set, gpus, skipped, err := registerXID(lib)
	if err != nil {
		return err
	}
	defer set.Free()
	for _, s := range skipped {
		o.warn(s)
	}
	if len(gpus) == 0 {
		return fmt.Errorf("nvml: watch XID: %w: %s", ErrNoXIDEvents, strings.Join(skipped, "; "))
	}

	backoff := xidBackoffMin
	var lastFail nvml.Return = nvml.SUCCESS
	for ctx.Err() == nil {
		ev, r := set.Wait(xidWaitMs)
		switch r {
		case nvml.SUCCESS:
			backoff, lastFail = xidBackoffMin, nvml.SUCCESS
			if ev.EventType&nvml.EventTypeXidCriticalError == 0 {
				continue
			}
			e := XIDEvent{GPU: -1, XID: ev.EventData, Time: time.Now()}
			e.GPU, e.BusID = findXIDGPU(gpus, ev.Device)
			fn(e)
		case nvml.ERROR_TIMEOUT:
			backoff, lastFail = xidBackoffMin, nvml.SUCCESS
		default:
			if r != lastFail {
				o.warn(fmt.Sprintf("EventSet.Wait: %s; retrying in %s", returnName(r), backoff))
				lastFail = r
			}
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
			backoff = min(2*backoff, xidBackoffMax)
		}
	}
	return nil
}

// registerXID creates an event set and registers every GPU of lib, which
// must be initialised, for XID events. It returns the set (nil with the
// error when EventSetCreate or DeviceGetCount fails), the GPUs registered
// and a line for each GPU skipped.
func registerXID(lib nvml.Interface) (nvml.EventSet, []xidGPU, []string, error) {
	n, r := lib.DeviceGetCount()
	if r != nvml.SUCCESS {
		return nil, nil, nil, fmt.Errorf("nvml: watch XID: %w: DeviceGetCount: %w", ErrUnavailable, retErr(r))
	}
	set, r := lib.EventSetCreate()
	if r != nvml.SUCCESS {
		return nil, nil, nil, fmt.Errorf("nvml: watch XID: EventSetCreate: %w", retErr(r))
	}
	var gpus []xidGPU
	var skipped []string
	for i := range n {
		dev, r := lib.DeviceGetHandleByIndex(i)
		if r != nvml.SUCCESS {
			skipped = append(skipped, fmt.Sprintf("GPU %d: DeviceGetHandleByIndex: %s", i, returnName(r)))
			continue
		}
		g := xidGPU{index: i, dev: dev}
		if info, r := dev.GetPciInfo(); r == nvml.SUCCESS {
			g.busID, _ = pci.Canonical(cString(info.BusId[:]))
		}
		if uuid, r := dev.GetUUID(); r == nvml.SUCCESS {
			g.uuid = uuid
		}
		if r := dev.RegisterEvents(nvml.EventTypeXidCriticalError, set); r != nvml.SUCCESS {
			who := fmt.Sprintf("GPU %d", i)
			if g.busID != "" {
				who += " (" + g.busID + ")"
			}
			skipped = append(skipped, fmt.Sprintf("%s: RegisterEvents(EventTypeXidCriticalError): %s", who, returnName(r)))
			continue
		}
		gpus = append(gpus, g)
	}
	if n == 0 {
		skipped = append(skipped, "DeviceGetCount: 0 GPUs")
	}
	return set, gpus, skipped, nil
}

// findXIDGPU finds an event's device among the registered GPUs: by handle,
// else by UUID, else by PCI bus id. Unknown: -1 and the device's own bus id
// if it answers one.
func findXIDGPU(gpus []xidGPU, dev nvml.Device) (int, string) {
	if dev == nil {
		return -1, ""
	}
	for _, g := range gpus {
		if sameHandle(g.dev, dev) {
			return g.index, g.busID
		}
	}
	if uuid, r := dev.GetUUID(); r == nvml.SUCCESS && uuid != "" {
		for _, g := range gpus {
			if g.uuid == uuid {
				return g.index, g.busID
			}
		}
	}
	var bus string
	if info, r := dev.GetPciInfo(); r == nvml.SUCCESS {
		bus, _ = pci.Canonical(cString(info.BusId[:]))
	}
	for _, g := range gpus {
		if bus != "" && g.busID == bus {
			return g.index, g.busID
		}
	}
	return -1, bus
}

// sameHandle reports whether two device handles are the same handle,
// without the panic == gives on incomparable dynamic types.
func sameHandle(a, b nvml.Device) bool {
	ta := reflect.TypeOf(a)
	return ta != nil && ta == reflect.TypeOf(b) && ta.Comparable() && a == b
}

// recordXIDs registers every device of lib (initialised) on one event set
// and drains the events already pending, for Record: per device, the
// RegisterEvents answer and the XIDs in order. A failed EventSetCreate is
// every device's answer.
func recordXIDs(lib nvml.Interface, devs []nvml.Device) []*Answer[[]uint64] {
	out := make([]*Answer[[]uint64], len(devs))
	set, r := lib.EventSetCreate()
	if r != nvml.SUCCESS {
		for i, d := range devs {
			if d != nil {
				out[i] = &Answer[[]uint64]{Return: returnName(r)}
			}
		}
		return out
	}
	defer set.Free()
	var gpus []xidGPU
	for i, d := range devs {
		if d == nil {
			continue
		}
		if r := d.RegisterEvents(nvml.EventTypeXidCriticalError, set); r != nvml.SUCCESS {
			out[i] = &Answer[[]uint64]{Return: returnName(r)}
			continue
		}
		out[i] = &Answer[[]uint64]{Value: []uint64{}}
		g := xidGPU{index: i, dev: d}
		if uuid, r := d.GetUUID(); r == nvml.SUCCESS {
			g.uuid = uuid
		}
		if info, r := d.GetPciInfo(); r == nvml.SUCCESS {
			g.busID, _ = pci.Canonical(cString(info.BusId[:]))
		}
		gpus = append(gpus, g)
	}
	if len(gpus) == 0 {
		return out
	}
	for range xidRecordLimit {
		ev, r := set.Wait(0)
		if r != nvml.SUCCESS {
			break
		}
		if ev.EventType&nvml.EventTypeXidCriticalError == 0 {
			continue
		}
		if i, _ := findXIDGPU(gpus, ev.Device); i >= 0 {
			out[i].Value = append(out[i].Value, ev.EventData)
		}
	}
	return out
}

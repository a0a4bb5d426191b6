package nvml

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// watch runs WatchXID on lib until it has delivered n events (then it
// cancels) or returned, and gives back the events, the warnings and its
// error. It fails the test if WatchXID does not return within 10 s of the
// cancel, or leaves a goroutine behind.
func watch(t *testing.T, lib nvml.Interface, n int) ([]XIDEvent, []string, error) {
	t.Helper()
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var events []XIDEvent
	var warnings []string
	done := make(chan error, 1)
	go func() {
		done <- WatchXID(ctx, lib, func(e XIDEvent) {
			events = append(events, e)
			if len(events) == n {
				cancel()
			}
		}, XIDWarnings(func(s string) { warnings = append(warnings, s) }))
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatalf("WatchXID did not return; %d of %d events so far", len(events), n)
	}
	settled(t, before)
	return events, warnings, err
}

// settled fails the test unless the goroutine count comes back to before
// (the runtime may take a moment to retire an exited goroutine).
func settled(t *testing.T, before int) {
	t.Helper()
	for range 200 {
		if runtime.NumGoroutine() <= before {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("%d goroutines after WatchXID returned, %d before", runtime.NumGoroutine(), before)
}

var ignoreTime = cmpopts.IgnoreFields(XIDEvent{}, "Time")

// TestWatchXIDReplay: the hgx file's three XIDs arrive in device order,
// each with its GPU's index and bus id, and WatchXID returns after the
// cancel with its NVML reference and event set given back.
func TestWatchXIDReplay(t *testing.T) {
	lib := NewReplay(hgxFile())
	start := time.Now()
	events, warnings, err := watch(t, lib, 3)
	if err != nil {
		t.Fatalf("WatchXID: %v", err)
	}
	want := []XIDEvent{
		{GPU: 0, BusID: "0000:18:00.0", XID: 48},
		{GPU: 1, BusID: "0000:9a:00.0", XID: 94},
		{GPU: 1, BusID: "0000:9a:00.0", XID: 79},
	}
	if diff := cmp.Diff(want, events, ignoreTime); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	for _, e := range events {
		if e.Time.Before(start) || e.Time.After(time.Now()) {
			t.Errorf("event time %v outside the watch", e.Time)
		}
	}
	if len(warnings) != 0 {
		t.Errorf("warnings %q, want none", warnings)
	}
	if _, r := lib.DeviceGetCount(); r != nvml.ERROR_UNINITIALIZED {
		t.Errorf("after WatchXID: DeviceGetCount = %v, want ERROR_UNINITIALIZED (Shutdown matched Init)", r)
	}

	// Each XID is delivered once per replayer: a second watch, or Record,
	// sees none.
	lib.Init()
	set, _ := lib.EventSetCreate()
	dev, _ := lib.DeviceGetHandleByIndex(1)
	if r := dev.RegisterEvents(nvml.EventTypeXidCriticalError, set); r != nvml.SUCCESS {
		t.Fatalf("RegisterEvents = %v", r)
	}
	if ev, r := set.Wait(0); r != nvml.ERROR_TIMEOUT {
		t.Errorf("Wait after the watch = %+v, %v; want ERROR_TIMEOUT", ev, r)
	}
	set.Free()
	lib.Shutdown()
}

// TestWatchXIDSkips: GPUs that cannot be registered are skipped and named;
// with none left WatchXID fails with ErrNoXIDEvents at once.
func TestWatchXIDSkips(t *testing.T) {
	f := hgxFile()
	f.Devices[0].XIDs = failedp[[]uint64](notSupported)
	f.Devices = append(f.Devices, ReplayDevice{Handle: gpuIsLost})
	f.DeviceCount = ok(3)
	events, warnings, err := watch(t, NewReplay(f), 2)
	if err != nil {
		t.Fatalf("WatchXID: %v", err)
	}
	if diff := cmp.Diff([]XIDEvent{{GPU: 1, BusID: "0000:9a:00.0", XID: 94}, {GPU: 1, BusID: "0000:9a:00.0", XID: 79}}, events, ignoreTime); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	wantWarn := []string{
		"GPU 0 (0000:18:00.0): RegisterEvents(EventTypeXidCriticalError): ERROR_NOT_SUPPORTED",
		"GPU 2: DeviceGetHandleByIndex: ERROR_GPU_IS_LOST",
	}
	if diff := cmp.Diff(wantWarn, warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}

	// failuresFile: a VM GPU without XID events, a lost handle, a GPU
	// lost at registration.
	_, warnings, err = watch(t, NewReplay(failuresFile()), 1)
	if !errors.Is(err, ErrNoXIDEvents) {
		t.Fatalf("WatchXID = %v, want ErrNoXIDEvents", err)
	}
	for _, w := range []string{
		"GPU 0 (0000:00:06.0): RegisterEvents(EventTypeXidCriticalError): ERROR_NOT_SUPPORTED",
		"GPU 1: DeviceGetHandleByIndex: ERROR_GPU_IS_LOST",
		"GPU 2 (0000:1a:00.0): RegisterEvents(EventTypeXidCriticalError): ERROR_GPU_IS_LOST",
	} {
		if !strings.Contains(err.Error(), w) || !contains(warnings, w) {
			t.Errorf("error %q and warnings %q should both name %q", err, warnings, w)
		}
	}

	// No GPU at all.
	none := ReplayFile{Version: ReplayVersion, DeviceCount: ok(0)}
	if _, _, err := watch(t, NewReplay(none), 1); !errors.Is(err, ErrNoXIDEvents) || !strings.Contains(err.Error(), "0 GPUs") {
		t.Errorf("WatchXID with no GPU = %v, want ErrNoXIDEvents naming 0 GPUs", err)
	}
}

// TestWatchXIDUnavailable: a failed Init is the only call; a nil lib and a
// done context call nothing.
func TestWatchXIDUnavailable(t *testing.T) {
	lib, _ := mockLib()
	lib.InitFunc = func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }
	_, _, err := watch(t, lib, 1)
	if !errors.Is(err, ErrLibraryNotFound) || !errors.Is(err, nvml.ERROR_LIBRARY_NOT_FOUND) {
		t.Errorf("WatchXID = %v, want ErrLibraryNotFound", err)
	}
	if n := len(lib.DeviceGetCountCalls()) + len(lib.EventSetCreateCalls()) + len(lib.ShutdownCalls()); n != 0 {
		t.Errorf("%d calls after a failed Init, want none", n)
	}

	lib, _ = mockLib()
	lib.InitFunc = func() nvml.Return { return nvml.ERROR_DRIVER_NOT_LOADED }
	if _, _, err := watch(t, lib, 1); !errors.Is(err, ErrUnavailable) {
		t.Errorf("WatchXID = %v, want ErrUnavailable", err)
	}

	if err := WatchXID(context.Background(), nil, func(XIDEvent) {}); !errors.Is(err, ErrLibraryNotFound) {
		t.Errorf("WatchXID(nil) = %v, want ErrLibraryNotFound", err)
	}

	lib, _ = mockLib()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := WatchXID(ctx, lib, func(XIDEvent) {}); err != nil || len(lib.InitCalls()) != 0 {
		t.Errorf("WatchXID(done ctx) = %v after %d Init calls, want nil and none", err, len(lib.InitCalls()))
	}
}

// TestWatchXIDWaitFails: a Wait that keeps failing is retried with a
// backoff, not in a busy loop, reported once, and the set is freed and
// NVML shut down on return.
func TestWatchXIDWaitFails(t *testing.T) {
	lib, dev := mockLib()
	var mu sync.Mutex
	waits := 0
	set := &mock.EventSet{
		WaitFunc: func(uint32) (nvml.EventData, nvml.Return) {
			mu.Lock()
			waits++
			mu.Unlock()
			return nvml.EventData{}, nvml.ERROR_GPU_IS_LOST
		},
		FreeFunc: func() nvml.Return { return nvml.SUCCESS },
	}
	lib.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return set, nvml.SUCCESS }
	dev.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }

	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	var warnings []string
	err := WatchXID(ctx, lib, func(XIDEvent) { t.Error("an event from a failing Wait") },
		XIDWarnings(func(s string) { warnings = append(warnings, s) }))
	if err != nil {
		t.Fatalf("WatchXID: %v", err)
	}
	// A busy loop would have called Wait thousands of times in 0.7 s; the
	// backoff (0.5 s, then 1 s) allows 2.
	if waits < 1 || waits > 4 {
		t.Errorf("Wait called %d times in 0.7 s, want 1-4", waits)
	}
	if diff := cmp.Diff([]string{"EventSet.Wait: ERROR_GPU_IS_LOST; retrying in 500ms"}, warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	if len(set.FreeCalls()) != 1 || len(lib.ShutdownCalls()) != 1 || len(lib.InitCalls()) != 1 {
		t.Errorf("Free %d, Init %d, Shutdown %d times; want once each",
			len(set.FreeCalls()), len(lib.InitCalls()), len(lib.ShutdownCalls()))
	}
}

// TestWatchXIDMapping: an event's device is found by handle, else by UUID,
// else by bus id; an unknown one is GPU -1 with its own bus id. Events
// other than XIDs are ignored.
func TestWatchXIDMapping(t *testing.T) {
	lib, dev := mockLib()
	dev.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
	byUUID := &mock.Device{GetUUIDFunc: func() (string, nvml.Return) { return "GPU-0", nvml.SUCCESS }}
	fillNotSupported(byUUID)
	pciOf := func(bus string) func() (nvml.PciInfo, nvml.Return) {
		return func() (nvml.PciInfo, nvml.Return) {
			var info nvml.PciInfo
			putCString(info.BusId[:], bus)
			return info, nvml.SUCCESS
		}
	}
	byBus := &mock.Device{GetPciInfoFunc: pciOf("00000000:3B:00.0")}
	fillNotSupported(byBus)
	stranger := &mock.Device{GetPciInfoFunc: pciOf("00000000:99:00.0")}
	fillNotSupported(stranger)
	queue := []nvml.EventData{
		{Device: dev, EventType: nvml.EventTypeXidCriticalError, EventData: 13},
		{Device: byUUID, EventType: nvml.EventTypeXidCriticalError, EventData: 31},
		{Device: dev, EventType: nvml.EventTypeSingleBitEccError, EventData: 1},
		{Device: byBus, EventType: nvml.EventTypeXidCriticalError, EventData: 43},
		{Device: stranger, EventType: nvml.EventTypeXidCriticalError, EventData: 45},
		{Device: nil, EventType: nvml.EventTypeXidCriticalError, EventData: 63},
	}
	set := &mock.EventSet{
		WaitFunc: func(uint32) (nvml.EventData, nvml.Return) {
			if len(queue) == 0 {
				return nvml.EventData{}, nvml.ERROR_TIMEOUT
			}
			ev := queue[0]
			queue = queue[1:]
			return ev, nvml.SUCCESS
		},
		FreeFunc: func() nvml.Return { return nvml.SUCCESS },
	}
	lib.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return set, nvml.SUCCESS }
	events, _, err := watch(t, lib, 5)
	if err != nil {
		t.Fatalf("WatchXID: %v", err)
	}
	want := []XIDEvent{
		{GPU: 0, BusID: "0000:3b:00.0", XID: 13},
		{GPU: 0, BusID: "0000:3b:00.0", XID: 31},
		{GPU: 0, BusID: "0000:3b:00.0", XID: 43},
		{GPU: -1, BusID: "0000:99:00.0", XID: 45},
		{GPU: -1, XID: 63},
	}
	if diff := cmp.Diff(want, events, ignoreTime); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestReplayEventSet: the replayer's event set on its own.
func TestReplayEventSet(t *testing.T) {
	lib := NewReplay(hgxFile())
	if _, r := lib.EventSetCreate(); r != nvml.ERROR_UNINITIALIZED {
		t.Errorf("EventSetCreate before Init = %v", r)
	}
	lib.Init()
	defer lib.Shutdown()
	dev0, _ := lib.DeviceGetHandleByIndex(0)
	dev1, _ := lib.DeviceGetHandleByIndex(1)
	other := NewReplay(hgxFile())
	other.Init()
	foreign, _ := other.EventSetCreate()

	set, r := lib.EventSetCreate()
	if r != nvml.SUCCESS {
		t.Fatalf("EventSetCreate = %v", r)
	}
	for _, tc := range []struct {
		name  string
		dev   nvml.Device
		types uint64
		set   nvml.EventSet
		want  nvml.Return
	}{
		{"other type", dev0, nvml.EventTypeXidCriticalError | nvml.EventTypePState, set, nvml.ERROR_NOT_SUPPORTED},
		{"foreign set", dev0, nvml.EventTypeXidCriticalError, foreign, nvml.ERROR_INVALID_ARGUMENT},
		{"nil set", dev0, nvml.EventTypeXidCriticalError, nil, nvml.ERROR_INVALID_ARGUMENT},
		{"gpu 1", dev1, nvml.EventTypeXidCriticalError, set, nvml.SUCCESS},
	} {
		if r := lib.DeviceRegisterEvents(tc.dev, tc.types, tc.set); r != tc.want {
			t.Errorf("%s: DeviceRegisterEvents = %v, want %v", tc.name, r, tc.want)
		}
	}
	if types, r := lib.DeviceGetSupportedEventTypes(dev0); types != nvml.EventTypeXidCriticalError || r != nvml.SUCCESS {
		t.Errorf("GetSupportedEventTypes = %#x, %v", types, r)
	}
	// Only GPU 1 is registered: its two XIDs, then nothing; GPU 0's 48
	// stays pending for a set that registers GPU 0.
	for _, want := range []uint64{94, 79} {
		ev, r := lib.EventSetWait(set, 0)
		if r != nvml.SUCCESS || ev.EventData != want || ev.EventType != nvml.EventTypeXidCriticalError || ev.Device != dev1 {
			t.Errorf("Wait = %+v, %v; want XID %d of GPU 1", ev, r, want)
		}
	}
	if _, r := set.Wait(0); r != nvml.ERROR_TIMEOUT {
		t.Errorf("Wait with nothing left = %v, want ERROR_TIMEOUT", r)
	}
	set2, _ := lib.EventSetCreate()
	dev0.RegisterEvents(nvml.EventTypeXidCriticalError, set2)
	if ev, r := set2.Wait(0); r != nvml.SUCCESS || ev.EventData != 48 {
		t.Errorf("second set: Wait = %+v, %v; want XID 48", ev, r)
	}
	if r := lib.EventSetFree(set); r != nvml.SUCCESS {
		t.Errorf("Free = %v", r)
	}
	if r := set.Free(); r != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("second Free = %v, want ERROR_INVALID_ARGUMENT", r)
	}
	if _, r := set.Wait(0); r != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("Wait on a freed set = %v, want ERROR_INVALID_ARGUMENT", r)
	}
	set2.Free()
	foreign.Free()
	other.Shutdown()
}

// TestReplayNVLinkErrorCounter: the counters answer the file; a missing
// errors object or counter answers NOT_SUPPORTED, an undefined counter
// INVALID_ARGUMENT.
func TestReplayNVLinkErrorCounter(t *testing.T) {
	f := hgxFile()
	f.Devices[0].NVLinks[0].Errors = nil
	f.Devices[0].NVLinks[1].Errors.Replay = nil
	lib := NewReplay(f)
	lib.Init()
	defer lib.Shutdown()
	dev0, _ := lib.DeviceGetHandleByIndex(0)
	for _, tc := range []struct {
		link int
		c    nvml.NvLinkErrorCounter
		v    uint64
		want nvml.Return
	}{
		{2, nvml.NVLINK_ERROR_DL_CRC_FLIT, 7, nvml.SUCCESS},
		{2, nvml.NVLINK_ERROR_DL_CRC_DATA, 2, nvml.SUCCESS},
		{2, nvml.NVLINK_ERROR_DL_REPLAY, 31, nvml.SUCCESS},
		{2, nvml.NVLINK_ERROR_DL_RECOVERY, 4, nvml.SUCCESS},
		{2, nvml.NVLINK_ERROR_DL_ECC_DATA, 0, nvml.ERROR_NOT_SUPPORTED},
		{2, nvml.NVLINK_ERROR_COUNT, 0, nvml.ERROR_INVALID_ARGUMENT},
		{0, nvml.NVLINK_ERROR_DL_CRC_FLIT, 0, nvml.ERROR_NOT_SUPPORTED}, // no errors object
		{1, nvml.NVLINK_ERROR_DL_REPLAY, 0, nvml.ERROR_NOT_SUPPORTED},   // counter missing
		{1, nvml.NVLINK_ERROR_DL_CRC_FLIT, 0, nvml.SUCCESS},
		{9, nvml.NVLINK_ERROR_DL_CRC_FLIT, 0, nvml.ERROR_INVALID_ARGUMENT}, // past the last link
	} {
		v, r := lib.DeviceGetNvLinkErrorCounter(dev0, tc.link, tc.c)
		if v != tc.v || r != tc.want {
			t.Errorf("GetNvLinkErrorCounter(%d, %d) = %d, %v; want %d, %v", tc.link, tc.c, v, r, tc.v, tc.want)
		}
	}

	bad := hgxFile()
	bad.Devices[1].NVLinks[0].Errors.CRCData = failedp[uint64]("ERROR_BOGUS")
	bad.Devices[1].XIDs = failedp[[]uint64]("ERROR_BOGUS")
	err := bad.validate()
	for _, w := range []string{"devices[1].nvlinks[0].errors.crc_data", "devices[1].xids"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("validate = %v, want %s named", err, w)
		}
	}
}

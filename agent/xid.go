package agent

import (
	"context"
	"errors"
	"sync"

	"github.com/gpuaffinity/gpuaffinity/nvml"
)

// startXIDWatch starts the background XID watch (nvml.WatchXID) on the
// initialised NVML library, counting events into the exporter's
// XIDCounter, unless one runs already or NVML is not initialised. Run
// calls it after each discovery round, so a watch that could not start
// (no NVML yet, no GPU delivering events) is tried again then. One watch
// serves the agent's life: under a fixture root it stays on the replay it
// started with (WatchXID holds its own Init), so re-opening nvml.json
// does not deliver the recorded XIDs twice.
func (a *Agent) startXIDWatch(ctx context.Context, wg *sync.WaitGroup) {
	if a.xidRunning.Load() || ctx.Err() != nil {
		return
	}
	lib := a.nv.current()
	if lib == nil {
		return
	}
	a.xidRunning.Store(true)
	wg.Go(func() {
		defer a.xidRunning.Store(false)
		err := nvml.WatchXID(ctx, lib, func(ev nvml.XIDEvent) {
			if ev.GPU < 0 {
				a.log.Warn("XID from a GPU the watch did not register; not counted", "xid", ev.XID, "bus_id", ev.BusID)
				return
			}
			a.log.Info("XID", "gpu", ev.GPU, "bus_id", ev.BusID, "xid", ev.XID)
			a.xids.Add(ev.GPU, ev.XID, ev.Time)
		}, nvml.XIDWarnings(func(w string) { a.log.Warn("XID watch", "warning", w) }))
		if err == nil {
			return
		}
		a.xidMu.Lock()
		defer a.xidMu.Unlock()
		if err.Error() != a.xidErr {
			lvl := a.log.Warn
			if errors.Is(err, nvml.ErrNoXIDEvents) {
				lvl = a.log.Info // VMs and older GPUs deliver none
			}
			lvl("XID watch not running; retried after the next discovery", "err", err)
		}
		a.xidErr = err.Error()
	})
}

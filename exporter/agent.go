package exporter

import (
	"cmp"
	"github.com/gpuaffinity/gpuaffinity/internal/sortfn"
	"strconv"
	"time"

	"github.com/gpuaffinity/gpuaffinity/health"
)

// collectAgent renders what the agent keeps in memory: discovery, the
// health gate, the state files and the XID counts (labelled as the GPU
// of that NVML index in gpus). It reads no device and
// is always part of a collection.
func collectAgent(st *State, gpus *gpuLabelSet, xid *XIDCounter, s *sink) {
	d := st.Discovery
	s.gauge(descDiscoverySuccess, b2f(d.OK))
	if !d.Last.IsZero() {
		s.gauge(descDiscoveryLast, unix(d.Last))
		s.gauge(descDiscoveryDuration, d.Duration.Seconds())
	}
	if !d.LastSuccess.IsZero() {
		s.gauge(descDiscoveryLastOK, unix(d.LastSuccess))
	}
	s.gauge(descStateWriteSuccess, b2f(st.StateWriteOK))

	if h := st.Health; h != nil {
		s.gauge(descHealthHealthy, b2f(h.Healthy))
		if !h.Time.IsZero() {
			s.gauge(descHealthLastRun, unix(h.Time))
		}
		seen := map[string]bool{}
		for _, r := range h.Results {
			if seen[r.ID] {
				continue
			}
			seen[r.ID] = true
			s.gauge(descHealthCheckFailed, b2f(r.Verdict == health.Fail), r.ID)
		}
	} else {
		s.gauge(descHealthHealthy, 0)
	}

	if xid == nil {
		return
	}
	count, last := xid.snapshot()
	keys := make([]xidKey, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	sortfn.Sort(keys, func(a, b xidKey) int { return cmp.Or(cmp.Compare(a.gpu, b.gpu), cmp.Compare(a.code, b.code)) })
	for _, k := range keys {
		s.gpuCounter(descXIDErrors, float64(count[k]), gpus.xid(k.gpu), strconv.FormatUint(k.code, 10))
	}
	for gpu, t := range last {
		s.gpuGauge(descLastXIDTimestamp, unix(t), gpus.xid(gpu))
	}
}

func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

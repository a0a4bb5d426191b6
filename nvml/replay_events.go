package nvml

import (
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// replayEventSet answers go-nvml's nvml.EventSet from the devices' recorded
// XIDs. Wait and Free are methods below; every other method comes from the
// embedded notSupportedEventSet and answers ERROR_NOT_SUPPORTED.
//
// Its fields are guarded by lib.mu, which also guards lib.pending: the XIDs
// are the replayer's, not the set's, so each is delivered once whatever
// sets come and go (as a real XID happens once).
type replayEventSet struct {
	notSupportedEventSet

	lib        *replayLib
	registered []bool // by device index
	freed      bool
}

var _ nvml.EventSet = (*replayEventSet)(nil)

// EventSetCreate answers a new, empty event set.
func (l *replayLib) EventSetCreate() (nvml.EventSet, nvml.Return) {
	if r := l.ready(); r != nvml.SUCCESS {
		return nil, r
	}
	s := &replayEventSet{lib: l, registered: make([]bool, len(l.devices))}
	return s, nvml.SUCCESS
}

func (l *replayLib) EventSetWait(set nvml.EventSet, timeoutms uint32) (nvml.EventData, nvml.Return) {
	if set == nil {
		return nvml.EventData{}, nvml.ERROR_INVALID_ARGUMENT
	}
	return set.Wait(timeoutms)
}

func (l *replayLib) EventSetFree(set nvml.EventSet) nvml.Return {
	if set == nil {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	return set.Free()
}

func (l *replayLib) DeviceRegisterEvents(d nvml.Device, types uint64, set nvml.EventSet) nvml.Return {
	if d == nil {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	return d.RegisterEvents(types, set)
}

func (l *replayLib) DeviceGetSupportedEventTypes(d nvml.Device) (uint64, nvml.Return) {
	if d == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GetSupportedEventTypes()
}

// GetSupportedEventTypes answers EventTypeXidCriticalError where the file
// records XID events as supported, else the recorded failure.
func (d *replayDevice) GetSupportedEventTypes() (uint64, nvml.Return) {
	_, r := answerAs(optional(recField(d, func(h *ReplayDevice) *Answer[[]uint64] { return h.XIDs })), d.ready(), same[[]uint64])
	if r != nvml.SUCCESS {
		return 0, r
	}
	return nvml.EventTypeXidCriticalError, nvml.SUCCESS
}

// RegisterEvents registers the device on set, an event set of the same
// replayer, for XID events: it answers what xids records (a missing xids
// answers ERROR_NOT_SUPPORTED). Any other event type answers
// ERROR_NOT_SUPPORTED, as NVML does when some requested type is not
// supported.
func (d *replayDevice) RegisterEvents(types uint64, set nvml.EventSet) nvml.Return {
	if r := d.ready(); r != nvml.SUCCESS {
		return r
	}
	s, ok := set.(*replayEventSet)
	if !ok || s == nil || s.lib != d.lib {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	if types&^uint64(nvml.EventTypeXidCriticalError) != 0 {
		return nvml.ERROR_NOT_SUPPORTED
	}
	if _, r := answer(optional(d.rec.XIDs)); r != nvml.SUCCESS {
		return r
	}
	d.lib.mu.Lock()
	defer d.lib.mu.Unlock()
	if s.freed {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	if types != 0 {
		s.registered[d.index] = true
	}
	return nvml.SUCCESS
}

// Wait delivers the next recorded XID of the registered devices: the
// lowest device index with one left first, each device's in file order.
// When none is left it sleeps timeoutms, as NVML blocks, and answers
// ERROR_TIMEOUT. A freed set answers ERROR_INVALID_ARGUMENT.
func (s *replayEventSet) Wait(timeoutms uint32) (nvml.EventData, nvml.Return) {
	if r := s.lib.ready(); r != nvml.SUCCESS {
		return nvml.EventData{}, r
	}
	s.lib.mu.Lock()
	if s.freed {
		s.lib.mu.Unlock()
		return nvml.EventData{}, nvml.ERROR_INVALID_ARGUMENT
	}
	for i, reg := range s.registered {
		if q := s.lib.pending[i]; reg && len(q) > 0 {
			s.lib.pending[i] = q[1:]
			s.lib.mu.Unlock()
			return nvml.EventData{
				Device:    s.lib.devices[i],
				EventType: nvml.EventTypeXidCriticalError,
				EventData: q[0],
			}, nvml.SUCCESS
		}
	}
	s.lib.mu.Unlock()
	time.Sleep(time.Duration(timeoutms) * time.Millisecond)
	return nvml.EventData{}, nvml.ERROR_TIMEOUT
}

// Free releases the set; a second Free answers ERROR_INVALID_ARGUMENT.
func (s *replayEventSet) Free() nvml.Return {
	if r := s.lib.ready(); r != nvml.SUCCESS {
		return r
	}
	s.lib.mu.Lock()
	defer s.lib.mu.Unlock()
	if s.freed {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	s.freed = true
	return nvml.SUCCESS
}

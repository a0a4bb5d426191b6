package nvml

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// ret is a recorded Return name as an nvml.Return.
func ret(name string) nvml.Return {
	r, err := parseReturn(name)
	if err != nil {
		return nvml.ERROR_UNKNOWN
	}
	return r
}

// answer replays a: its value on success, the zero value and the recorded
// Return otherwise.
func answer[T any](a Answer[T]) (T, nvml.Return) {
	if r := ret(a.Return); r != nvml.SUCCESS {
		var zero T
		return zero, r
	}
	return a.Value, nvml.SUCCESS
}

// answerAs replays a through conv, for answers whose recorded type differs
// from go-nvml's (int for nvml.EnableState, ...).
func answerAs[T, U any](a Answer[T], r nvml.Return, conv func(T) U) (U, nvml.Return) {
	if r == nvml.SUCCESS {
		var v T
		v, r = answer(a)
		if r == nvml.SUCCESS {
			return conv(v), r
		}
	}
	var zero U
	return zero, r
}

// retOf is an optional answer's Return, nil when the file does not record
// the call.
func retOf[T any](a *Answer[T]) *string {
	if a == nil {
		return nil
	}
	return &a.Return
}

// optional is the answer of a call the file may leave out: a missing one
// answers ERROR_NOT_SUPPORTED.
func optional[T any](a *Answer[T]) Answer[T] {
	if a == nil {
		return Answer[T]{Return: returnName(nvml.ERROR_NOT_SUPPORTED)}
	}
	return *a
}

// recField reads one optional answer of the device; nil for a nil device
// (whose ready answers the error).
func recField[T any](d *replayDevice, get func(*ReplayDevice) *Answer[T]) *Answer[T] {
	if d == nil || d.rec == nil {
		return nil
	}
	return get(d.rec)
}

func same[T any](v T) T { return v }

package nvml

import (
	"reflect"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// fillNotSupported sets every nil XxxFunc field of a go-nvml moq mock (a
// pointer to mock.Interface, mock.Device, ...) to a function that answers
// zero values and ERROR_NOT_SUPPORTED in every nvml.Return result.
func fillNotSupported(m any) {
	v := reflect.ValueOf(m).Elem()
	stubs := notSupportedStubs(v.Type())
	for i, stub := range stubs {
		if f := v.Field(i); stub.IsValid() && f.IsNil() {
			f.Set(stub)
		}
	}
}

var stubCache sync.Map // reflect.Type of a mock struct → []reflect.Value by field

// notSupportedStubs builds, once per mock type, the stub for each exported
// func field (the invalid Value for other fields).
func notSupportedStubs(t reflect.Type) []reflect.Value {
	if s, ok := stubCache.Load(t); ok {
		return s.([]reflect.Value)
	}
	returnType := reflect.TypeFor[nvml.Return]()
	notSupported := reflect.ValueOf(nvml.ERROR_NOT_SUPPORTED)
	stubs := make([]reflect.Value, t.NumField())
	for i := range stubs {
		sf := t.Field(i)
		if !sf.IsExported() || sf.Type.Kind() != reflect.Func {
			continue
		}
		ft := sf.Type
		out := make([]reflect.Value, ft.NumOut())
		for j := range out {
			out[j] = reflect.Zero(ft.Out(j))
			if ft.Out(j) == returnType {
				out[j] = notSupported
			}
		}
		stubs[i] = reflect.MakeFunc(ft, func([]reflect.Value) []reflect.Value { return out })
	}
	s, _ := stubCache.LoadOrStore(t, stubs)
	return s.([]reflect.Value)
}

package nvml

import (
	"errors"
	"fmt"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// ErrLibraryNotFound is wrapped by Result.Err when NVML is absent: Init
// answered ERROR_LIBRARY_NOT_FOUND (no NVIDIA driver on the node), or there
// is no NVML source at all (a root without nvml.json).
var ErrLibraryNotFound = errors.New("NVML library not found")

// ErrUnavailable is wrapped by Result.Err when NVML is present but cannot be
// used: Init or DeviceGetCount failed for another reason (driver not loaded,
// no permission, driver/library version mismatch).
var ErrUnavailable = errors.New("NVML unavailable")

// returnInfo names one nvml.Return: its constant name without go-nvml's
// package ("ERROR_NOT_SUPPORTED") and the text libnvidia-ml's
// nvmlErrorString gives for it ("Not Supported"), where known.
type returnInfo struct {
	ret  nvml.Return
	name string
	text string
}

// returnTable is go-nvml's Return enumeration (pkg/nvml/const.go). The names
// are written out rather than taken from Return.Error(): go-nvml replaces
// that function with libnvidia-ml's nvmlErrorString once the library is
// loaded, so Error() gives "Not Supported" live and "ERROR_NOT_SUPPORTED"
// elsewhere. The texts are libnvidia-ml's own (as pynvml lists them); the
// newer codes have none here and are matched by name only.
var returnTable = []returnInfo{
	{nvml.SUCCESS, "SUCCESS", "Success"},
	{nvml.ERROR_UNINITIALIZED, "ERROR_UNINITIALIZED", "Uninitialized"},
	{nvml.ERROR_INVALID_ARGUMENT, "ERROR_INVALID_ARGUMENT", "Invalid Argument"},
	{nvml.ERROR_NOT_SUPPORTED, "ERROR_NOT_SUPPORTED", "Not Supported"},
	{nvml.ERROR_NO_PERMISSION, "ERROR_NO_PERMISSION", "Insufficient Permissions"},
	{nvml.ERROR_ALREADY_INITIALIZED, "ERROR_ALREADY_INITIALIZED", "Already Initialized"},
	{nvml.ERROR_NOT_FOUND, "ERROR_NOT_FOUND", "Not Found"},
	{nvml.ERROR_INSUFFICIENT_SIZE, "ERROR_INSUFFICIENT_SIZE", "Insufficient Size"},
	{nvml.ERROR_INSUFFICIENT_POWER, "ERROR_INSUFFICIENT_POWER", "Insufficient External Power"},
	{nvml.ERROR_DRIVER_NOT_LOADED, "ERROR_DRIVER_NOT_LOADED", "Driver Not Loaded"},
	{nvml.ERROR_TIMEOUT, "ERROR_TIMEOUT", "Timeout"},
	{nvml.ERROR_IRQ_ISSUE, "ERROR_IRQ_ISSUE", "Interrupt Request Issue"},
	{nvml.ERROR_LIBRARY_NOT_FOUND, "ERROR_LIBRARY_NOT_FOUND", "NVML Shared Library Not Found"},
	{nvml.ERROR_FUNCTION_NOT_FOUND, "ERROR_FUNCTION_NOT_FOUND", "Function Not Found"},
	{nvml.ERROR_CORRUPTED_INFOROM, "ERROR_CORRUPTED_INFOROM", "Corrupted infoROM"},
	{nvml.ERROR_GPU_IS_LOST, "ERROR_GPU_IS_LOST", "GPU is lost"},
	{nvml.ERROR_RESET_REQUIRED, "ERROR_RESET_REQUIRED", "GPU requires restart"},
	{nvml.ERROR_OPERATING_SYSTEM, "ERROR_OPERATING_SYSTEM", "The operating system has blocked the request."},
	{nvml.ERROR_LIB_RM_VERSION_MISMATCH, "ERROR_LIB_RM_VERSION_MISMATCH", "RM has detected an NVML/RM version mismatch."},
	{nvml.ERROR_IN_USE, "ERROR_IN_USE", "The GPU is currently in use"},
	{nvml.ERROR_MEMORY, "ERROR_MEMORY", "Insufficient Memory"},
	{nvml.ERROR_NO_DATA, "ERROR_NO_DATA", "No data"},
	{nvml.ERROR_VGPU_ECC_NOT_SUPPORTED, "ERROR_VGPU_ECC_NOT_SUPPORTED", ""},
	{nvml.ERROR_INSUFFICIENT_RESOURCES, "ERROR_INSUFFICIENT_RESOURCES", ""},
	{nvml.ERROR_FREQ_NOT_SUPPORTED, "ERROR_FREQ_NOT_SUPPORTED", ""},
	{nvml.ERROR_ARGUMENT_VERSION_MISMATCH, "ERROR_ARGUMENT_VERSION_MISMATCH", ""},
	{nvml.ERROR_DEPRECATED, "ERROR_DEPRECATED", ""},
	{nvml.ERROR_NOT_READY, "ERROR_NOT_READY", ""},
	{nvml.ERROR_GPU_NOT_FOUND, "ERROR_GPU_NOT_FOUND", ""},
	{nvml.ERROR_INVALID_STATE, "ERROR_INVALID_STATE", ""},
	{nvml.ERROR_RESET_TYPE_NOT_SUPPORTED, "ERROR_RESET_TYPE_NOT_SUPPORTED", ""},
	{nvml.ERROR_UNKNOWN, "ERROR_UNKNOWN", "Unknown Error"},
}

// returnName is r's constant name, the same live and replayed; "" for
// SUCCESS, as nvml.json writes it. A code missing from the table is
// written as "RETURN_<n>" and parses back.
func returnName(r nvml.Return) string {
	if r == nvml.SUCCESS {
		return ""
	}
	for _, e := range returnTable {
		if e.ret == r {
			return e.name
		}
	}
	return fmt.Sprintf("RETURN_%d", int32(r))
}

// ReturnName is the constant name of an nvmlReturn_t value as nvml.h
// spells it ("ERROR_NOT_SUPPORTED"), "SUCCESS" for 0 and "RETURN_<n>" for
// a code go-nvml does not know: the one spelling every report uses, the
// same live and replayed. The table is this package's alone
// (TestReturnNamesOwned).
func ReturnName(code int) string {
	if code == int(nvml.SUCCESS) {
		return "SUCCESS"
	}
	return returnName(nvml.Return(code))
}

// parseReturn is returnName's inverse: "" and "SUCCESS" are SUCCESS. It
// also accepts a name without "ERROR_" and libnvidia-ml's text ("Not
// Supported", "GPU is lost"), ignoring case, spaces, '_' and punctuation.
func parseReturn(s string) (nvml.Return, error) {
	if s == "" {
		return nvml.SUCCESS, nil
	}
	for _, e := range returnTable { // the name as returnName writes it
		if s == e.name {
			return e.ret, nil
		}
	}
	var n int32
	if _, err := fmt.Sscanf(s, "RETURN_%d", &n); err == nil && fmt.Sprintf("RETURN_%d", n) == s {
		return nvml.Return(n), nil
	}
	key := squash(s)
	for _, e := range returnTable {
		if key == squash(e.name) || key == squash(strings.TrimPrefix(e.name, "ERROR_")) ||
			(e.text != "" && key == squash(e.text)) {
			return e.ret, nil
		}
	}
	return nvml.ERROR_UNKNOWN, fmt.Errorf("unknown NVML return %q", s)
}

// squash keeps only the lower-cased letters and digits of s.
func squash(s string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(s) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// returnError is a failed nvml.Return as an error. Its text is the Return's
// name, the same live and replayed; it unwraps to the nvml.Return, so
// errors.Is(err, nvml.ERROR_GPU_IS_LOST) works.
type returnError struct{ ret nvml.Return }

func (e returnError) Error() string { return returnName(e.ret) }
func (e returnError) Unwrap() error { return e.ret }

// retErr wraps a failed Return as an error; nil for SUCCESS.
func retErr(r nvml.Return) error {
	if r == nvml.SUCCESS {
		return nil
	}
	return returnError{r}
}

package rdma

// ErrorCounters are the port counters whose increase means a sick link
// (NVIDIA NVSentinel's fatal set, IBTA PortCounters). Read them with
// CounterReader.PortCounters.
var ErrorCounters = []string{
	"symbol_error",
	"link_downed",
	"excessive_buffer_overrun_errors",
	"local_link_integrity_errors",
}

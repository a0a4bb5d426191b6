package exporter

import (
	"context"
	"sync"
	"time"

	"github.com/gpuaffinity/gpuaffinity/rdma"
)

// portsRead is one collection's read of the RDMA ports, shared by the
// rdma collector and the jobs collector's fabric balance, so that a
// scrape with both reads each port's files once: the fabric's transmit
// counters are among the rdma collector's files. Whichever collector
// asks first reads, under its context; the other waits for that read.
type portsRead struct {
	r     *rdma.CounterReader
	once  sync.Once
	at    time.Time
	ports []rdma.PortSample
	err   error
}

// read returns the collection's read, reading on the first call. The
// ports are shared: callers only read them.
func (p *portsRead) read(ctx context.Context) (time.Time, []rdma.PortSample, error) {
	p.once.Do(func() {
		p.at = time.Now()
		p.ports, p.err = p.r.Read(ctx)
	})
	return p.at, p.ports, p.err
}

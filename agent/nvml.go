package agent

import (
	"log/slog"
	"sync"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/nvml"
)

// nvmlHold keeps the agent's own NVML Init. On the live root (or with an
// injected library) it is one library for the agent's life: Init is
// tried at every discovery until it succeeds, and nothing else is called
// on a library whose Init failed. Under another root every discovery
// re-opens ROOT/nvml.json: the new replay is initialised and swapped in,
// and the one before it is shut down one swap later, so a scrape that
// still holds it finishes first.
type nvmlHold struct {
	root  string
	fixed gonvml.Interface // live, or injected; nil: re-open per discovery
	log   *slog.Logger

	// refreshMu serialises refresh. Open and Init run under it and not
	// under mu, so an Init that hangs (or a replay whose read blocks)
	// does not hang scrapes (current) or the agent's exit (close).
	refreshMu sync.Mutex
	failed    string // the last Init or open failure, logged once; under refreshMu

	mu     sync.Mutex
	cur    gonvml.Interface // the library discovery and scrapes use
	source string
	held   bool             // cur's Init succeeded and is not yet shut down
	prev   gonvml.Interface // the replay before cur, still initialised
	closed bool             // close ran: an Init that returns later is shut down at once
}

func newNVMLHold(root string, injected gonvml.Interface, log *slog.Logger) *nvmlHold {
	h := &nvmlHold{root: root, log: log}
	switch {
	case injected != nil:
		h.fixed, h.source = injected, nvml.SourceReplay
	case rootfs.IsLive(root):
		h.fixed, h.source = gonvml.New(), nvml.SourceLive
	}
	h.cur = h.fixed
	return h
}

// refresh prepares NVML for a discovery and returns the library to read
// (nil for none) and its source name.
func (h *nvmlHold) refresh() (gonvml.Interface, string) {
	h.refreshMu.Lock()
	defer h.refreshMu.Unlock()
	if h.fixed != nil {
		h.mu.Lock()
		held := h.held
		h.mu.Unlock()
		if !held {
			held = h.init(h.fixed)
			h.mu.Lock()
			defer h.mu.Unlock()
			if held && h.closed {
				h.fixed.Shutdown()
				held = false
			}
			h.held = held
		}
		return h.fixed, h.source
	}
	lib, source, err := nvml.Open(h.root)
	if err != nil {
		// As discovery without the agent: a bad nvml.json is no NVML.
		h.fail(err.Error())
		lib, source = nil, nvml.SourceNone
	}
	var held bool
	if lib != nil {
		held = h.init(lib)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		if held {
			lib.Shutdown()
		}
		return nil, nvml.SourceNone
	}
	if h.prev != nil {
		h.prev.Shutdown()
	}
	h.prev = nil
	if h.held {
		h.prev = h.cur
	}
	h.cur, h.source, h.held = lib, source, held
	return lib, source
}

// init takes one Init reference on lib.
func (h *nvmlHold) init(lib gonvml.Interface) bool {
	if r := lib.Init(); r != gonvml.SUCCESS {
		// r.Error() is go-nvml's own table while the library is not
		// loaded: no call into libnvidia-ml.
		h.fail("NVML Init: " + r.Error())
		return false
	}
	if h.failed != "" {
		h.log.Info("NVML initialised", "root", h.root)
	}
	h.failed = ""
	return true
}

func (h *nvmlHold) fail(msg string) {
	if msg != h.failed {
		h.log.Warn("NVML not available; serving without it", "root", h.root, "err", msg)
	}
	h.failed = msg
}

// current is the initialised library, or nil: what scrapes read.
func (h *nvmlHold) current() gonvml.Interface {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.held {
		return nil
	}
	return h.cur
}

// close drops the agent's references: Shutdown for each Init it holds.
// It does not wait for a refresh stuck in Open or Init: what that one
// initialises afterwards is shut down when it returns.
func (h *nvmlHold) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	if h.prev != nil {
		h.prev.Shutdown()
		h.prev = nil
	}
	if h.held {
		h.cur.Shutdown()
		h.held = false
	}
}

package exporter

import (
	"github.com/klauspost/compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
)

// Beyond Options.MaxRequestsInFlight scrapes at once, Handler answers
// 503 with node_exporter's text (promhttp's for its MaxRequestsInFlight,
// client_golang v1.25.0 prometheus/promhttp/http.go) and Connection:
// close, before it takes a gzip compressor (1.15 MiB) or gathers; the
// refusals are counted as promhttp_metric_handler_requests_total{code="503"}.
func TestHandlerLimitBeforeCompression(t *testing.T) {
	root, node := fixture(t, "dgx-h100")
	entered, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	defer releaseOnce.Do(func() { close(release) })
	e := newExporter(t, root, node, nil, func(o *Options) {
		o.MaxRequestsInFlight = 1
		o.State = func() State {
			entered <- struct{}{}
			<-release
			return State{Node: node, StateWriteOK: true}
		}
	})
	h := e.Handler()
	get := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set("Accept-Encoding", "gzip")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	// One scrape holds the one slot: its collection waits on State.
	held := make(chan *httptest.ResponseRecorder, 1)
	go func() { held <- get() }()
	<-entered

	const n = 50
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		w := get()
		if w.Code != http.StatusServiceUnavailable {
			t.Fatalf("scrape with the limit reached: %d", w.Code)
		}
		if got, want := w.Body.String(), "Limit of concurrent requests reached (1), try again later.\n"; got != want {
			t.Errorf("refusal %q, want %q", got, want)
		}
		if c, enc := w.Header().Get("Connection"), w.Header().Get("Content-Encoding"); c != "close" || enc != "" {
			t.Errorf("refusal with Connection %q, Content-Encoding %q; want close and none", c, enc)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 64<<10 {
		t.Errorf("a refused scrape allocates %d KiB: a compressor or a collection", per>>10)
	}

	releaseOnce.Do(func() { close(release) })
	if w := <-held; w.Code != http.StatusOK || w.Header().Get("Content-Encoding") != "gzip" {
		t.Errorf("held scrape: %d, Content-Encoding %q", w.Code, w.Header().Get("Content-Encoding"))
	}
	go func() { // the next collection's State
		for range entered {
		}
	}()
	r := scrape(t, h)
	close(entered)
	if v := r.must(t, "promhttp_metric_handler_requests_total", l("code", "503")); v != n {
		t.Errorf(`promhttp_metric_handler_requests_total{code="503"} = %g, want %d`, v, n)
	}
}

// With gzipMax compressors in use, a scrape that asks for gzip gets the
// whole answer uncompressed; once one is back, gzip again.
func TestHandlerGzipBound(t *testing.T) {
	root, node := fixture(t, "dgx-h100")
	h := newExporter(t, root, node, nil).Handler()
	get := func() (string, int) {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set("Accept-Encoding", "gzip")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		body := w.Body.Bytes()
		if w.Header().Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(w.Body)
			if err != nil {
				t.Fatal(err)
			}
			if body, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
		}
		return w.Header().Get("Content-Encoding"), len(body)
	}
	var taken []*gzip.Writer
	for range gzipMax {
		gz := getGzipWriter()
		if gz == nil {
			t.Fatalf("compressor %d of %d refused", len(taken)+1, gzipMax)
		}
		taken = append(taken, gz)
	}
	if getGzipWriter() != nil {
		t.Fatalf("a compressor beyond gzipMax (%d)", gzipMax)
	}
	enc, plainLen := get()
	if enc != "" || plainLen < 10_000 {
		t.Errorf("with all compressors in use: Content-Encoding %q, %d bytes; want identity", enc, plainLen)
	}
	putGzipWriter(taken[0])
	for _, gz := range taken[1:] {
		putGzipWriter(gz)
	}
	if enc, n := get(); enc != "gzip" || n < 10_000 {
		t.Errorf("with compressors back: Content-Encoding %q, %d bytes; want gzip", enc, n)
	}
}

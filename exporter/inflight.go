package exporter

import (
	"fmt"
	"net/http"
)

// limitInFlight serves at most max requests through h at once and answers
// the others 503 with promhttp's text for its MaxRequestsInFlight (what
// node_exporter's --web.max-requests sets). promhttp checks its limit
// inside its own handler, which gzipHandler wraps: by then each request
// has taken a compressor. Here the check comes first: a refused request
// takes no compressor and starts no collection.
//
// The refusal also closes the connection: a refused client (a storm of
// them, or one that never reads) keeps no connection in the server, each
// of which holds a goroutine and two 4 KiB buffers in net/http until the
// server's IdleTimeout. max 0 or less: no limit.
func limitInFlight(max int, h http.Handler) http.Handler {
	if max <= 0 {
		return h
	}
	slots := make(chan struct{}, max)
	refusal := fmt.Sprintf("Limit of concurrent requests reached (%d), try again later.", max)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
			h.ServeHTTP(w, r)
		default:
			w.Header().Set("Connection", "close")
			http.Error(w, refusal, http.StatusServiceUnavailable)
		}
	})
}

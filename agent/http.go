package agent

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/gpuaffinity/gpuaffinity/exporter"
)

// routes builds the agent's endpoints.
func (a *Agent) routes() (http.Handler, error) {
	landing, err := web.NewLandingPage(web.LandingConfig{
		Name:        "gpuaffinity",
		Description: "GPU/NIC/NUMA topology, health gate and metrics of this node",
		Version:     a.opts.Version,
		Profiling:   "false",
		Links: []web.LandingLinks{
			{Address: "/metrics", Text: "Metrics", Description: "Prometheus metrics (docs/metrics.md)"},
			{Address: "/topology", Text: "Topology", Description: "the node as gpuaffinity.topology/v1 JSON"},
			{Address: "/health", Text: "Health gate", Description: "200 when the last health gate passed, else 503 and why"},
			{Address: "/readyz", Text: "Ready", Description: "200 once the first discovery has run and the agent serves"},
			{Address: "/healthz", Text: "Alive", Description: "200 while the agent serves"},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("landing page: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", landing)
	mux.Handle("GET /metrics", a.exp.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		text(w, http.StatusOK, "ok\n")
	})
	mux.HandleFunc("GET /readyz", a.serveReady)
	mux.HandleFunc("GET /health", a.serveHealth)
	mux.HandleFunc("GET /topology", a.serveTopology)
	return closeOnBody(mux), nil
}

// The HTTP servers' deadlines. With the /metrics bound (Options.MaxRequests)
// they bound what one client can hold: docs/operations.md, "Load and
// memory", has the figures.
const (
	// readHeaderTimeout is the time a client has to send a request's
	// headers (slowloris: headers dribbled or never finished).
	readHeaderTimeout = 10 * time.Second
	// readTimeout bounds the whole request. No endpoint takes a body
	// (closeOnBody): a request has the headers' time for all of it.
	readTimeout = readHeaderTimeout
	// writeTimeout bounds a handler and its answer, from the end of the
	// request's headers: the collectors' deadline (exporter's
	// DefaultTimeout, 5 s) and 10 s more to encode and send. A client that
	// does not read its answer holds its /metrics slot for this long at
	// most.
	writeTimeout = exporter.DefaultTimeout + 10*time.Second
	// idleTimeout is how long a kept-alive connection may wait for its
	// next request: over a scrape interval, so Prometheus's connection is
	// reused.
	idleTimeout = 2 * time.Minute
)

// closeOnBody closes the connection of a request that comes with a body
// (a Content-Length, or chunked) once it is answered, without reading the
// body: no endpoint takes one. net/http would otherwise read up to
// 256 KiB of it to keep the connection: when the answer starts (the
// handler's write waits, and a /metrics request holds its slot and its
// compressor), unless the answer says Connection: close, and again after
// the handler, unless the read fails. A client sending its body slowly
// stretches each to readTimeout; 4,000 of them held over 100 MiB. The
// read deadline set in the past makes the second read fail at once.
func closeOnBody(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength == 0 {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Connection", "close")
		h.ServeHTTP(w, r)
		// Not supported (HTTP/2, which the agent does not serve): its
		// server reads no body after the handler.
		_ = http.NewResponseController(w).SetReadDeadline(time.Unix(1, 0))
	})
}

// serveReady answers 200 once the first discovery round has ended, good
// or not: from then on every endpoint answers (a failed round's reason is
// on /health, in the metrics and the log), so a rollout or a Service does
// not wait on the node's health. Before it, 503. The gate's verdict is
// /health's, never readiness: an unhealthy node's agent must stay ready,
// or its metrics and the verdict itself leave the Service and
// `kubectl rollout status` never ends.
func (a *Agent) serveReady(w http.ResponseWriter, r *http.Request) {
	a.mu.RLock()
	s := a.state
	a.mu.RUnlock()
	if s.Node == nil && s.Discovery.Last.IsZero() {
		text(w, http.StatusServiceUnavailable, "not ready: no discovery yet\n")
		return
	}
	verdict := "healthy"
	switch {
	case s.Node == nil:
		verdict = "discovery failed (see /health)"
	case s.Health == nil:
		verdict = "health gate not run (see /health)"
	case !s.Health.Healthy:
		verdict = "unhealthy (see /health)"
	}
	text(w, http.StatusOK, "ready: serving; node "+verdict+"\n")
}

// serveHealth answers the health gate: 200 when the last gate passed,
// else 503 with the reason: no discovery yet, discovery failed, the gate
// could not run, or the gate's failures.
func (a *Agent) serveHealth(w http.ResponseWriter, r *http.Request) {
	a.mu.RLock()
	s, gateErr := a.state, a.gateErr
	a.mu.RUnlock()
	switch {
	case s.Node == nil && s.Discovery.Last.IsZero():
		text(w, http.StatusServiceUnavailable, "not ready: no discovery yet\n")
	case s.Node == nil:
		text(w, http.StatusServiceUnavailable, "not ready: discovery failed: "+s.Discovery.Err+"\n")
	case s.Health == nil:
		text(w, http.StatusServiceUnavailable, "not ready: the health gate could not run: "+gateErr+"\n")
	case !s.Health.Healthy:
		var b strings.Builder
		fmt.Fprintf(&b, "unhealthy: %s\n", s.Health.Summary())
		for _, f := range s.Health.Failed() {
			fmt.Fprintf(&b, "fail %s: %s\n", f.ID, f.Reason)
		}
		text(w, http.StatusServiceUnavailable, b.String())
	default:
		text(w, http.StatusOK, fmt.Sprintf("ok: healthy (profile %s, gate at %s)\n",
			s.Health.Profile, s.Health.Time.UTC().Format(time.RFC3339)))
	}
}

// serveTopology answers the last good node's topology JSON.
func (a *Agent) serveTopology(w http.ResponseWriter, r *http.Request) {
	a.mu.RLock()
	js := a.topology
	a.mu.RUnlock()
	if js == nil {
		text(w, http.StatusServiceUnavailable, "no topology yet\n")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(js)
}

func text(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write([]byte(body))
}

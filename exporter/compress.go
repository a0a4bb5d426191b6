package exporter

import (
	"github.com/klauspost/compress/gzip"
	"net/http"
	"strings"
)

// gzipHandler answers gzip-compressed, with klauspost/compress's
// stateless encoder, where the client asks for gzip, and passes other
// requests to h unchanged, as well as those that find gzipMax
// compressors in use.
//
// promhttp (client_golang v1.25.0) compresses only at gzip's default
// level, from a pool it does not export, and HandlerOpts has no level:
// on dgx-h100 that compression cost about four times BestSpeed's for a
// tenth smaller answer. So h is a promhttp handler offering identity only
// (OfferedCompressions), and this picks gzip as promhttp would have with
// its default offers, identity and gzip (acceptsGzip).
//
// The stateless encoder (gzip.StatelessCompression) keeps no state
// between writes: a compressor is a few hundred bytes, where one of
// compress/flate at gzip.BestSpeed is 1.15 MiB (its hash tables and
// window), which as live heap also raised the collector's goal by half
// as much again at the agent's GOGC of 50. On the dgx-h100 answer (265
// kB of text) it writes 17.5 kB, as BestSpeed does (within 0.3 %), in
// two thirds of BestSpeed's time (docs/bench.md, "Agent memory").
func gzipHandler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !acceptsGzip(r.Header) {
			h.ServeHTTP(w, r)
			return
		}
		gz := getGzipWriter()
		if gz == nil {
			// All compressors in use: identity, which promhttp (offering
			// only identity) answers whatever the client accepts.
			h.ServeHTTP(w, r)
			return
		}
		gz.Reset(w)
		gw := &gzipResponseWriter{ResponseWriter: w, gz: gz}
		defer func() {
			if !gw.plain {
				// An empty answer still gets its gzip header, as
				// promhttp's would.
				gz.Close()
			}
			gz.Reset(nil)
			putGzipWriter(gz)
		}()
		w.Header().Set("Content-Encoding", "gzip")
		// promhttp must not compress again, nor see a client that asks
		// for compression.
		r2 := r.Clone(r.Context())
		r2.Header.Del("Accept-Encoding")
		h.ServeHTTP(gw, r2)
	})
}

// gzipWriters keeps a few idle gzip writers (two cover the usual
// scrapers, one Prometheus or an HA pair); up to gzipMax at once
// allocate their own.
var gzipWriters = make(chan *gzip.Writer, 2)

// gzipMax bounds the compressors in use at once, in the whole process.
// A compression in progress holds about 300 KiB (the stateless
// encoder's token buffer and bit writer, pooled between its writes),
// and its CPU: without the bound, thousands of scrapes in flight would
// hold that each. A scrape that finds gzipMax in use is answered
// uncompressed: larger on the wire, but complete, and every scraper
// reads identity.
const gzipMax = 4

// gzipInUse holds one token per compressor handed out.
var gzipInUse = make(chan struct{}, gzipMax)

// getGzipWriter hands out a compressor, or nil when gzipMax are in use.
// A non-nil one goes back with putGzipWriter.
func getGzipWriter() *gzip.Writer {
	select {
	case gzipInUse <- struct{}{}:
	default:
		return nil
	}
	select {
	case gz := <-gzipWriters:
		return gz
	default:
		gz, _ := gzip.NewWriterLevel(nil, gzip.StatelessCompression) // a valid level: no error
		return gz
	}
}

func putGzipWriter(gz *gzip.Writer) {
	select {
	case gzipWriters <- gz:
	default:
	}
	<-gzipInUse
}

// gzipResponseWriter compresses the body of an answer, unless the
// handler removed the Content-Encoding header before the answer started
// (promhttp's error answers are plain text).
type gzipResponseWriter struct {
	http.ResponseWriter
	gz      *gzip.Writer
	started bool // WriteHeader or Write was called
	plain   bool // the answer is not compressed
}

func (w *gzipResponseWriter) start() {
	if w.started {
		return
	}
	w.started = true
	w.plain = w.Header().Get("Content-Encoding") != "gzip"
	if !w.plain {
		w.Header().Del("Content-Length") // the uncompressed length, if any
	}
}

func (w *gzipResponseWriter) WriteHeader(code int) {
	w.start()
	w.ResponseWriter.WriteHeader(code)
}

func (w *gzipResponseWriter) Write(b []byte) (int, error) {
	w.start()
	if w.plain {
		return w.ResponseWriter.Write(b)
	}
	return w.gz.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *gzipResponseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// acceptsGzip reports whether promhttp, offering identity and gzip (its
// default without zstd), would answer gzip: the Accept-Encoding entry of
// the highest quality names gzip or "*" and none as high names identity or
// "*" first, and that quality is not 0. It parses the header as promhttp's
// internal copy of gddo's httputil/header.ParseAccept does.
func acceptsGzip(h http.Header) bool {
	best, bestQ := "identity", -1.0
	specs := parseAcceptEncoding(h)
	for _, offer := range []string{"identity", "gzip"} {
		for _, s := range specs {
			if s.q > bestQ && (s.value == "*" || s.value == offer) {
				best, bestQ = offer, s.q
			}
		}
	}
	return best == "gzip" && bestQ != 0
}

type acceptSpec struct {
	value string
	q     float64
}

// parseAcceptEncoding is gddo's header.ParseAccept for Accept-Encoding.
func parseAcceptEncoding(h http.Header) []acceptSpec {
	var specs []acceptSpec
line:
	for _, s := range h["Accept-Encoding"] {
		for {
			var spec acceptSpec
			i := 0
			for i < len(s) && (isHeaderToken(s[i]) || s[i] == '/') {
				i++
			}
			spec.value, s = s[:i], s[i:]
			if spec.value == "" {
				continue line
			}
			spec.q = 1
			s = trimHeaderSpace(s)
			if strings.HasPrefix(s, ";") {
				s = trimHeaderSpace(s[1:])
				if !strings.HasPrefix(s, "q=") {
					continue line
				}
				spec.q, s = headerQuality(s[2:])
				if spec.q < 0 {
					continue line
				}
			}
			specs = append(specs, spec)
			s = trimHeaderSpace(s)
			if !strings.HasPrefix(s, ",") {
				continue line
			}
			s = trimHeaderSpace(s[1:])
		}
	}
	return specs
}

// isHeaderToken reports whether b may be part of an RFC 2616 token.
func isHeaderToken(b byte) bool {
	return b > 31 && b < 127 && !strings.ContainsRune(" \t\"(),/:;<=>?@[]\\{}", rune(b))
}

func trimHeaderSpace(s string) string { return strings.TrimLeft(s, " \t\r\n") }

// headerQuality parses a q value ("0", "1", "0.5"); -1 when there is none.
func headerQuality(s string) (float64, string) {
	var q float64
	switch {
	case s == "":
		return -1, ""
	case s[0] == '0':
	case s[0] == '1':
		q = 1
	default:
		return -1, ""
	}
	s = s[1:]
	if !strings.HasPrefix(s, ".") {
		return q, s
	}
	s = s[1:]
	i, n, d := 0, 0, 1
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		n = n*10 + int(s[i]-'0')
		d *= 10
	}
	return q + float64(n)/float64(d), s[i:]
}

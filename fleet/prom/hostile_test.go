package prom_test

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gpuaffinity/gpuaffinity/fleet/prom"
)

// A fake Prometheus: it answers every query with what answer writes for
// that query (the PromQL in the form's "query").
func fakeProm(t *testing.T, answer func(w http.ResponseWriter, query string)) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/query" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		r.ParseForm()
		answer(w, r.PostForm.Get("query"))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// placementSeries is one live placement series of target i as JSON.
func placementSeries(i int, node string) string {
	return fmt.Sprintf(`{"metric":{"__name__":"gpuaffinity_node_placement_info","job":"a","instance":"n%d:9400","node":%q,"hostname":%q,"tier0":"leaf%d"},"value":[1700000000,"1"]}`,
		i, node, node, i%7)
}

// identity is a node label on target i's up series.
func identity(i int, node string) string {
	return fmt.Sprintf(`{"metric":{"job":"a","instance":"n%d:9400","node":%q},"value":[1700000000,"1"]}`, i, node)
}

// heapGrowth runs f and returns how much the heap the runtime holds grew
// (HeapSys, which a collection does not give back at once): what f
// needed at its peak, give or take.
func heapGrowth(f func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	if after.HeapSys < before.HeapSys {
		return 0
	}
	return after.HeapSys - before.HeapSys
}

// A server that answers 3 GB (streamed, never held by it either: one
// target's series over and over) is cut at the bound on a response, with
// an error naming the bound, and the reader's memory stays flat: the
// answer is decoded as it arrives, never held.
func TestReadHugeBody(t *testing.T) {
	url := fakeProm(t, func(w http.ResponseWriter, q string) {
		w.Header().Set("Content-Type", "application/json")
		bw := bufio.NewWriterSize(w, 1<<16)
		bw.WriteString(`{"status":"success","data":{"resultType":"vector","result":[`)
		for i := 0; i < 3<<30/200; i++ {
			if i > 0 {
				bw.WriteByte(',')
			}
			if _, err := bw.WriteString(placementSeries(i%3, "node")); err != nil {
				return // the reader hung up
			}
		}
		bw.WriteString(`]}}`)
		bw.Flush()
	})
	var err error
	grew := heapGrowth(func() {
		_, err = prom.Read(context.Background(), prom.Options{URL: url, MaxResponseBytes: 16 << 20})
	})
	if !errors.Is(err, prom.ErrTooLarge) || !strings.Contains(err.Error(), "16 MiB (--max-response)") {
		t.Errorf("3 GB answer: %v, want ErrTooLarge naming the 16 MiB bound", err)
	}
	if grew > 32<<20 {
		t.Errorf("the heap grew %d MiB reading a 64 MiB-bounded answer", grew>>20)
	}
}

// gzipMembers is a gzip stream of the members given, each member's text
// repeated n times: a multi-member stream, which gzip readers take as
// one (RFC 1952, 2.2), so a bomb of 4 GB costs one compression of a
// megabyte, not of 4 GB.
func gzipMembers(t *testing.T, parts ...any) []byte {
	t.Helper()
	var out []byte
	for i := 0; i < len(parts); i += 2 {
		text, n := parts[i].(string), parts[i+1].(int)
		var b strings.Builder
		gz, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		gz.Write([]byte(text))
		gz.Close()
		for range n {
			out = append(out, b.String()...)
		}
	}
	return out
}

// A gzip body of a few megabytes that inflates to 4 GB stops at the
// bound on the inflated bytes, or sooner where it is not JSON; memory
// stays flat either way.
func TestReadGzipBomb(t *testing.T) {
	serveGzip := func(body []byte) string {
		return fakeProm(t, func(w http.ResponseWriter, q string) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(body)
		})
	}
	prefix := `{"status":"success","data":{"resultType":"vector","result":[`
	zeros := gzipMembers(t, prefix, 1, strings.Repeat("\x00", 1<<20), 4<<10)
	var err error
	grew := heapGrowth(func() {
		_, err = prom.Read(context.Background(), prom.Options{URL: serveGzip(zeros), MaxResponseBytes: 16 << 20})
	})
	if err == nil || !strings.Contains(err.Error(), "malformed answer") {
		t.Errorf("gzip bomb of zeros (%d KB): %v, want a malformed answer", len(zeros)>>10, err)
	}
	if grew > 64<<20 {
		t.Errorf("the heap grew %d MiB on a gzip bomb", grew>>20)
	}
	// A bomb of valid series (4 GB inflated) stops at the bound.
	chunk := strings.Repeat(placementSeries(1, "n1")+",", (1<<20)/200)
	valid := gzipMembers(t, prefix, 1, chunk, 4<<10, placementSeries(1, "n1")+"]}}", 1)
	grew = heapGrowth(func() {
		_, err = prom.Read(context.Background(), prom.Options{URL: serveGzip(valid), MaxResponseBytes: 16 << 20})
	})
	if !errors.Is(err, prom.ErrTooLarge) || !strings.Contains(err.Error(), "16 MiB") {
		t.Errorf("valid gzip bomb (%d KB compressed): %v, want ErrTooLarge naming the bound", len(valid)>>10, err)
	}
	if grew > 64<<20 {
		t.Errorf("the heap grew %d MiB on a gzip bomb", grew>>20)
	}
}

// One target with 200,000 placement series is refused, named, with the
// count and the bound; the other nodes are read; the reader holds one
// series of it.
func TestReadOneNodeFlooding(t *testing.T) {
	url := fakeProm(t, func(w http.ResponseWriter, q string) {
		w.Header().Set("Content-Type", "application/json")
		bw := bufio.NewWriter(w)
		defer bw.Flush()
		bw.WriteString(`{"status":"success","data":{"resultType":"vector","result":[`)
		switch {
		case strings.HasPrefix(q, "group by (job, instance, node)"):
			for i := range 10 {
				if i > 0 {
					bw.WriteByte(',')
				}
				bw.WriteString(identity(i, fmt.Sprintf("n%d", i)))
			}
		case strings.HasPrefix(q, "gpuaffinity_node_placement_info"):
			for i := range 10 {
				if i > 0 {
					bw.WriteByte(',')
				}
				bw.WriteString(placementSeries(i, fmt.Sprintf("n%d", i)))
			}
			for j := range 200_000 {
				fmt.Fprintf(bw, `,{"metric":{"__name__":"gpuaffinity_node_placement_info","job":"a","instance":"n3:9400","node":"n3","hostname":"n3","tier0":"flood%d"},"value":[1700000000,"1"]}`, j)
			}
		}
		bw.WriteString(`]}}`)
	})
	var f prom.Fleet
	var err error
	grew := heapGrowth(func() { f, err = prom.Read(context.Background(), prom.Options{URL: url}) })
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Nodes) != 9 || len(f.Refused) != 1 || !strings.Contains(f.Refused[0].String(), `target "a/n3:9400": 200001 gpuaffinity_node_placement_info series, over the bound of 1`) {
		t.Errorf("%d nodes, refused %v; want 9 and n3's target refused with its count", len(f.Nodes), f.Refused)
	}
	if grew > 64<<20 {
		t.Errorf("the heap grew %d MiB for 200,000 series of one node", grew>>20)
	}
}

// A server's error text reaches the caller quoted and clipped: no
// newline or escape of it reaches a terminal, and a megabyte of it is
// not printed. A password in the URL is never printed.
func TestReadServerErrorText(t *testing.T) {
	evil := "bad\nFAIL: injected\x1b[2J" + strings.Repeat("x", 1<<20)
	url := fakeProm(t, func(w http.ResponseWriter, q string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		msg, _ := json.Marshal(evil)
		fmt.Fprintf(w, `{"status":"error","errorType":"bad_data","error":%s}`, msg)
	})
	_, err := prom.Read(context.Background(), prom.Options{URL: strings.Replace(url, "http://", "http://admin:pa55@", 1)})
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	if strings.ContainsAny(msg, "\n\x1b") || len(msg) > 2000 || strings.Contains(msg, "pa55") || !strings.Contains(msg, `bad\nFAIL: injected\x1b[2J`) {
		t.Errorf("error %q: want the server's text quoted, clipped, and no password", clipped(msg))
	}
	// Not JSON at all (a proxy's page): its start, quoted.
	url = fakeProm(t, func(w http.ResponseWriter, q string) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		io.WriteString(w, "<html>\n"+strings.Repeat("y", 1<<20))
	})
	_, err = prom.Read(context.Background(), prom.Options{URL: url})
	if err == nil || strings.Contains(err.Error(), "\n") || len(err.Error()) > 2000 || !strings.Contains(err.Error(), "502") {
		t.Errorf("HTML answer: %q", clipped(err.Error()))
	}
}

// A redirect to another host is not followed (the credentials stay with
// the server named); one on the same host is.
func TestReadRedirects(t *testing.T) {
	other := fakeProm(t, func(w http.ResponseWriter, q string) { t.Error("the other host was asked") })
	url := fakeProm(t, func(w http.ResponseWriter, q string) {})
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()
	_, err := prom.Read(context.Background(), prom.Options{URL: redirect.URL, Timeout: 5 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "redirect to another server") {
		t.Errorf("cross-host redirect: %v", err)
	}
	_ = url
}

func clipped(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

// A target whose placement carries a megabyte label value is refused with
// its size and the bound; nothing quotes the megabyte.
func TestReadHugeLabelValue(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	url := fakeProm(t, func(w http.ResponseWriter, q string) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"success","data":{"resultType":"vector","result":[`)
		if strings.HasPrefix(q, "gpuaffinity_node_placement_info") {
			io.WriteString(w, placementSeries(1, "n1")+",")
			fmt.Fprintf(w, `{"metric":{"job":"a","instance":"n2:9400","node":"n2","hostname":"n2","tier0":%q},"value":[1700000000,"1"]}`, huge)
		}
		if strings.HasPrefix(q, "group by (job, instance, node)") {
			io.WriteString(w, identity(1, "n1")+","+identity(2, "n2"))
		}
		io.WriteString(w, `]}}`)
	})
	f, err := prom.Read(context.Background(), prom.Options{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Nodes) != 1 || len(f.Refused) != 1 || !strings.Contains(f.Refused[0].Reason, "label tier0 of 1048576 bytes, over the bound of 1024") {
		t.Errorf("nodes %v, refused %v", f.Nodes, f.Refused)
	}
	for _, r := range f.Refused {
		if len(r.String()) > 1000 {
			t.Errorf("refusal of %d bytes", len(r.String()))
		}
	}
}

package placement

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// fixture reads a payload from testdata/ (see testdata/README.md).
func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// metadataServer serves body at path on 127.0.0.1, answering 403 when
// header key is missing or wrong, as both real services do, and 404
// elsewhere.
func metadataServer(t *testing.T, path, key, val string, body []byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get(key) != val {
			http.Error(w, "missing header", http.StatusForbidden)
			return
		}
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestReadGCP(t *testing.T) {
	srv := metadataServer(t, GCPPhysicalHostPath, "Metadata-Flavor", "Google", fixture(t, "gcp_physical_host.txt"))
	got, err := Read(context.Background(), "gcp", Options{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	want := Placement{
		Cloud:    "gcp",
		Tiers:    []string{"9b2d4f6a8c0e1b3d5f7a9c1e3b5d7f9a", "3f8a1c0e5b7d9f2a4c6e8b0d1f3a5c7e"},
		Block:    "3f8a1c0e5b7d9f2a4c6e8b0d1f3a5c7e",
		SubBlock: "9b2d4f6a8c0e1b3d5f7a9c1e3b5d7f9a",
		Host:     "e4c6a8b0d2f4a6c8e0b2d4f6a8c0e2b4",
		Source:   srv.URL + GCPPhysicalHostPath,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestReadOCI(t *testing.T) {
	const (
		island  = "ocid1.hpcisland.oc1.iad.anuwcljrg5pyaeycajoqlssa7bzvfq2pydtrw2ebwtbcnfdqj3hkmg6ipkea"
		network = "ocid1.computenetworkblock.oc1.iad.anuwclddsdefsinyc7pyqjvhqp2bsdsdrmgfauk3imm2pqcsk56pt6l7rlqa"
		local   = "ocid1.computelocalblock.oc1.iad.anuwcljrg5pyaeycpcxcdn3ovybfbyyd4wdfg3ythv4fmlnzvwwy5vnaxqza"
	)
	tests := []struct {
		name, file   string
		host, fabric string
	}{
		// H100/H200-class host: no GPU memory fabric.
		{"h100", "oci_rdma_topology.json", "ocid1.computebaremetalhost.oc1.iad.anuwcljrg5pyaeycu4jhxcdkrumy5g2ub5bpwq4pk3vmosllhqqpm3o5ykxa", ""},
		// GB200: the fabric is the NVLink domain.
		{"gb200", "oci_rdma_topology_gb200.json", "ocid1.computebaremetalhost.oc1.iad.anuwcljrg5pyaeyc6ahwvp7m3kz4blxn5yfd2uq3oqqgqbrxh4tmsbpsfwga", "ocid1.computegpumemoryfabric.oc1.iad.anuwcljrg5pyaeycvk2ucqvhyz4i6hpxltxyoexw7cj3wgxbbdrqmyyx4gva"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := metadataServer(t, OCIRDMATopologyPath, "Authorization", "Bearer Oracle", fixture(t, tt.file))
			got, err := Read(context.Background(), "oci", Options{BaseURL: srv.URL + "/"})
			if err != nil {
				t.Fatal(err)
			}
			want := Placement{
				Cloud:        "oci",
				Tiers:        []string{local, network, island},
				Host:         tt.host,
				LocalBlock:   local,
				NetworkBlock: network,
				HPCIsland:    island,
				NVLinkDomain: tt.fabric,
				Source:       srv.URL + OCIRDMATopologyPath,
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

// TestHeaderRequired: a service that insists on its header must not be
// answered by a request without it (the fake returns 403, so a missing
// header shows up as a failure, not ErrNotAvailable).
func TestHeaderRequired(t *testing.T) {
	srv := metadataServer(t, GCPPhysicalHostPath, "Metadata-Flavor", "NotGoogle", fixture(t, "gcp_physical_host.txt"))
	_, err := Read(context.Background(), "gcp", Options{BaseURL: srv.URL})
	if err == nil || errors.Is(err, ErrNotAvailable) || !strings.Contains(err.Error(), "HTTP 403") {
		t.Fatalf("err = %v, want HTTP 403", err)
	}
}

func TestNotAvailable(t *testing.T) {
	notFound := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(notFound.Close)
	for _, cloud := range []string{"gcp", "oci"} {
		t.Run(cloud+"-404", func(t *testing.T) {
			_, err := Read(context.Background(), cloud, Options{BaseURL: notFound.URL})
			if !errors.Is(err, ErrNotAvailable) {
				t.Fatalf("err = %v, want ErrNotAvailable", err)
			}
			if !strings.Contains(err.Error(), notFound.URL) {
				t.Errorf("error %q does not name the URL", err)
			}
		})
	}
	// An empty object: IMDS without topology fields.
	t.Run("oci-empty-object", func(t *testing.T) {
		srv := metadataServer(t, OCIRDMATopologyPath, "Authorization", "Bearer Oracle", []byte(`{}`))
		_, err := Read(context.Background(), "oci", Options{BaseURL: srv.URL})
		if !errors.Is(err, ErrNotAvailable) {
			t.Fatalf("err = %v, want ErrNotAvailable", err)
		}
	})
	// Any other status is a failure, not "not available".
	t.Run("500", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "boom", http.StatusInternalServerError)
		}))
		t.Cleanup(srv.Close)
		_, err := Read(context.Background(), "gcp", Options{BaseURL: srv.URL})
		if err == nil || errors.Is(err, ErrNotAvailable) {
			t.Fatalf("err = %v, want a non-sentinel failure", err)
		}
	})
}

func TestTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs before srv.Close
	start := time.Now()
	_, err := Read(context.Background(), "oci", Options{BaseURL: srv.URL, Timeout: 100 * time.Millisecond})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Read took %v with a 100ms timeout", d)
	}
}

func TestOversizeBody(t *testing.T) {
	big := []byte(`{"customerLocalBlock":"` + strings.Repeat("a", MaxBodyBytes) + `"}`)
	srv := metadataServer(t, OCIRDMATopologyPath, "Authorization", "Bearer Oracle", big)
	_, err := Read(context.Background(), "oci", Options{BaseURL: srv.URL})
	if err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Fatalf("err = %v, want body size error", err)
	}
}

func TestGarbageJSON(t *testing.T) {
	for name, body := range map[string]string{
		"not-json":     `<html>captive portal</html>`,
		"truncated":    `{"customerLocalBlock":"a"`,
		"trailing":     `{"customerLocalBlock":"a","customerNetworkBlock":"b","customerHPCIslandId":"c"} x`,
		"wrong-type":   `{"customerHPCIslandId":123,"customerNetworkBlock":"b","customerLocalBlock":"c"}`,
		"array":        `["a","b"]`,
		"missing-tier": `{"customerHPCIslandId":"a","customerNetworkBlock":"b"}`,
		"empty-body":   ``,
		"null":         `null`, // decodes to no fields: ErrNotAvailable, still an error
	} {
		t.Run(name, func(t *testing.T) {
			srv := metadataServer(t, OCIRDMATopologyPath, "Authorization", "Bearer Oracle", []byte(body))
			p, err := Read(context.Background(), "oci", Options{BaseURL: srv.URL})
			if err == nil {
				t.Fatalf("got %+v, want an error", p)
			}
			if !strings.Contains(err.Error(), srv.URL+OCIRDMATopologyPath) {
				t.Errorf("error %q does not name the URL", err)
			}
		})
	}
}

func TestRedirect(t *testing.T) {
	gcp := fixture(t, "gcp_physical_host.txt")
	hit := make(chan struct{}, 1)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hit <- struct{}{}
		_, _ = w.Write(gcp)
	}))
	t.Cleanup(other.Close)
	// Same port, other host name: still another host.
	ou, _ := url.Parse(other.URL)
	otherByName := "http://localhost:" + ou.Port() + GCPPhysicalHostPath

	for _, to := range []string{other.URL + GCPPhysicalHostPath, otherByName} {
		t.Run("off-host "+to, func(t *testing.T) {
			redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, to, http.StatusFound)
			}))
			t.Cleanup(redir.Close)
			_, err := Read(context.Background(), "gcp", Options{BaseURL: redir.URL})
			if err == nil || !strings.Contains(err.Error(), "refused redirect") {
				t.Fatalf("err = %v, want refused redirect", err)
			}
			select {
			case <-hit:
				t.Fatal("the other host was asked")
			default:
			}
		})
	}
	t.Run("same-host", func(t *testing.T) {
		redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/same" {
				_, _ = w.Write(gcp)
				return
			}
			http.Redirect(w, r, "/same", http.StatusFound)
		}))
		t.Cleanup(redir.Close)
		if _, err := Read(context.Background(), "gcp", Options{BaseURL: redir.URL}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("loop", func(t *testing.T) {
		loop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/again", http.StatusFound)
		}))
		t.Cleanup(loop.Close)
		_, err := Read(context.Background(), "gcp", Options{BaseURL: loop.URL})
		if err == nil || !strings.Contains(err.Error(), "redirects") {
			t.Fatalf("err = %v, want redirect limit", err)
		}
	})
}

func TestHostileValues(t *testing.T) {
	gcp := map[string]string{
		"newline":       "/a/b/c\n",
		"escape":        "/a/\x1b[31mb/c",
		"nul":           "/a/b\x00/c",
		"space":         "/a/b c/d",
		"non-ascii":     "/a/b/\u00e9",
		"too-long":      "/a/b/" + strings.Repeat("x", MaxValueLen+1),
		"extra-segment": "/a/b/c/d",
	}
	for name, v := range gcp {
		t.Run("gcp-"+name, func(t *testing.T) {
			srv := metadataServer(t, GCPPhysicalHostPath, "Metadata-Flavor", "Google", []byte(v))
			if p, err := Read(context.Background(), "gcp", Options{BaseURL: srv.URL}); err == nil {
				t.Fatalf("accepted %q as %+v", v, p)
			}
		})
	}
	oci := map[string]string{
		"bell":          `{"customerHPCIslandId":"a\u0007","customerNetworkBlock":"b","customerLocalBlock":"c"}`,
		"newline":       `{"customerHPCIslandId":"a","customerNetworkBlock":"b\nBlockName=x","customerLocalBlock":"c"}`,
		"host-del":      `{"customerHPCIslandId":"a","customerNetworkBlock":"b","customerLocalBlock":"c","customerHostId":"h\u007f"}`,
		"fabric-long":   `{"customerHPCIslandId":"a","customerNetworkBlock":"b","customerLocalBlock":"c","customerGpuMemoryFabric":"` + strings.Repeat("f", MaxValueLen+1) + `"}`,
		"invalid-utf-8": "{\"customerHPCIslandId\":\"a\xff\",\"customerNetworkBlock\":\"b\",\"customerLocalBlock\":\"c\"}",
	}
	for name, v := range oci {
		t.Run("oci-"+name, func(t *testing.T) {
			srv := metadataServer(t, OCIRDMATopologyPath, "Authorization", "Bearer Oracle", []byte(v))
			if p, err := Read(context.Background(), "oci", Options{BaseURL: srv.URL}); err == nil {
				t.Fatalf("accepted %q as %+v", v, p)
			}
		})
	}
}

func TestUnsupported(t *testing.T) {
	for _, cloud := range []string{"aws", "azure"} {
		_, err := Read(context.Background(), cloud, Options{})
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%s: err = %v, want errors.ErrUnsupported", cloud, err)
		}
	}
	_, err := Read(context.Background(), "nimbus", Options{})
	if err == nil || errors.Is(err, errors.ErrUnsupported) || errors.Is(err, ErrNotAvailable) {
		t.Errorf("unknown cloud: err = %v, want a plain error", err)
	}
}

func TestBadBaseURL(t *testing.T) {
	for _, base := range []string{"ftp://169.254.169.254", "169.254.169.254", "http://", "http://h/prefix", "http://u:p@h", "http://h?x=1"} {
		if _, err := Read(context.Background(), "gcp", Options{BaseURL: base}); err == nil || !strings.Contains(err.Error(), "base URL") {
			t.Errorf("%q: err = %v, want base URL error", base, err)
		}
	}
}

// TestNoProxy: the default transport never consults HTTP_PROXY.
func TestNoProxy(t *testing.T) {
	u, _ := url.Parse(DefaultBaseURL)
	tr, ok := newClient(Options{}, u).Transport.(*http.Transport)
	if !ok || tr.Proxy != nil {
		t.Fatalf("default transport %#v has a proxy function", tr)
	}
}

func TestParsePhysicalHost(t *testing.T) {
	tests := []struct {
		in               string
		block, sub, host string
		wantErr          bool
	}{
		{in: "/b/s/h", block: "b", sub: "s", host: "h"},
		{in: "/0a1b/2c3d/4e5f", block: "0a1b", sub: "2c3d", host: "4e5f"},
		// dranet trims the leading slash; a value without it is not the
		// documented form.
		{in: "b/s/h", wantErr: true},
		{in: "", wantErr: true},
		{in: "/", wantErr: true},
		{in: "/b/s", wantErr: true},
		{in: "/b//h", wantErr: true},
		{in: "/b/s/h/", wantErr: true},
		{in: " /b/s/h", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			b, s, h, err := parsePhysicalHost(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if b != tt.block || s != tt.sub || h != tt.host {
				t.Errorf("got %q %q %q", b, s, h)
			}
		})
	}
}

// FuzzParsePhysicalHost: whatever is accepted rebuilds the input exactly
// and holds only valid values.
func FuzzParsePhysicalHost(f *testing.F) {
	f.Add("/3f8a1c0e5b7d9f2a4c6e8b0d1f3a5c7e/9b2d4f6a8c0e1b3d5f7a9c1e3b5d7f9a/e4c6a8b0d2f4a6c8e0b2d4f6a8c0e2b4")
	f.Add("/b/s/h")
	f.Add("/a/\x1b[31mb/c")
	f.Add("/a/b/c/d")
	f.Fuzz(func(t *testing.T, in string) {
		b, s, h, err := parsePhysicalHost(in)
		if err != nil {
			return
		}
		if got := "/" + b + "/" + s + "/" + h; got != in {
			t.Fatalf("parsed %q into %q", in, got)
		}
		for _, v := range []string{b, s, h} {
			if why := ValidValue(v); why != "" {
				t.Fatalf("accepted %q: %s", v, why)
			}
		}
	})
}

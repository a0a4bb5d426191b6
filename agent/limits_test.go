package agent

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gpuaffinity/gpuaffinity/internal/testutil/fakesys/fakesystest"
)

// With Options.MaxConnections connections open, the next waits in the
// kernel's accept queue, unserved, and is served once one closes.
func TestMaxConnections(t *testing.T) {
	r := startAgent(t, Options{Root: fakesystest.Root(t, "dgx-h100"), MaxConnections: 1})
	hold, err := net.Dial("tcp", r.a.Addrs()[0].String())
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	// The held connection is served, and kept alive.
	io.WriteString(hold, "GET /healthz HTTP/1.1\r\nHost: agent\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(hold), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("held connection: %v %v", resp, err)
	}
	resp.Body.Close()

	done := make(chan error, 1)
	go func() {
		resp, err := r.client.Get(r.url + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	// Not a synchronisation: the time the second request has to be
	// (wrongly) served while the first connection is open.
	select {
	case err := <-done:
		t.Fatalf("a second connection served beyond MaxConnections 1 (%v)", err)
	case <-time.After(500 * time.Millisecond):
	}
	hold.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the waiting connection after the first closed: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting connection not served within 30 s of the first closing")
	}
}

// A request with a body is answered and its connection closed without
// the body being read: a client that sends 10 bytes of a 100,000-byte
// body gets its whole answer and then the end of the connection.
func TestBodyNotRead(t *testing.T) {
	r := startAgent(t, Options{Root: fakesystest.Root(t, "dgx-h100")})
	for _, path := range []string{"/healthz", "/metrics", "/nosuch"} {
		c, err := net.Dial("tcp", r.a.Addrs()[0].String())
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: agent\r\nContent-Length: 100000\r\n\r\n0123456789")
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if _, err := io.ReadAll(resp.Body); err != nil {
			t.Errorf("%s: answer cut: %v", path, err)
		}
		resp.Body.Close()
		if !resp.Close {
			t.Errorf("%s: answered %s without Connection: close", path, resp.Status)
		}
		// The agent closes: EOF (or a reset, the unread body arriving),
		// long before readTimeout, which reading the body would take.
		if _, err := br.ReadByte(); err == nil {
			t.Errorf("%s: more bytes after the answer", path)
		}
		if d := time.Since(start); d > readTimeout/2 {
			t.Errorf("%s: answered and closed %s after the request: the agent waited for the body", path, d)
		}
		c.Close()
	}
}

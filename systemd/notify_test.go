package systemd

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// listen binds a unixgram socket, sets NOTIFY_SOCKET to it and returns
// a function that reads the next datagram (or "" after a timeout).
func listen(t *testing.T) func(time.Duration) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	return func(d time.Duration) string {
		conn.SetReadDeadline(time.Now().Add(d))
		buf := make([]byte, 4096)
		n, err := conn.Read(buf)
		if err != nil {
			return ""
		}
		return string(buf[:n])
	}
}

func TestNotify(t *testing.T) {
	next := listen(t)
	if err := Ready("8 GPUs\nhealthy"); err != nil {
		t.Fatal(err)
	}
	if got := next(time.Second); got != "READY=1\nSTATUS=8 GPUs healthy" {
		t.Errorf("Ready sent %q", got)
	}
	if err := Reloading(); err != nil {
		t.Fatal(err)
	}
	if got := next(time.Second); !strings.HasPrefix(got, "RELOADING=1\nMONOTONIC_USEC=") {
		t.Errorf("Reloading sent %q", got)
	}
	Stopping()
	if got := next(time.Second); got != "STOPPING=1" {
		t.Errorf("Stopping sent %q", got)
	}
	Status("rescanning")
	if got := next(time.Second); got != "STATUS=rescanning" {
		t.Errorf("Status sent %q", got)
	}
}

func TestNotifyWithoutSystemd(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	if sent, err := Notify("READY=1"); sent || err != nil {
		t.Errorf("without NOTIFY_SOCKET: %t %v", sent, err)
	}
	t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "nobody"))
	if err := Ready("x"); err == nil || !strings.Contains(err.Error(), "nobody") {
		t.Errorf("no listener: %v", err)
	}
}

func TestWatchdog(t *testing.T) {
	next := listen(t)
	for _, c := range []struct {
		usec, pid string
		want      time.Duration
	}{
		{"", "", 0},
		{"2000000", "", time.Second},
		{"2000000", strconv.Itoa(os.Getpid()), time.Second},
		{"2000000", "1", 0}, // another process is watched
	} {
		t.Setenv("WATCHDOG_USEC", c.usec)
		t.Setenv("WATCHDOG_PID", c.pid)
		if got, err := WatchdogInterval(); err != nil || got != c.want {
			t.Errorf("WATCHDOG_USEC=%q WATCHDOG_PID=%q: %s %v, want %s", c.usec, c.pid, got, err, c.want)
		}
	}
	t.Setenv("WATCHDOG_USEC", "soon")
	if _, err := WatchdogInterval(); err == nil {
		t.Error("bad WATCHDOG_USEC accepted")
	}

	var alive atomic.Bool
	alive.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Watchdog(ctx, 20*time.Millisecond, alive.Load, func(err error) { t.Error(err) })
	}()
	for range 3 {
		if got := next(2 * time.Second); got != "WATCHDOG=1" {
			t.Fatalf("ping %q", got)
		}
	}
	// Stuck: no more pings.
	alive.Store(false)
	for next(100*time.Millisecond) != "" {
		// pings sent before the store
	}
	if got := next(200 * time.Millisecond); got != "" {
		t.Errorf("pinged %q while not alive", got)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Watchdog did not return after cancel")
	}
	Watchdog(context.Background(), 0, nil, nil) // returns at once
}

package systemd

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// Notify sends states, one per line ("READY=1", "STATUS=..."), in one
// datagram to $NOTIFY_SOCKET. It reports whether a service manager was
// there to send to; without $NOTIFY_SOCKET it returns (false, nil).
func Notify(states ...string) (bool, error) {
	lines := make([]string, len(states))
	for i, s := range states {
		// A newline inside a value would start a new assignment.
		lines[i] = strings.ReplaceAll(s, "\n", " ")
	}
	sent, err := daemon.SdNotify(false, strings.Join(lines, "\n"))
	if err != nil {
		return false, fmt.Errorf("sd_notify %s: %w", os.Getenv("NOTIFY_SOCKET"), err)
	}
	return sent, nil
}

// Ready tells systemd the service has started (READY=1), with a status
// line for `systemctl status`.
func Ready(status string) error { return notify(daemon.SdNotifyReady, "STATUS="+status) }

// Reloading tells systemd the service is reloading its configuration
// (RELOADING=1, with the MONOTONIC_USEC newer managers want); Ready ends it.
func Reloading() error {
	return notify(daemon.SdNotifyReloading, daemon.SdNotifyMonotonicUsec())
}

// Stopping tells systemd the service is shutting down (STOPPING=1).
func Stopping() error { return notify(daemon.SdNotifyStopping) }

// Status sets the status line `systemctl status` shows.
func Status(status string) error { return notify("STATUS=" + status) }

func notify(states ...string) error {
	_, err := Notify(states...)
	return err
}

// WatchdogInterval is how often to ping the watchdog: half of
// WATCHDOG_USEC when systemd watches this process (WatchdogSec= in the
// unit; WATCHDOG_PID, when set, must be this process), else 0.
func WatchdogInterval() (time.Duration, error) {
	d, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		return 0, fmt.Errorf("systemd watchdog: %w", err)
	}
	return d / 2, nil
}

// Watchdog sends WATCHDOG=1 every interval until ctx is done, but only
// while alive reports true: a process whose work is stuck stops pinging
// and systemd restarts it after WatchdogSec=. A nil alive always pings.
// Send errors go to onErr (may be nil). Watchdog returns at once when
// interval is not positive.
func Watchdog(ctx context.Context, interval time.Duration, alive func() bool, onErr func(error)) {
	if interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if alive == nil || alive() {
			if err := notify(daemon.SdNotifyWatchdog); err != nil && onErr != nil {
				onErr(err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Package systemd holds what the agent needs from systemd: the
// sd_notify messages of a Type=notify service (READY=1, RELOADING=1,
// STOPPING=1, STATUS=) and the watchdog's WATCHDOG=1 pings, over the
// datagram socket systemd names in $NOTIFY_SOCKET (through
// github.com/coreos/go-systemd/v22/daemon). Outside systemd ($NOTIFY_SOCKET
// unset) every call does nothing and returns nil.
//
// The unit files, gpuaffinity.service and gpuaffinity.socket, the job
// audit's drop-in (jobs.conf, ProtectProc=default), the agent's
// part of /etc/default/gpuaffinity (gpuaffinity.default) and their
// install notes (README.md) sit beside this package; deploy/internal/pkgbuild
// puts them in the .deb and .rpm. Errors name the socket; a service manager that
// stops listening is an error the caller logs, never a reason to stop.
// Nothing here reads flags or the environment beyond NOTIFY_SOCKET,
// WATCHDOG_USEC and WATCHDOG_PID.
package systemd

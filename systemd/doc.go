// Package systemd will hold the unit files and the sd_notify/watchdog
// glue of the agent. It is empty until the agent issue lands; the folder
// is part of the layout in DESIGN.md.
package systemd

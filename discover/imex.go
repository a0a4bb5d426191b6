package discover

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"github.com/gpuaffinity/gpuaffinity/internal/sortfn"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// IMEX files (NVIDIA IMEX guide, "IMEX channels" and "Configuration").
const (
	procDevices     = "proc/devices"
	imexChannelsDev = "nvidia-caps-imex-channels" // the driver's character device name
	imexChannelDir  = "dev/nvidia-caps-imex-channels"
	imexConfig      = "etc/nvidia-imex/config.cfg"
	// maxIMEXChannels bounds the channel nodes read (the driver offers
	// 2048; a node uses a few).
	maxIMEXChannels = 2048
)

// readIMEX reads the IMEX channel major, the channel nodes and the IMEX
// daemon's configuration. On a live root a channel node must be a
// character device with the driver's major that this process may open
// read-write; a replayed root (a snapshot, a fixture) cannot hold device
// nodes, so there a channel is a regular file holding "c MAJOR:MINOR"
// (docs/snapshot.md), judged the same way without the access test.
func readIMEX(root *rootfs.Root, warn func(...error)) topology.IMEX {
	im := topology.IMEX{Channels: []topology.IMEXChannel{}}
	if b, err := root.ReadFile(procDevices, maxProcFile); err == nil {
		im.DeviceMajor = charMajor(b, imexChannelsDev)
	} else if !errors.Is(err, fs.ErrNotExist) {
		warn(fmt.Errorf("read /%s: %w", procDevices, err))
	}
	ents, err := root.ReadDir(imexChannelDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		warn(fmt.Errorf("read /%s: %w", imexChannelDir, err))
	}
	for _, e := range ents {
		num, ok := strings.CutPrefix(e.Name(), "channel")
		n, err := strconv.Atoi(num)
		if !ok || err != nil || n < 0 || n >= maxIMEXChannels || strconv.Itoa(n) != num {
			continue
		}
		rel := path.Join(imexChannelDir, e.Name())
		im.Channels = append(im.Channels, topology.IMEXChannel{Number: n, Path: "/" + rel, Problem: channelProblem(root, rel, im.DeviceMajor)})
	}
	sortfn.Sort(im.Channels, func(a, b topology.IMEXChannel) int { return a.Number - b.Number })
	im.Config = readIMEXConfig(root, warn)
	return im
}

// charMajor is the major of character device name in /proc/devices
// ("Character devices:" then "<major> <name>" lines); nil when absent.
func charMajor(b []byte, name string) *int {
	char := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "Character devices:":
			char = true
		case line == "Block devices:":
			char = false
		case char:
			f := strings.Fields(line)
			if len(f) == 2 && f[1] == name {
				if m, err := strconv.Atoi(f[0]); err == nil && m >= 0 {
					return &m
				}
			}
		}
	}
	return nil
}

// channelProblem says why the channel node rel cannot be used; "" when it
// can.
func channelProblem(root *rootfs.Root, rel string, driverMajor *int) string {
	fi, err := root.Stat(rel)
	if err != nil {
		return err.Error()
	}
	var major int
	switch {
	case fi.Mode()&fs.ModeCharDevice != 0:
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return "no device number"
		}
		major = int(unix.Major(uint64(st.Rdev)))
	case fi.Mode().IsRegular() && !root.Live():
		b, err := root.ReadFile(rel, 64)
		if err != nil {
			return err.Error()
		}
		var minor int
		if _, err := fmt.Sscanf(strings.TrimSpace(string(b)), "c %d:%d", &major, &minor); err != nil {
			return fmt.Sprintf("replayed node %q is not \"c MAJOR:MINOR\"", strings.TrimSpace(string(b)))
		}
	default:
		return "not a character device"
	}
	switch {
	case driverMajor == nil:
		return fmt.Sprintf("major %d, but the driver has registered no %s device (/proc/devices)", major, imexChannelsDev)
	case major != *driverMajor:
		return fmt.Sprintf("major %d, but the driver's %s major is %d (a node left from an earlier boot)", major, imexChannelsDev, *driverMajor)
	}
	if root.Live() && fi.Mode()&fs.ModeCharDevice != 0 {
		if err := unix.Access(root.Path(rel), unix.R_OK|unix.W_OK); err != nil {
			return fmt.Sprintf("no read-write access for this process: %v", err)
		}
	}
	return ""
}

// readIMEXConfig reads the IMEX daemon's config.cfg (KEY=VALUE lines) and
// counts the peers in its IMEX_NODE_CONFIG_FILE; nil where not installed.
func readIMEXConfig(root *rootfs.Root, warn func(...error)) *topology.IMEXConfig {
	b, err := root.ReadFile(imexConfig, maxProcFile)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			warn(fmt.Errorf("read /%s: %w", imexConfig, err))
		}
		return nil
	}
	c := &topology.IMEXConfig{Path: "/" + imexConfig}
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		switch strings.TrimSpace(k) {
		case "IMEX_NODE_CONFIG_FILE":
			c.NodesConfig = strings.TrimSpace(v)
		case "SERVER_PORT":
			if p, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && p > 0 && p < 65536 {
				c.ServerPort = &p
			}
		}
	}
	if c.NodesConfig == "" || !path.IsAbs(c.NodesConfig) {
		return c
	}
	nb, err := root.ReadFile(strings.TrimPrefix(path.Clean(c.NodesConfig), "/"), maxProcFile)
	if err != nil {
		warn(fmt.Errorf("IMEX node list (IMEX_NODE_CONFIG_FILE in /%s): %w", imexConfig, err))
		return c
	}
	n := 0
	for line := range strings.Lines(string(nb)) {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			n++
		}
	}
	c.Nodes = &n
	return c
}

// Package snapshot captures what gpuaffinity's discovery reads from a node —
// an allowlist of sysfs and procfs files, and NVML's answers as nvml.json —
// into a directory or a .tar.gz that any command reads back with --root
// (DESIGN.md, "The root"). It is what `gpuaffinity snapshot -f DIR|FILE.tar.gz`
// calls.
//
// What is copied is one table, paths.go, each entry saying who reads it
// (discovery, hwloc, node_exporter, ghw); nothing outside it is ever opened.
// Links are kept as links with their exact, relative text; a file's bytes
// are kept as the kernel wrote them. Every link passed through on the way to
// a file is copied too, so a snapshot resolves every path the same way the
// source did. A link whose text is absolute or climbs above the source root
// is never followed nor copied. Reads are bounded (64 KiB an attribute, 4 MiB
// for /proc/cpuinfo, meminfo, self/status and mounts). With Options.Scrub,
// MAC addresses, GUIDs, GPU UUIDs, the hostname and a serial-looking chassis
// asset tag are replaced by stable fakes (scrub.go). docs/snapshot.md
// describes the layout, the scrub rules and how to use --root on the result.
//
// Error contract: WriteDir and WriteTarGz fail only when the source root
// cannot be opened, a read fails in an unexpected way, NVML cannot be
// recorded, or the output cannot be written; errors wrap the cause with %w
// and name the path. What a live system legitimately does is not a failure
// and lands in the Report instead: a file listed and then gone (a NIC
// unplugged mid-snapshot) is a warning; an attribute the kernel refuses to
// give (EINVAL for an unpopulated GID, ENODATA, EIO, EACCES...), a write-only
// file, one over its size bound or a link out of the root is skipped and
// counted by reason; an optional attribute a device does not have is simply
// absent, as it is in the source.
//
// Extract unpacks a snapshot (or any tar of a root, such as the fixtures)
// without ever writing outside its target, nor making a link that, resolved
// through the archive's other links, leads outside it. WriteTarGzFile and
// WriteDir never write through a link planted at their output, nor into a
// directory another user could change under them.
//
// Not to add here: parsing. A snapshot holds data only, exactly as read;
// readers live in the source packages.
package snapshot

package snapshot

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuaffinity/gpuaffinity/internal/atomicfile"
	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/rdma"
)

// Options says what to snapshot.
type Options struct {
	// Root is the source root: "/" (or "") for the live node, or a
	// directory laid out like one (an earlier snapshot, a fake root).
	Root string
	// Scrub replaces identifying values with stable fakes (see scrub.go and
	// docs/snapshot.md).
	Scrub bool
	// NVML, when set, is recorded into nvml.json through nvml.Record. When
	// nil and Root is not "/", Root/nvml.json (if present) is loaded and
	// re-recorded through nvml.Record(nvml.NewReplay(loaded)); when nil and
	// Root is "/", no nvml.json is written. The caller owns the library's
	// lifecycle as nvml.Record documents it; cmd/ passes what nvml.Open(root)
	// returned.
	NVML nvml.Interface
	// Netlink, when set, is asked for the IPv4 addresses of every netdev
	// of Root's sys/class/net, written to addresses.json. When nil: on "/"
	// the process's own netlink (rdma.NewNetlink) is asked; on another
	// root, Root/addresses.json (if present) is copied.
	Netlink rdma.Netlink
}

// Report says what a snapshot holds and what it left out.
type Report struct {
	Files int // regular files written, nvml.json included
	Links int // symbolic links written
	Dirs  int // directories written
	// Skipped counts the allowlisted files that were not copied, by reason:
	// an errno name ("EINVAL" for an unpopulated GID, "ENODATA", "EIO",
	// "EACCES"...), "write-only", "larger than N bytes", "link outside root".
	Skipped map[string]int
	// Warnings are things that changed under the snapshot (a file listed
	// and gone when read: a NIC unplugged mid-snapshot) or were left out for
	// safety, one line each, naming the path. They do not fail a snapshot.
	Warnings []string
	// NVML says where nvml.json came from: "" when none was written,
	// "Options.NVML", or the path of the source root's nvml.json.
	NVML string
	// Addresses says where addresses.json came from: "" when none was
	// written, "netlink (N interfaces)", "Options.Netlink (N interfaces)",
	// or the path of the source root's addresses.json.
	Addresses string
}

// String summarizes the report on one line, reasons in sorted order:
// "1060 files, 34 links, 152 dirs; skipped 5 EINVAL, 1 write-only; 0 warnings; nvml.json from Options.NVML".
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d files, %d links, %d dirs", r.Files, r.Links, r.Dirs)
	if len(r.Skipped) > 0 {
		b.WriteString("; skipped")
		for i, reason := range slices.Sorted(maps.Keys(r.Skipped)) {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, " %d %s", r.Skipped[reason], reason)
		}
	}
	fmt.Fprintf(&b, "; %d warnings", len(r.Warnings))
	if r.NVML == "" {
		b.WriteString("; no nvml.json")
	} else {
		fmt.Fprintf(&b, "; nvml.json from %s", r.NVML)
	}
	if r.Addresses != "" {
		fmt.Fprintf(&b, "; addresses.json from %s", r.Addresses)
	}
	return b.String()
}

// WriteDir snapshots opts.Root into dir, which must not exist or be an empty
// directory of ours: an existing dir that is a symlink or is owned by
// another user is refused. Files are written 0644 with O_EXCL|O_NOFOLLOW,
// directories 0755, links with their exact text, all through an os.Root on
// dir.
func WriteDir(opts Options, dir string) (Report, error) {
	t, rep, err := collect(opts, nil)
	if err != nil {
		return rep, err
	}
	if err := t.writeDir(dir); err != nil {
		return rep, err
	}
	return rep, nil
}

// WriteTarGz snapshots opts.Root as a gzip-compressed tar stream on w. The
// stream is deterministic: entries sorted by path, directories listed before
// what they hold, fixed modes, owners and times, so two snapshots of the same
// root are byte-identical. w is not closed.
func WriteTarGz(opts Options, w io.Writer) (Report, error) {
	t, rep, err := collect(opts, nil)
	if err != nil {
		return rep, err
	}
	if err := t.writeTarGz(w); err != nil {
		return rep, err
	}
	return rep, nil
}

// WriteTarGzFile snapshots opts.Root as WriteTarGz does into the file
// path, atomically and without following anything planted there
// (internal/atomicfile): a temporary file beside path, created O_EXCL,
// written, fsynced and renamed over path, so a symlink at path is replaced,
// never written through. A directory another user could race in (writable
// by others without the sticky bit, or owned by someone other than us or
// root) is refused, naming it. On error path is left as it was.
func WriteTarGzFile(opts Options, path string) (Report, error) {
	var rep Report
	err := atomicfile.WriteFunc(path, fileMode, func(w io.Writer) error {
		var err error
		rep, err = WriteTarGz(opts, w)
		return err
	})
	return rep, err
}

// openSource opens the source root for reading.
func openSource(root string) (*os.Root, error) {
	root = rootfs.Clean(root)
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("open snapshot source root %s: %w", root, err)
	}
	return r, nil
}

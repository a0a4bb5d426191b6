package demo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
	"github.com/gpuaffinity/gpuaffinity/nvml"
)

// Write writes machine name into dir (created if missing; it should be
// empty): its sys/, proc/ and other files, and nvml.json when it has
// NVML answers. Directories are made 0755 and files 0644 (less the
// umask), as the fixture builder writes them, so that lstopo
// (HWLOC_FSROOT), node_exporter (--path.sysfs) and the agent's on-disk
// readers see the same machine as Memory gives. An unknown name wraps
// ErrUnknownMachine; otherwise the error is the *os.PathError of the
// first file that could not be written.
func Write(name, dir string) error {
	m, rf, err := load(name)
	if err != nil {
		return err
	}
	var files []file
	if rf != nil {
		data, err := nvml.EncodeReplay(*rf)
		if err != nil {
			return fmt.Errorf("build %s: %w", name, err)
		}
		files = append(files, file{path: nvml.ReplayFileName, data: data})
	}
	dirs, files, err := list(m.Root(), ".", nil, files)
	if err != nil {
		return fmt.Errorf("build %s: %w", name, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("build %s: %w", name, err)
	}
	if err := write(dir, dirs, files); err != nil {
		return fmt.Errorf("build %s: %w", name, err)
	}
	return nil
}

// file is a regular file or, when link is set, a symlink to write.
type file struct {
	path string
	data []byte
	link string
}

// list appends the directories under rel (parents first) to dirs and
// its files and links to files.
func list(r *rootfs.Root, rel string, dirs []string, files []file) ([]string, []file, error) {
	entries, err := r.ReadDir(rel)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		p := path.Join(rel, e.Name())
		switch {
		case e.Type()&fs.ModeSymlink != 0:
			target, err := r.Readlink(p)
			if err != nil {
				return nil, nil, err
			}
			files = append(files, file{path: p, link: target})
		case e.IsDir():
			dirs = append(dirs, p)
			if dirs, files, err = list(r, p, dirs, files); err != nil {
				return nil, nil, err
			}
		default:
			data, err := r.ReadFile(p, 64<<20)
			if err != nil {
				return nil, nil, err
			}
			files = append(files, file{path: p, data: data})
		}
	}
	return dirs, files, nil
}

// write makes dirs under root, which must exist, then writes files from
// several goroutines (a machine has thousands).
func write(root string, dirs []string, files []file) error {
	for _, d := range dirs {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	workers := min(runtime.GOMAXPROCS(0), 8, max(1, len(files)/256))
	chunk := (len(files) + workers - 1) / workers
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := min(w*chunk, len(files)), min((w+1)*chunk, len(files))
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = writeFiles(root, files[lo:hi])
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func writeFiles(root string, files []file) error {
	for _, f := range files {
		full := filepath.Join(root, f.path)
		if f.link != "" {
			if err := os.Symlink(f.link, full); err != nil {
				return err
			}
			continue
		}
		if err := os.WriteFile(full, f.data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

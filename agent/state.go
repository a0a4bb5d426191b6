package agent

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gpuaffinity/gpuaffinity/agent/cache"
	"github.com/gpuaffinity/gpuaffinity/internal/atomicfile"
	"github.com/gpuaffinity/gpuaffinity/nccl"
	"github.com/gpuaffinity/gpuaffinity/render"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// stateFiles renders the state files of n for directory dir: file name
// to content, nil content for a file that must not exist (the XML on EFA
// nodes, where aws-ofi-nccl writes NCCL's topology itself). It does no
// I/O.
func stateFiles(dir string, n topology.Node) (map[string][]byte, []string, error) {
	files := map[string][]byte{}
	var js bytes.Buffer
	if err := render.JSON(&js, n); err != nil {
		return nil, nil, err
	}
	files[cache.TopologyFile] = js.Bytes()
	launch, err := cache.EncodeLaunch(n)
	if err != nil {
		return nil, nil, fmt.Errorf("render %s: %w", cache.LaunchFile, err)
	}
	files[cache.LaunchFile] = launch
	files[cache.LegacyLaunchFile] = nil // an older launcher must not read a stale one

	req := nccl.EnvRequest{TopoFile: n.TopoFile}
	if nccl.PluginWritesTopology(n) {
		files[cache.NCCLTopoFile] = nil
	} else {
		var xml bytes.Buffer
		if err := nccl.TopologyXML(&xml, n, nccl.XMLOptions{}); err != nil {
			return nil, nil, fmt.Errorf("render %s: %w", cache.NCCLTopoFile, err)
		}
		files[cache.NCCLTopoFile] = xml.Bytes()
		req.TopoFile = filepath.Join(dir, cache.NCCLTopoFile)
	}
	e, err := nccl.BuildEnv(n, req)
	if err != nil {
		return nil, nil, fmt.Errorf("render %s: %w", cache.EnvFile, err)
	}
	// A value dotenv cannot hold (a hostile netdev name) is left out of
	// the file with a warning: the rest of the state is still written.
	vars, dropped := nccl.DotenvHoldable(e.Vars)
	warnings := e.Warnings
	for _, v := range dropped {
		warnings = append(warnings, fmt.Sprintf("%s: %s=%q left out: dotenv cannot hold it (gpuaffinity env -o sh can)", cache.EnvFile, v.Name, v.Value))
	}
	var env bytes.Buffer
	if err := nccl.WriteDotenv(&env, vars); err != nil {
		return nil, nil, fmt.Errorf("render %s: %w", cache.EnvFile, err)
	}
	files[cache.EnvFile] = env.Bytes()
	return files, warnings, nil
}

// writeState writes n's state files into dir as one generation
// (atomicfile.WriteFiles): every file is first written in full to a
// temporary file beside it (and fsynced); only when all are written are
// they renamed into place, the topology last. A failed write (disk full)
// changes none of them, so a reader never finds a new env beside an old
// topology.json. It returns the topology JSON it wrote.
func writeState(dir string, n topology.Node) ([]byte, []string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("state dir %s: %w", dir, err)
	}
	files, warnings, err := stateFiles(abs, n)
	if err != nil {
		return nil, warnings, err
	}
	order := []string{cache.NCCLTopoFile, cache.EnvFile, cache.LegacyLaunchFile, cache.LaunchFile, cache.TopologyFile}
	gen := make([]atomicfile.File, 0, len(order))
	for _, name := range order {
		gen = append(gen, atomicfile.File{Name: name, Data: files[name], Perm: 0o644, Remove: files[name] == nil})
	}
	if err := atomicfile.WriteFiles(abs, gen); err != nil {
		return files[cache.TopologyFile], warnings, err
	}
	return files[cache.TopologyFile], warnings, nil
}

// removeStaleTemps removes the temporary files an interrupted
// atomicfile.Write or WriteFiles of path left behind (".<name>.tmp-<random>" beside
// it: a kill -9 between create and rename). Only one writer may use a
// state directory, so at start every such file is stale.
func removeStaleTemps(path string) error {
	matches, err := filepath.Glob(filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*"))
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range matches {
		if err := os.Remove(m); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// cleanStateDir creates dir when missing and removes stale temporary
// files of the state files (and of the NFD file, when set).
func cleanStateDir(dir, nfdFile string) error {
	var errs []error
	if dir != "" {
		_, statErr := os.Stat(dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("state dir: %w", err)
		}
		if errors.Is(statErr, fs.ErrNotExist) {
			// Ours: make it 0755 whatever the umask.
			if err := os.Chmod(dir, 0o755); err != nil {
				return fmt.Errorf("state dir: %w", err)
			}
		}
		// Launchers trust what is in it: another user must not be able
		// to write there (cache.Load refuses such a directory too).
		if _, err := cache.TrustedDir(dir); err != nil {
			return fmt.Errorf("state dir: %w", err)
		}
		for _, name := range []string{cache.TopologyFile, cache.LaunchFile, cache.NCCLTopoFile, cache.EnvFile} {
			errs = append(errs, removeStaleTemps(filepath.Join(dir, name)))
		}
	}
	if nfdFile != "" {
		errs = append(errs, removeStaleTemps(nfdFile))
	}
	return errors.Join(errs...)
}

package agent

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gpuaffinity/gpuaffinity/internal/atomicfile"
	"github.com/gpuaffinity/gpuaffinity/nccl"
	"github.com/gpuaffinity/gpuaffinity/render"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// The files the agent writes in its state directory.
const (
	TopologyFile = "topology.json" // render.JSON of the last good node
	NCCLTopoFile = "nccl-topo.xml" // nccl.TopologyXML, as `gpuaffinity nccl-topo` writes it
	EnvFile      = "env"           // node-level dotenv, as `gpuaffinity env -o dotenv --write-topo DIR` without a rank
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
	files[TopologyFile] = js.Bytes()

	req := nccl.EnvRequest{TopoFile: n.TopoFile}
	if nccl.PluginWritesTopology(n) {
		files[NCCLTopoFile] = nil
	} else {
		var xml bytes.Buffer
		if err := nccl.TopologyXML(&xml, n, nccl.XMLOptions{}); err != nil {
			return nil, nil, fmt.Errorf("render %s: %w", NCCLTopoFile, err)
		}
		files[NCCLTopoFile] = xml.Bytes()
		req.TopoFile = filepath.Join(dir, NCCLTopoFile)
	}
	e, err := nccl.BuildEnv(n, req)
	if err != nil {
		return nil, nil, fmt.Errorf("render %s: %w", EnvFile, err)
	}
	var env bytes.Buffer
	if err := nccl.WriteDotenv(&env, e.Vars); err != nil {
		return nil, nil, fmt.Errorf("render %s: %w", EnvFile, err)
	}
	files[EnvFile] = env.Bytes()
	return files, e.Warnings, nil
}

// writeState writes n's state files into dir, each atomically, the
// topology last: a reader that finds a topology.json newer than the boot
// finds the other files of the same node (or newer). It returns the
// topology JSON it wrote.
func writeState(dir string, n topology.Node) ([]byte, []string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("state dir %s: %w", dir, err)
	}
	files, warnings, err := stateFiles(abs, n)
	if err != nil {
		return nil, warnings, err
	}
	var errs []error
	for _, name := range []string{NCCLTopoFile, EnvFile, TopologyFile} {
		path := filepath.Join(abs, name)
		data := files[name]
		if data == nil {
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			continue
		}
		errs = append(errs, atomicfile.Write(path, data, 0o644))
	}
	return files[TopologyFile], warnings, errors.Join(errs...)
}

// removeStaleTemps removes the temporary files an interrupted
// atomicfile.Write of path left behind (".<name>.tmp-<random>" beside
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
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("state dir: %w", err)
		}
		for _, name := range []string{TopologyFile, NCCLTopoFile, EnvFile} {
			errs = append(errs, removeStaleTemps(filepath.Join(dir, name)))
		}
	}
	if nfdFile != "" {
		errs = append(errs, removeStaleTemps(nfdFile))
	}
	return errors.Join(errs...)
}

package nccl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/gpuaffinity/gpuaffinity/cpuset"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// ErrUnsafe is wrapped when a name or value cannot be written safely in
// the requested format.
var ErrUnsafe = errors.New("cannot be written safely")

// envValidName reports whether name is a portable shell variable name:
// [A-Za-z_][A-Za-z0-9_]*.
func envValidName(name string) bool {
	if name == "" {
		return false
	}
	for i, c := range name {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

func envCheckNames(vars []Var) error {
	for _, v := range vars {
		if !envValidName(v.Name) {
			return fmt.Errorf("variable name %q %w: want [A-Za-z_][A-Za-z0-9_]*", v.Name, ErrUnsafe)
		}
		if strings.IndexByte(v.Value, 0) >= 0 {
			return fmt.Errorf("%s: value with a NUL byte %w", v.Name, ErrUnsafe)
		}
	}
	return nil
}

// WriteSh writes one `export NAME='value'` line per variable. Every value
// is single-quoted and an embedded single quote is closed, escaped and
// reopened (quote, backslash, quote, quote), so the output is inert
// in bash, dash and zsh (no expansion of $, `, \, =, ^, globs). Nothing is
// written when a name is invalid.
func WriteSh(w io.Writer, vars []Var) error {
	if err := envCheckNames(vars); err != nil {
		return err
	}
	var b bytes.Buffer
	for _, v := range vars {
		b.WriteString("export ")
		b.WriteString(v.Name)
		b.WriteString("='")
		b.WriteString(strings.ReplaceAll(v.Value, "'", `'\''`))
		b.WriteString("'\n")
	}
	_, err := w.Write(b.Bytes())
	return err
}

// envDotenvSafe is the set of bytes a dotenv value may hold: docker
// --env-file takes values raw (no unquoting), systemd's EnvironmentFile=
// unquotes and unescapes, so only bytes both read alike are written.
func envDotenvSafe(c byte) bool {
	switch {
	case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("_.,:=^/@%+-", c) >= 0
}

// WriteDotenv writes NAME=value lines for systemd's EnvironmentFile= and
// docker --env-file. Values are written raw; a value with a byte outside
// [A-Za-z0-9_.,:=^/@%+-] is refused with an error naming the variable,
// and nothing is written.
// DotenvHoldable splits vars into those a dotenv file can hold
// (WriteDotenv's rules) and those it cannot, so that a writer can leave
// the latter out with a warning instead of writing nothing.
func DotenvHoldable(vars []Var) (ok, dropped []Var) {
	for _, v := range vars {
		safe := envCheckNames([]Var{v}) == nil
		for i := 0; safe && i < len(v.Value); i++ {
			safe = envDotenvSafe(v.Value[i])
		}
		if safe {
			ok = append(ok, v)
		} else {
			dropped = append(dropped, v)
		}
	}
	return ok, dropped
}

func WriteDotenv(w io.Writer, vars []Var) error {
	if err := envCheckNames(vars); err != nil {
		return err
	}
	var b bytes.Buffer
	for _, v := range vars {
		for i := 0; i < len(v.Value); i++ {
			if !envDotenvSafe(v.Value[i]) {
				return fmt.Errorf("%s=%q %w as dotenv: byte %q is outside [A-Za-z0-9_.,:=^/@%%+-] (use -o sh or -o json)", v.Name, v.Value, ErrUnsafe, v.Value[i])
			}
		}
		b.WriteString(v.Name)
		b.WriteByte('=')
		b.WriteString(v.Value)
		b.WriteByte('\n')
	}
	_, err := w.Write(b.Bytes())
	return err
}

// envJSON is an Env as JSON: {"local_rank":..,"gpu":..,"env":{...},
// "warnings":[...]}, env keys in Vars order.
func envJSON(e Env) ([]byte, error) {
	if err := envCheckNames(e.Vars); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	num := func(p *int) string {
		if p == nil {
			return "null"
		}
		return strconv.Itoa(*p)
	}
	b.WriteString(`{"local_rank":` + num(e.Rank) + `,"gpu":` + num(e.GPU) + `,"env":{`)
	for i, v := range e.Vars {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(v.Name)
		val, err := json.Marshal(v.Value)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(val)
	}
	b.WriteString(`},"warnings":`)
	ws := e.Warnings
	if ws == nil {
		ws = []string{}
	}
	wj, err := json.Marshal(ws)
	if err != nil {
		return nil, err
	}
	b.Write(wj)
	b.WriteByte('}')
	// Indent for people; the key order stays.
	var out bytes.Buffer
	if err := json.Indent(&out, b.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// WriteJSON writes e as one JSON object: {"local_rank":..,"gpu":..,
// "env":{NAME:value,...},"warnings":[...]}; local_rank and gpu are null
// without a rank; env keys keep the documented order.
func WriteJSON(w io.Writer, e Env) error {
	data, err := envJSON(e)
	if err != nil {
		return err
	}
	_, err = w.Write(append(data, '\n'))
	return err
}

// WriteJSONRanks writes a JSON array of WriteJSON's objects, one per rank.
func WriteJSONRanks(w io.Writer, envs []Env) error {
	var b bytes.Buffer
	b.WriteString("[")
	for i, e := range envs {
		data, err := envJSON(e)
		if err != nil {
			return err
		}
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n")
		b.Write(data)
	}
	if len(envs) > 0 {
		b.WriteString("\n")
	}
	b.WriteString("]\n")
	_, err := w.Write(b.Bytes())
	return err
}

// envPerRank are the per-rank variables; all others are node-level.
var envPerRank = map[string]bool{
	"GPUAFFINITY_GPU": true, "GPUAFFINITY_HIP_DEVICES": true, "GPUAFFINITY_NICS": true,
	"GPUAFFINITY_CPUS": true, "GPUAFFINITY_NUMA": true, "UCX_NET_DEVICES": true,
}

// writeNodeVars writes the node-level variables every rank shares (name
// and value), in the first env's order; then, where ranks differ (a node
// with NVIDIA and AMD GPUs: CUDA_DEVICE_ORDER, NCCL_TOPO_FILE are NCCL's
// only), "Ranks R also:" and the variables those ranks have besides.
func writeNodeVars(b *bytes.Buffer, envs []Env) {
	if len(envs) == 0 {
		return
	}
	line := func(v Var) {
		q := strconv.Quote(v.Value)
		fmt.Fprintf(b, "  %s=%s\n", v.Name, q[1:len(q)-1])
	}
	inAll := func(v Var) bool {
		for _, e := range envs {
			if got, ok := e.Get(v.Name); !ok || got != v.Value {
				return false
			}
		}
		return true
	}
	for _, v := range envs[0].Vars {
		if !envPerRank[v.Name] && inAll(v) {
			line(v)
		}
	}
	type group struct {
		ranks []int
		vars  []Var
	}
	var groups []group
	for i, e := range envs {
		var own []Var
		for _, v := range e.Vars {
			if !envPerRank[v.Name] && !inAll(v) {
				own = append(own, v)
			}
		}
		if len(own) == 0 {
			continue
		}
		r := i
		if e.Rank != nil {
			r = *e.Rank
		}
		j := slices.IndexFunc(groups, func(g group) bool { return slices.Equal(g.vars, own) })
		if j < 0 {
			groups = append(groups, group{vars: own})
			j = len(groups) - 1
		}
		groups[j].ranks = append(groups[j].ranks, r)
	}
	for _, g := range groups {
		label := "Rank"
		if len(g.ranks) > 1 {
			label = "Ranks"
		}
		fmt.Fprintf(b, "%s %s also:\n", label, cpuset.Of(g.ranks...).String())
		for _, v := range g.vars {
			line(v)
		}
	}
}

// WriteRanks writes the all-ranks view for people: the node-level
// variables every rank shares (from the first env), then one row per rank
// with its GPU (index, bus id), NUMA node, CPUs, NICs, the GPU→NIC path
// class and UCX_NET_DEVICES.
func WriteRanks(w io.Writer, n topology.Node, envs []Env) error {
	var b bytes.Buffer
	b.WriteString("Every rank:\n")
	writeNodeVars(&b, envs)
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RANK\tGPU\tBUS ID\tNUMA\tCPUS\tNICS\tCLASS\tUCX_NET_DEVICES")
	dash := func(s string, ok bool) string {
		if !ok || s == "" {
			return "-"
		}
		return strconv.Quote(s)[1 : len(strconv.Quote(s))-1]
	}
	for _, e := range envs {
		rank, gpu, bus, class := "-", "-", "-", "-"
		if e.Rank != nil {
			rank = strconv.Itoa(*e.Rank)
		}
		if e.GPU != nil {
			gpu = strconv.Itoa(*e.GPU)
			for _, g := range n.GPUs {
				if g.Index == *e.GPU {
					bus = g.BusID
				}
			}
			for _, p := range n.Pairs {
				if p.GPU == *e.GPU && len(p.NICs) > 0 {
					class = p.Class.String()
				}
			}
		}
		numa, okN := e.Get("GPUAFFINITY_NUMA")
		cpus, okC := e.Get("GPUAFFINITY_CPUS")
		nics, okI := e.Get("GPUAFFINITY_NICS")
		ucx, okU := e.Get("UCX_NET_DEVICES")
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", rank, gpu, bus, dash(numa, okN), dash(cpus, okC), dash(nics, okI), class, dash(ucx, okU))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

package nccl

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestWriteShNames(t *testing.T) {
	for _, name := range []string{"", "1A", "A-B", "A B", "$(x)", "Ä"} {
		var b bytes.Buffer
		err := WriteSh(&b, []Var{{"OK", "1"}, {name, "v"}})
		if !errors.Is(err, ErrUnsafe) || b.Len() > 0 {
			t.Errorf("name %q: err %v, wrote %q", name, err, b.String())
		}
	}
	var b bytes.Buffer
	if err := WriteSh(&b, []Var{{"_a1", "it's"}}); err != nil || b.String() != "export _a1='it'\\''s'\n" {
		t.Errorf("got %q, %v", b.String(), err)
	}
	if err := WriteSh(&b, []Var{{"A", "nul\x00"}}); !errors.Is(err, ErrUnsafe) {
		t.Errorf("NUL value: %v", err)
	}
}

func TestWriteDotenv(t *testing.T) {
	var b bytes.Buffer
	vars := []Var{{"NCCL_IB_HCA", "=mlx5_0:1,mlx5_3:1"}, {"NCCL_SOCKET_IFNAME", "^docker,lo"}, {"NCCL_TOPO_FILE", "/run/gpu-affinity/nccl-topo.xml"}, {"E", ""}, {"P", "a@b%c+d"}}
	if err := WriteDotenv(&b, vars); err != nil {
		t.Fatal(err)
	}
	want := "NCCL_IB_HCA==mlx5_0:1,mlx5_3:1\nNCCL_SOCKET_IFNAME=^docker,lo\nNCCL_TOPO_FILE=/run/gpu-affinity/nccl-topo.xml\nE=\nP=a@b%c+d\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
	for _, v := range []string{"a b", "a'b", `a"b`, "$x", "a\nb", "a#b", `a\b`, "`id`", "a;b", "*"} {
		b.Reset()
		err := WriteDotenv(&b, []Var{{"GOOD", "1"}, {"BAD_VAR", v}})
		if !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), "BAD_VAR") || b.Len() > 0 {
			t.Errorf("value %q: err %v, wrote %q", v, err, b.String())
		}
	}
}

func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	e := Env{Rank: envIntp(2), GPU: envIntp(5), Vars: []Var{{"Z", "1"}, {"A", "a'\"b"}}}
	if err := WriteJSON(&b, e); err != nil {
		t.Fatal(err)
	}
	var got struct {
		LocalRank *int              `json:"local_rank"`
		GPU       *int              `json:"gpu"`
		Env       map[string]string `json:"env"`
		Warnings  []string          `json:"warnings"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, b.String())
	}
	if *got.LocalRank != 2 || *got.GPU != 5 || got.Env["A"] != "a'\"b" || got.Warnings == nil || len(got.Warnings) != 0 {
		t.Errorf("got %+v", got)
	}
	if strings.Index(b.String(), `"Z"`) > strings.Index(b.String(), `"A"`) {
		t.Errorf("env keys not in Vars order: %s", b.String())
	}
	b.Reset()
	if err := WriteJSON(&b, Env{Warnings: []string{"w"}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"local_rank": null`) || !strings.Contains(b.String(), `"gpu": null`) || !strings.Contains(b.String(), `"env": {}`) {
		t.Errorf("no-rank JSON: %s", b.String())
	}
	b.Reset()
	if err := WriteJSONRanks(&b, []Env{e, e}); err != nil {
		t.Fatal(err)
	}
	var arr []map[string]any
	if err := json.Unmarshal(b.Bytes(), &arr); err != nil || len(arr) != 2 {
		t.Errorf("ranks JSON %v: %s", err, b.String())
	}
}

func TestWriteRanks(t *testing.T) {
	n := fixtureNode(t, "oci-bm-gpu-h100")
	var envs []Env
	for r := range 8 {
		envs = append(envs, envMustBuild(t, n, EnvRequest{Rank: envIntp(r)}))
	}
	var b bytes.Buffer
	if err := WriteRanks(&b, n, envs); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Every rank:\n", "  NCCL_IB_GID_INDEX=3\n", "  NCCL_SOCKET_IFNAME==eth0\n",
		"RANK  GPU  BUS ID",
		"\n7     7    0000:d8:00.0  1     56-111,168-223  mlx5_16,mlx5_17  PXB    mlx5_16:1,mlx5_17:1\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "GPUAFFINITY_") {
		t.Errorf("per-rank variables in the node block:\n%s", out)
	}
}

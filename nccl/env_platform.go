package nccl

import (
	"slices"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/topology"
)

// platformSetting is one variable a platform publishes for its fabric,
// with where it publishes it.
type platformSetting struct {
	Var
	Source string // where the platform publishes it
}

// ociSettings are OCI's RoCE QoS and queue-pair settings for its GPU
// shapes' RDMA cluster network (oracle-quickstart/oci-hpc
// playbooks/roles/nccl-conf/templates/{h100,h200,b200}, the
// samples/gpu/nccl_run_allreduce*.sbatch jobs).
var ociSettings = []platformSetting{
	{Var{"NCCL_IB_QPS_PER_CONNECTION", "1"}, ociSource},
	{Var{"NCCL_IB_SPLIT_DATA_ON_QPS", "0"}, ociSource},
	{Var{"NCCL_IB_TC", "41"}, ociSource},
	{Var{"NCCL_IB_SL", "0"}, ociSource},
	{Var{"NCCL_IB_TIMEOUT", "22"}, ociSource},
}

const ociSource = "oracle-quickstart/oci-hpc@b5285a6 playbooks/roles/nccl-conf/templates/h100; samples/gpu/nccl_run_allreduce_H100.sbatch@d8df359"

// gibSettings are Google's gIB profile, the values of
// /usr/local/gib/scripts/set_nccl_env.sh as Google's own a3-ultragpu-8g
// NeMo Dockerfile repeats them (GoogleCloudPlatform/cluster-toolkit
// examples/machine-learning/a3-ultragpu-8g); NCCL_NET=gIB from its
// run-nccl-tests.sh.
var gibSettings = []platformSetting{
	{Var{"NCCL_NET", "gIB"}, gibSource},
	{Var{"NCCL_CROSS_NIC", "0"}, gibSource},
	{Var{"NCCL_NET_GDR_LEVEL", "PIX"}, gibSource},
	{Var{"NCCL_P2P_NET_CHUNKSIZE", "131072"}, gibSource},
	{Var{"NCCL_NVLS_CHUNKSIZE", "524288"}, gibSource},
	{Var{"NCCL_IB_ADAPTIVE_ROUTING", "1"}, gibSource},
	{Var{"NCCL_IB_QPS_PER_CONNECTION", "4"}, gibSource},
	{Var{"NCCL_IB_TC", "52"}, gibSource},
	{Var{"NCCL_IB_FIFO_TC", "84"}, gibSource},
}

const gibSource = "GoogleCloudPlatform/cluster-toolkit@4f04afc examples/machine-learning/a3-ultragpu-8g (nccl-tests/run-nccl-tests.sh, the NeMo Dockerfile's copy of set_nccl_env.sh)"

// gibTuners are the tuner configurations of Google's gIB installation by
// GPU: a3-ultragpu (H200) and a4-highgpu (B200).
var gibTuners = map[string]string{
	"H200": "/usr/local/gib/configs/tuner_config_a3u.txtpb",
	"B200": "/usr/local/gib/configs/tuner_config_a4.txtpb",
}

// platform adds the settings the node's platform publishes for its fabric;
// one the caller has set already is left out.
func (b *envBuilder) platform(req EnvRequest, roce []topology.NIC, gib bool) {
	n := b.n
	var settings []platformSetting
	switch {
	case n.Platform.Cloud == topology.CloudOCI && len(roce) > 0:
		settings = ociSettings
	case gib && !slices.Contains(n.NetPlugins, "gIB"):
		b.warn("Google Cloud with RoCE compute NICs, but Google's gIB NCCL plugin is not installed (no /usr/local/gib/scripts/set_nccl_env.sh): NCCL_NET=gIB and Google's profile not set; NCCL uses its own IB transport")
	case gib:
		settings = slices.Clone(gibSettings)
		if t := gibTuner(n); t != "" {
			settings = append(settings, platformSetting{Var{"NCCL_TUNER_CONFIG_PATH", t}, gibSource})
		} else {
			b.warn("gIB: no tuner configuration known for these GPUs (a3-ultragpu H200, a4 B200): NCCL_TUNER_CONFIG_PATH not set")
		}
	}
	for _, st := range settings {
		if req.Preset != nil {
			if _, ok := req.Preset(st.Name); ok {
				continue
			}
		}
		b.set(st.Name, st.Value)
	}
}

// gibTuner is the gIB tuner configuration for the node's GPUs; "" when
// they are none of the known ones or not all alike.
func gibTuner(n topology.Node) string {
	t := ""
	for _, g := range n.GPUs {
		var this string
		for model, path := range gibTuners {
			if strings.Contains(g.Model, model) {
				this = path
			}
		}
		if this == "" || (t != "" && this != t) {
			return ""
		}
		t = this
	}
	return t
}

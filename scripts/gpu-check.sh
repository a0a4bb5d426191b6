#!/usr/bin/env bash
# gpu-check.sh: check a prebuilt gpuaffinity binary against a live NVIDIA
# GPU host. The steps are:
#   1. topo beside nvidia-smi topo -m (every GPU-GPU and GPU-NIC class)
#   2. snapshot, then topo --root <snapshot> -o json == live topo -o json
#   3. nccl-topo loaded by NCCL (NCCL_TOPO_FILE): no WARN, attributes kept
#   4. check --interval 1s -o json: verdict, failed and skipped ids
#   5. agent on a free localhost port: /readyz, three timed /metrics scrapes
#   6. storage: topo's NVMe list against /sys/class/nvme, the GDS view, cufile -f -
#   7. NVLink fabric: NVML's fabric and platform answers as topo reads them,
#      beside nvidia-smi's fabric.* query fields, and the IMEX view
#   8. the fleet series of step 5's agent (docs/fleet.md): placement, layout
#   9. the job audit: a real CUDA process pinned with taskset to its GPU's
#      CPUs, then to CPUs off them; gpuaffinity audit must say aligned, then
#      misaligned (and the agent's gpuaffinity_gpu_processes, where it has
#      --collector.jobs)
# Every step prints PASS/FAIL/SKIP and its wall time. The script ends with a
# summary and exits 1 if any step failed, 2 if it cannot run here. Details:
# scripts/gpu-check.md.
#
# usage: scripts/gpu-check.sh [--demo [NAME]] [--strict-health] [BINARY]
set -uo pipefail

PROG=${0##*/}

usage() {
  cat <<'EOF'
usage: gpu-check.sh [options] [BINARY]

Checks gpuaffinity on a live NVIDIA GPU host: topo against nvidia-smi topo -m,
snapshot replay, the NCCL topology file inside NCCL, check, the agent's
/metrics, and audit's verdicts on a CUDA process pinned on and off its GPU's
CPUs. Each step prints PASS/FAIL/SKIP and its time in ms. At the end comes
a summary. Exit status: 0 all passed or skipped, 1 a step failed, 2 cannot
run (no nvidia-smi, no binary, bad option).

  BINARY            the gpuaffinity binary (default: $GPUAFFINITY, else
                    ./bin/gpuaffinity)
  --demo [NAME]     no GPU needed: run against the embedded machine NAME
                    (default dgx-h100; see `gpuaffinity topo --demo list`).
                    Step 1 compares topo's own nvidia-smi-style table with
                    its JSON, step 2 snapshots the demo machine's root, step 3
                    self-tests the XML comparer and skips NCCL, steps 4-5 run
                    with --demo, step 9 runs audit --demo and skips.
  --strict-health   an unhealthy node (check exit 1, /readyz 503) fails
                    steps 4 and 5. By default those steps check that
                    gpuaffinity ran correctly and only report the verdict.
  -h, --help        this text

Environment:
  GPUAFFINITY       the binary, when BINARY is not given
  OUT               where outputs and logs go (default: a new mktemp -d folder)
  NCCL_TESTS_BIN    all_reduce_perf to use in step 3 (default: on PATH, else
                    looked for under /usr/local and /opt)
EOF
}

die() { echo "$PROG: $*" >&2; exit 2; }

# ---- options -----------------------------------------------------------------
DEMO=""
STRICT_HEALTH=0
BIN_ARG=""
while (($#)); do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --demo=*) DEMO=${1#--demo=}; [[ -n $DEMO ]] || die "--demo= needs a machine name"; shift ;;
    --demo)
      shift
      # An optional machine name: a plain word that is not a file.
      if (($#)) && [[ $1 =~ ^[a-z0-9][a-z0-9-]*$ && ! -e $1 ]]; then DEMO=$1; shift; else DEMO=dgx-h100; fi ;;
    --strict-health) STRICT_HEALTH=1; shift ;;
    --) shift; break ;;
    -*) echo "$PROG: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) [[ -z $BIN_ARG ]] || die "one BINARY only (got $BIN_ARG and $1)"; BIN_ARG=$1; shift ;;
  esac
done
if (($#)); then
  [[ -z $BIN_ARG && $# -eq 1 ]] || die "unexpected arguments: $*"
  BIN_ARG=$1
fi
BIN=${BIN_ARG:-${GPUAFFINITY:-./bin/gpuaffinity}}

# ---- preconditions (exit 2) --------------------------------------------------
command -v timeout >/dev/null 2>&1 || die "timeout (coreutils) not found: it bounds every command"
[[ -f $BIN && -x $BIN ]] || die "gpuaffinity binary not found or not executable: $BIN (give its path as the first argument or \$GPUAFFINITY; build one with: go build -o bin/gpuaffinity ./cmd/gpuaffinity)"
[[ $BIN == */* ]] || BIN=./$BIN
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
if [[ -z $DEMO ]] && ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "$PROG: nvidia-smi not found on PATH: this script checks gpuaffinity on a live NVIDIA GPU host." >&2
  echo "$PROG: run it on one (with the driver installed), or use --demo [NAME] to exercise the plumbing without a GPU." >&2
  exit 2
fi

if [[ -z ${OUT:-} ]]; then
  OUT=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX") || die "mktemp -d failed"
fi
mkdir -p "$OUT" || die "cannot create output directory $OUT"
OUT=$(cd "$OUT" && pwd)

PY=$(command -v python3 || true)
READY_TIMEOUT_S=90   # the agent's first discovery and health gate
CURL=$(command -v curl || true)

# ---- timing, running, steps --------------------------------------------------
now_ms() {
  local t=${EPOCHREALTIME:-}
  if [[ -n $t ]]; then
    t=${t//[.,]/}            # microseconds (the separator follows the locale)
    echo $((10#$t / 1000))
  else
    date +%s%3N
  fi
}

RC=0 MS=0
# run NAME SECONDS CMD...: runs CMD under timeout, stdout to $OUT/NAME.out,
# stderr to $OUT/NAME.err; sets RC and MS and prints the command line.
run() {
  local name=$1 secs=$2; shift 2
  local t0 note=""
  t0=$(now_ms)
  timeout -k 5 "$secs" "$@" >"$OUT/$name.out" 2>"$OUT/$name.err" </dev/null
  RC=$?
  MS=$(($(now_ms) - t0))
  ((RC == 124 || RC == 137)) && note=" TIMED OUT after ${secs}s"
  printf '  $ %s\n    rc=%d, %d ms%s  (out: %s.out, err: %s.err)\n' "$(quote "$@")" "$RC" "$MS" "$note" "$name" "$name"
}

quote() { local s; s=$(printf '%q ' "$@"); echo "${s% }"; }

# indent FILE [MAX]: print a file indented, at most MAX lines (default 40).
indent() {
  local f=$1 max=${2:-40} n
  [[ -s $f ]] || return 0
  n=$(wc -l <"$f")
  head -n "$max" "$f" | sed 's/^/    | /'
  ((n > max)) && echo "    | ... ($((n - max)) more lines in ${f#"$OUT"/})"
  return 0
}

S_ID=() S_TITLE=() S_STATUS=() S_MS=() S_NOTE=()
CUR_ID="" CUR_TITLE="" CUR_T0=0
step_begin() {
  CUR_ID=$1 CUR_TITLE=$2 CUR_T0=$(now_ms)
  printf '\n=== Step %s: %s ===\n' "$CUR_ID" "$CUR_TITLE"
}
# step_end STATUS NOTE
step_end() {
  local ms=$(($(now_ms) - CUR_T0))
  printf -- '--- Step %s: %s (%d ms)%s\n' "$CUR_ID" "$1" "$ms" "${2:+: $2}"
  S_ID+=("$CUR_ID") S_TITLE+=("$CUR_TITLE") S_STATUS+=("$1") S_MS+=("$ms") S_NOTE+=("$2")
}

# ---- the agent (background; stopped on exit) -----------------------------------
AGENT_PIDS=()
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  local pid i
  for pid in "${AGENT_PIDS[@]+"${AGENT_PIDS[@]}"}"; do
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null
      for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      # timeout(1) leads its own process group: SIGKILL the group, agent included.
      kill -0 "$pid" 2>/dev/null && { kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null; }
      wait "$pid" 2>/dev/null
    fi
  done
}
trap cleanup EXIT
trap 'echo "$PROG: interrupted" >&2; exit 130' INT
trap 'echo "$PROG: terminated" >&2; exit 143' TERM

free_port() {
  if [[ -n $PY ]]; then
    timeout 10 "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()' && return 0
  fi
  local p i
  for ((i = 0; i < 50; i++)); do
    p=$((20000 + RANDOM % 40000))
    timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$p" 2>/dev/null || { echo "$p"; return 0; }
  done
  return 1
}

AGENT_PID="" AGENT_PORT=""
# agent_start NAME STATE_DIR [extra env assignments...] -- [agent flags...]
agent_start() {
  local name=$1 state=$2; shift 2
  local envs=()
  while (($#)) && [[ $1 != -- ]]; do envs+=("$1"); shift; done
  [[ ${1:-} == -- ]] && shift
  AGENT_PORT=$(free_port) || { echo "  no free localhost port found"; return 1; }
  mkdir -p "$state"
  local cmd=(timeout -k 5 600 "$BIN" agent --state-dir "$state" --rescan 0
    --web.listen-address "127.0.0.1:$AGENT_PORT" --log-level info "$@")
  printf '  $ %s%s &\n' "${envs[*]+"${envs[*]} "}" "$(quote "${cmd[@]}")"
  env "${envs[@]+"${envs[@]}"}" "${cmd[@]}" >"$OUT/$name.log" 2>&1 </dev/null &
  AGENT_PID=$!
  AGENT_PIDS+=("$AGENT_PID")
  echo "    pid $AGENT_PID, port $AGENT_PORT, log ${name}.log"
}

# agent_stop: SIGTERM, wait up to 10 s; sets RC (the agent's exit status) and MS.
agent_stop() {
  local t0 i
  t0=$(now_ms)
  RC=0
  if kill -0 "$AGENT_PID" 2>/dev/null; then
    kill -TERM "$AGENT_PID" 2>/dev/null
    for ((i = 0; i < 100; i++)); do kill -0 "$AGENT_PID" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$AGENT_PID" 2>/dev/null; then
      echo "  agent did not stop within 10 s of SIGTERM: SIGKILL to its process group"
      kill -KILL -- "-$AGENT_PID" 2>/dev/null || kill -KILL "$AGENT_PID" 2>/dev/null
    fi
  fi
  wait "$AGENT_PID" 2>/dev/null
  RC=$?
  MS=$(($(now_ms) - t0))
}

# ---- python helpers (parsing and comparing) -----------------------------------
HELPER=$OUT/gpu_check_helpers.py
cat >"$HELPER" <<'PYEOF'
"""Helpers of scripts/gpu-check.sh, written out by it at each run."""
import json
import re
import sys
import xml.etree.ElementTree as ET

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


# ---- step 1: nvidia-smi topo -m against topo -o json ----------------------------
def parse_smi(text):
    lines = [ANSI.sub("", l).rstrip() for l in text.splitlines()]
    hdr = next((i for i, l in enumerate(lines) if re.search(r"(^|\s)GPU0(\s|$)", l)), None)
    if hdr is None:
        raise ValueError("no header row naming GPU0")
    rows = []
    for l in lines[hdr + 1:]:
        if not l.strip():
            break
        toks = l.split()
        rows.append((toks[0], toks[1:]))
    labels = {r[0] for r in rows}
    cols = []
    for tok in lines[hdr].split():
        if tok not in labels:
            break
        cols.append(tok)
    if set(cols) != labels:
        raise ValueError("header columns %s do not match the row labels %s" % (cols, sorted(labels)))
    matrix, extra = {}, {}
    for lab, toks in rows:
        if len(toks) < len(cols):
            raise ValueError("row %s has %d cells, want %d" % (lab, len(toks), len(cols)))
        for j, c in enumerate(cols):
            matrix[(lab, c)] = toks[j]
        extra[lab] = toks[len(cols):]
    legend = {}
    for l in lines[hdr + 1 + len(rows):]:
        m = re.match(r"^\s*(NIC\d+)\s*:\s*(\S+)", l)
        if m:
            legend[m.group(1)] = m.group(2)
    return cols, matrix, extra, legend


def smi_value(v):
    v = v.strip().upper()
    return "SYS" if v == "SOC" else v  # SOC: the old name of SYS


def cmd_smi(smi_path, json_path):
    with open(smi_path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    with open(json_path) as f:
        node = json.load(f)
    try:
        cols, matrix, extra, legend = parse_smi(text)
    except (ValueError, IndexError) as e:
        print("  cannot parse the nvidia-smi matrix: %s" % e)
        return 3
    smi_gpus, smi_nics = [], []
    for c in cols:
        m = re.fullmatch(r"GPU(\d+)", c)
        if m:
            smi_gpus.append((c, int(m.group(1))))
        elif re.fullmatch(r"NIC\d+", c):
            smi_nics.append((c, legend.get(c, c)))
        else:  # older nvidia-smi names the column by its RDMA device
            smi_nics.append((c, c))
    gpus = node.get("gpus") or []
    nics = {n["name"]: n for n in node.get("nics") or []}
    by_nvml = {g["nvml_index"]: g for g in gpus if g.get("nvml_index") is not None}
    notes = []
    if gpus and not by_nvml:
        notes.append("gpuaffinity has no NVML indices: GPUi of nvidia-smi taken as gpuaffinity index i")
        by_nvml = {g["index"]: g for g in gpus}
    dis = []
    print("  nvidia-smi: %d GPUs, %d NICs%s" % (len(smi_gpus), len(smi_nics),
          (" (" + ", ".join("%s=%s" % c for c in smi_nics) + ")") if smi_nics else ""))
    print("  gpuaffinity: %d GPUs, %d NICs (%d with an RDMA device)" % (
        len(gpus), len(nics), sum(1 for n in nics.values() if n.get("rdma_device"))))

    def ours(n):
        g = by_nvml.get(n)
        return None if g is None else g["index"]

    for lab, n in smi_gpus:
        if ours(n) is None:
            dis.append("%s: nvidia-smi has GPU %d, gpuaffinity has no GPU with nvml_index %d" % (lab, n, n))
    smi_idx = {n for _, n in smi_gpus}
    for n, g in sorted(by_nvml.items()):
        if n not in smi_idx:
            dis.append("gpuaffinity GPU %d (%s, nvml_index %s) is not in nvidia-smi's matrix" % (g["index"], g.get("bus_id"), n))
    smi_nic_names = {name for _, name in smi_nics}
    for lab, name in smi_nics:
        if name not in nics:
            dis.append("%s (%s): nvidia-smi has this NIC, gpuaffinity has no NIC named %s" % (lab, name, name))
    not_in_smi = [n for n in sorted(nics) if nics[n].get("rdma_device") and n not in smi_nic_names]
    if not_in_smi:
        notes.append("RDMA NICs of gpuaffinity that nvidia-smi does not list (not counted): " + ", ".join(not_in_smi))

    gp = {(p["a"], p["b"]): p for p in node.get("gpu_paths") or []}
    n_gg = 0
    for i, (la, na) in enumerate(smi_gpus):
        for lb, nb in smi_gpus[i + 1:]:
            ia, ib = ours(na), ours(nb)
            if ia is None or ib is None:
                continue
            n_gg += 1
            v1, v2 = smi_value(matrix[(la, lb)]), smi_value(matrix[(lb, la)])
            p = gp.get((min(ia, ib), max(ia, ib)))
            if p is None:
                dis.append("%s-%s: nvidia-smi %s, gpuaffinity has no gpu_paths entry for GPUs %d,%d" % (la, lb, v1, ia, ib))
                continue
            want = "NV%d" % p["nvlinks"] if p.get("nvlinks") else p["class"]
            if v1 != want or v2 != want:
                smi = v1 if v1 == v2 else "%s / %s (%s-%s / %s-%s)" % (v1, v2, la, lb, lb, la)
                dis.append("%s-%s: nvidia-smi %s, gpuaffinity %s (gpu_paths a=%d b=%d: class %s, nvlinks %d)" % (
                    la, lb, smi, want, p["a"], p["b"], p["class"], p.get("nvlinks", 0)))
    paths = {(p["gpu"], p["nic"]): p for p in node.get("paths") or []}
    n_gn = 0
    for lg, ng in smi_gpus:
        ig = ours(ng)
        if ig is None:
            continue
        for ln, name in smi_nics:
            if name not in nics:
                continue
            n_gn += 1
            v1, v2 = smi_value(matrix[(lg, ln)]), smi_value(matrix[(ln, lg)])
            p = paths.get((ig, name))
            if p is None:
                dis.append("%s-%s (%s): nvidia-smi %s, gpuaffinity has no path GPU %d to %s" % (lg, ln, name, v1, ig, name))
                continue
            if v1 != p["class"] or v2 != p["class"]:
                smi = v1 if v1 == v2 else "%s / %s (%s-%s / %s-%s)" % (v1, v2, lg, ln, ln, lg)
                dis.append("%s-%s (%s): nvidia-smi %s, gpuaffinity %s%s" % (
                    lg, ln, name, smi, p["class"], " (inferred)" if p.get("inferred") else ""))
    # CPU and NUMA affinity columns: information only.
    for lg, ng in smi_gpus:
        g = by_nvml.get(ng)
        ex = extra.get(lg) or []
        if g is None or not ex:
            continue
        loc = g.get("locality") or {}
        aff = g.get("nvml_cpu_affinity") or loc.get("cpus") or ""
        if ex[0] not in (aff, loc.get("cpus")):
            notes.append("%s CPU Affinity: nvidia-smi %s, gpuaffinity nvml_cpu_affinity %r, locality.cpus %r (not counted)" % (
                lg, ex[0], g.get("nvml_cpu_affinity"), loc.get("cpus")))
        if len(ex) > 1 and ex[1] != "N/A" and re.fullmatch(r"\d+", ex[1]) and loc.get("node") is not None and int(ex[1]) != loc["node"]:
            notes.append("%s NUMA Affinity: nvidia-smi %s, gpuaffinity locality.node %s (not counted)" % (lg, ex[1], loc["node"]))
    print("  compared %d GPU-GPU pairs and %d GPU-NIC pairs (both directions of nvidia-smi's matrix)" % (n_gg, n_gn))
    for n in notes:
        print("  note: " + n)
    for d in dis:
        print("  DISAGREE " + d)
    print("  disagreements: %d" % len(dis))
    if not smi_gpus:
        print("  nvidia-smi's matrix has no GPU")
        return 1
    return 1 if dis else 0


# ---- step 2: JSON equality --------------------------------------------------------
def label(item, i):
    if isinstance(item, dict):
        for k in ("bus_id", "name", "id", "index"):
            if k in item and not isinstance(item[k], (dict, list)):
                return "[%d %s=%s]" % (i, k, item[k])
        if "gpu" in item and "nic" in item:
            return "[%d gpu=%s nic=%s]" % (i, item["gpu"], item["nic"])
        if "a" in item and "b" in item:
            return "[%d a=%s b=%s]" % (i, item["a"], item["b"])
    return "[%d]" % i


def walk(a, b, path, out):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            p = path + "." + k if path else k
            if k not in a:
                out.append("%s: missing on the left, right has %s" % (p, json.dumps(b[k])[:120]))
            elif k not in b:
                out.append("%s: left has %s, missing on the right" % (p, json.dumps(a[k])[:120]))
            else:
                walk(a[k], b[k], p, out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append("%s: %d entries on the left, %d on the right" % (path, len(a), len(b)))
        for i, (x, y) in enumerate(zip(a, b)):
            walk(x, y, path + label(x, i), out)
    elif a != b:
        out.append("%s: %s != %s" % (path, json.dumps(a)[:120], json.dumps(b)[:120]))


def cmd_jsondiff(left, right, max_lines="40"):
    """left: the live topo JSON; right: the replayed one. 0 equal, 1 differ."""
    with open(left, "rb") as f:
        lb = f.read()
    with open(right, "rb") as f:
        rb = f.read()
    a, b = json.loads(lb), json.loads(rb)
    na, nb = (a.get("nvml") or {}), (b.get("nvml") or {})
    normalized = False
    # Documented (docs/topology-json.md, nvml.source; docs/nvml-replay.md):
    # "live" is the driver's NVML, "replay" is DIR/nvml.json under --root,
    # so a snapshot read back says "replay" where the node said "live".
    if na.get("source") == "live" and nb.get("source") == "replay":
        na["source"] = nb["source"] = "live|replay (normalized)"
        normalized = True
    out = []
    walk(a, b, "", out)
    if normalized:
        print("  normalized: nvml.source live (left) vs replay (right), documented as where NVML's answers came from")
    if not out:
        if lb == rb:
            print("  identical (byte for byte)")
        else:
            print("  identical after the normalization above")
        return 0
    for line in out[: int(max_lines)]:
        print("  DIFF " + line)
    if len(out) > int(max_lines):
        print("  ... %d more differences" % (len(out) - int(max_lines)))
    print("  differences: %d" % len(out))
    return 1


# ---- step 3: our NCCL XML against NCCL's dump -------------------------------------
def index_xml(root):
    """key -> (element, parent key) for every element; the first of a key wins."""
    out, dups = {}, []

    def key_of(e, chain):
        pci = next((k for k in reversed(chain) if k[0] == "pci"), None)
        a = e.attrib
        if e.tag == "pci" and "busid" in a:
            return ("pci", a["busid"].lower())
        if e.tag == "cpu" and "numaid" in a:
            return ("cpu", a["numaid"])
        if e.tag == "net":
            return ("net", a.get("name") or "dev=" + a.get("dev", "?"))
        if e.tag in ("gpu", "nic"):
            return (e.tag, pci[1] if pci else "?")
        if e.tag in ("nvlink", "c2c", "pcilink"):
            return (e.tag, chain[-1] if chain else None, a.get("target", ""))
        if e.tag == "system":
            return ("system",)
        return (e.tag, chain[-1] if chain else None, len(chain))

    def rec(e, chain):
        k = key_of(e, chain)
        if k in out:
            dups.append(k)
        else:
            out[k] = (e, chain[-1] if chain else None)
        for c in e:
            if isinstance(c.tag, str):
                rec(c, chain + [k])

    rec(root, [])
    return out, dups


def fmt_key(k):
    if k is None:
        return "(top)"
    if k[0] == "pci":
        return "pci busid=%s" % k[1]
    if k[0] == "cpu":
        return "cpu numaid=%s" % k[1]
    if k[0] == "net":
        return "net name=%s" % k[1]
    if k[0] in ("gpu", "nic"):
        return "%s under pci %s" % k
    if k[0] == "system":
        return "system"
    return "%s under %s%s" % (k[0], fmt_key(k[1]), (" target=%s" % k[2]) if len(k) > 2 and k[2] else "")


def cmd_nccl(ours_path, dump_path):
    try:
        ours = ET.parse(ours_path).getroot()
    except ET.ParseError as e:
        print("  our XML does not parse: %s" % e)
        return 3
    try:
        dump = ET.parse(dump_path).getroot()
    except ET.ParseError as e:
        print("  NCCL's dump does not parse: %s" % e)
        return 3
    oi, odups = index_xml(ours)
    di, _ = index_xml(dump)
    dis, missing, attrs = [], [], 0
    for k in odups:
        dis.append("our XML has %s twice (NCCL takes the first)" % fmt_key(k))
    for k, (e, parent) in oi.items():
        if k not in di:
            missing.append(fmt_key(k))
            continue
        de, dparent = di[k]
        for name, val in e.attrib.items():
            attrs += 1
            got = de.attrib.get(name)
            if got is None:
                dis.append("%s: we set %s=%r, NCCL's dump has no %s" % (fmt_key(k), name, val, name))
            elif got != val:
                dis.append("%s: we set %s=%r, NCCL's dump has %r" % (fmt_key(k), name, val, got))
        if parent != dparent and (parent is None) == (dparent is None):
            dis.append("%s: ours is under %s, NCCL's under %s" % (fmt_key(k), fmt_key(parent), fmt_key(dparent)))
    matched = len(oi) - len(missing)
    print("  our elements: %d, found in NCCL's dump: %d, attributes compared: %d" % (len(oi), matched, attrs))
    if missing:
        print("  not in NCCL's dump (NCCL trims branches with no GPU or NIC of this communicator; not counted): "
              + "; ".join(missing[:20]) + (" ..." if len(missing) > 20 else ""))
    for d in dis:
        print("  DISAGREE " + d)
    print("  disagreements: %d" % len(dis))
    if matched == 0:
        print("  no element of ours is in NCCL's dump")
        return 1
    return 1 if dis else 0


# ---- step 4: check -o json ------------------------------------------------------
def cmd_check(json_path, rc):
    rc = int(rc)
    try:
        with open(json_path) as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        print("  check's output is not JSON: %s" % e)
        return 1
    bad = []
    if d.get("schema") != "gpuaffinity.health/v1":
        bad.append("schema is %r, want gpuaffinity.health/v1" % d.get("schema"))
    res = d.get("results") or []
    by = {}
    for r in res:
        v = r.get("verdict")
        if v not in ("pass", "warn", "fail", "skip"):
            bad.append("check %s has verdict %r" % (r.get("id"), v))
        by.setdefault(v, []).append(r)
    healthy = d.get("healthy")
    if rc == 0 and healthy is not True:
        bad.append("exit 0 but healthy=%r" % healthy)
    if rc == 1 and healthy is not False:
        bad.append("exit 1 but healthy=%r" % healthy)
    if rc not in (0, 1):
        bad.append("exit %d (2: could not check)" % rc)
    if (healthy is True) == bool(by.get("fail")):
        bad.append("healthy=%r with %d failed checks" % (healthy, len(by.get("fail", []))))
    print("  verdict: %s, healthy: %s, profile: %s, %d checks (%s)" % (
        d.get("verdict"), healthy, d.get("profile"), len(res),
        ", ".join("%d %s" % (len(by.get(v, [])), v) for v in ("pass", "warn", "fail", "skip"))))
    for v in ("fail", "warn", "skip"):
        for r in by.get(v, []):
            print("  %-4s %-20s %s" % (v, r.get("id"), r.get("reason", "")))
    for b in bad:
        print("  INCONSISTENT " + b)
    if bad:
        return 1
    return 0 if healthy else 4


def cmd_count_gpus(json_path):
    with open(json_path) as f:
        print(len(json.load(f).get("gpus") or []))
    return 0


# ---- step 6: the storage layer ---------------------------------------------------
def cmd_storage(topo_json, sysfs_list, cufile_json):
    """topo's storage section against the kernel's own NVMe list (name and
    PCI address from /sys/class/nvme), and cufile -f - parsed as JSON."""
    with open(topo_json) as f:
        n = json.load(f)
    st = n.get("storage") or {}
    ours = {d["name"]: d.get("bus_id", "") for d in st.get("nvme") or []}
    kernel = {}
    with open(sysfs_list) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3:
                kernel[parts[0]] = parts[2].lower() if parts[1] == "pcie" else ""
    bad = []
    for name, addr in sorted(kernel.items()):
        if name not in ours:
            bad.append("%s (%s) is in /sys/class/nvme, not in topo" % (name, addr or "fabrics"))
        elif addr and ours[name] != addr:
            bad.append("%s: topo says %s, the kernel %s" % (name, ours[name], addr))
    for name in sorted(set(ours) - set(kernel)):
        bad.append("%s is in topo, not in /sys/class/nvme" % name)
    for d in st.get("nvme") or []:
        link = d.get("link") or {}
        print("  %-7s %-13s %-9s %-28s x%s/x%s %s" % (d["name"], d.get("bus_id", "-"), d.get("use"), d.get("model", "")[:28],
                                                 link.get("width", "?"), link.get("max_width", "?"), link.get("speed", "")))
    for m in st.get("mounts") or []:
        print("  mount %-24s %-7s nics=%s (%s)" % (m["target"], m["kind"], ",".join(m.get("nics") or []) or "-", m.get("nics_reason", "")))
    gds = st.get("gds") or {}
    p2p = gds.get("p2pdma") or {}
    print("  GDS: nvidia-fs %s%s; P2PDMA %s%s; IOMMU %s" % (
        "loaded" if gds.get("nvidia_fs") else "not loaded",
        " (%s)" % gds["nvidia_fs_version"] if gds.get("nvidia_fs_version") else "",
        "supported" if p2p.get("supported") else "not supported",
        "" if p2p.get("supported") else " (" + "; ".join(p2p.get("missing") or []) + ")",
        (gds.get("iommu") or {}).get("mode")))
    for p in st.get("pairs") or []:
        print("  GPU %s: NVMe %s (%s), storage NICs %s (%s)" % (p["gpu"], ",".join(p["nvme"]) or "-", p["nvme_class"],
                                                              ",".join(p["nics"]) or "-", p["nic_class"]))
    if cufile_json:
        try:
            with open(cufile_json) as f:
                c = json.load(f)
            print("  cufile: properties.use_pci_p2pdma=%s rdma_dynamic_routing=%s, fs keys %s" % (
                c.get("properties", {}).get("use_pci_p2pdma"), c.get("properties", {}).get("rdma_dynamic_routing"),
                ",".join(sorted(c.get("fs", {})))))
        except (OSError, ValueError) as e:
            bad.append("cufile -f - is not JSON: %s" % e)
    for b in bad:
        print("  DIFF " + b)
    return 1 if bad else 0


def cmd_fabric(topo_json, smi_csv):
    """topo's per-GPU fabric (GetGpuFabricInfo_v4/v1) and platform
    (GetPlatformInfo) answers printed, and compared with nvidia-smi's
    fabric.state/status/clusterUuid/cliqueId where it printed them. A GPU
    outside any fabric reads N/A there and has no fabric in topo: both are
    the answer NOT_SUPPORTED, which is recorded, not a failure."""
    with open(topo_json) as f:
        n = json.load(f)
    states = {1: "Not Started", 2: "In Progress", 3: "Completed"}
    smi = {}
    if smi_csv:
        with open(smi_csv) as f:
            for line in f:
                parts = [p.strip() for p in line.split(",")]
                if len(parts) == 5:
                    smi[parts[0].lower().replace("00000000:", "0000:")] = parts[1:]
    bad = []
    for g in n.get("gpus") or []:
        fab, plat = g.get("fabric"), g.get("platform")
        if fab:
            print("  GPU %s %s: fabric state %s status %s cluster %s clique %s mask %s summary %s" % (
                g["index"], g["bus_id"], fab.get("state"), fab.get("status"), fab.get("cluster_uuid") or "(zero)",
                fab.get("clique_id"), fab.get("health_mask"), fab.get("health_summary")))
        else:
            print("  GPU %s %s: no fabric info (GetGpuFabricInfo: NOT_SUPPORTED or state 0)" % (g["index"], g["bus_id"]))
        if plat:
            print("    platform: chassis %s slot %s tray %s host %s module %s peer_type %s" % (
                plat.get("chassis_serial"), plat.get("slot"), plat.get("tray"), plat.get("host"), plat.get("module"), plat.get("peer_type")))
        else:
            print("    platform: none (GetPlatformInfo: NOT_SUPPORTED or absent)")
        row = smi.get(g["bus_id"].lower())
        if row is None:
            continue
        state, status, uuid, clique = row
        print("    nvidia-smi: fabric.state=%s status=%s clusterUuid=%s cliqueId=%s" % tuple(row))
        ours = states.get(fab["state"], str(fab["state"])) if fab else "N/A"
        if state not in ("[N/A]", "N/A", "[Not Supported]") and state != ours:
            bad.append("GPU %s: fabric state %s in topo, %s in nvidia-smi" % (g["index"], ours, state))
        if state in ("[N/A]", "N/A", "[Not Supported]") and fab:
            bad.append("GPU %s: topo has fabric state %s, nvidia-smi N/A" % (g["index"], ours))
        if fab and fab.get("cluster_uuid") and uuid.lower() != fab["cluster_uuid"].lower():
            bad.append("GPU %s: cluster uuid %s in topo, %s in nvidia-smi" % (g["index"], fab["cluster_uuid"], uuid))
    f = n.get("nvlink_fabric") or {}
    imex = f.get("imex") or {}
    print("  NVLink domains: %s; multi-node %s; IMEX major %s, channels %s, config %s" % (
        ["%s.%s:%s" % (d.get("cluster_uuid") or "-", d.get("clique_id"), d.get("gpus")) for d in f.get("domains") or []],
        f.get("multi_node"), imex.get("device_major"),
        ["%s%s" % (c["number"], " (" + c["problem"] + ")" if c.get("problem") else "") for c in imex.get("channels") or []],
        (imex.get("config") or {}).get("path")))
    for b in bad:
        print("  DIFF " + b)
    return 1 if bad else 0


# ---- step 9: the job audit ------------------------------------------------------
def parse_cpus(text):
    out = set()
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def fmt_cpus(cpus):
    cpus, out, i = sorted(cpus), [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else "%d-%d" % (cpus[i], cpus[j]))
        i = j + 1
    return ",".join(out)


def cmd_jobs_plan(topo_json):
    """The first GPU NVML lists with a UUID and local CPUs this script may
    run on: shell assignments of its index, UUID, local CPUs, the allowed
    ones among them (on) and the allowed CPUs not local to it (off)."""
    import os
    import shlex
    with open(topo_json) as f:
        n = json.load(f)
    allowed = os.sched_getaffinity(0)
    for g in n.get("gpus") or []:
        if g.get("nvml_index") is None or not g.get("uuid") or g.get("state", "ok") != "ok":
            continue
        local = parse_cpus((g.get("locality") or {}).get("cpus"))
        on = local & allowed
        if not on:
            continue
        print("J_GPU=%d J_UUID=%s J_LOCAL=%s J_ON=%s J_OFF=%s" % (
            g["index"], shlex.quote(g["uuid"]), shlex.quote(fmt_cpus(local)),
            shlex.quote(fmt_cpus(on)), shlex.quote(fmt_cpus(allowed - local))))
        return 0
    print("no GPU listed by NVML with a UUID and local CPUs this script may use (allowed %s)" % fmt_cpus(allowed),
          file=sys.stderr)
    return 1


def cmd_jobs_verdict(audit_json, pid, gpu, want):
    """Exit 0 when audit -o json lists pid on GPU gpu with verdict want, 1
    when it lists it otherwise or not at all, 3 when it does not list it
    and says some GPU's processes could not be listed."""
    with open(audit_json) as f:
        d = json.load(f)
    pid, gpu = int(pid), int(gpu)
    if d.get("schema") != "gpuaffinity.audit/v1":
        print("  schema is %r, want gpuaffinity.audit/v1" % d.get("schema"))
        return 1
    procs = d.get("processes") or []
    unread = d.get("unread") or []
    print("  audit lists %d GPU process(es)%s" % (len(procs), "; not listed: " + "; ".join(unread) if unread else ""))
    mine = [p for p in procs if p.get("pid") == pid]
    if not mine:
        print("  pid %d is not among them" % pid)
        return 3 if unread else 1
    p = mine[0]
    print("  pid %d %s: gpus %s, cpus %s, mems %s; the GPU's CPUs %s: %s (%s)" % (
        pid, p.get("command"), p.get("gpus"), p.get("cpus"), p.get("mems"), p.get("gpu_cpus"),
        p.get("verdict"), p.get("reason")))
    bad = []
    if gpu not in (p.get("gpus") or []):
        bad.append("on GPUs %s, want GPU %d" % (p.get("gpus"), gpu))
    if p.get("verdict") != want:
        bad.append("verdict %s, want %s" % (p.get("verdict"), want))
    for b in bad:
        print("  DIFF pid %d: %s" % (pid, b))
    return 1 if bad else 0


def main():
    cmds = {"smi": cmd_smi, "jsondiff": cmd_jsondiff, "nccl": cmd_nccl, "check": cmd_check,
            "count-gpus": cmd_count_gpus, "storage": cmd_storage, "fabric": cmd_fabric,
            "jobs-plan": cmd_jobs_plan, "jobs-verdict": cmd_jobs_verdict}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        print("usage: gpu_check_helpers.py %s ARGS..." % "|".join(cmds), file=sys.stderr)
        return 2
    try:
        return cmds[sys.argv[1]](*sys.argv[2:])
    except (OSError, ValueError, KeyError, TypeError) as e:
        print("  helper %s failed: %s: %s" % (sys.argv[1], type(e).__name__, e))
        return 3


if __name__ == "__main__":
    sys.exit(main())
PYEOF

py() { timeout -k 5 60 "$PY" "$HELPER" "$@"; }

DEMO_FLAGS=()
[[ -n $DEMO ]] && DEMO_FLAGS=(--demo "$DEMO")

echo "gpu-check: binary $BIN"
echo "gpu-check: $("$BIN" version 2>/dev/null | head -n 1)"
echo "gpu-check: output in $OUT"
[[ -n $DEMO ]] && echo "gpu-check: DEMO mode, machine $DEMO (no GPU used; nvidia-smi and NCCL are not run)"
[[ -z $PY ]] && echo "gpu-check: python3 not found: the comparisons of steps 1, 3 and 4 are skipped"
echo "gpu-check: host $(hostname 2>/dev/null), $(date -u +%Y-%m-%dT%H:%M:%SZ)"

# ---- step 1: topo beside nvidia-smi topo -m --------------------------------------
step1() {
  local st=PASS note=""
  if [[ -n $DEMO ]]; then
    step_begin 1 "topo vs its own table (demo: stands in for nvidia-smi topo -m)"
    run step1-topo-table 60 "$BIN" topo ${DEMO_FLAGS[@]+"${DEMO_FLAGS[@]}"}
    local smi=$OUT/step1-topo-table.out
  else
    step_begin 1 "gpuaffinity topo vs nvidia-smi topo -m"
    run step1-nvidia-smi 60 nvidia-smi topo -m
    local smi=$OUT/step1-nvidia-smi.out smi_rc=$RC smi_ms=$MS
    if ((smi_rc != 0)); then
      indent "$OUT/step1-nvidia-smi.err" 10; indent "$smi" 10
      step_end FAIL "nvidia-smi topo -m failed (rc=$smi_rc, $smi_ms ms)"; return
    fi
    run step1-topo-table 60 "$BIN" topo
  fi
  local tab_rc=$RC tab_ms=$MS
  ((tab_rc == 0)) || { indent "$OUT/step1-topo-table.err" 10; st=FAIL note="topo (table) rc=$tab_rc"; }
  indent "$OUT/step1-topo-table.out" 60
  run step1-topo-json 60 "$BIN" topo ${DEMO_FLAGS[@]+"${DEMO_FLAGS[@]}"} -o json
  local json_rc=$RC json_ms=$MS
  if ((json_rc != 0)); then
    indent "$OUT/step1-topo-json.err" 10
    step_end FAIL "topo -o json rc=$json_rc"; return
  fi
  [[ -s $OUT/step1-topo-json.err ]] && { echo "  topo -o json stderr:"; indent "$OUT/step1-topo-json.err" 10; }
  if [[ -z $DEMO ]]; then
    echo "  nvidia-smi topo -m:"
    indent "$smi" 60
    echo "  timing: nvidia-smi topo -m ${smi_ms} ms, gpuaffinity topo ${tab_ms} ms, gpuaffinity topo -o json ${json_ms} ms"
  else
    echo "  timing: gpuaffinity topo ${tab_ms} ms, gpuaffinity topo -o json ${json_ms} ms"
  fi
  if [[ -z $PY ]]; then
    step_end SKIP "python3 not found: matrix not compared${note:+; $note}"; return
  fi
  py smi "$smi" "$OUT/step1-topo-json.out" | tee "$OUT/step1-compare.txt"
  local crc=${PIPESTATUS[0]} ndis
  ndis=$(grep -o 'disagreements: [0-9]*' "$OUT/step1-compare.txt" | grep -o '[0-9]*$')
  case $crc in
    0) ;;
    1) st=FAIL note="${note:+$note; }${ndis:-some} disagreement(s) with nvidia-smi (DISAGREE lines)" ;;
    *) st=FAIL note="${note:+$note; }could not compare" ;;
  esac
  [[ $st == PASS ]] && note="every GPU-GPU and GPU-NIC class agrees"
  step_end "$st" "$note"
}

# ---- step 2: snapshot and replay ---------------------------------------------------
step2() {
  step_begin 2 "snapshot, then topo --root <snapshot> -o json == live topo -o json"
  local root=/ st=PASS note="" demo_pid="" t0
  if [[ -n $DEMO ]]; then
    # snapshot has no --demo: the agent builds the demo machine in
    # $TMPDIR/gpuaffinity-demo-* and keeps it while it runs; that folder is
    # the "live" root here.
    echo "  demo: an agent builds machine $DEMO on disk; its root plays the live node"
    rm -rf "$OUT/step2-demo-tmp"; mkdir -p "$OUT/step2-demo-tmp"
    agent_start step2-demo-agent "$OUT/step2-demo-state" "TMPDIR=$OUT/step2-demo-tmp" -- --demo "$DEMO" ||
      { step_end FAIL "could not start the demo agent"; return; }
    demo_pid=$AGENT_PID
    t0=$(now_ms)
    while (($(now_ms) - t0 < READY_TIMEOUT_S * 1000)); do
      [[ -s $OUT/step2-demo-state/topology.json ]] && break
      kill -0 "$demo_pid" 2>/dev/null || break
      sleep 0.1
    done
    local roots=("$OUT"/step2-demo-tmp/gpuaffinity-demo-*)
    if [[ ! -s $OUT/step2-demo-state/topology.json || ${#roots[@]} -ne 1 || ! -d ${roots[0]} ]]; then
      indent "$OUT/step2-demo-agent.log" 20
      agent_stop
      step_end FAIL "the demo agent wrote no topology.json or no single demo root"; return
    fi
    root=${roots[0]}
    echo "    demo root ${root#"$OUT"/} ready after $(($(now_ms) - t0)) ms"
  fi
  local rootflag=()
  [[ -n $DEMO ]] && rootflag=(--root "$root")
  local snap=$OUT/step2-snapshot
  rm -rf "$snap"
  run step2-live-before 60 "$BIN" topo ${rootflag[@]+"${rootflag[@]}"} -o json
  local a_rc=$RC
  run step2-snapshot 180 "$BIN" snapshot ${rootflag[@]+"${rootflag[@]}"} -f "$snap"
  local s_rc=$RC s_ms=$MS
  indent "$OUT/step2-snapshot.err" 10
  run step2-live-after 60 "$BIN" topo ${rootflag[@]+"${rootflag[@]}"} -o json
  local b_rc=$RC
  run step2-replay 60 "$BIN" topo --root "$snap" -o json
  local r_rc=$RC r_ms=$MS
  if [[ -n $DEMO ]]; then
    run step2-demo-direct 60 "$BIN" topo --demo "$DEMO" -o json
    local d_rc=$RC
    if ((d_rc == 0)) && cmp -s "$OUT/step2-demo-direct.out" "$OUT/step2-live-before.out"; then
      echo "  topo --demo $DEMO -o json == topo --root <demo root> -o json"
    else
      echo "  topo --demo $DEMO -o json differs from topo --root <demo root> -o json (rc=$d_rc)"
      diff -u "$OUT/step2-live-before.out" "$OUT/step2-demo-direct.out" >"$OUT/step2-demo-direct.diff"
      indent "$OUT/step2-demo-direct.diff" 30
      st=FAIL note="--demo and --root <demo root> differ"
    fi
    if cmp -s "$OUT/step2-demo-state/topology.json" "$OUT/step2-live-before.out"; then
      echo "  the agent's topology.json == topo --root <demo root> -o json"
    else
      echo "  the agent's topology.json differs from topo --root <demo root> -o json"
      st=FAIL note="${note:+$note; }agent topology.json differs"
    fi
    agent_stop
    echo "  demo agent stopped: rc=$RC in $MS ms"
  fi
  if ((a_rc != 0 || s_rc != 0 || b_rc != 0 || r_rc != 0)); then
    for f in step2-live-before step2-snapshot step2-live-after step2-replay; do indent "$OUT/$f.err" 5; done
    step_end FAIL "a command failed (topo rc=$a_rc, snapshot rc=$s_rc, topo rc=$b_rc, replay rc=$r_rc)"; return
  fi
  echo "  snapshot: $(du -sh "$snap" 2>/dev/null | cut -f1) in $s_ms ms; replay topo in $r_ms ms"
  local cmp_rc
  if [[ -n $PY ]]; then
    echo "  replay vs live (before the snapshot):"
    py jsondiff "$OUT/step2-live-before.out" "$OUT/step2-replay.out"
    cmp_rc=$?
    if ((cmp_rc == 1)); then
      echo "  replay vs live (after the snapshot):"
      py jsondiff "$OUT/step2-live-after.out" "$OUT/step2-replay.out" && cmp_rc=0 &&
        note="${note:+$note; }replay equals the live read taken after the snapshot"
      echo "  live before vs live after (what changed on the node meanwhile):"
      py jsondiff "$OUT/step2-live-before.out" "$OUT/step2-live-after.out" 20
    fi
  else
    # Without python3: a plain diff, nvml.source normalized by sed.
    local f
    for f in step2-live-before step2-live-after step2-replay; do
      sed -e 's/^\(    "source": \)"\(live\|replay\)",$/\1"live|replay (normalized)",/' "$OUT/$f.out" >"$OUT/$f.norm.json"
    done
    echo "  normalized: nvml.source live vs replay (documented as where NVML's answers came from), by sed"
    if cmp -s "$OUT/step2-live-before.norm.json" "$OUT/step2-replay.norm.json" ||
      cmp -s "$OUT/step2-live-after.norm.json" "$OUT/step2-replay.norm.json"; then
      cmp_rc=0; echo "  identical"
    else
      cmp_rc=1
    fi
  fi
  if ((cmp_rc != 0)); then
    diff -u "$OUT/step2-live-before.out" "$OUT/step2-replay.out" >"$OUT/step2-replay.diff"
    echo "  diff -u live replay (step2-replay.diff):"
    indent "$OUT/step2-replay.diff" 40
    st=FAIL note="${note:+$note; }the replay differs from the live node"
  fi
  [[ $st == PASS && -z $note ]] && note="replay == live"
  step_end "$st" "$note"
}

# ---- step 3: the NCCL topology file inside NCCL -------------------------------------
find_all_reduce_perf() {
  if [[ -n ${NCCL_TESTS_BIN:-} ]]; then echo "$NCCL_TESTS_BIN"; return 0; fi
  command -v all_reduce_perf 2>/dev/null && return 0
  local d f
  for d in /usr/local /opt; do
    [[ -d $d ]] || continue
    f=$(timeout 30 find "$d" -maxdepth 6 -type f -name all_reduce_perf -perm -u+x 2>/dev/null | head -n 1)
    [[ -n $f ]] && { echo "$f"; return 0; }
  done
  return 1
}

step3() {
  step_begin 3 "nccl-topo loaded by NCCL (NCCL_TOPO_FILE, NCCL_TOPO_DUMP_FILE)"
  local xml=$OUT/step3-nccl-topo.xml dump=$OUT/step3-nccl-dump.xml log=$OUT/step3-nccl.log
  rm -f "$xml" "$dump"
  run step3-nccl-topo 60 "$BIN" nccl-topo ${DEMO_FLAGS[@]+"${DEMO_FLAGS[@]}"} -f "$xml"
  if ((RC != 0)) || [[ ! -s $xml ]]; then
    indent "$OUT/step3-nccl-topo.err" 10
    step_end FAIL "nccl-topo rc=$RC"; return
  fi
  echo "  $(grep -o '<[a-z][a-z0-9]*' "$xml" | wc -l) elements in ${xml#"$OUT"/} ($MS ms)"
  if [[ -n $DEMO ]]; then
    if [[ -n $PY ]]; then
      echo "  demo: comparer self-test, our XML against itself as the dump"
      py nccl "$xml" "$xml" || { step_end FAIL "the comparer fails on our own XML"; return; }
    fi
    step_end SKIP "demo: NCCL not run"; return
  fi
  local prog kind ngpu=1
  if prog=$(find_all_reduce_perf); then
    kind=nccl-tests
    if [[ -n ${CUDA_VISIBLE_DEVICES:-} ]]; then
      ngpu=$(awk -F, '{print NF}' <<<"$CUDA_VISIBLE_DEVICES")
    elif [[ -n $PY && -s $OUT/step1-topo-json.out ]]; then
      ngpu=$(py count-gpus "$OUT/step1-topo-json.out") || ngpu=1
    fi
    ((ngpu >= 1)) || ngpu=1
  elif [[ -n $PY ]] && timeout 120 "$PY" -c 'import sys, torch, torch.distributed as d; sys.exit(0 if torch.cuda.is_available() and d.is_nccl_available() else 1)' >/dev/null 2>&1; then
    kind=torch
  else
    echo "  no NCCL program: all_reduce_perf is not on PATH nor under /usr/local or /opt (set NCCL_TESTS_BIN), and python3 cannot import torch with CUDA and NCCL"
    step_end SKIP "no all_reduce_perf and no torch with NCCL"; return
  fi
  local inherited
  inherited=$(env | grep '^NCCL_' | grep -v '^NCCL_TESTS_BIN=' | sort | tr '\n' ' ')
  [[ -n $inherited ]] && echo "  note: NCCL variables already set, kept: $inherited"
  local nccl_env=(NCCL_TOPO_FILE="$xml" NCCL_TOPO_DUMP_FILE="$dump" NCCL_DEBUG=INFO "NCCL_DEBUG_SUBSYS=INIT,GRAPH,ENV")
  if [[ $kind == nccl-tests ]]; then
    echo "  using $prog on $ngpu GPU(s), one process"
    run step3-nccl 240 env "${nccl_env[@]}" "$prog" -b 8 -e 1M -f 4 -g "$ngpu" -n 5 -w 2 -c 1
  else
    echo "  using torch.distributed (NCCL backend), one process, world size 1, GPU 0"
    run step3-nccl 240 env "${nccl_env[@]}" "GPU_CHECK_TORCH_STORE=$OUT/step3-torch-store" "$PY" -c '
import os, torch, torch.distributed as dist
store = os.environ["GPU_CHECK_TORCH_STORE"]
torch.cuda.set_device(0)
dist.init_process_group("nccl", init_method="file://" + store, rank=0, world_size=1)
t = torch.ones(1 << 10, device="cuda")
dist.all_reduce(t)
torch.cuda.synchronize()
print("all_reduce ok:", t[0].item(), "NCCL", ".".join(map(str, torch.cuda.nccl.version())))
dist.destroy_process_group()
'
  fi
  local nrc=$RC nms=$MS st=PASS note=""
  cat "$OUT/step3-nccl.out" "$OUT/step3-nccl.err" >"$log"
  echo "  NCCL: $(grep -m1 -o 'NCCL version [^ ]*' "$log" || echo 'version not in the log'), program rc=$nrc, $nms ms"
  grep -E 'NCCL_TOPO_FILE|TOPO_DUMP|Loading topology|topology file' "$log" | head -n 5 | sed 's/^/    | /'
  grep -qF "$xml" "$log" || echo "  note: the log does not name our file $xml (NCCL may not have said it loaded it)"
  if ((nrc != 0)); then
    tail -n 30 "$log" | sed 's/^/    | /'
    st=FAIL note="the NCCL program failed (rc=$nrc)"
  fi
  local warns
  warns=$(grep -cw 'WARN' "$log")
  if ((warns > 0)); then
    echo "  WARN lines in the NCCL log: $warns"
    grep -nw 'WARN' "$log" | head -n 30 | sed 's/^/    | /'
    st=FAIL note="${note:+$note; }$warns WARN line(s)"
  else
    echo "  no WARN line in the NCCL log (${log#"$OUT"/}, $(wc -l <"$log") lines)"
  fi
  if [[ ! -s $dump ]]; then
    st=FAIL note="${note:+$note; }NCCL wrote no dump to NCCL_TOPO_DUMP_FILE"
  elif [[ -n $PY ]]; then
    echo "  our XML vs NCCL's dump (${dump#"$OUT"/}):"
    py nccl "$xml" "$dump" | tee "$OUT/step3-compare.txt"
    if ((PIPESTATUS[0] != 0)); then
      st=FAIL
      note="${note:+$note; }$(grep -o 'disagreements: [0-9]*' "$OUT/step3-compare.txt" | grep -o '[0-9]*$' || echo '?') disagreement(s) with NCCL's dump"
    fi
  fi
  [[ $st == PASS ]] && note="$kind: no WARN, every attribute of ours kept by NCCL"
  step_end "$st" "$note"
}

# ---- step 4: check ----------------------------------------------------------------
step4() {
  step_begin 4 "gpuaffinity check --interval 1s -o json"
  run step4-check 120 "$BIN" check ${DEMO_FLAGS[@]+"${DEMO_FLAGS[@]}"} --interval 1s -o json
  local rc=$RC ms=$MS st=PASS note=""
  indent "$OUT/step4-check.err" 10
  if [[ -n $PY ]]; then
    py check "$OUT/step4-check.out" "$rc"
    case $? in
      0) note="healthy (rc=0, $ms ms)" ;;
      4) note="node UNHEALTHY (rc=1, $ms ms): see the fail lines"
         ((STRICT_HEALTH)) && st=FAIL ;;
      *) st=FAIL note="check's answer is inconsistent or it could not check (rc=$rc)" ;;
    esac
  else
    case $rc in
      0) note="healthy (rc=0)" ;;
      1) note="node UNHEALTHY (rc=1)"; ((STRICT_HEALTH)) && st=FAIL ;;
      *) st=FAIL note="could not check (rc=$rc)" ;;
    esac
    # Without python3: the results' id and verdict lines, failed and skipped ones.
    awk -F'"' '/^      "id": / { id = $4 } /^      "verdict": / && $4 != "pass" { printf "  %-4s %s\n", $4, id }' \
      "$OUT/step4-check.out"
  fi
  step_end "$st" "$note"
}

# ---- step 5: agent -------------------------------------------------------------------
step5() {
  step_begin 5 "gpuaffinity agent: /readyz, /metrics x3, NVML GPU metrics"
  if [[ -z $CURL ]]; then step_end SKIP "curl not found"; return; fi
  local state=$OUT/step5-agent-state st=PASS note="" t0 code=000
  rm -rf "$state"
  local envs=()
  [[ -n $DEMO ]] && envs=("TMPDIR=$OUT/step5-demo-tmp") && mkdir -p "$OUT/step5-demo-tmp"
  agent_start step5-agent "$state" "${envs[@]+"${envs[@]}"}" -- "${DEMO_FLAGS[@]+"${DEMO_FLAGS[@]}"}" ||
    { step_end FAIL "could not start the agent"; return; }
  local base=http://127.0.0.1:$AGENT_PORT
  t0=$(now_ms)
  # Ready: /readyz answers 200, or 503 with a verdict (not "no discovery yet").
  while (($(now_ms) - t0 < READY_TIMEOUT_S * 1000)); do
    kill -0 "$AGENT_PID" 2>/dev/null || break
    code=$(timeout 5 "$CURL" -s -o "$OUT/step5-readyz.txt" -w '%{http_code}' --max-time 3 "$base/readyz" 2>/dev/null)
    [[ $code == 200 ]] && break
    [[ $code == 503 ]] && ! grep -q 'no discovery yet' "$OUT/step5-readyz.txt" && break
    sleep 0.1
  done
  local ready_ms=$(($(now_ms) - t0))
  if ! kill -0 "$AGENT_PID" 2>/dev/null; then
    indent "$OUT/step5-agent.log" 30
    agent_stop
    step_end FAIL "the agent exited (rc=$RC) before it was ready"; return
  fi
  echo "  /readyz: HTTP $code after $ready_ms ms: $(head -n 1 "$OUT/step5-readyz.txt" 2>/dev/null)"
  sed -n '2,20p' "$OUT/step5-readyz.txt" 2>/dev/null | sed 's/^/    | /'
  case $code in
    200) ;;
    503) note="/readyz 503 (node unhealthy)"; ((STRICT_HEALTH)) && st=FAIL ;;
    *) st=FAIL note="/readyz never answered (HTTP $code after $ready_ms ms)" ;;
  esac
  local hz
  hz=$(timeout 5 "$CURL" -s -o /dev/null -w '%{http_code}' --max-time 3 "$base/healthz")
  echo "  /healthz: HTTP $hz"
  [[ $hz == 200 ]] || { st=FAIL note="${note:+$note; }/healthz HTTP $hz"; }
  # Three timed scrapes.
  local n w scrape_ok=0 times=() secs size
  for n in 1 2 3; do
    w=$(timeout 30 "$CURL" -s -o "$OUT/step5-metrics.$n.txt" -w '%{http_code} %{time_total} %{size_download}' --max-time 25 "$base/metrics")
    read -r code secs size <<<"$w"
    local sms
    sms=$(awk -v s="${secs:-0}" 'BEGIN { printf "%.1f", s * 1000 }')
    times+=("$sms")
    echo "  scrape $n: HTTP ${code:-none}, ${size:-0} bytes, $sms ms, $(grep -vc '^#' "$OUT/step5-metrics.$n.txt" 2>/dev/null || echo 0) samples"
    [[ $code == 200 ]] && scrape_ok=$((scrape_ok + 1))
  done
  ((scrape_ok == 3)) || { st=FAIL note="${note:+$note; }$((3 - scrape_ok)) scrape(s) failed"; }
  # NVML-derived GPU metrics (docs/metrics.md, collector nvml).
  local m=$OUT/step5-metrics.3.txt ngpu=-1
  timeout 10 "$CURL" -s --max-time 5 -o "$OUT/step5-topology.json" "$base/topology"
  if cmp -s "$OUT/step5-topology.json" "$state/topology.json"; then
    echo "  /topology == state-dir topology.json"
  else
    echo "  /topology differs from the state dir's topology.json"
    st=FAIL note="${note:+$note; }/topology != topology.json"
  fi
  if [[ -n $PY ]]; then
    ngpu=$(py count-gpus "$OUT/step5-topology.json" 2>/dev/null) || ngpu=-1
  else
    ngpu=$(grep -c '"nvml_index":' "$OUT/step5-topology.json" 2>/dev/null)
  fi
  local n_info n_up n_width nvml_up bad_up
  n_info=$(grep -c '^gpuaffinity_gpu_info{' "$m")
  n_up=$(grep -c '^gpuaffinity_gpu_up{' "$m")
  n_width=$(grep -c '^gpuaffinity_gpu_pcie_link_width{' "$m")
  nvml_up=$(awk '$1 == "gpuaffinity_nvml_up" { print $2 }' "$m")
  bad_up=$(grep '^gpuaffinity_gpu_up{' "$m" | awk '$NF != 1' | tr '\n' ' ')
  echo "  GPUs in /topology: $ngpu; gpuaffinity_nvml_up ${nvml_up:-absent}; gpu_info series $n_info, gpu_up $n_up, gpu_pcie_link_width $n_width"
  grep -E '^gpuaffinity_(gpu_info|gpu_up|gpu_pcie_link_width|gpu_pcie_link_generation)\{' "$m" | head -n 8 | sed 's/^/    | /'
  local mfail=""
  [[ $nvml_up == 1 ]] || mfail="gpuaffinity_nvml_up is ${nvml_up:-absent}, want 1"
  ((ngpu > 0)) || mfail="${mfail:+$mfail; }no GPU in /topology"
  ((n_info == ngpu && n_up == ngpu)) || mfail="${mfail:+$mfail; }gpu_info/gpu_up series $n_info/$n_up for $ngpu GPUs"
  ((n_width == ngpu)) || mfail="${mfail:+$mfail; }gpu_pcie_link_width (read from NVML at scrape) for $n_width of $ngpu GPUs"
  [[ -z $bad_up ]] || mfail="${mfail:+$mfail; }GPUs not up: $bad_up"
  if [[ -n $mfail ]]; then
    st=FAIL note="${note:+$note; }$mfail"
  fi
  agent_stop
  echo "  agent stopped (SIGTERM): rc=$RC in $MS ms"
  ((RC == 0)) || { indent "$OUT/step5-agent.log" 20; st=FAIL note="${note:+$note; }agent exit $RC after SIGTERM, want 0"; }
  [[ $st == PASS && -z $note ]] && note="ready in $ready_ms ms; scrapes ${times[*]} ms; $ngpu GPUs with NVML metrics"
  [[ $st == PASS && $note == /readyz* ]] && note="$note; scrapes ${times[*]} ms; $ngpu GPUs with NVML metrics"
  step_end "$st" "$note"
}

# ---- step 6: the storage layer ---------------------------------------------------------
# NVMe controllers against the kernel's /sys/class/nvme, the GDS view, each
# GPU's nearest NVMe and storage NICs, and `cufile -f -`; gdscheck -p and
# nvidia-fs's own files are shown where installed (not compared).
step6() {
  step_begin 6 "storage: NVMe vs /sys/class/nvme, GDS view, cufile -f -"
  local st=PASS note="" list=$OUT/step6-sysfs-nvme.txt
  run step6-topo 60 "$BIN" topo ${DEMO_FLAGS[@]+"${DEMO_FLAGS[@]}"} -o json
  if ((RC != 0)); then indent "$OUT/step6-topo.err" 10; step_end FAIL "topo -o json failed (rc=$RC)"; return; fi
  : >"$list"
  if [[ -z $DEMO ]]; then
    local c
    for c in /sys/class/nvme/nvme*; do
      [[ -e $c ]] || continue
      printf '%s %s %s\n' "${c##*/}" "$(cat "$c/transport" 2>/dev/null || echo unknown)" "$(cat "$c/address" 2>/dev/null || echo -)" >>"$list"
    done
    [[ -r /proc/driver/nvidia-fs/version ]] && echo "  nvidia-fs: $(cat /proc/driver/nvidia-fs/version)"
    [[ -r /proc/driver/nvidia-fs/bridges ]] && echo "  nvidia-fs ACS-enabled bridges: $(tr '\n' ' ' </proc/driver/nvidia-fs/bridges)"
    local gds
    for gds in /usr/local/cuda/gds/tools/gdscheck /usr/local/cuda-*/gds/tools/gdscheck; do
      if [[ -x $gds ]]; then run step6-gdscheck 60 "$gds" -p; indent "$OUT/step6-gdscheck.out" 60; break; fi
    done
  else
    # Demo: the machine's own NVMe list, as topo reads it, stands in.
    [[ -n $PY ]] && "$PY" -c 'import json,sys; [print(d["name"], d["transport"], d.get("bus_id") or "-") for d in json.load(open(sys.argv[1]))["storage"]["nvme"]]' "$OUT/step6-topo.out" >"$list"
  fi
  run step6-cufile 60 "$BIN" cufile ${DEMO_FLAGS[@]+"${DEMO_FLAGS[@]}"} -f -
  local cuf=$OUT/step6-cufile.out
  if ((RC != 0)); then indent "$OUT/step6-cufile.err" 10; st=FAIL note="cufile -f - failed (rc=$RC)"; cuf=""; fi
  if [[ -n $PY ]]; then
    if ! py storage "$OUT/step6-topo.out" "$list" "$cuf"; then st=FAIL note="${note:+$note; }topo's NVMe list differs from the kernel's"; fi
  else
    note="${note:+$note; }python3 missing: storage section not compared"
  fi
  [[ $st == PASS ]] && note="$(wc -l <"$list") NVMe controller(s) agree"
  step_end "$st" "$note"
}

# ---- step 7: the NVLink fabric -----------------------------------------------------
step7() {
  step_begin 7 "NVLink fabric: NVML fabric/platform answers, nvidia-smi fabric.*, IMEX"
  local st=PASS note="" csv=""
  run step7-topo 60 "$BIN" topo ${DEMO_FLAGS[@]+"${DEMO_FLAGS[@]}"} -o json
  if ((RC != 0)); then indent "$OUT/step7-topo.err" 10; step_end FAIL "topo -o json failed (rc=$RC)"; return; fi
  if [[ -z $DEMO ]] && command -v nvidia-smi >/dev/null; then
    run step7-smi 60 nvidia-smi --query-gpu=pci.bus_id,fabric.state,fabric.status,fabric.clusterUuid,fabric.cliqueId --format=csv,noheader
    if ((RC == 0)); then csv=$OUT/step7-smi.out; else indent "$OUT/step7-smi.err" 5; note="nvidia-smi has no fabric.* query fields here; "; fi
    [[ -r /proc/devices ]] && echo "  /proc/devices: $(grep -E 'nvidia' /proc/devices | tr '\n' ';')"
    ls -l /dev/nvidia-caps-imex-channels 2>/dev/null | sed 's/^/  /'
  fi
  if [[ -n $PY ]]; then
    if ! py fabric "$OUT/step7-topo.out" "$csv"; then st=FAIL note="${note}topo's fabric answers differ from nvidia-smi's"; fi
  else
    note="${note}python3 missing: fabric answers not printed"
  fi
  [[ $st == PASS ]] && note="${note}fabric and platform answers recorded"
  step_end "$st" "$note"
}

# ---- step 8: the fleet series ----------------------------------------------------------
# The agent of step 5 exported the node's place in the fleet (docs/fleet.md):
# one gpuaffinity_node_placement_info whose hostname is topology.json's, whose
# gpu_model is the model most GPUs report and whose clique is NVML's
# <cluster_uuid>.<clique_id> (empty outside a multi-node NVLink domain), and
# one gpuaffinity_node_layout_info with two 16-hex digests. --placement auto
# asked the metadata service of the cloud DMI names (GCP, OCI) or nothing; its
# log lines are shown.
step8() {
  step_begin 8 "fleet series: node_placement_info, node_layout_info, placement read"
  local m=$OUT/step5-metrics.3.txt st=PASS note=""
  if [[ ! -s $m ]]; then step_end SKIP "no /metrics scrape from step 5"; return; fi
  local np nl place layout host="" model=""
  np=$(grep -c '^gpuaffinity_node_placement_info{' "$m")
  nl=$(grep -c '^gpuaffinity_node_layout_info{' "$m")
  place=$(grep '^gpuaffinity_node_placement_info{' "$m" | head -n 1)
  layout=$(grep '^gpuaffinity_node_layout_info{' "$m" | head -n 1)
  echo "  | $place"
  echo "  | $layout"
  grep -E 'placement (not )?read' "$OUT/step5-agent.log" 2>/dev/null | head -n 3 | sed 's/^/  log: /'
  if [[ -s $OUT/step5-topology.json ]]; then
    host=$(grep -m1 -o '"hostname": *"[^"]*"' "$OUT/step5-topology.json" | sed 's/.*: *"//; s/"$//')
  fi
  if [[ -z $DEMO ]] && command -v nvidia-smi >/dev/null; then
    model=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | sort -rn | head -n 1 | sed 's/^ *[0-9]* //')
  fi
  ((np == 1 && nl == 1)) || { st=FAIL note="$np placement and $nl layout series, want 1 each"; }
  [[ -z $host || $place == *"hostname=\"$host\""* ]] || { st=FAIL note="${note:+$note; }placement hostname is not topology.json's $host"; }
  [[ -z $model || $place == *"gpu_model=\"$model\""* ]] || { st=FAIL note="${note:+$note; }gpu_model is not nvidia-smi's majority name $model"; }
  [[ $layout =~ layout=\"[0-9a-f]{16}\" && $layout =~ firmware=\"[0-9a-f]{16}\" ]] || { st=FAIL note="${note:+$note; }layout/firmware are not 16-hex digests"; }
  [[ $st == PASS ]] && note="one placement and one layout series; hostname ${host:-?}, gpu_model ${model:-(demo)}"
  step_end "$st" "$note"
}

# ---- step 9: the job audit ---------------------------------------------------------------
# A real CUDA process: python3's ctypes on the driver's libcuda.so.1 (cuInit,
# a primary context, 1 MiB of device memory), which every host with the
# driver has, so neither torch nor nvcc is needed. NVML then lists it on
# its GPU (CUDA_VISIBLE_DEVICES=<the GPU's UUID>). GPU_CHECK_PIN pins it
# from inside where taskset is missing.
CUDA_CHILD='
import ctypes, os, sys, time
pin = os.environ.get("GPU_CHECK_PIN")
if pin:
    cpus = set()
    for part in pin.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    os.sched_setaffinity(0, cpus)
try:
    cuda = ctypes.CDLL("libcuda.so.1")
except OSError as e:
    print("no libcuda.so.1:", e, flush=True)
    sys.exit(4)
def ck(r, what):
    if r != 0:
        print("CUDA error %d in %s" % (r, what), flush=True)
        sys.exit(3)
ck(cuda.cuInit(0), "cuInit")
dev, ctx, mem = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
ck(cuda.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
ck(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
ck(cuda.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
ck(cuda.cuMemAlloc_v2(ctypes.byref(mem), ctypes.c_size_t(1 << 20)), "cuMemAlloc")
print("ready", os.getpid(), flush=True)
time.sleep(float(sys.argv[1]))
'

JOB_PID="" JOB_CHILD=""
# job_start NAME CPUS: the CUDA process on J_UUID, pinned to CPUS, in the
# background (stopped on exit like the agent); waits up to 60 s for it to
# hold its context and sets JOB_CHILD to its pid. Returns 4 without
# libcuda.so.1, 1 on any other failure.
job_start() {
  local name=$1 cpus=$2 t0 pin=() envs=(CUDA_VISIBLE_DEVICES="$J_UUID")
  if command -v taskset >/dev/null 2>&1; then pin=(taskset -c "$cpus"); else envs+=(GPU_CHECK_PIN="$cpus"); fi
  local cmd=(timeout -k 5 300 ${pin[@]+"${pin[@]}"} "$PY" -c "$CUDA_CHILD" 290)
  printf '  $ %s %s &\n' "${envs[*]}" "$(quote "${pin[@]+"${pin[@]}"}" "$PY" -c '<CUDA program>' 290)"
  env "${envs[@]}" "${cmd[@]}" >"$OUT/$name.out" 2>&1 </dev/null &
  JOB_PID=$! JOB_CHILD=""
  AGENT_PIDS+=("$JOB_PID")
  t0=$(now_ms)
  while (($(now_ms) - t0 < 60000)); do
    JOB_CHILD=$(awk '$1 == "ready" { print $2; exit }' "$OUT/$name.out")
    [[ -n $JOB_CHILD ]] && break
    kill -0 "$JOB_PID" 2>/dev/null || break
    sleep 0.1
  done
  if [[ -z $JOB_CHILD ]]; then
    indent "$OUT/$name.out" 10
    kill -TERM "$JOB_PID" 2>/dev/null   # still starting after 60 s
    wait "$JOB_PID" 2>/dev/null
    (($? == 4)) && return 4
    return 1
  fi
  echo "    pid $JOB_CHILD on GPU $J_GPU ($J_UUID), CPUs $cpus, ready after $(($(now_ms) - t0)) ms"
}

job_stop() {
  kill -TERM "$JOB_PID" 2>/dev/null
  wait "$JOB_PID" 2>/dev/null
}

# job_audit NAME WANT: gpuaffinity audit -o json, and the verdict of
# JOB_CHILD on J_GPU; returns the helper's answer (0, 1, 3).
job_audit() {
  run "$1" 60 "$BIN" audit --no-env -o json
  ((RC == 0)) || { indent "$OUT/$1.err" 10; return 1; }
  py jobs-verdict "$OUT/$1.out" "$JOB_CHILD" "$J_GPU" "$2"
}

# job_series: the agent, with --collector.jobs, while the aligned process
# runs: gpuaffinity_gpu_processes of its GPU counts it as aligned. Sets
# SERIES_NOTE; returns 1 on a failure, 0 otherwise (also when the agent
# has no --collector.jobs, which the note says).
SERIES_NOTE=""
job_series() {
  SERIES_NOTE=""
  if ! "$BIN" agent --help 2>&1 | grep -q -- '--collector.jobs'; then
    SERIES_NOTE="this agent has no --collector.jobs: series not checked"; return 0
  fi
  [[ -n $CURL ]] || { SERIES_NOTE="curl not found: series not checked"; return 0; }
  local state=$OUT/step9-agent-state t0 code=000 line val
  rm -rf "$state"
  agent_start step9-agent "$state" -- --collector.jobs || { SERIES_NOTE="could not start the agent"; return 1; }
  t0=$(now_ms)
  while (($(now_ms) - t0 < READY_TIMEOUT_S * 1000)); do
    kill -0 "$AGENT_PID" 2>/dev/null || break
    code=$(timeout 5 "$CURL" -s -o "$OUT/step9-readyz.txt" -w '%{http_code}' --max-time 3 "http://127.0.0.1:$AGENT_PORT/readyz" 2>/dev/null)
    [[ $code == 200 ]] && break
    [[ $code == 503 ]] && ! grep -q 'no discovery yet' "$OUT/step9-readyz.txt" && break
    sleep 0.1
  done
  timeout 30 "$CURL" -s --max-time 25 -o "$OUT/step9-metrics.txt" "http://127.0.0.1:$AGENT_PORT/metrics"
  agent_stop
  grep '^gpuaffinity_gpu_processes{' "$OUT/step9-metrics.txt" 2>/dev/null | grep -E "[{,]gpu=\"$J_GPU\"[,}]" | sed 's/^/    | /'
  line=$(grep '^gpuaffinity_gpu_processes{' "$OUT/step9-metrics.txt" 2>/dev/null |
    grep -E "[{,]gpu=\"$J_GPU\"[,}]" | grep 'verdict="aligned"' | head -n 1)
  val=${line##* }
  if [[ -z $line ]] || ! awk -v v="$val" 'BEGIN { exit !(v >= 1) }'; then
    SERIES_NOTE="gpuaffinity_gpu_processes{gpu=\"$J_GPU\",verdict=\"aligned\"} is ${val:-absent}, want 1 or more"
    indent "$OUT/step9-agent.log" 10
    return 1
  fi
  SERIES_NOTE="agent: gpuaffinity_gpu_processes{gpu=\"$J_GPU\",verdict=\"aligned\"} $val"
}

step9() {
  step_begin 9 "job audit: a CUDA process pinned on and off its GPU's CPUs, gpuaffinity audit -o json"
  if [[ -n $DEMO ]]; then
    run step9-audit 60 "$BIN" audit "${DEMO_FLAGS[@]}" --no-env -o json
    ((RC == 0)) || { indent "$OUT/step9-audit.err" 10; step_end FAIL "audit --demo failed (rc=$RC)"; return; }
    grep -q '"schema": *"gpuaffinity.audit/v1"' "$OUT/step9-audit.out" || { step_end FAIL "audit -o json has no schema gpuaffinity.audit/v1"; return; }
    step_end SKIP "demo: no live process to audit (audit -o json answered)"; return
  fi
  [[ -n $PY ]] || { step_end SKIP "python3 missing: it runs the CUDA process and reads the audit"; return; }
  run step9-topo 60 "$BIN" topo -o json
  ((RC == 0)) || { indent "$OUT/step9-topo.err" 10; step_end FAIL "topo -o json failed (rc=$RC)"; return; }
  local plan J_GPU J_UUID J_LOCAL J_ON J_OFF
  if ! plan=$(py jobs-plan "$OUT/step9-topo.out" 2>"$OUT/step9-plan.err"); then
    indent "$OUT/step9-plan.err" 5
    step_end SKIP "no GPU to run on: $(head -n 1 "$OUT/step9-plan.err")"; return
  fi
  eval "$plan"
  echo "  GPU $J_GPU ($J_UUID): local CPUs $J_LOCAL; pinned on $J_ON; off it: ${J_OFF:-none}"
  local st=PASS note="" r
  # 1. pinned to the GPU's local CPUs: aligned.
  job_start step9-aligned "$J_ON"; r=$?
  if ((r == 4)); then step_end SKIP "no libcuda.so.1: no CUDA process to audit"; return; fi
  if ((r != 0)); then step_end FAIL "the CUDA process did not start (see step9-aligned.out)"; return; fi
  job_audit step9-audit-aligned aligned; r=$?
  if ((r == 3)); then
    job_stop
    step_end SKIP "NVML did not list the GPUs' processes (run as root)"; return
  fi
  ((r == 0)) || { st=FAIL note="pinned to the GPU's CPUs: not listed aligned on GPU $J_GPU"; }
  job_series || { st=FAIL note="${note:+$note; }$SERIES_NOTE"; }
  [[ -n $SERIES_NOTE ]] && echo "  $SERIES_NOTE"
  job_stop
  # 2. pinned to CPUs off the GPU's (the other socket): misaligned.
  if [[ -z $J_OFF ]]; then
    echo "  every CPU this script may use is local to GPU $J_GPU (one NUMA node, or a cpuset): misaligned not tried"
    [[ $st == PASS ]] && note="aligned as pinned; misaligned not tried (no CPU off the GPU's)"
  else
    job_start step9-misaligned "$J_OFF" || { step_end FAIL "${note:+$note; }the second CUDA process did not start"; return; }
    job_audit step9-audit-misaligned misaligned; r=$?
    ((r == 0)) || { st=FAIL note="${note:+$note; }pinned off the GPU's CPUs: not listed misaligned on GPU $J_GPU"; }
    job_stop
    [[ $st == PASS ]] && note="aligned on $J_ON, misaligned on $J_OFF"
  fi
  [[ $st == PASS && $SERIES_NOTE == agent:* ]] && note="$note; $SERIES_NOTE"
  step_end "$st" "$note"
}

T_ALL=$(now_ms)
step1
step2
step3
step4
step5
step6
step7
step8
step9

# ---- summary -------------------------------------------------------------------------
printf '\n=== Summary (%s%s) ===\n' "$(hostname 2>/dev/null)" "${DEMO:+, demo $DEMO}"
printf '%-4s  %-6s %9s  %s\n' step result "time ms" "what / note"
failed=0
for i in "${!S_ID[@]}"; do
  printf '%-4s  %-6s %9d  %s\n' "${S_ID[$i]}" "${S_STATUS[$i]}" "${S_MS[$i]}" "${S_TITLE[$i]}"
  [[ -n ${S_NOTE[$i]} ]] && printf '%-4s  %-6s %9s    %s\n' "" "" "" "${S_NOTE[$i]}"
  [[ ${S_STATUS[$i]} == FAIL ]] && failed=$((failed + 1))
done
printf 'total %d ms; outputs in %s\n' "$(($(now_ms) - T_ALL))" "$OUT"
if ((failed)); then
  echo "RESULT: FAIL ($failed step(s) failed)"
  exit 1
fi
echo "RESULT: PASS"
exit 0

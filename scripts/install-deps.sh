#!/usr/bin/env bash
# install-deps.sh PKG... — install the Debian packages the build or tests
# need when their command is missing. Needs root and apt-get; otherwise it
# says what is missing and leaves the decision to the caller (tests that
# need hwloc or graphviz then fail with a message naming the package).
set -euo pipefail

declare -A cmd_of=([gcc]=gcc [hwloc]=lstopo-no-graphics [graphviz]=dot [prometheus-node-exporter]=prometheus-node-exporter
                  [munge]=munged [slurmctld]=slurmctld [slurm-client]=sinfo [systemd]=systemd-analyze)
missing=()
for pkg in "$@"; do
  c=${cmd_of[$pkg]:-$pkg}
  command -v "$c" >/dev/null 2>&1 || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "install-deps: missing ${missing[*]} (run as root on Debian, or install them yourself)" >&2
  exit 0
fi
echo "install-deps: apt-get install ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

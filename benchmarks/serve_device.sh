#!/usr/bin/env bash
# One device-machine call: issue 20's serve benchmark on the 16-core GPU host, gpuroute serve side by side
# with osrm-routed MLD in one run (benchmarks/serve.py --dataset): Monaco and Andorra, /route at 1, 8 and 32
# clients, /table 100 x 100 at 1 client, the HTTP servers measured side by side (uvicorn + httptools on uvloop,
# the default; uvicorn + h11; granian), their answers compared byte for byte.
#
# Usage on the device machine, from the repo root (carry local_data/: the osrm-bindings wheel in local_data/osrm,
# the wheels of local_data/whl: httptools, uvloop and granian for CPython 3.12, which the device cannot download):
#   OUT=$OUT bash benchmarks/serve_device.sh
# Optional: BEFORE_SRC=DIR (a copy of an earlier src/, e.g. `git archive 6fdc20b src | tar -x -C DIR`, carried)
# adds it as the first variant; ROUNDS (default 1); ARGS (more benchmarks/serve.py arguments).
set -o pipefail
OUT=${OUT:-out}
mkdir -p "$OUT" /tmp/site
# the carried wheels (no network on the device), as benchmarks/device_batch.sh installs them
pip install -q --no-index --no-deps --target /tmp/site local_data/whl/*.whl >/dev/null 2>&1 || echo "wheel install failed"
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export GPUROUTE_COMMIT=${GPUROUTE_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
python3 -c "import httptools, uvloop, granian, uvicorn; print('httptools', httptools.__version__, 'uvloop', \
  uvloop.__version__, 'uvicorn', uvicorn.__version__)" || exit 2
before=()
if [ -n "${BEFORE_SRC:-}" ]; then before=(--variant before "src=$BEFORE_SRC"); fi
# the first variant compiles the tree's numba cache at its start (before it listens); the others find it
timeout ${T_SERVE:-570} python3 benchmarks/serve.py --dataset --graphs Monaco Andorra --clients 1 8 32 \
  --routes 5000 --tables 50 --rounds "${ROUNDS:-1}" --label h100host --out "$OUT" \
  --requests-from benchmarks/results/serve_dataset_2026-11-26_before_75fde7b.json \
  "${before[@]}" --variant httptools http=httptools --variant h11 http=h11 --variant granian server=granian \
  ${ARGS:-} 2>&1 | tee "$OUT/serve_device.log" | grep -v "^  agreement"

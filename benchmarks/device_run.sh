#!/usr/bin/env bash
# One device-machine call: the GPU tests, then the benchmark suites named in $SUITES. Logs and JSON go
# to $OUT. Usage on the device machine, from the repo root:
#   SUITES="tests bench batched" bash benchmarks/device_run.sh
# BAY travels in the git-ignored local_data/ (carry it); the rest is in the package.
set -o pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
OUT=${OUT:-out}
mkdir -p "$OUT"
SUITES=${SUITES:-"tests"}
export GPUROUTE_COMMIT=${GPUROUTE_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv
for s in $SUITES; do
  case $s in
    tests) eval "set -- ${TEST_ARGS:-tests}"
           timeout ${T_TESTS:-300} python3 -m pytest -q -m gpu -p no:cacheprovider --maxfail=40 "$@" 2>&1 \
             | tee "$OUT/pytest_gpu.log" | tail -25 ;;
    sweep) eval "set -- ${SWEEP_ARGS:-}"
           timeout ${T_SWEEP:-240} python3 benchmarks/cell_bf_sweep.py --out "$OUT" "$@" 2>&1 | tee "$OUT/sweep.log" ;;
    seed002) eval "set -- ${SEED_ARGS:-}"
           timeout ${T_SEED:-280} python3 benchmarks/seed002_table.py --out "$OUT" "$@" 2>&1 | tee "$OUT/seed002.log" ;;
    bench) eval "set -- ${BENCH_ARGS:-}"
           timeout ${T_BENCH:-540} python3 benchmarks/sssp_one_to_all.py --out "$OUT" "$@" 2>&1 | tee "$OUT/bench.log" ;;
    batched) eval "set -- ${BATCHED_ARGS:-}"
           timeout ${T_BATCHED:-240} python3 benchmarks/batched.py --out "$OUT" "$@" 2>&1 | tee "$OUT/batched.log" ;;
  esac
done

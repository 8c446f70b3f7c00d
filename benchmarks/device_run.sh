#!/usr/bin/env bash
# One device-machine call: GPU tests, then the benchmark suites named in $SUITES (default: the cell-bf
# sweep). Logs and JSON go to $OUT. Usage on the device machine, from the repo root:
#   SUITES="tests sweep" bash benchmarks/device_run.sh
set -o pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
OUT=${OUT:-out}
mkdir -p "$OUT"
SUITES=${SUITES:-"tests sweep"}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv
for s in $SUITES; do
  case $s in
    tests) timeout ${T_TESTS:-300} python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_sssp_gpu.py 2>&1 \
             | tee "$OUT/pytest_gpu.log" | tail -25 ;;
    # *_ARGS are parsed like a command line (quotes group words: --graphs NY "NY tiled 4x4")
    sweep) eval "set -- ${SWEEP_ARGS:-}"
           timeout ${T_SWEEP:-240} python3 benchmarks/cell_bf_sweep.py --out "$OUT" "$@" 2>&1 | tee "$OUT/sweep.log" ;;
    seed002) eval "set -- ${SEED_ARGS:-}"
           timeout ${T_SEED:-280} python3 benchmarks/seed002_table.py --out "$OUT" "$@" 2>&1 | tee "$OUT/seed002.log" ;;
    bench) eval "set -- ${BENCH_ARGS:-}"
           timeout ${T_BENCH:-540} python3 benchmarks/sssp_one_to_all.py --out "$OUT" "$@" 2>&1 | tee "$OUT/bench.log" ;;
  esac
done

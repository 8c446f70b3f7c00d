#!/usr/bin/env bash
# One device-machine call for this session's GPU work: install the carried wheels (.whl/, no network on
# the device; numpy/cupy come with the machine), then the steps named in $STEPS, logs under $OUT.
#   STEPS="crp-tests crp-bench service" bash benchmarks/device_batch.sh
set -o pipefail
OUT=${OUT:-out}
mkdir -p "$OUT" /tmp/site
pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1 || echo "wheel install failed"
export PYTHONPATH=src:/tmp/site PYTHONUNBUFFERED=1
export GPUROUTE_COMMIT=${GPUROUTE_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
for s in ${STEPS:-crp-tests}; do
  echo "=== $s"
  case $s in
    crp-tests) timeout ${T_CRP:-200} python3 -m pytest -q -p no:cacheprovider -x tests/crp 2>&1 | tail -15 ;;
    gpu-tests) eval "set -- ${TEST_ARGS:-tests}"
               timeout ${T_TESTS:-300} python3 -m pytest -q -m gpu -p no:cacheprovider --maxfail=20 "$@" 2>&1 \
                 | tee "$OUT/pytest_gpu.log" | tail -25 ;;
    crp-bench) timeout ${T_CRPB:-200} python3 benchmarks/crp_gpu.py --reps 10 --out "$OUT" ${CRP_ARGS:-} 2>&1 | tail -40 ;;
    service) timeout ${T_SVC:-200} python3 benchmarks/service_gpu.py --reps 10 --out "$OUT" 2>&1 | grep -v Deprecat | tail -12 ;;
    *) eval "timeout 300 $s" 2>&1 | tail -40 ;;
  esac
done

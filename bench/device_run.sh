#!/usr/bin/env bash
# The device call of this session's FP8/MXFP8 work (see NOTES.md): GPU tests with one line per test,
# then the FP8 and MXFP8 benchmark groups with the torchao peers. Logs land in $OUT.
set -u
export PYTHONUNBUFFERED=1 TORCHAO_FORCE_SKIP_LOADING_SO_FILES=1 QUANTLAY_COMMIT="${1:-unknown}"
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl 2>/dev/null && export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . > "$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
timeout "${TEST_S:-280}" python3 -m pytest -v -p no:cacheprovider --tb=short tests/test_gpu_formats.py \
  -k "${TEST_K:-realistic or poisoned or segments or custom_op}" 2>&1 | grep -v Warning | tee "$OUT/gpu_tests.log" | grep -E "PASS|FAIL|ERROR|passed|failed|Error" | cut -c1-160
timeout "${BENCH_S:-220}" python3 -m quantlay.cli bench --groups fp8,mxfp8 --shapes "${SHAPES:-8192x8192,16384x8192,32768x4096}" \
  --csv "$OUT/bench.csv" 2>&1 | grep -v -i warn | tee "$OUT/bench.log" | tail -70

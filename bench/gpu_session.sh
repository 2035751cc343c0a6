#!/usr/bin/env bash
# One GPU run: install, run the GPU tests, memcheck every generated kernel, tune tiles, profile (ncu), benchmark.
# Usage on the device machine: STAGES="tests verify memcheck bench" BENCH_GROUPS=mxfp8,fp8 bash bench/gpu_session.sh COMMIT
# Optional: TESTS (pytest paths), TEST_K (a -k expression), TEST_S (seconds), SHAPES (bench shapes), GEMM_SHAPES,
# TEST_N (pytest-xdist workers sharing the GPU, to spread the GEMM tests' compilation; big_memory tests run one at
# a time, by a file lock; needs the pytest-xdist and execnet wheels in .whl/),
# SWEEP_GEMM / SWEEP_SHAPES / SWEEP_CONFIGS / SWEEP_S (bench/gemm_sweep.py),
# BENCH_MATCH (e.g. quantlay,torchao: no torch reference peers), BENCH_S, MEMCHECK_KERNELS, MEMCHECK_S,
# MEMCHECK_TESTS / MEMCHECK_K (the memtests stage: GPU tests under compute-sanitizer, e.g. the GEMMs' split tail
# with MEMCHECK_K="split and not random"), TUNE_KERNELS (comma-separated or all), TUNE_FLAGS (on,off | on | off), TUNE_SHAPE, TUNE_MAX_TILE, TUNE_S (seconds; tune.log is appended to, so one call can run several tunes), PROFILE_KERNELS (space-separated; gemm:TEXT for a GEMM of the bench, at PROFILE_GEMM_SHAPE), PROFILE_REGEX (ncu's kernel names; for GEMMs e.g. _hopper_kernel|gemm|xmma), PROFILE_S,
# TIMELINE_GEMMS / TIMELINE_SHAPE (bench/gemm_timeline.py: per-warpgroup clock64 stamps of Hopper GEMMs),
# ABLATE_GEMM / ABLATE_CASES (bench/gemm_ablate.py: the GEMM with one part of its consumer taken out, timed by gemm_ab),
# AB_BASE (a folder of earlier generated GEMM modules; default: this tree's, for AB_SET) / AB_SET (NAME=INT, a module
# setting for this tree's runs, e.g. HOPPER_SPLIT_TAIL=1) / AB_CASES / AB_S (bench/gemm_ab.py).
# (writes logs under $OUT; .whl/ carries lark and, for the torchao peers, torchao 0.18)
set -u
export PYTHONUNBUFFERED=1 QUANTLAY_COMMIT="${1:-unknown}" TORCHAO_FORCE_SKIP_LOADING_SO_FILES=1
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . > "$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/gpu.txt"
STAGES="${STAGES-tests memcheck tune bench}"  # set but empty: no stage (setup only)
for s in $STAGES; do
  case $s in
    tests) timeout "${TEST_S:-300}" python3 -m pytest -v -p no:cacheprovider --tb=short ${TESTS:-tests/test_gpu.py tests/test_kernels.py tests/test_golden_vectors.py} ${TEST_K:+-k "$TEST_K"} ${TEST_N:+-n "$TEST_N"} 2>&1 | tee "$OUT/gpu_tests.log" | grep -E "FAIL|ERROR|passed|failed" | cut -c1-160 ;;
    memtests) timeout "${MEMCHECK_S:-400}" compute-sanitizer --tool memcheck --print-limit 20 python3 -m pytest -q -p no:cacheprovider --tb=short ${MEMCHECK_TESTS:-tests/test_gpu_gemm.py} ${MEMCHECK_K:+-k "$MEMCHECK_K"} 2>&1 | tee "$OUT/memcheck_tests.log" | grep -E "ERROR SUMMARY|Invalid|passed|failed" | head -20 ;;
    memcheck) timeout "${MEMCHECK_S:-400}" compute-sanitizer --tool memcheck --print-limit 20 python3 bench/memcheck.py 2>&1 | tee "$OUT/memcheck.log" | tail -8 ;;
    tune) timeout "${TUNE_S:-300}" python3 -m quantlay.cli tune --kernel "${TUNE_KERNELS:-mxfp4_cast_transpose_hw}" --flags "${TUNE_FLAGS:-on,off}" --shape "${TUNE_SHAPE:-8192x8192}" ${TUNE_MAX_TILE:+--max-tile "$TUNE_MAX_TILE"} 2>&1 | tee -a "$OUT/tune.log" | grep -E "^best|Error|error" | cut -c1-200; cp compiler/tuning.json "$OUT/" ;;
    compare) timeout 300 python3 -m quantlay.cli compare dsl/specs/mxfp4_cast_transpose.ql --against examples.compare.handwritten_mxfp4:cast_transpose_mxfp4 --binding examples/compare/binding.toml --shapes 512x1024 --time-shapes 4096x6144,8192x8192,16384x8192 --json "$OUT/compare.json" 2>&1 | tee "$OUT/compare.log" | tail -12 ;;
    profile) timeout "${PROFILE_S:-240}" ncu --clock-control none --profile-from-start off --kernel-name "regex:${PROFILE_REGEX:-_quantize_kernel|triton_fp8}" --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --metrics 'regex:^(smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio|dram__bytes_(read|write)\.sum|lts__t_bytes\.sum\.per_second)$' python3 bench/ncu_launch.py ${PROFILE_GEMM_SHAPE:+--gemm-shape $PROFILE_GEMM_SHAPE} ${PROFILE_KERNELS:-fp8_1x128_rocm_te fp8_1x128_colwise_transposed fp8_1x128_deepgemm mxfp8_nvte mxfp4_cast_transpose_hw} > "$OUT/profile.log" 2>&1; grep -E "profiled|autotuned|lts__t_bytes|Duration|DRAM Throughput|L2 Cache Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|Block Limit Reg" "$OUT/profile.log" | head -120 ;;
    sweep) timeout "${SWEEP_S:-200}" python3 bench/gemm_sweep.py ${SWEEP_GEMM:-fp8_gemm_fprop} ${SWEEP_SHAPES:-8192x8192x8192,4096x2048x7168} ${SWEEP_CONFIGS:+"$SWEEP_CONFIGS"} 2>&1 | tee -a "$OUT/sweep.log" | tail -40 ;;
    timeline) for g in ${TIMELINE_GEMMS:-fp8_gemm_grouped_wgrad_t fp8_gemm_grouped_fprop}; do timeout 120 python3 bench/gemm_timeline.py "$g" --shape "${TIMELINE_SHAPE:-4096x7168x2048}" --csv "$OUT/timeline_$g.csv"; done 2>&1 | tee "$OUT/timeline.log" | tail -12 ;;
    ablate) python3 bench/gemm_ablate.py "${ABLATE_GEMM:-fp8_gemm_grouped_wgrad_t}" /tmp/ablate > /dev/null && for d in /tmp/ablate/*/; do echo "== $(basename "$d") (base: the part taken out)"; timeout 150 python3 bench/gemm_ab.py "$d" --cases "${ABLATE_CASES:-fp8_gemm_grouped_wgrad_t:wgrad_t_G=8_equal:4096x7168x2048;fp8_gemm_grouped_wgrad_t:wgrad_t_G=8_equal:16384x4096x4096}"; done 2>&1 | tee "$OUT/ablate.log" | grep -v Warn ;;
    ab) rm -rf /tmp/ab_base && mkdir -p /tmp/ab_base && cp "${AB_BASE:-generated}"/fp8_gemm_*.py /tmp/ab_base/ && timeout "${AB_S:-300}" python3 bench/gemm_ab.py /tmp/ab_base ${AB_SET:+--set "$AB_SET"} ${AB_CASES:+--cases "$AB_CASES"} 2>&1 | tee "$OUT/ab.log" | grep -v Warn ;;
    verify) for f in dsl/specs/*.ql; do timeout 200 python3 -m quantlay.cli verify "$f" 2>&1 | tail -3; done | tee "$OUT/verify.log" ;;
    bench) timeout "${BENCH_S:-500}" python3 -m quantlay.cli bench --groups "${BENCH_GROUPS:-mxfp4}" ${SHAPES:+--shapes "$SHAPES"} ${GEMM_SHAPES:+--gemm-shapes "$GEMM_SHAPES"} ${BENCH_MATCH:+--match "$BENCH_MATCH"} --csv "$OUT/bench.csv" 2>&1 | tee "$OUT/bench.log" | tail -60 ;;
  esac
done

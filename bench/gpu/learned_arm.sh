#!/usr/bin/env bash
# Issue 42 item 6 in one GPU lease (<= 600 s of command): the replacing Transformer at the full budget
# (FULL_BUDGET: 6000 steps x 32 windows, curriculum 128/256/320), stopped by --time-limit, with its
# time-to-quality curve (test / held-out at 600 steps at every validation), steps/s and peak GPU memory;
# then the step time of the full budget's longer shapes (bench/learned_speed.py). Prepared by
# bench/gpu/prepare.sh; files back in $OUT: learned_arm.log, summary.json, results.json, metrics.jsonl,
# arm_model.json, speed.log. TL (default 270 s) is the training's time limit.
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 JAX_COMPILATION_CACHE_DIR=/tmp/jc XDG_CACHE_HOME=/tmp/xc
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import jax, mujoco; print('jax', jax.__version__, jax.devices(), 'mujoco', mujoco.__version__)" 2>&1 | grep -v warp
rm -rf /tmp/la && cp -r gpu/la /tmp/la
echo "setup $(( $(date +%s) - T0 )) s"
timeout $(( 500 - ($(date +%s) - T0) )) python3 bench/learned_arm.py --data gpu/D0 --out /tmp/la --models analytic transformer \
  --budget full --time-limit "${TL:-270}" --eval-every 25 --curve > "$OUT/learned_arm.log" 2>&1
echo "learned_arm rc=$? at $(( $(date +%s) - T0 )) s" | tee -a "$OUT/learned_arm.log"
cp /tmp/la/summary.json /tmp/la/results.json "$OUT/" 2>/dev/null
cp /tmp/la/transformer/metrics.jsonl /tmp/la/transformer/arm_model.json "$OUT/" 2>/dev/null
grep -v warp "$OUT/learned_arm.log" | tail -c 3000
REM=$(( 575 - ($(date +%s) - T0) ))
echo "left for step times: $REM s"
if [ "$REM" -gt 60 ]; then
  timeout "$REM" python3 bench/learned_speed.py --data gpu/D0 --variants f64_L320_B32 f64_L128_B256 f32_L320_B32 --steps 4 \
    2>&1 | grep -v warp | tee "$OUT/speed.log"
fi
echo "done at $(( $(date +%s) - T0 )) s"

#!/usr/bin/env bash
# Prepare, on this machine, what a GPU lease for issue 42 item 6 carries (run from the repo root):
#   bash bench/gpu/prepare.sh           # then: device run "bash bench/gpu/learned_arm.sh", carry [".whl", "gpu"]
# Writes gpu/ (ignored by git): gpu/D0 = synth neural_actuator seed 0 scale 0.1 (2.3 MB), gpu/la = the analytic
# fit of bench/learned_arm.py on it (so the lease does not spend device time on the CPU-only fit), and .whl/
# (mujoco, mujoco-mjx, cma, trimesh for Python 3.12; ../shared/tools/gpu-wheels). About 2 min on 2 cores.
set -euo pipefail
grep -qx '/gpu/' .git/info/exclude 2>/dev/null || echo '/gpu/' >> .git/info/exclude
[ -d .whl ] || ../shared/tools/gpu-wheels
[ -d gpu/D0 ] || actuatorlab synth --robot open_manipulator_x --suite neural_actuator --out gpu/D0 --seed 0 --scale 0.1
[ -f gpu/la/results.json ] || python bench/learned_arm.py --data gpu/D0 --out gpu/la --models analytic
du -sh gpu .whl

"""The mjlab exports run in mjlab itself (issue 10, section 2): ``bench/mjlab_check.py``'s three
steps as a test with tolerances.

mjlab 1.6 pins ``mujoco ~= 3.11`` and actuatorlab needs ``mujoco >= 4``, so mjlab runs in its own
virtual environment, named by ``ACTUATORLAB_MJLAB_PYTHON`` (its Python)::

    python -m venv V && V/bin/pip install mjlab==1.6.0 torch==2.13.0
    ACTUATORLAB_MJLAB_PYTHON=V/bin/python python -m pytest tests/test_mjlab_roundtrip.py -n 0

Without that variable the test is skipped: CI does not build this environment (measured on the
2-core machine: about 3.5 min to install, 2.3 GB, and 2.3 min to run, mostly MuJoCo-Warp kernel
compilation), which would take the suite past its time budget.

What is asserted (the pendulum bench at the exported 5 ms physics step, 2 s of targets):
- without joint friction, ``DcMotorActuatorCfg`` and ``BuiltinDcMotorActuatorCfg`` follow
  actuatorlab's rollout to 1e-5 rad at every sample (float32 in mjlab: about 2e-6 measured);
- the learned ``actuator_net`` through ``LearnedMlpActuatorCfg`` + TorchScript, the same;
- with the fitted joint friction the error stays below 0.01 rad MAE (MuJoCo's implicit damping and
  soft ``frictionloss``: docs/export.md section 9; 6.7 mrad measured);
- run at half the declared step (a wrong rate), every case is off by more than 5 mrad MAE: the
  test can tell a right from a wrong integration.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
PY = os.environ.get("ACTUATORLAB_MJLAB_PYTHON")

pytestmark = [pytest.mark.mjlab,
              pytest.mark.skipif(not PY, reason="set ACTUATORLAB_MJLAB_PYTHON to a Python that has mjlab 1.6 "
                                                "(see this file's docstring)")]


def _check_module():
    spec = importlib.util.spec_from_file_location("mjlab_check", ROOT / "bench" / "mjlab_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_mjlab_exports_replay_in_mjlab_within_tolerance(tmp_path, capsys):
    mod = _check_module()
    sys.path.insert(0, str(ROOT / "tests"))
    mod.prepare(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    r = subprocess.run([PY, str(ROOT / "bench" / "mjlab_check.py"), "run", str(tmp_path)], env=env,
                       capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, f"mjlab run failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    capsys.readouterr()
    rows = {}
    for case in (*mod.CASES, mod.LEARNED):
        log, res = np.load(tmp_path / case / "log.npz"), np.load(tmp_path / case / "mjlab.npz")
        for key in res.files:
            rows[case, key] = np.abs(res[key] - log["q_ref"])
    configs = {k for _, k in rows if not k.endswith(":wrong")}
    assert configs == {"DcMotorActuatorCfg", "BuiltinDcMotorActuatorCfg", "LearnedMlpActuatorCfg"}, configs
    for (case, key), e in rows.items():
        assert np.isfinite(e).all(), (case, key)
        if key.endswith(":wrong"):
            assert e.mean() > 5e-3, (case, key, e.mean())
        elif case == "full":
            assert e.mean() < 1e-2, (case, key, e.mean())
        else:
            assert e.max() < 1e-5, (case, key, e.max())

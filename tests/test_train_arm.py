"""train_arm end to end on a tiny problem: warm start from a given teacher, one compilation of the
MJX training step per curriculum window shape (counted), a resume with another teacher refused
without touching the run folder.

Tiny MLP, two 40-step chirp logs of the OpenManipulator-X; the MJX gradient still takes about a
minute per shape to compile on a 2-core CPU (the session's compilation cache keeps it for reruns).
"""

from __future__ import annotations

import numpy as np
import pytest

import actuatorlab.learned.arm_train as arm_train
from actuatorlab.errors import ModelError
from actuatorlab.learned.arm_train import ArmTrainConfig, train_arm
from actuatorlab.learned.distill import DistillConfig
from actuatorlab.precision import physics_precision
from actuatorlab.robots import load_robot

from test_learned_distill import ROBOT, chirp_logs

SIZES = dict(width=8, depth=1, d=8, head_width=8)


def _teacher(robot, kt_scale: float) -> dict:
    p = robot.nominal_params()
    return {"model": None, "params": {"kt": float(p["kt"][0] * kt_scale)}}


def test_one_compilation_per_window_shape_and_resume_rules(tmp_path, monkeypatch):
    robot = load_robot(ROBOT)
    with physics_precision():
        logs = chirp_logs(robot, robot.nominal_params(), T=40, n_logs=3, seed=1)
    traces = []
    real = arm_train.arm_loss

    def counting(*a, **k):  # called once per trace of the training step (never when it runs)
        traces.append(a[1].q_meas.shape)
        return real(*a, **k)

    monkeypatch.setattr(arm_train, "arm_loss", counting)
    budget = dict(steps=3, batch=1, curriculum=(4, 4, 8), stage_fraction=(1, 1, 1), eval_every=3,
                  max_val_windows=1, one_shape=False)
    opts = ArmTrainConfig(arch="mlp", sizes=SIZES, history=2, per_channel=("q_target", "q", "dq", "err"),
                          budget=budget, teacher=_teacher(robot, 1.05), distill=DistillConfig(steps=20, batch=64))
    run = tmp_path / "run"
    with physics_precision():
        d = train_arm(ROBOT, logs[:2], logs[2:], opts, out=run, progress=False)
    # three stages, two window shapes (4 and 8 control steps): two compilations of the step
    assert sorted({s[1] for s in traces}) == [4, 8] and len(traces) == 2, traces
    ws = d["training"]["warm_start"]
    assert ws["teacher"] == "teacher: the given analytic parameters" and ws["steps"] == 20
    assert ws["mse_after"] < ws["mse_before"]

    before = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in run.iterdir()}
    other = ArmTrainConfig(**{**opts.__dict__, "teacher": _teacher(robot, 1.2)})
    with physics_precision(), pytest.raises(ModelError) as e:
        train_arm(ROBOT, logs[:2], logs[2:], other, out=run, resume=True, progress=False)
    assert "different teacher" in str(e.value) and "\n" not in str(e.value)
    assert {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in run.iterdir()} == before
    np.testing.assert_equal(len(traces), 2)

"""Warm start of a whole-robot learned actuator by distillation of an analytic teacher.

The "hardware" is the OpenManipulator-X with its nominal actuator parameters; the teacher is an
analytic model fitted slightly wrong (kt +8 %, Coulomb friction x 2), so its rollouts have a
known, non-zero error. A small network (MLP 2 x 128, two frames of history; 16 chirp logs of
2.4 s and one noisy copy of each) distilled to the teacher on measured frames (no simulator)
must, in closed loop through the simulator on held-out windows, come within 1.2x of the teacher's
rollout error: a test that fails when the effort it learned is not the teacher's (an untrained
network drives the joints off by radians).
"""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest
from test_arm_fit import chirp_logs as arm_chirp_logs

from actuatorlab.errors import ModelError
from actuatorlab.learned.arm import _base_of, _effort_scale, arm_log, learned_windows, make_learned_arm, native_mae
from actuatorlab.learned.arm_train import distill_targets, resolve_teacher
from actuatorlab.learned.distill import DistillConfig, distill, teacher_effort
from actuatorlab.models.features import Normalizer, fit_normalizer
from actuatorlab.precision import physics_precision
from actuatorlab.robots import load_robot
from actuatorlab.sim.arm import initial_state, make_inputs
from actuatorlab.sim.arm_learned import frames_of_log, trainable
from actuatorlab.sim.arm_native import rollout_native

ROBOT = "open_manipulator_x"
FEATS = ("q_target", "q", "dq", "err")


def chirp_logs(robot, params, T=240, n_logs=3, seed=0):
    """Slower, smaller chirps than test_arm_fit's (0.2-0.4 Hz to 1-2 Hz, 0.3-0.6 rad), named by seed."""
    return arm_chirp_logs(robot, params, T, n_logs, seed, f0=(0.2, 0.2), f1=(1.0, 1.0), amp=(0.3, 0.3),
                          prefix=f"chirp_{seed}")


@pytest.fixture(scope="module")
def case():
    with physics_precision():
        robot = load_robot(ROBOT)
        truth = robot.nominal_params()
        wrong = {k: np.array(v, float) for k, v in truth.items()}
        wrong["kt"] = wrong["kt"] * 1.08
        wrong["friction_base"] = wrong["friction_base"] * 2.0
        train = chirp_logs(robot, truth, n_logs=16, seed=0)
        held = chirp_logs(robot, truth, n_logs=2, seed=7)
        ch = tuple(j for j in robot.joint_names if j.startswith("joint"))
        tr = [arm_log(robot, t, ch, FEATS) for t in train]
        ho = [arm_log(robot, t, ch, FEATS) for t in held]
    return dict(robot=robot, truth=truth, wrong=wrong, tr=tr, ho=ho, ch=ch, train=train)


def _model(case, residual=False, base=None):
    robot, tr, ch = case["robot"], case["tr"], case["ch"]
    F = len(ch) * len(FEATS)
    tmp = make_learned_arm(robot, "mlp", channels=ch, per_channel=FEATS, normalizer=Normalizer(np.zeros(F), np.ones(F)),
                           effort_scale=1.0, history=2, width=4, depth=1, d=4, head_width=4)
    fr = np.concatenate([frames_of_log(tmp, lg.base.inputs.q_target, lg.base.q_meas, lg.base.dq_meas,
                                       lg.base.inputs.v_supply, lg.base.inputs.enable, lg.telemetry) for lg in tr])
    base = case["wrong"] if base is None else base
    with physics_precision():
        s = _effort_scale(robot, base, tr, ch, residual)
        return make_learned_arm(robot, "mlp", channels=ch, per_channel=FEATS, normalizer=fit_normalizer(fr),
                                effort_scale=s, base=base, residual=residual, history=2,
                                key=jax.random.PRNGKey(0), width=128, depth=2, d=32, head_width=32)


def distill_arm(model, robot, logs, teacher, base, cfg):
    """The warm start of train_arm: its data builder, then distill."""
    x, y, w = distill_targets(model, robot, logs, teacher, base, cfg)
    return distill(model, lambda m, win: m.heads(win).torque, x, y, w, cfg, filter_spec=trainable(model))


def test_teacher_effort_is_the_rollouts_own_effort(case):
    """Teacher-forced on a log the teacher itself made, the effort equals the rollout's recorded one
    (first physics step of each control step) wherever the log's state is the rollout's state."""
    robot = case["robot"]
    with physics_precision():
        qt = np.tile(np.array([0.2, -0.3, 0.1, 0.3, 0.0]), (40, 1))
        _, o = rollout_native(robot, case["wrong"], make_inputs(robot, qt), initial_state(robot, q=np.zeros(5)))
        tau = teacher_effort(robot, case["wrong"], o.q, o.dq, make_inputs(robot, qt))
    ref = o.tau_motor + o.tau_friction
    # the window restart rebuilds the firmware memory from dq (q_prev = q - dq dt): equal up to that
    np.testing.assert_allclose(tau[5:, :4], ref[5:, :4], atol=0.05 * np.abs(ref[:, :4]).max())


def test_distillation_reproduces_the_teacher_in_closed_loop(case):
    robot, tr, ho = case["robot"], case["tr"], case["ho"]
    model = _model(case)
    with physics_precision():
        w = learned_windows(robot, ho, 100, model)
        mae_teacher = native_mae(robot, case["wrong"], w)["position_mae"]
        mae_cold = native_mae(robot, model, w)["position_mae"]
        warm, info = distill_arm(model, robot, tr, (robot, case["wrong"]), None,
                                 DistillConfig(steps=1500, batch=256, lr=3e-3, copies=1))
        mae_warm = native_mae(robot, warm, w)["position_mae"]
    assert info["mse_after"] < 0.05 * info["mse_before"] and info["r2"] > 0.97
    assert mae_teacher > 1e-3  # the teacher is wrong by a measurable amount
    assert mae_cold > 5 * mae_teacher
    assert mae_warm <= 1.2 * mae_teacher, (mae_warm, mae_teacher, info)


def test_residual_learns_teacher_minus_base(case):
    """A residual over the nominal base distilled to the (different) teacher rolls out like the teacher."""
    robot, tr, ho = case["robot"], case["tr"], case["ho"]
    truth, wrong = case["truth"], case["wrong"]
    model = _model(case, residual=True, base=truth)
    with physics_precision():
        w = learned_windows(robot, ho, 100, model)
        ref = native_mae(robot, wrong, w)["position_mae"]
        warm, info = distill_arm(model, robot, tr, (robot, wrong), (robot, truth),
                                 DistillConfig(steps=800, batch=256, lr=3e-3, copies=1))
        got = native_mae(robot, warm, w)["position_mae"]
        assert native_mae(robot, model, w)["position_mae"] < 0.2 * ref  # the zeroed head is the (true) base
    assert got >= 0.8 * ref and got <= 1.2 * ref, (got, ref)


def test_distill_is_robot_agnostic():
    """distill fits any torque_fn over (windows, targets): here a linear map of the last frame."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(512, 3, 4)).astype(np.float32)
    A = rng.normal(size=(4, 2))
    y = x[:, -1] @ A
    p, info = distill({"A": np.zeros((4, 2), np.float32)}, lambda p, win: win[-1] @ p["A"], x, y,
                      cfg=DistillConfig(steps=500, batch=128, lr=1e-1))
    assert info["r2"] > 0.99
    np.testing.assert_allclose(np.asarray(p["A"]), A, atol=0.05)


def test_teacher_file_errors(case, tmp_path):
    """--init of another robot, another joint set or an unknown format: one line naming the file."""
    other = tmp_path / "other_robot.json"
    other.write_text(json.dumps({"format": "actuatorlab-arm-model", "format_version": "1", "robot": "so100",
                                 "model": None, "params": {}, "per_joint": False}))
    joints = tmp_path / "joints.json"
    joints.write_text(json.dumps({"format": "actuatorlab-arm-model", "format_version": "1", "robot": ROBOT,
                                  "model": None, "params": {"kt": {"joint9": 1.0}}, "per_joint": True}))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"hello": 1}))
    for path, what in ((other, "fitted for robot"), (joints, "joint9"), (bad, "")):
        with pytest.raises(ModelError) as e:
            resolve_teacher(ROBOT, path, None, case["train"])
        msg = str(e.value)
        assert str(path) in msg and "\n" not in msg and what in msg
    with pytest.raises(ModelError, match="fitted for robot"):
        _base_of(ROBOT, other)

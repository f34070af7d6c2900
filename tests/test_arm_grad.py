"""Gradient fit of a whole robot through MJX (actuatorlab.identify.arm_grad).

Tracing and compiling MJX's value-and-gradient takes most of this file's time on CPU, so one
function is compiled for the whole file: the OpenManipulator-X with kt, friction_viscous and
armature free (3 values: forward mode), minibatches of B = 8 windows of L = 16 control steps. The
recovery fit runs a two-stage curriculum of that one length (the stage loop, Adam restart and
stage selection are exercised without a second compile); the gradient checks call the same
compiled function. A persistent compilation cache in the system temp dir (the one
tests/test_arm_sim.py uses) lets reruns skip the XLA compile; JAX_COMPILATION_CACHE_DIR wins if set.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import pytest
from test_arm_fit import chirp_logs

from actuatorlab.errors import DataError, ModelError, UnknownNameError
from actuatorlab.identify import arm_grad
from actuatorlab.identify.arm_fit import ArmSpace
from actuatorlab.sim.arm_data import evaluate_arm, log_arrays
from actuatorlab.identify.arm_grad import fit_arm_grad, minibatches, stage_windows, window_objective
from actuatorlab.robots import load_robot
from actuatorlab.sim.arm import ArmConfig

ROBOT = "open_manipulator_x"
NAMES = ("kt", "friction_viscous", "armature")
L, B = 16, 8  # window length [control steps], windows per step
FIT = dict(params=NAMES, curriculum=(L, L), iters=(100, 50), batch=B, lr=0.1, seed=0)


@pytest.fixture(scope="module")
def robot():
    return load_robot(ROBOT)


@pytest.fixture(scope="module")
def truth(robot):
    p = robot.nominal_params()
    p["kt"] = p["kt"] * 0.8  # 1.98 vs nominal 2.48 N.m/A
    p["friction_viscous"] = np.full_like(p["kt"], 0.2)  # nominal 0 [N.m.s/rad]
    return p


@pytest.fixture(scope="module")
def logs(robot, truth):
    """Two 1.6 s chirp logs of joint1..joint4 made by the native path with ``truth``: 20 windows
    of 16 steps (the gripper is not logged, so not scored)."""
    return chirp_logs(robot, truth, T=160, n_logs=2)


@pytest.fixture(scope="module")
def batch(robot, logs):
    """The first minibatch of the fit's shape (B windows of L steps) and the shared objective."""
    cfg = ArmConfig.from_robot(robot)
    w, wgt = stage_windows(robot, [log_arrays(robot, t) for t in logs], L, cfg)
    space, vg = window_objective(robot, NAMES, cfg)
    base = {k: jnp.asarray(v) for k, v in robot.nominal_params().items()}  # the values not fitted
    return dict(w=w, wgt=wgt, space=space, vg=vg, base=base,
                plan=minibatches(len(w.start), B, 1, np.random.default_rng(0)))


@pytest.fixture(scope="module")
def fit(logs):
    return fit_arm_grad(ROBOT, logs, **FIT)


def test_windows_and_minibatches(robot, batch):
    w, wgt = batch["w"], batch["wgt"]
    assert w.q_meas.shape == (20, L, robot.n_joints) and wgt.shape == w.q_meas.shape
    g = robot.index("gripper_left_joint")
    assert np.all(wgt[..., g] == 0.0) and np.all(wgt[..., :g] == 1.0)  # no padding: 160 = 10 x 16
    # B = 8 of 20 windows: every epoch of 3 steps uses each window once; the last step is padded
    plan = minibatches(20, 8, 6, np.random.default_rng(3))
    for epoch in (plan[:3], plan[3:]):
        real = np.concatenate([idx[c == 1] for idx, c in epoch])
        assert sorted(real) == list(range(20))
        assert [int(c.sum()) for _, c in epoch] == [8, 8, 4]
    assert all(len(idx) == 8 for idx, _ in plan)
    same = minibatches(20, 8, 6, np.random.default_rng(3))
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(plan, same))
    # fewer windows than B: every step is the full batch, padded with zero weights
    full = minibatches(5, 8, 2, np.random.default_rng(0))
    assert all(sorted(idx[c == 1]) == [0, 1, 2, 3, 4] and c.sum() == 5 for idx, c in full)


def test_gradient_finite_and_matches_central_difference(robot, batch):
    """dJ/dz through MJX (armature included: it enters MJX's dof_armature) vs central differences,
    at nominal kt and armature and half the true viscous friction, on data made with the truth."""
    space, vg, w, wgt, base = batch["space"], batch["vg"], batch["w"], batch["wgt"], batch["base"]
    idx, c = batch["plan"][0]
    args = (base, *arm_grad._take(w, wgt, idx, c))
    p = robot.nominal_params()
    p["friction_viscous"] = np.full_like(p["kt"], 0.1)
    z = space.z_of(p)
    f, g = vg(jnp.asarray(z), *args)
    g = np.asarray(g)
    assert np.all(np.isfinite(g)) and math.isfinite(float(f)) and float(f) > 1e-6
    h = 1e-5
    for a, name in enumerate(NAMES):
        zp, zm = z.copy(), z.copy()
        zp[a] += h
        zm[a] -= h
        fd = (float(vg(jnp.asarray(zp), *args)[0]) - float(vg(jnp.asarray(zm), *args)[0])) / (2 * h)
        assert abs(fd) > 1e-4 * float(f), name  # the derivative is not trivially zero
        assert g[a] == pytest.approx(fd, rel=1e-6), name  # measured 8e-10 .. 2e-9 (h = 1e-5)
    # zero-weight padding and unscored joints do not enter J: padding copies with c = 0 give the
    # same J as the real windows alone (duplicated at weight 1), and the gripper's data is ignored
    real = idx[:4]
    pad = arm_grad._take(w, wgt, np.resize(real, B), np.r_[np.ones(4), np.zeros(B - 4)])
    f_pad, _ = vg(jnp.asarray(z), base, *pad)
    f_dup, _ = vg(jnp.asarray(z), base, *arm_grad._take(w, wgt, np.r_[real, real], np.ones(B)))
    assert float(f_pad) == pytest.approx(float(f_dup), rel=1e-12)
    _, x, s0, q, wt = args
    f_grip, _ = vg(jnp.asarray(z), base, x, s0, q.at[..., robot.index("gripper_left_joint")].add(0.3), wt)
    assert float(f_grip) == pytest.approx(float(f), rel=1e-12)


def test_fit_recovers_kt_viscous_and_armature(robot, truth, logs, fit):
    r = fit
    got = {k: r["params"][k]["xm430_w350"] for k in NAMES}
    # started at nominal: kt +25 %, friction_viscous 0 (truth 0.2), armature at the truth
    assert got["kt"] == pytest.approx(truth["kt"][0], rel=0.03)
    assert got["friction_viscous"] == pytest.approx(0.2, rel=0.06)
    assert got["armature"] == pytest.approx(truth["armature"][0], rel=0.05)
    assert r["train_mae"] < r["train_mae_nominal"] / 50  # native path, 16-step windows
    assert r["train_mae_init"] == pytest.approx(r["train_mae_nominal"])
    # comparable with fit_arm: the native replay score at the fit horizon is the reported MAE
    ev = evaluate_arm(ROBOT, r["params"], logs, horizons=(L,))
    assert ev["position_mae"] == pytest.approx(r["train_mae"], rel=1e-6)
    assert {"model", "params", "nominal", "param_sets", "train_mae", "train_mse", "train_mae_nominal", "evaluations",
            "wall_s", "horizon", "n_windows", "unit", "per_joint"} <= set(r)
    assert r["method"] == "adam" and r["mode"] == "forward" and r["evaluations"] == 150
    assert r["horizon"] == L and r["n_windows"] == 20 and r["skipped_steps"] == 0
    h = r["loss_history"]
    assert [s["iters"] for s in h] == [100, 50] and all(len(s["loss"]) == s["iters"] for s in h)
    assert h[1]["lr"] < h[0]["lr"] == 0.1  # one decay through both stages
    assert np.mean(h[-1]["loss"][-10:]) < np.mean(h[0]["loss"][:5]) / 100
    assert r["compile_s"] >= 0 and r["wall_s"] > r["compile_s"]
    assert r["param_sets"]["kt"] == [got["kt"]]


def test_same_seed_same_result(logs):
    kw = dict(FIT, curriculum=(L,), iters=(4,))
    a, b = fit_arm_grad(ROBOT, logs, **kw), fit_arm_grad(ROBOT, logs, **kw)
    assert a["params"] == b["params"] and a["loss_history"][0]["loss"] == b["loss_history"][0]["loss"]
    assert b["compile_s"] < 5.0  # the executable compiled once in this process is reused
    c = fit_arm_grad(ROBOT, logs, **dict(kw, seed=1))  # another minibatch order
    assert c["params"] != a["params"]


class _Quadratic:
    """Stand-in for the compiled MJX objective: J = |z - target|^2, NaN gradients at some calls."""

    def __init__(self, target, nan_at=()):
        self.target, self.nan_at, self.calls = jnp.asarray(target), set(nan_at), 0

    def lower(self, *a):
        return self

    def compile(self):
        return self

    def __call__(self, z, *data):
        self.calls += 1
        g = 2 * (z - self.target)
        return jnp.sum((z - self.target) ** 2), jnp.full_like(z, jnp.nan) if self.calls in self.nan_at else g


def _stub(monkeypatch, truth, nan_at=()):
    """Replace the MJX objective by a quadratic around z(truth) in the fit's own box."""
    def factory(r, names, cfg, mode, sets, images=None):
        space = ArmSpace.build(names, r.nominal_params(), sets)
        full = {k: np.broadcast_to(truth[k][:1], (len(r.groups),)) for k in names}
        return space, _Quadratic(space.z_of(full), nan_at)

    monkeypatch.setattr(arm_grad, "window_objective", factory)


def test_nan_steps_are_skipped(monkeypatch, truth, logs):
    """The descent loop on the stand-in objective with NaN gradients at two steps: those steps
    are skipped and counted, and projected Adam still lands on the truth."""
    _stub(monkeypatch, truth, nan_at=(3, 7))
    r = fit_arm_grad(ROBOT, logs, **dict(FIT, curriculum=(L,), iters=(200,)))
    assert r["skipped_steps"] == 2 and r["loss_history"][0]["skipped"] == 2
    assert r["params"]["kt"]["xm430_w350"] == pytest.approx(truth["kt"][0], rel=1e-3)
    assert r["params"]["friction_viscous"]["xm430_w350"] == pytest.approx(0.2, rel=1e-3)
    assert r["train_mae"] < 1e-4 * r["train_mae_nominal"]  # the truth replays its own logs


def test_per_joint_layout(monkeypatch, robot, truth, logs):
    """One set per logged joint (the unlogged gripper stays nominal), reverse mode above
    FORWARD_MAX values, and the result feeds evaluate_arm (stand-in objective: no compile)."""
    _stub(monkeypatch, truth)
    r = fit_arm_grad(ROBOT, logs, **dict(FIT, curriculum=(L,), iters=(200,)), per_joint=True)
    arm = {"joint1", "joint2", "joint3", "joint4"}
    assert set(r["params"]["kt"]) == arm and r["mode"] == "reverse" and r["per_joint"]
    for j in arm:
        assert r["params"]["kt"][j] == pytest.approx(truth["kt"][0], rel=1e-3)
    assert r["param_sets"]["kt"][robot.index("gripper_left_joint")] == robot.nominal_params()["kt"][0]
    ev = evaluate_arm(ROBOT, r["params"], logs, horizons=(L,))
    assert ev["position_mae"] == pytest.approx(r["train_mae"], rel=1e-6)


def test_init_picks_the_best_start_and_keeps_its_fixed_values(monkeypatch, robot, truth, logs):
    """Starts are scored natively; the fit starts from the best one, and a parameter it does not
    fit (load_friction) keeps that start's value (stand-in objective: no compile)."""
    _stub(monkeypatch, truth)
    good = {"kt": truth["kt"], "friction_viscous": {"xm430_w350": 0.2}, "load_friction": 0.17}
    bad = {"kt": 4.0}
    r = fit_arm_grad(ROBOT, logs, **dict(FIT, curriculum=(L,), iters=(5,)), init=[bad, good])
    assert r["param_sets"]["load_friction"] == [0.17]  # nominal 0.16
    assert r["train_mae_init"] < r["train_mae_nominal"] / 10  # the good start, not nominal or bad


def test_bad_inputs(logs):
    with pytest.raises(UnknownNameError, match="friction_viscous"):  # the message lists what exists
        fit_arm_grad(ROBOT, logs, params=("kt", "not_a_param"))
    with pytest.raises(ModelError, match="curriculum is empty"):
        fit_arm_grad(ROBOT, logs, params=NAMES, curriculum=())
    with pytest.raises(ModelError, match="iterations"):
        fit_arm_grad(ROBOT, logs, params=NAMES, curriculum=(8, 16), iters=(5, 0))
    with pytest.raises(ModelError, match="2 curriculum stages"):
        fit_arm_grad(ROBOT, logs, params=NAMES, curriculum=(8, 16), iters=(5,))
    with pytest.raises(ModelError, match="batch"):
        fit_arm_grad(ROBOT, logs, params=NAMES, batch=0)
    with pytest.raises(ModelError, match="lr"):
        fit_arm_grad(ROBOT, logs, params=NAMES, lr=-1.0)
    with pytest.raises(UnknownNameError, match="not_a_param"):
        fit_arm_grad(ROBOT, logs, params=NAMES, iters=1, init={"not_a_param": 1.0})
    with pytest.raises(DataError, match="no logs"):
        fit_arm_grad(ROBOT, [], params=NAMES)

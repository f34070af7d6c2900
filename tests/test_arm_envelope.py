"""The operating envelope of a whole-robot fit: ``fit --robot`` records per joint the ranges its
logs covered, the environments read them from arm_model.json and count time outside, and
``evaluate --robot`` reports each log's share of samples outside."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

from actuatorlab.logs.format import Channel, Setup, Trajectory
from actuatorlab.logs.io import save_trajectory
from actuatorlab.robots import load_robot

ROBOT = "open_manipulator_x"
AMP = {"joint1": 0.2, "joint2": 0.3, "joint3": 0.25, "joint4": 0.15}  # [rad] of each joint's sine


def _log(robot, name, scale=1.0, T=200, f=1.0):
    t = np.arange(T) * robot.control_dt
    data, ch = {}, {}
    for k, (j, a) in enumerate(AMP.items()):
        q = scale * a * np.sin(2 * np.pi * f * t + k)
        for c, v, unit, kind in ((f"position/{j}", q, "rad", "measured"),
                                 (f"velocity/{j}", np.gradient(q, t), "rad/s", "estimated"),
                                 (f"position_target/{j}", q, "rad", "commanded")):
            data[c], ch[c] = v, Channel(unit, kind)
    setup = Setup("xm430-w350", controller="dynamixel_pwm", gains={"kp": 800}, supply_voltage=12.0,
                  extra={"robot": robot.name, "joints": list(AMP)})
    return Trajectory(name, t, data, ch, setup)


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    from actuatorlab.app.jobs import RobotFitOptions, run_fit

    robot = load_robot(ROBOT)
    d = tmp_path_factory.mktemp("armenv")
    logs = [_log(robot, "a"), _log(robot, "b", f=1.5)]
    paths = [str(save_trajectory(tr, d / f"{tr.name}.parquet")) for tr in logs]
    # no robot named: the logs name theirs (Setup.extra["robot"]), so run_fit fits the whole robot
    m = run_fit(paths, d / "run", model="m1", robot=RobotFitOptions(max_evals=2, max_windows=2, horizon=50))
    assert m["robot"] == ROBOT and (d / "run" / "arm_model.json").is_file()
    return robot, logs, d, m


def test_fit_records_the_logs_ranges_per_joint(fitted):
    from actuatorlab.evaluate.envelope import validate_envelope

    robot, logs, d, m = fitted
    env = json.loads((d / "run" / "arm_model.json").read_text())["envelope"]
    assert set(env) == set(AMP)  # the gripper is not in the logs: no envelope for it
    for j, a in AMP.items():
        validate_envelope(env[j], j)
        for dim, x in (("position", np.concatenate([tr[f"position/{j}"] for tr in logs])),
                       ("velocity", np.concatenate([tr[f"velocity/{j}"] for tr in logs]))):
            r = env[j]["dimensions"][dim]
            span = x.max() - x.min()
            assert r["min"] == pytest.approx(x.min()) and r["max"] == pytest.approx(x.max())
            # quantile range widened by 5 % of its span: within [min - 5.1 % span, min], same at the top
            assert x.min() - 0.051 * span <= r["lower"] <= x.min()
            assert x.max() <= r["upper"] <= x.max() + 0.051 * span
        assert "effort" not in env[j]["dimensions"]  # no pwm_duty channel in these logs


def test_environment_reads_the_envelope_from_the_model_file_and_counts_time_outside(fitted):
    from actuatorlab.envs import TimingContract
    from actuatorlab.envs.gym_env import NativeBatch

    robot, logs, d, m = fitted
    path = d / "run" / "arm_model.json"
    c = TimingContract(decimation=2, action_scale=1.0)
    key = np.asarray(jax.random.PRNGKey(0))[None]
    env = NativeBatch(ROBOT, path, num_envs=1, contract=c)
    off = NativeBatch(ROBOT, path, num_envs=1, contract=c, envelope=False)
    assert env.bounds is not None and off.bounds is None
    lo = env.bounds.pos_lo[robot.index("joint1")]
    assert lo == pytest.approx(m["envelope"]["joint1"]["dimensions"]["position"]["lower"])
    for e in (env, off):
        e.reset(key)
    hold = np.zeros((1, robot.n_joints))
    for _ in range(3):  # at home (0 rad, inside every joint's range): nothing counted
        _, _, _, _, info = env.step(hold)
    assert info["envelope_outside_s"]["position"].max() == 0.0
    go = hold.copy()
    go[0, robot.index("joint1")] = 0.6  # beyond joint1's 0.2 rad amplitude
    for _ in range(15):
        _, _, _, _, info = env.step(go)
        _, _, _, _, info_off = off.step(go)
    out = info["envelope_outside_s"]["position"][0]
    assert out[robot.index("joint1")] > 0.05 and out[robot.index("joint2")] == 0.0
    assert info_off["envelope_outside_s"]["any"].max() == 0.0


def test_evaluate_reports_each_logs_share_outside(fitted, tmp_path):
    from actuatorlab.app.jobs import run_evaluate_arm

    robot, logs, d, m = fitted
    inside = save_trajectory(logs[0], tmp_path / "in.parquet")
    wide = save_trajectory(_log(robot, "wide", scale=2.0, f=0.5), tmp_path / "wide.parquet")
    r = run_evaluate_arm(ROBOT, d / "run" / "arm_model.json", [str(inside), str(wide)])
    frac = r["envelope_outside_fraction"]
    assert frac["a"] < 0.01  # a training log: only the quantile tails can be outside
    # twice the amplitude at half the frequency (velocities as in training): the position leaves the
    # range (+5 %) where |sin| > 0.525, 1 - 2 asin(0.525) / pi = 65 % of a period
    assert 0.55 < frac["wide"] < 0.75
    assert set(r["envelope_outside_per_joint"]["wide"]) == set(AMP)


def test_the_environment_counts_outside_the_samples_the_evaluation_check_finds_outside(fitted):
    """'Outside' is defined once: the run-time counters (envs.envelope.outside) and the evaluation's
    log check (check_log per joint) flag the same samples of the same signals."""
    from actuatorlab.envs.envelope import DIMS, envelope_bounds, outside
    from actuatorlab.evaluate.envelope import check_robot_log, robot_features

    robot, logs, d, m = fitted
    env = m["envelope"]
    wide = _log(robot, "wide", scale=2.0, f=1.0)  # twice the training amplitude, 4/3 of its peak speed
    feats = robot_features(robot, wide)
    q = np.zeros((wide.n, robot.n_joints))
    dq = np.zeros_like(q)
    for j in AMP:
        q[:, robot.index(j)] = feats[j]["signals"]["position"]
        dq[:, robot.index(j)] = feats[j]["signals"]["velocity"]
    counted = outside(np, envelope_bounds(robot, env), q, dq, np.zeros_like(q))  # (T, 5, n)
    checks = {c.log: c for c in check_robot_log(robot, env, wide)}
    assert set(checks) == set(AMP)
    for j in AMP:
        for k, dim in enumerate(DIMS[:2]):
            np.testing.assert_array_equal(counted[:, k, robot.index(j)], checks[j].outside[dim])
        assert checks[j].outside["position"].any() and checks[j].outside["velocity"].any()


def test_evaluate_reports_each_joints_errors_by_the_one_joint_regimes(fitted, tmp_path):
    """The whole-robot evaluation gains, per joint, the regime breakdown of the one-joint
    evaluation (evaluate.metrics), on the window rollouts it scores: the joint's MAE over all its
    samples is evaluate_arm's MAE at that horizon, and the speed regimes of a sine follow the
    arcsine law as for one joint."""
    import math

    from actuatorlab.app.jobs import run_evaluate_arm
    from actuatorlab.evaluate.metrics import REGIMES, regime_masks, summarize
    from actuatorlab.evaluate.replay import replay_robot

    robot, logs, d, m = fitted
    path = save_trajectory(logs[0], tmp_path / "a.parquet")
    r = run_evaluate_arm(ROBOT, d / "run" / "arm_model.json", [str(path)])
    h = r["horizon"]
    assert r["regime_horizon"] == h and set(r["per_joint_regimes"]) == set(AMP)
    res = replay_robot(ROBOT, dict(m["params"]), [logs[0]], h, m["model"])
    c95 = math.cos(0.025 * math.pi)
    for j in AMP:
        reg = r["per_joint_regimes"][j]
        assert list(reg) == list(REGIMES)
        (lr,) = res[j]
        assert summarize(res[j])["position_mae"] == pytest.approx(r["per_joint"][j][str(h)], rel=1e-12)
        assert summarize(res[j])["regimes"] == reg
        masks = regime_masks(lr)
        assert reg["high_speed"]["n_samples"] == int(masks["high_speed"].sum())
        # 200 samples of a 1 Hz sine at 100 Hz: P(|cos| > 0.5 c95) = 1 - (2/pi) asin(0.5 c95)
        assert reg["high_speed"]["fraction"] == pytest.approx(1 - 2 / math.pi * math.asin(0.5 * c95), abs=0.03)
        assert reg["torque_disabled"]["n_samples"] == 0 and reg["stall"]["n_samples"] == 0  # no pwm_duty logged
        # a 1 Hz sine reverses twice a second: 4 reversals in 2 s, each marks 11 samples (+-0.05 s)
        assert reg["near_reversal"]["n_samples"] in range(3 * 11 - 6, 4 * 11 + 1)


def test_an_arm_model_file_with_the_earlier_envelope_layout_still_evaluates_the_same(fitted, tmp_path):
    """Files written before the whole-robot envelope was the one-joint one per joint record fewer
    keys (regimes only 'saturated', rest_speed 0, no torque_disabled_seen, a 'source' note); they
    load and give the same outside fractions: the 1-D ranges are what is checked."""
    from actuatorlab.app.jobs import run_evaluate_arm

    robot, logs, d, m = fitted
    doc = json.loads((d / "run" / "arm_model.json").read_text())
    keep = ("version", "dt", "unit", "n_samples", "logs", "dimensions")
    doc["envelope"] = {j: {**{k: e[k] for k in keep}, "planes": {}, "regimes": {}, "conditions": {},
                           "checked_conditions": [], "source": "whole-robot training logs (identify.arm_envelope)",
                           "settings": {"quantiles": [0.001, 0.999], "margin": 0.05, "saturation_level": 0.95,
                                        "rest_speed": 0.0, "rest_window_s": 0.1}}
                       for j, e in doc["envelope"].items()}
    old = tmp_path / "old_arm_model.json"
    old.write_text(json.dumps(doc))
    wide = save_trajectory(_log(robot, "wide", scale=2.0, f=0.5), tmp_path / "wide.parquet")
    a = run_evaluate_arm(ROBOT, d / "run" / "arm_model.json", [str(wide)])
    b = run_evaluate_arm(ROBOT, old, [str(wide)])
    for k in ("envelope_outside_fraction", "envelope_outside_per_joint", "envelope_outside_dimensions"):
        assert a[k] == b[k]
    assert 0.55 < b["envelope_outside_fraction"]["wide"] < 0.75

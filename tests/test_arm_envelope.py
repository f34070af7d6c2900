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

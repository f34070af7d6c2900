"""The legged in-air suite (synth/legged.py, synth/legged_sim.py): physics directions, safety, determinism."""

import dataclasses
import json
import math

import numpy as np
import pytest

from actuatorlab.robots.loader import home_qpos
from actuatorlab.logs.io import load_native
from actuatorlab.synth.legged import (ANYDRIVE, DRIVE_FAMILIES, DRIVE_LOG_DT, JOINT_TYPES, SAFETY, TRAIN_GAIN,
                                      LeggedLog, draw_units, leg_command, legged_logs)
from actuatorlab.synth.legged_sim import (LeggedRun, legged_robot, log_target, protocol_log, run_legged,
                                          simulate_legged)
from actuatorlab.synth.suites import SynthError

ROBOT = legged_robot()
HOME = home_qpos(ROBOT.model())[ROBOT.qpos_adr]
J = ROBOT.index("LF_HFE")


def _one(unit, target_j, load=0.0, seed=0, j=J):
    """Every drive = ``unit``; joint ``j`` (LF_HFE) follows ``target_j`` (offsets [rad]), the others hold."""
    tg = np.zeros((target_j.size, ROBOT.n_joints))
    tg[:, j] = target_j
    return simulate_legged(ROBOT, (unit,) * ROBOT.n_joints, LeggedRun(tg, TRAIN_GAIN, load, np.full(12, 30.0)),
                           np.random.default_rng(seed))


def _phase_lag(t, x, f):
    """[rad] phase of x behind sin(2 pi f t)."""
    s, c = np.sum(x * np.sin(2 * np.pi * f * t)), np.sum(x * np.cos(2 * np.pi * f * t))
    return -math.atan2(c, s)


def test_more_delay_more_phase_lag():
    t = np.arange(101) * 0.02
    tgt = 0.1 * np.sin(2 * np.pi * 1.5 * t)
    lags = []
    for delay in (0.002, 0.02):
        u = dataclasses.replace(ANYDRIVE, interface=dataclasses.replace(ANYDRIVE.interface, command_delay=delay))
        r = _one(u, tgt)
        sel = t >= 0.67  # after one cycle
        lags.append(_phase_lag(t[sel], r.position[sel, J] - HOME[J], 1.5))
    # 18 ms more delay at 1.5 Hz: about 0.17 rad more lag
    assert lags[1] - lags[0] > 0.1, lags


def test_more_backlash_wider_dead_band_at_reversals():
    # LF_HFE swung slowly around the pose where its gravity torque is zero (0.35 rad below standing): the
    # spring torque changes sign at every pass, so the rotor crosses the dead band
    t = np.arange(201) * 0.02
    x = np.mod(t / 2.0 + 0.25, 1.0)
    tgt = -0.35 + 0.2 * (1.0 - 4.0 * np.abs(x - 0.5))  # triangle +-0.2 rad, 0.4 rad/s
    swing = []
    for b in (0.0005, 0.02):
        u = dataclasses.replace(ANYDRIVE, gear=dataclasses.replace(ANYDRIVE.gear, backlash=b))
        r = _one(u, tgt)
        assert np.min(r.tau_c[50:, J]) < 0 < np.max(r.tau_c[50:, J])
        defl = r.motor_position[50:, J] - r.position[50:, J]  # the logged deflection, both encoders
        swing.append(float(defl.max() - defl.min()))
    # the dead band adds its width to the deflection swing between the two torque directions
    assert swing[1] - swing[0] > 0.5 * (0.02 - 0.0005), swing


def test_simulation_deterministic_by_seed():
    log = LeggedLog("x", "train", "chirp", 1.0, TRAIN_GAIN, 1, 1.0)
    runs = []
    for _ in range(2):
        rng = np.random.default_rng([3, 1, 0])
        tg = log_target(ROBOT, log, rng)
        runs.append(simulate_legged(ROBOT, (ANYDRIVE,) * 12, LeggedRun(tg, log.gain, log.load, np.full(12, 30.0)), rng))
    for f in ("position", "motor_position", "velocity", "current", "effort", "q"):
        np.testing.assert_array_equal(getattr(runs[0], f), getattr(runs[1], f))


def test_commands_stay_inside_the_box_and_speed_cap():
    t = np.arange(501) * 0.02
    for jt in JOINT_TYPES:
        for fam in ("chirp", "sweep_slow", "sweep_fast", "reversals", "steps"):
            q = leg_command(fam, t, jt, np.random.default_rng(1))
            assert np.max(np.abs(q)) <= SAFETY.command_share * SAFETY.box(jt) + 1e-12
            assert np.max(np.abs(np.diff(q))) / 0.02 <= SAFETY.command_speed + 1e-9


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    out = tmp_path_factory.mktemp("legged") / "d"
    run_legged("anymal_c", out, seed=0, scale=0.02)
    return out


def test_protocol_never_leaves_its_safety_limits(tiny):
    card = json.loads((tiny / "dataset.json").read_text())
    assert set(card["splits"]) == {"train", "heldout/excitation", "heldout/load", "heldout/gain", "drive"}
    # the check bites: the chirps resonate past the HAA box at full amplitude and were run again smaller
    assert any(rec["rejected_amplitudes"] for rec in card["logs"] if rec["family"] == "chirp")
    for rec in card["logs"]:
        ex = rec["truth_extremes"]
        for jt in JOINT_TYPES:
            assert ex[f"{jt}_max_offset_rad"] <= SAFETY.box(jt), (rec["name"], jt, ex)
            assert ex[f"{jt}_max_speed_rad_s"] <= SAFETY.speed, (rec["name"], jt, ex)
            assert ex[f"{jt}_max_torque_nm"] <= SAFETY.torque, (rec["name"], jt, ex)
        assert SAFETY.violations(ex) == []
        for tried in rec["rejected_amplitudes"]:  # a rejected amplitude was larger and broke a limit
            assert tried["amplitude"] > rec["amplitude"] and tried["broken"]
        # something moved: the excited joints leave the standing pose
        assert max(ex[f"{jt}_max_offset_rad"] for jt in JOINT_TYPES) > 0.02


def test_same_seed_same_logs(tiny):
    """A log of the dataset is the protocol run of its own streams (seed, 1 | 2, k) with the units of stream (seed, 0)."""
    card = json.loads((tiny / "dataset.json").read_text())
    assert card["units"]["LF_HFE"] != card["units"]["RF_HFE"]  # unit-to-unit variation
    logs = legged_logs(0.02)
    k = next(i for i, lg in enumerate(logs) if lg.split == "heldout/load")
    units = draw_units(np.random.default_rng([0, 0]), 12)
    target, amp, r, tries = protocol_log(ROBOT, units, logs[k], 0, k, HOME)
    assert card["logs"][k]["amplitude"] == amp and len(tries) == len(card["logs"][k]["rejected_amplitudes"])
    traj = load_native(tiny / logs[k].split / f"{logs[k].name}.parquet", strict=False)
    for j in ("LF_HAA", "RH_KFE"):
        np.testing.assert_array_equal(traj[f"position/{j}"], r.position[:, ROBOT.index(j)])
        np.testing.assert_array_equal(traj[f"effort/{j}"], r.effort[:, ROBOT.index(j)])


def test_other_robot_refused():
    with pytest.raises(SynthError, match="anymal_c"):
        legged_robot("open_manipulator_x")


def test_drive_rate_logs_sample_the_registers_at_1khz(tiny):
    """The drive split: the same protocol's commands (50 Hz, held), the drive's registers every millisecond and
    the datasheet constants the drive-side identification needs; appended after the other logs, whose seed
    streams therefore did not move (test_same_seed_same_logs)."""
    logs = legged_logs(0.02)
    drive = [lg for lg in logs if lg.split == "drive"]
    assert [lg.family for lg in drive] == [f for f in DRIVE_FAMILIES for _ in range(3)]
    assert logs[-len(drive):] == drive and {lg.rotation for lg in drive} == {0, 1, 2}
    traj = load_native(tiny / "drive" / f"{drive[0].name}.parquet", strict=False)
    assert np.allclose(np.diff(traj.time), DRIVE_LOG_DT)
    assert traj.setup.extra["drive"]["torque_constant"] == pytest.approx(4.0)
    cmd = traj["position_target/LF_HAA"]
    steps = np.flatnonzero(np.diff(cmd))  # the host's 50 Hz command, held between its samples
    assert steps.size > 10 and np.all(np.diff(steps) % 20 == 0)
    assert np.ptp(traj["current/LF_HAA"]) > 1.0 and np.ptp(traj["motor_position/LF_HAA"]) > 0.02

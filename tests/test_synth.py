"""Virtual hardware (actuatorlab.synth): determinism, splits, channel metadata, labels and physics.

The dataset tests use the 4-trajectory "smoke" suite; the physics tests call the simulator directly
on short plans. Everything needs the OpenManipulator-X MJCF of ../shared/models (skipped if absent).
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import mujoco
import numpy as np
import pytest

from actuatorlab.errors import DataError, UnknownNameError
from actuatorlab.logs import CANONICAL_UNITS, load_native
from actuatorlab.synth import SUITES, run_synth, split_groups
from actuatorlab.synth import truth as tr
from actuatorlab.synth.commands import Plan, plan_of
from actuatorlab.synth.robot import ROBOTS, Kinematics, build_scene
from actuatorlab.synth.simulate import Rates, Restriction, RunConditions, simulate
from actuatorlab.synth.suites import SynthError

SHARED = Path(__file__).resolve().parents[2] / "shared"
MJCF = SHARED / "models" / "open_manipulator_x" / "open_manipulator_x.xml"
JOINTS = ROBOTS["open_manipulator_x"].joints



def _need_model() -> None:
    if not MJCF.is_file():
        pytest.skip("../shared/models/open_manipulator_x is not present")


def _tree_hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> Path:
    _need_model()
    out = tmp_path_factory.mktemp("synth") / "smoke"
    summary = run_synth("open_manipulator_x", "smoke", out, seed=0)
    assert summary["n_trajectories"] == 4
    return out


@pytest.fixture(scope="module")
def card(smoke) -> dict:
    return json.loads((smoke / "dataset.json").read_text())


def _load(smoke: Path, card: dict, name: str):
    rec = next(r for r in card["trajectories"] if r["name"] == name)
    return load_native(smoke / rec["split"] / name, strict=False), rec


@pytest.fixture(scope="module")
def truths():
    return tr.draw_joint_truths(np.random.default_rng(7), JOINTS)


@pytest.fixture(scope="module")
def scene(truths):
    _need_model()
    return build_scene("open_manipulator_x", truths, Rates().physics_dt)


# ----------------------------------------------------------------------------------------------
# dataset: determinism, splits, metadata
# ----------------------------------------------------------------------------------------------

def test_same_seed_same_bytes_other_seed_differs(smoke, tmp_path):
    again = tmp_path / "again"
    run_synth("open_manipulator_x", "smoke", again, seed=0)
    h0, h1 = _tree_hashes(smoke), _tree_hashes(again)
    assert len(h0) == 2 * 4 + 2  # 4 parquet/json pairs + DATASET.md + dataset.json
    assert h0 == h1
    other = tmp_path / "other"
    run_synth("open_manipulator_x", "smoke", other, seed=1)
    h2 = _tree_hashes(other)
    assert h2.keys() == h0.keys()
    assert sum(h0[k] != h2[k] for k in h0) >= 8  # every trajectory file differs


def test_split_files_unique_and_heldout_only_under_heldout(smoke, card):
    files = sorted(p.relative_to(smoke) for p in smoke.rglob("*.parquet"))
    names = [p.stem for p in files]
    assert len(names) == len(set(names)) == len(card["trajectories"]) == 4
    for p in files:
        traj = load_native(smoke / p, strict=False)
        under_heldout = p.parts[0] == "heldout"
        held = traj.conditions["load"] == "payload_400g" or traj.conditions["contact"] == "push_-y"
        if held:
            assert under_heldout, p
        if under_heldout:  # held-out folders hold the condition or the no-contact pair of a held-out push
            assert held or traj.conditions["pair"] != "none"
            assert p.parts[1] in ("payload_400g", "push_-y")
        rec = next(r for r in card["trajectories"] if r["name"] == p.stem)
        assert Path(rec["split"]) == p.parent


def test_split_of_full_suite_is_8_1_1_by_group_and_keeps_pairs():
    suite = SUITES["neural_actuator"]
    specs = suite.build(1.0, np.random.default_rng(1))
    split = split_groups(specs, suite.heldout, np.random.default_rng(3))
    assert set(split) == {s.name for s in specs} and len(specs) == len(split)
    for s in specs:
        c = s.conditions("s01")
        if c["load"] == "payload_400g":
            assert split[s.name] == "heldout/payload_400g"
        elif c["contact"] == "push_-y" or (s.pair != "none" and s.pair.startswith("push_-y")):
            assert split[s.name] == "heldout/push_-y"
        else:
            assert not split[s.name].startswith("heldout")
        if s.pair != "none":
            assert split[s.name] == split[s.pair]
    counts = {k: sum(v == k for v in split.values()) for k in ("train", "val", "test")}
    rest = sum(counts.values())
    assert counts["val"] == pytest.approx(0.1 * rest, abs=3) and counts["test"] == pytest.approx(0.1 * rest, abs=3)
    assert counts["train"] >= 0.75 * rest
    again = split_groups(specs, suite.heldout, np.random.default_rng(3))
    assert again == split


def test_restricted_pairs_are_split_by_family_so_val_and_test_hold_every_family():
    from actuatorlab.synth.suites import RESTRICTED_PAIR_FAMILIES, restricted_pair_specs

    fams = {(f, v) for _, f, _, v, _ in RESTRICTED_PAIR_FAMILIES}
    missing_plain = 0
    for seed in range(8):
        specs = restricted_pair_specs(60, 0.1, np.random.default_rng(seed), 0)
        split = split_groups(specs, (), np.random.default_rng(seed), stratify=True)
        plain = split_groups(specs, (), np.random.default_rng(seed))
        for s in specs:                                                   # a pair is never split
            assert split[s.name] == split[s.pair]
        for where in ("val", "test"):
            held = {(s.family, s.variant) for s in specs if split[s.name] == where}
            assert held == fams                                           # every family, every seed
            assert sum(split[s.name] == where for s in specs) == 2 * 6    # 6 pairs, as unstratified
            missing_plain += {(s.family, s.variant) for s in specs if plain[s.name] == where} != fams
        trained = {(s.family, s.variant) for s in specs if split[s.name] == "train"}
        assert trained == fams and sum(v == "train" for v in split.values()) == 2 * 48
        assert split == split_groups(specs, (), np.random.default_rng(seed), stratify=True)
    assert missing_plain > 0          # the random cut does miss families (the reason for stratify)
    few = restricted_pair_specs(3, 0.1, np.random.default_rng(0), 0)    # strata of 1: plain random cut
    split = split_groups(few, (), np.random.default_rng(0), stratify=True)
    assert sorted(split.values()) == ["test", "test", "train", "train", "val", "val"]


def test_channel_metadata_units_and_setup(smoke, card):
    for rec in card["trajectories"]:
        traj, _ = _load(smoke, card, rec["name"])
        assert traj.setup.actuator == "xm430-w350" and traj.setup.controller == "dynamixel_pwm"
        assert traj.setup.joint_type == "revolute" and traj.setup.gains == {"kp": 800.0}
        assert traj.setup.extra["robot"] == "open_manipulator_x" and traj.setup.extra["joints"] == list(JOINTS)
        assert traj.setup.extra["per_joint_gains"] == {j: {"kp": 800.0} for j in JOINTS}
        for key in ("load", "gain", "excitation", "session", "contact", "restricted"):
            assert key in traj.conditions
        expected_kind = {"position_target": "commanded", "torque_enable": "commanded", "position": "measured",
                         "velocity": "estimated", "current": "measured", "pwm_duty": "measured",
                         "temperature": "measured"}
        for j in JOINTS:
            for canon, kind in expected_kind.items():
                ch = traj.channels[f"{canon}/{j}"]
                assert ch.unit == CANONICAL_UNITS[canon]["revolute"], (canon, ch.unit)
                assert ch.kind == kind and ch.source and ch.latency_s >= 0.0
                assert np.all(np.isfinite(traj[f"{canon}/{j}"]))
            assert traj.channels[f"position/{j}"].side == "output"
            assert traj.channels[f"velocity/{j}"].latency_s == pytest.approx(0.013)
        assert traj.channels["supply_voltage"].unit == "V"
        for ax in "xyz":
            ch = traj.channels[f"force_{ax}"]
            assert ch.unit == "N" and ch.side == "none"
            assert ch.kind == ("measured" if rec["family"] in ("push_hold", "no_contact") else "estimated")
        assert traj.channels["contact"].unit == "bool"
        # register quantisation is visible in the values
        counts = traj["position/joint2"] / tr.ENCODER_STEP
        assert np.allclose(counts, np.round(counts), atol=1e-6)
        pwm = traj["pwm_duty/joint2"] * tr.PWM_LIMIT
        assert np.allclose(pwm, np.round(pwm), atol=1e-6)
        assert np.allclose(traj["supply_voltage"] * 10, np.round(traj["supply_voltage"] * 10), atol=1e-6)
        assert np.all(np.diff(traj.time) > 0) and np.allclose(np.diff(traj.time), 0.01)


def test_card_states_generator_seed_scale_truth_and_split(smoke, card):
    assert card["generator"] == "actuatorlab.synth" and card["seed"] == 0 and card["scale"] == 1.0
    assert card["suite"] == "smoke" and card["rates_hz"] == {"physics": 2000.0, "firmware": 1000.0, "log": 100.0}
    for j in JOINTS:
        t = card["ground_truth"]["joints"][j]
        assert set(t) == set(card["ground_truth"]["units"])
        assert 1.5 < t["kt20"] < 3.5 and 3.0 < t["R20"] < 8.0
    # units really differ (unit-to-unit variation) and are recorded
    assert len({card["ground_truth"]["joints"][j]["R20"] for j in JOINTS}) == 4
    md = (smoke / "DATASET.md").read_text()
    for word in ("seed 0", "scale 1.0", "smoke", "lift_hold", "heldout/push_-y", "R20", "train"):
        assert word in md


# ----------------------------------------------------------------------------------------------
# labels and firmware law in the logs
# ----------------------------------------------------------------------------------------------

def test_payload_force_label_is_the_payload_weight(smoke, card, scene):
    traj, rec = _load(smoke, card, "lift_hold_400g_000")
    on = traj["contact"] > 0.5
    assert on.all()  # grasped from the start
    assert np.allclose(traj["force_z"][on], -0.4 * 9.81, atol=1e-9)
    assert np.allclose(traj["force_x"], 0.0) and np.allclose(traj["force_y"], 0.0)
    # the label, applied at the end effector, has the payload's effect on the joints of the scene:
    # qfrc_bias(m) - qfrc_bias(0) = -J^T F_label
    data = mujoco.MjData(scene.model)
    q = np.array([0.3, 0.7, -0.5, 0.2])
    data.qpos[scene.qpos] = q
    bias = []
    for m in (0.0, 0.4):
        scene.set_payload(m)
        mujoco.mj_forward(scene.model, data)
        bias.append(data.qfrc_bias[scene.dof].copy())
    scene.set_payload(0.0)
    J = Kinematics(scene).jacobian(q)
    F = np.array([traj["force_x"][0], traj["force_y"][0], traj["force_z"][0]])
    assert np.allclose(bias[1] - bias[0], -J.T @ F, atol=1e-9)
    assert np.abs(bias[1] - bias[0]).max() > 0.3  # a real load [N.m]


def test_push_label_and_its_no_contact_pair(smoke, card):
    push, _ = _load(smoke, card, "push_-y_000")
    free, _ = _load(smoke, card, "no_contact_-y_000")
    assert np.array_equal(push["position_target/joint1"], free["position_target/joint1"])  # same commands
    on = push["contact"] > 0.5
    assert 0.2 < on.mean() < 0.95 and free["contact"].max() == 0.0
    assert push["force_y"][on].mean() < -0.5  # environment pushes the robot along -y
    assert np.abs(push["force_x"]).max() < 0.3 and np.abs(free["force_y"]).max() < 0.3  # gauge noise only
    # joint1 (about z) feels the -y push: the position error grows while pushed
    err = np.abs(push["position_target/joint1"] - push["position/joint1"])
    err_free = np.abs(free["position_target/joint1"] - free["position/joint1"])
    assert err[on].mean() > 3 * err_free[on].mean()


def test_firmware_law_holds_in_the_logs(smoke, card):
    """pwm_duty = trunc(kp (goal - position) / 256) / 885 in encoder counts (= clip(kp g_e error)), with
    the goal of the previous log sample (the command delay is below one log period), exactly; current
    follows the DC motor law at rest."""
    gains = card["ground_truth"]["joints"]
    for name in ("lift_hold_400g_000", "teleop_000"):
        traj, rec = _load(smoke, card, name)
        kp = traj.setup.gains["kp"]
        for j in JOINTS:
            goal, pos, pwm = traj[f"position_target/{j}"], traj[f"position/{j}"], traj[f"pwm_duty/{j}"]
            g, p = np.round(goal / tr.ENCODER_STEP).astype(int), np.round(pos / tr.ENCODER_STEP).astype(int)
            e = int(kp) * (g[:-1] - p[1:])
            law = np.sign(e) * np.minimum(np.abs(e) // 256, tr.PWM_LIMIT) / tr.PWM_LIMIT
            assert np.array_equal(pwm[1:], law), (name, j)
            # the same law in SI: duty = clip(kp g_e (q_target - q)), up to the integer truncation
            si = np.clip(kp * tr.ERROR_GAIN * (goal[:-1] - pos[1:]), -1, 1)
            assert np.abs(pwm[1:] - si).max() < 1.0 / tr.PWM_LIMIT + 1e-12
            e_now = int(kp) * (g - p)
            now = np.sign(e_now) * np.minimum(np.abs(e_now) // 256, tr.PWM_LIMIT) / tr.PWM_LIMIT
            if np.any(np.diff(goal) != 0):
                assert not np.array_equal(pwm, now)  # the command delay is visible
        if name == "lift_hold_400g_000":
            # static hold: i = duty V / R(T) (no back-EMF at rest), within sensor noise, offset and quantisation
            for j in ("joint2", "joint3"):
                pos, pwm = traj[f"position/{j}"], traj[f"pwm_duty/{j}"]
                steady = (pos[2:] == pos[1:-1]) & (pos[1:-1] == pos[:-2]) & (pwm[2:] == pwm[1:-1])
                still = np.r_[False, False, steady] & (traj[f"velocity/{j}"] == 0) & (np.abs(pwm) > 0.1)
                assert still.sum() > 20
                R = tr.resistance(gains[j]["R20"], traj[f"temperature/{j}"][still])
                pred = traj[f"pwm_duty/{j}"][still] * traj["supply_voltage"][still] / R
                meas = traj[f"current/{j}"][still]
                assert np.abs(meas - pred).max() < 0.05 * np.abs(pred).max() + 0.04, j


@pytest.mark.parametrize("plane,direction", [("xy", "cw"), ("xz", "ccw")])
def test_circle_commands_trace_the_circle_in_the_stated_direction(scene, plane, direction):
    from actuatorlab.synth.commands import circle

    kin = Kinematics(scene)
    q = circle(np.random.default_rng(5), 500, 0.01, kin, direction=direction, plane=plane)
    ee = np.array([kin.ee(x) for x in q[250:]])  # after the 2 s approach
    axes = (0, 1) if plane == "xy" else (0, 2)
    other = 2 if plane == "xy" else 1
    u, v = ee[:, axes[0]], ee[:, axes[1]]
    # fit a circle: u^2 + v^2 = a u + b v + c
    A = np.stack([u, v, np.ones_like(u)], axis=1)
    a, b, c = np.linalg.lstsq(A, u**2 + v**2, rcond=None)[0]
    centre = np.array([a / 2, b / 2])
    r = np.hypot(u - centre[0], v - centre[1])
    assert 0.03 - 1e-3 < r.mean() < 0.07 + 1e-3 and np.ptp(r) < 1e-3  # on a circle within 1 mm
    assert np.ptp(ee[:, other]) < 1e-3  # in its plane
    phi = np.unwrap(np.arctan2(v - centre[1], u - centre[0]))
    assert np.sign(phi[-1] - phi[0]) == (1 if direction == "ccw" else -1)
    assert np.all(np.abs(np.diff(q, axis=0)) < 2.0 * 0.01 + 1e-9)  # no jumps (<= 2 rad/s)


# ----------------------------------------------------------------------------------------------
# physics of the ground truth
# ----------------------------------------------------------------------------------------------

def test_servo_step_equals_the_component_functions(truths):
    rng = np.random.default_rng(0)
    p = [truths[j] for j in JOINTS]
    consts = [tr.servo_constants(x) for x in p]
    h = 5e-4
    for _ in range(200):
        theta, q = rng.normal(0, 0.01, 4).tolist(), rng.normal(0, 0.01, 4).tolist()
        omega = (rng.normal(0, 1, 4) * (rng.random(4) > 0.3)).tolist()
        dq = rng.normal(0, 1, 4).tolist()
        duty = rng.uniform(-1, 1, 4).tolist()
        en = (rng.random(4) > 0.2).astype(float).tolist()
        kt = [x.kt20 for x in p]
        R = [x.R20 for x in p]
        th2, om2, tl, tc, cur = tr.servo_step(consts, (theta, omega, q, dq), (duty, 12.0, kt, R, en), h)
        for j, x in enumerate(p):
            c = tr.coupling_torque(theta[j], omega[j], q[j], dq[j], x.backlash, x.gear_stiffness, x.gear_damping)
            i = tr.motor_current(duty[j], 12.0, omega[j], kt[j], R[j], x.current_limit, en[j])
            F = tr.friction_budget(omega[j], kt[j] * i, c, x)
            f = tr.stick_slip(x.rotor_inertia, omega[j], kt[j] * i - c, F, h)
            om = omega[j] + h * (kt[j] * i - c + f) / x.rotor_inertia
            assert (tc[j], cur[j]) == pytest.approx((c, i), abs=1e-12)
            assert om2[j] == pytest.approx(om, abs=1e-12) and th2[j] == pytest.approx(theta[j] + h * om, abs=1e-12)
            assert tl[j] == pytest.approx(c + tr.bearing_torque(dq[j], x.bearing_friction), abs=1e-12)
            # friction never reverses the rotor: omega' is between 0 and the frictionless value
            free = omega[j] + h * (kt[j] * i - c) / x.rotor_inertia
            assert min(0.0, free) - 1e-12 <= om <= max(0.0, free) + 1e-12


def test_firmware_duty_and_motor_envelope():
    # duty per rad per register unit (Dynamixel X series), rounded to 1/885, saturating at +-1
    kp = 800.0
    err_counts = 100
    duty = tr.firmware_duty(kp, err_counts, 0, 1.0)
    assert duty == pytest.approx(kp * tr.ERROR_GAIN * err_counts * tr.ENCODER_STEP, abs=1 / 885)
    assert duty * 885 == 312 and tr.firmware_duty(kp, -err_counts, 0, 1.0) == -duty  # trunc(800*100/256), odd
    assert tr.firmware_duty(kp, 4000, 0, 1.0) == 1.0 and tr.firmware_duty(kp, -4000, 0, 1.0) == -1.0
    assert tr.firmware_duty(kp, 4000, 0, 0.0) == 0.0
    p = tr.NOMINAL_XM430_W350
    R25 = tr.resistance(p.R20, 25.0)
    assert R25 == pytest.approx(p.R20 * (1 + 0.00393 * 5))
    stall = tr.motor_current(1.0, 12.0, 0.0, p.kt20, R25, 10.0, 1.0)
    assert stall == pytest.approx(12.0 / R25)  # data sheet: 2.3 A at 12 V
    assert 2.1 < stall < 2.5
    assert tr.motor_current(1.0, 12.0, 12.0 / p.kt20, p.kt20, R25, 10.0, 1.0) == pytest.approx(0.0)  # no-load speed
    plug = tr.motor_current(1.0, 12.0, -3.0, p.kt20, R25, p.current_limit, 1.0)
    assert plug == p.current_limit  # reversing at speed: current clipped
    assert tr.motor_current(1.0, 12.0, -3.0, p.kt20, R25, p.current_limit, 0.0) == 0.0  # bridge open


def test_torque_disabled_free_motion_never_gains_energy(scene, truths):
    T = 250
    q = np.tile(np.array([0.5, 0.8, -0.6, 0.3]), (T, 1))
    plan = Plan(q_cmd=q, enable=np.zeros_like(q), payload=np.zeros(T))
    supply = tr.NOMINAL_SUPPLY
    for restriction in (None, Restriction("joint3", 1.5, 0.05)):
        r = simulate(scene, truths, supply, plan,
                     RunConditions([800.0] * 4, ambient=25.0, temperature0=[25.0] * 4, preroll=0.0,
                                   record_energy=True, restriction=restriction), np.random.default_rng(0))
        e = r.energy
        assert np.all(np.isfinite(e))
        assert np.abs(r.q[-1] - r.q[0]).max() > 0.3  # it really fell
        assert e[-1] < e[0] - 0.1  # friction dissipated a good part of it [J]
        assert np.diff(e).max() < 1e-4  # never gains energy (1e-4 J: explicit-integration ripple)
        assert np.all(r.i_true == 0.0) and np.all(r.pwm == 0.0)


def test_temperature_rises_with_joule_heat_under_sustained_load(scene, truths):
    T = 1000  # 10 s holding 500 g with the arm extended
    q = np.tile(np.array([0.0, 0.9, -0.9, 0.0]), (T, 1))
    r = simulate(scene, truths, tr.NOMINAL_SUPPLY, plan_of(q, 0.5),
                 RunConditions([800.0] * 4, ambient=25.0, temperature0=[25.0] * 4, preroll=0.5),
                 np.random.default_rng(0))
    rise = r.temp_true[-1] - r.temp_true[0]
    R = np.array([[tr.resistance(truths[j].R20, t) for j, t in zip(JOINTS, row)] for row in r.temp_true])
    C = np.array([truths[j].thermal_capacitance for j in JOINTS])
    joule = (r.i_true**2 * R).sum(axis=0) * 0.01 / C  # rise without cooling [K]
    assert abs(r.i_true[:, 1]).mean() > 0.6  # joint2 carries the load
    assert rise[1] > 1.5 and rise[1] == pytest.approx(joule[1], rel=0.1)
    assert abs(rise[0]) < 0.05  # joint1 (vertical axis) does no work holding
    assert np.argmax(rise) == np.argmax((r.i_true**2).mean(axis=0))
    assert r.temperature[-1, 1] - r.temperature[0, 1] >= 1.0  # visible in the 1 degC register
    # cooling: no current -> exponential decay to ambient with tau = R_th C
    t1 = tr.thermal_step(60.0, 0.0, 25.0, 5.0, 30.0, 150.0)
    assert t1 == pytest.approx(25.0 + 35.0 * math.exp(-1.0))


# ----------------------------------------------------------------------------------------------
# errors
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("scale", [0.0, -0.1, 1.5, float("nan"), "abc", None])
def test_bad_scale_is_a_clear_error(tmp_path, scale):
    with pytest.raises(SynthError, match=r"scale must be"):
        run_synth("open_manipulator_x", "smoke", tmp_path / "x", seed=0, scale=scale)
    assert not (tmp_path / "x").exists()


def test_unknown_suite_and_robot_list_what_exists(tmp_path):
    with pytest.raises(UnknownNameError, match=r"unknown suite 'nope'; available: cameras, cameras_gripper, neural_actuator, smoke"):
        run_synth("open_manipulator_x", "nope", tmp_path / "x", seed=0)
    with pytest.raises(UnknownNameError, match=r"unknown robot 'panda'; available: open_manipulator_x"):
        run_synth("panda", "smoke", tmp_path / "x", seed=0)


def test_refuses_a_non_empty_folder_unless_overwriting_its_own(tmp_path):
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(DataError, match="not empty"):
        run_synth("open_manipulator_x", "smoke", tmp_path, seed=0)
    with pytest.raises(DataError, match="refusing"):
        run_synth("open_manipulator_x", "smoke", tmp_path, seed=0, overwrite=True)
    assert (tmp_path / "mine.txt").read_text() == "keep me"


def test_push_pairs_add_twins_at_new_poses_and_leave_the_suite_untouched(smoke, tmp_path):
    """--push-pairs: N push / no-contact twins with the same commands, directions cycled through
    the pushes that are not held out, each at its own pose; the suite's files keep their bytes and
    splits; bad counts are one-line errors."""
    from actuatorlab.synth.suites import push_pair_specs

    s = run_synth("open_manipulator_x", "smoke", tmp_path / "pp", seed=0, push_pairs=5)
    assert s["n_trajectories"] == 4 + 10 and s["push_pairs"] == 5
    plain, pp = _tree_hashes(smoke), _tree_hashes(tmp_path / "pp")
    assert plain and all(pp.get(k) == v for k, v in plain.items() if k not in ("dataset.json", "DATASET.md"))
    card = json.loads((tmp_path / "pp" / "dataset.json").read_text())
    assert card["push_pairs"] == 5 and "push_pairs" not in json.loads((smoke / "dataset.json").read_text())
    recs = {r["name"]: r for r in card["trajectories"] if "_x0" in r["name"]}
    pushes = sorted(n for n in recs if n.startswith("push_"))
    # the smoke suite holds out push -y: the extra pairs cycle through the other five directions
    assert [n[:-5] for n in pushes] == ["push_+x", "push_+y", "push_+z", "push_-x", "push_-z"]
    poses = []
    for n in pushes:
        r, twin = recs[n], recs[n.replace("push_", "no_contact_", 1)]
        assert twin["split"] == r["split"] and not r["split"].startswith("heldout")
        assert twin["pair"] == r["pair"] == n and twin["conditions"]["contact"] == "none"
        a = load_native(tmp_path / "pp" / r["split"] / f"{n}.parquet")
        b = load_native(tmp_path / "pp" / twin["split"] / f"{twin['name']}.parquet")
        qt = np.stack([np.asarray(a[f"position_target/{j}"]) for j in ("joint1", "joint2", "joint3")], -1)
        np.testing.assert_array_equal(qt, np.stack([np.asarray(b[f"position_target/{j}"])
                                                    for j in ("joint1", "joint2", "joint3")], -1))
        f = np.stack([np.asarray(a[f"force_{c}"], float) for c in "xyz"], -1)
        d = np.asarray([1.0 if c == n[6] else 0.0 for c in "xyz"]) * (1 if n[5] == "+" else -1)
        contact = np.asarray(a["contact"], float) > 0.5
        assert contact.any() and float(np.mean(f[contact] @ d)) > 0.5          # pushed along its direction
        assert float(np.abs(np.stack([np.asarray(b[f"force_{c}"], float) for c in "xyz"], -1)).mean()) < 0.1
        poses.append(qt.mean(0))
    assert min(np.linalg.norm(p - q) for i, p in enumerate(poses) for q in poses[i + 1:]) > 0.01  # new poses
    with pytest.raises(SynthError, match="push_pairs must be an integer >= 0"):
        run_synth("open_manipulator_x", "smoke", tmp_path / "bad", seed=0, push_pairs=-1)
    with pytest.raises(SynthError, match="every push direction is excluded"):
        push_pair_specs(2, 1.0, np.random.default_rng(0), 0,
                        exclude=("push_+x", "push_-x", "push_+y", "push_-y", "push_+z", "push_-z"))

"""Robot configs: bundled robots load, joints are found by name, the MJCF is edited as documented,
nominal values reproduce their datasheets, and malformed configs fail with the file and problem."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import mujoco
import numpy as np
import pytest

from actuatorlab.errors import ModelError, UnknownNameError
from actuatorlab.models.friction import friction_budget
from actuatorlab.models.motor import dc_motor_torque
from actuatorlab.robots import CONFIG_DIR, list_robots, load_robot, param_scale
from actuatorlab.sim.arm import initial_state, make_inputs
from actuatorlab.sim.arm_native import rollout_native

ROBOTS = {"anymal_c": 12, "open_manipulator_x": 5, "open_manipulator_x_crank": 5, "so101": 6}
OMX = CONFIG_DIR / "open_manipulator_x.json"


def test_bundled_robots_are_listed():
    assert list_robots() == sorted(ROBOTS)


@pytest.mark.parametrize("name", sorted(ROBOTS))
def test_robot_loads_and_its_mjcf_is_edited(name):
    r = load_robot(name)
    assert r.n_joints == ROBOTS[name]
    m, mx = r.model(), r.model(for_mjx=True)
    assert m.opt.timestep == pytest.approx(r.physics_dt)
    assert r.substeps * r.physics_dt == pytest.approx(r.control_dt)
    assert (mx.opt.iterations, mx.opt.ls_iterations) == (1, 4)
    armature = r.joint_params(r.nominal_params())["armature"]
    for i, j in enumerate(r.joints):
        jid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j.name)
        assert jid >= 0 and m.jnt_qposadr[jid] == j.qpos_adr and m.jnt_dofadr[jid] == j.dof_adr
        assert m.dof_armature[j.dof_adr] == pytest.approx(armature[i])
        assert m.dof_damping[j.dof_adr] == 0.0 and m.dof_frictionloss[j.dof_adr] == 0.0
    # no MJCF actuator is left on a modelled joint
    driven = {int(m.actuator_trnid[a, 0]) for a in range(m.nu) if m.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT}
    assert not driven & {mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, n) for n in r.joint_names}
    hash(r)  # frozen and hashable (the compiled model is cached by robot)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.name = "x"  # type: ignore[misc]


def test_unknown_robot_lists_what_exists():
    with pytest.raises(UnknownNameError) as e:
        load_robot("omx")
    for name in ROBOTS:
        assert name in str(e.value)


def test_xm430_nominal_values_reproduce_the_datasheet():
    """Stall torque 4.1 N.m and no-load speed 46 rev/min at 12 V (ROBOTIS XM430-W350)."""
    r = load_robot("open_manipulator_x")
    p = {k: v[0] for k, v in r.nominal_params().items()}
    V = r.joint("joint1").supply_voltage
    tau_stall = float(dc_motor_torque(p, V, 0.0, 1.0))
    held = 4.1  # the load the servo holds at stall: motor torque = load + friction budget
    assert float(friction_budget(p, tau_stall, -held, 0.0)) == pytest.approx(tau_stall - held, rel=0.01)
    # no load: motor torque = friction; solve for the speed on a fine grid
    w = np.linspace(4.0, 5.5, 150001)
    tau = np.asarray(dc_motor_torque(p, V, w, 1.0))
    gap = tau - np.asarray(friction_budget(p, tau, 0.0, w))
    assert w[np.argmin(np.abs(gap))] == pytest.approx(46 * 2 * np.pi / 60, rel=0.01)


def test_prismatic_joint_parameters_are_scaled_by_the_linkage():
    r = load_robot("open_manipulator_x")
    g, j1 = r.joint("gripper_left_joint"), r.joint("joint1")
    rr = g.output_to_joint
    assert (g.joint_type, j1.joint_type) == ("prismatic", "revolute")
    p = r.joint_params(r.nominal_params())
    i, k = r.index("gripper_left_joint"), r.index("joint1")
    assert p["kt"][i] == pytest.approx(p["kt"][k] / rr)  # N/A
    assert p["armature"][i] == pytest.approx(p["armature"][k] / rr**2)  # kg
    assert p["friction_base"][i] == pytest.approx(p["friction_base"][k] / rr)  # N
    assert p["load_friction"][i] == p["load_friction"][k]  # dimensionless
    lc = r.law_constants()
    assert lc.error_gain[i] == pytest.approx(lc.error_gain[k] / rr)  # duty per m
    assert g.effort_limit == pytest.approx(j1.effort_limit / rr)
    assert g.velocity_limit == pytest.approx(j1.velocity_limit * rr)
    assert param_scale("stribeck_velocity", 0.01) == pytest.approx(0.01)
    assert param_scale("R", 0.01) == 1.0


def _write(tmp_path: Path, cfg: dict, name: str = "robot.json") -> Path:
    cfg = dict(cfg)
    cfg["mjcf"] = str((OMX.parent / cfg["mjcf"]).resolve())
    path = tmp_path / name
    path.write_text(json.dumps(cfg))
    return path


def _omx() -> dict:
    return json.loads(OMX.read_text())


def test_shared_and_per_joint_parameter_sets(tmp_path):
    cfg = _omx()
    cfg["actuators"]["xm430_w350"]["shared"] = False
    per_joint, shared = load_robot(_write(tmp_path, cfg)), load_robot("open_manipulator_x")
    assert len(shared.groups) == 1 and shared.groups[0].joints == shared.joint_names
    assert [g.name for g in per_joint.groups] == [f"xm430_w350@{j}" for j in per_joint.joint_names]
    a = shared.joint_params(shared.nominal_params())
    b = per_joint.joint_params(per_joint.nominal_params())
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


def _drop(d, *keys):
    for k in keys[:-1]:
        d = d[k]
    del d[keys[-1]]


BAD = [
    ("missing field", lambda c: _drop(c, "control_dt"), "missing field 'control_dt'"),
    ("unknown joint", lambda c: c["joints"].update(joint9={"actuator": "xm430_w350"}), "no joint named 'joint9'"),
    ("unknown model", lambda c: c["actuators"]["xm430_w350"].update(model="m9"), "unknown model 'm9'"),
    ("unknown law", lambda c: c["actuators"]["xm430_w350"].update(law="magic_pwm"), "unknown control law 'magic_pwm'"),
    ("unknown param", lambda c: c["actuators"]["xm430_w350"]["params"].update(kt2=1.0), "unknown field(s) 'kt2'"),
    ("missing nominal", lambda c: _drop(c, "actuators", "xm430_w350", "params", "R"), "needs a nominal value for R"),
    ("unknown actuator", lambda c: c["joints"]["joint2"].update(actuator="xm540"), "unknown actuator 'xm540'"),
    ("rates", lambda c: c.update(control_dt=0.003), "whole multiple of physics_dt"),
    ("missing gain", lambda c: _drop(c, "actuators", "xm430_w350", "gains", "kp"), "needs gain 'kp'"),
    ("negative log param", lambda c: c["actuators"]["xm430_w350"]["params"].update(armature=-1.0), "must be > 0"),
    # a compliant model loads (tests/test_arm_backlash.py) once its transmission has nominal values
    ("compliant model without nominals", lambda c: c["actuators"]["xm430_w350"].update(model="m3+backlash"),
     "needs a nominal value for backlash, stiffness"),
    ("wrong format", lambda c: c.update(format="urdf"), "format must be"),
    ("bounds of an unknown parameter", lambda c: c["actuators"]["xm430_w350"].update(bounds={"kt2": [1, 2]}),
     "actuators.xm430_w350.bounds.kt2: unknown parameter"),
    ("bounds lower >= upper", lambda c: c["actuators"]["xm430_w350"].update(bounds={"stiffness": [100, 50]}),
     "bounds.stiffness: lower 100 must be < upper 50"),
    ("log bounds at zero", lambda c: c["actuators"]["xm430_w350"].update(bounds={"armature": [0, 0.1]}),
     "bounds.armature: lower 0 must be > 0"),
    ("bounds not a pair", lambda c: c["actuators"]["xm430_w350"].update(bounds={"friction_base": [0.1]}),
     "bounds.friction_base: must be [lower, upper]"),
]


@pytest.mark.parametrize("label,edit,message", BAD, ids=[b[0] for b in BAD])
def test_malformed_config_names_file_and_problem(tmp_path, label, edit, message):
    cfg = _omx()
    edit(cfg)
    path = _write(tmp_path, cfg)
    with pytest.raises(ModelError) as e:
        load_robot(path)
    assert str(path) in str(e.value) and message in str(e.value)


def test_not_json_and_missing_file(tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text("{ not json")
    with pytest.raises(ModelError, match="not valid JSON"):
        load_robot(bad)
    with pytest.raises(ModelError, match="not found"):
        load_robot(tmp_path / "absent.json")


def test_anymal_holds_its_standing_pose():
    """Twelve PD drives (Isaac Lab's ANYdrive gains) keep the 19 kg base up on its feet."""
    r = load_robot("anymal_c")
    m = r.model()
    qpos = m.key_qpos[0].copy()
    x = make_inputs(r, np.tile(qpos[r.qpos_adr], (50, 1)))
    _, out = rollout_native(r, r.nominal_params(), x, initial_state(r, qpos=qpos))
    z = out.qpos[:, 2]
    assert np.all(np.isfinite(out.qpos))
    assert z.min() > 0.4  # [m] standing height 0.56 at the keyframe; kp 40 lets the knees give
    assert np.abs(out.qvel[-1]).max() < 0.05  # settled after 1 s
    assert np.abs(out.tau_motor).max() <= 80.0 + 1e-9  # effort limit


def test_so101_tracks_a_slow_target():
    r = load_robot("so101")
    t = np.arange(100) * r.control_dt
    qt = 0.3 * np.outer(1 - np.cos(np.pi * t / t[-1]), np.ones(r.n_joints)) / 2
    _, out = rollout_native(r, r.nominal_params(), make_inputs(r, qt), initial_state(r, q=np.zeros(r.n_joints)))
    assert np.abs(out.q[-1] - qt[-1]).max() < 0.1  # [rad] reached the 0.3 rad target within 0.1 rad

"""The gripper as a mechanism (issue 45, item 5): the OpenManipulator-X crank-slider's closed form
at both ends of travel, its ratio and inverse, the MuJoCo model's jaw against the closed form, the
force ratio by virtual work measured in MuJoCo, the camera's view of the jaw through the crank,
and bad geometries refused with the file and the field.

The robot is a copy of the bundled OM-X config whose gripper servo drives the jaw through the
crank-slider of docs/robots.md ("Mechanisms"); the bundled config keeps the linear linkage."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from actuatorlab.errors import ModelError
from actuatorlab.export.robot import export_robot_mjcf
from actuatorlab.robots import CONFIG_DIR, load_robot
from actuatorlab.robots.mechanisms import POLY_TOLERANCE, RATIO_TOLERANCE, CrankSlider, add_mechanisms
from actuatorlab.sim.arm import initial_state, make_inputs, make_mjx_rollout, mjx_model
from actuatorlab.sim.arm_native import rollout_native
from actuatorlab.sim.silhouette import body_point, load_meshes

LO, HI = -1.52, 0.92  # [rad] servo travel (ROBOTIS), finger 0.019 .. -0.01 m
OPEN, CLOSED = 0.019, -0.01  # [m]
GEOMETRY = {"type": "crank_slider", "parent": "link5", "slider": "gripper_left_joint",
            "crank_radius": 0.0154244, "rod_length": 0.06, "offset": 0.015, "theta0": -2.2,
            "jaw_zero": 0.0527589, "travel": [LO, HI], "sign": 1,
            "sources": "chosen to reproduce the ROBOTIS end points (servo -1.52 .. 0.92 rad -> finger 0.019 .. "
                       "-0.01 m), not measured from the part: ROBOTIS does not publish the linkage dimensions"}
MECH = CrankSlider("gripper_crank", "gripper_left_joint", "link5", 0.0154244, 0.06, 0.015, -2.2, 0.0527589, (LO, HI))
LINEAR = 0.029 / 2.44  # [m/rad] the bundled config's linear ratio (output_to_joint)


def _config(folder: Path, **changes) -> Path:
    cfg = json.loads((CONFIG_DIR / "open_manipulator_x.json").read_text())
    cfg["mjcf"] = str((CONFIG_DIR / cfg["mjcf"]).resolve())
    cfg["joints"].pop("gripper_left_joint")
    cfg["joints"]["gripper_crank"] = {"actuator": "xm430_w350"}
    cfg["joint_overrides"]["gripper_left_joint"] = {"frictionloss": 0.0}
    cfg["mechanisms"] = {"gripper_crank": {**GEOMETRY, **changes}}
    path = folder / "omx_crank.json"
    path.write_text(json.dumps(cfg))
    return path


@pytest.fixture(scope="module")
def robot(tmp_path_factory):
    return load_robot(_config(tmp_path_factory.mktemp("crank")))


def _adr(m: mujoco.MjModel, joint: str) -> int:
    return int(m.jnt_qposadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, joint)])


def _dof(m: mujoco.MjModel, joint: str) -> int:
    return int(m.jnt_dofadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, joint)])


def test_closed_form_at_both_ends_of_travel():
    q = MECH.position(np.array([LO, HI]))
    assert q == pytest.approx([OPEN, CLOSED], abs=1e-7)  # the ROBOTIS ends, to 0.1 um
    # the rod's length holds: crank pin (a cos phi, a sin phi) to the slider point (x, e) is b
    for th, qj in zip((LO, HI), q):
        phi = th - MECH.theta0
        pin = MECH.crank_radius * np.array([np.cos(phi), np.sin(phi)])
        assert np.hypot(qj + MECH.jaw_zero - pin[0], MECH.offset - pin[1]) == pytest.approx(MECH.rod_length, rel=1e-12)
    # the ratio at both ends against a central difference of the closed form, and its values
    h = 1e-6
    fd = (MECH.position(np.array([LO, HI]) + h) - MECH.position(np.array([LO, HI]) - h)) / (2 * h)
    ratio = MECH.ratio(np.array([LO, HI]))
    assert ratio == pytest.approx(fd, rel=1e-7)
    assert ratio == pytest.approx([-0.0086349, -0.0042206], rel=1e-4)  # [m/rad]
    # a mechanism, not a linear linkage: the ratio varies 3.5x over the travel, from 0.36 to 1.23
    # times the linear linkage's 0.0119 m/rad
    mid = float(MECH.ratio(-0.3))
    assert mid == pytest.approx(-0.014630, rel=1e-4)
    assert abs(ratio[1]) < 0.4 * LINEAR and abs(ratio[0]) < 0.75 * LINEAR and abs(mid) > 1.2 * LINEAR
    # JAX-traceable: autodiff of the jnp closed form is the analytic ratio
    th = jnp.linspace(LO, HI, 7)
    assert np.asarray(jax.vmap(jax.grad(lambda t: MECH.position(t, jnp)))(th)) == pytest.approx(
        np.asarray(MECH.ratio(th, jnp)), rel=1e-6)


def test_inverse_on_the_travel():
    th = np.linspace(LO, HI, 41)
    assert MECH.inverse(MECH.position(th)) == pytest.approx(th, abs=1e-9)
    assert MECH.inverse(np.array([OPEN, CLOSED])) == pytest.approx([LO, HI], abs=1e-5)  # ends to 0.04 um
    assert MECH.inverse(np.array([0.03, -0.02])) == pytest.approx([LO, HI], abs=1e-12)  # clipped to the ends
    assert MECH.jaw_range == pytest.approx((CLOSED, OPEN), abs=1e-7)
    q = np.linspace(CLOSED, OPEN, 9)
    assert np.asarray(jax.jit(lambda x: MECH.inverse(x, jnp))(jnp.asarray(q))) == pytest.approx(MECH.inverse(q), abs=1e-9)


def test_model_jaw_follows_the_crank_at_both_ends_and_mid_travel(robot):
    m = copy.copy(robot.model())
    m.opt.gravity[:] = 0.0
    jaw, right, crank = _adr(m, "gripper_left_joint"), _adr(m, "gripper_right_joint"), _adr(m, "gripper_crank")
    assert robot.joint("gripper_crank").joint_type == "revolute" and robot.joint("gripper_crank").output_to_joint == 1.0
    assert m.nu == 0  # the MJCF's position actuator on the jaw is gone: the crank drives it
    assert m.key_qpos[0][crank] == pytest.approx(float(MECH.inverse(0.0)), abs=1e-9)  # home: jaw at 0
    errors = []
    for th in (LO, -0.3, HI):
        d = mujoco.MjData(m)
        d.qpos[crank] = th  # the jaw starts at 0: the equality has to pull it onto the crank's curve
        for _ in range(250):  # 0.5 s
            mujoco.mj_step(m, d)
        errors.append(d.qpos[jaw] - float(MECH.position(d.qpos[crank])))
        assert d.qpos[right] == pytest.approx(d.qpos[jaw], abs=1e-6)
        assert d.qpos[crank] == pytest.approx(th, abs=0.01)
    assert np.abs(errors).max() < 0.5 * POLY_TOLERANCE  # measured 0.009 mm at most


def test_keyframes_get_the_crank_angle_of_their_jaw(robot):
    spec = mujoco.MjSpec.from_file(str(Path(robot.mjcf_path).parent / "open_manipulator_x.xml"))
    spec.keys[0].qpos, spec.keys[0].qvel = [0.1, 0.2, 0.3, 0.4, 0.01, 0.01], [1.0, 2.0, 3.0, 4.0, 0.0, 0.0]
    add_mechanisms(spec, robot.mechanisms, robot.config_path)
    m = spec.compile()
    crank = _adr(m, "gripper_crank")
    assert m.key_qpos[0][crank] == pytest.approx(float(MECH.inverse(0.01)), abs=1e-9)
    assert m.key_qvel[0][crank] == 0.0 and list(m.key_qvel[0][:4]) == [1.0, 2.0, 3.0, 4.0]
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    mujoco.mj_forward(m, d)
    eq = d.efc_type == mujoco.mjtConstraint.mjCNSTR_EQUALITY
    assert np.abs(d.efc_pos[eq]).max() < POLY_TOLERANCE  # the keyframe sits on both equalities


def test_servo_command_maps_to_jaw_position(robot):
    # the crank is an actuated joint like any other: command the jaw 15 mm open through the inverse
    target = float(MECH.inverse(0.015))
    qt = np.zeros((150, robot.n_joints))
    qt[:, robot.index("gripper_crank")] = target
    q0 = np.zeros(robot.n_joints)
    q0[robot.index("gripper_crank")] = float(MECH.inverse(0.0))
    _, out = rollout_native(robot, robot.nominal_params(), make_inputs(robot, qt), initial_state(robot, q=q0))
    m = robot.model()
    th, jaw = out.qpos[-1, _adr(m, "gripper_crank")], out.qpos[-1, _adr(m, "gripper_left_joint")]
    assert th == pytest.approx(target, abs=0.03)  # [rad] the servo's P loop against its friction
    assert jaw == pytest.approx(float(MECH.position(th)), abs=POLY_TOLERANCE)
    assert jaw == pytest.approx(0.015, abs=0.5e-3)


def test_mjx_rollout_of_the_mechanism_matches_native(robot):
    # MJX takes the crank's hinge and the polynomial equality (iterations = 1): same rollout as native
    pytest.importorskip("mujoco.mjx", reason="mujoco-mjx is not installed")
    qt = np.zeros((100, robot.n_joints))
    qt[:, robot.index("gripper_crank")] = float(MECH.inverse(0.015))
    q0 = np.zeros(robot.n_joints)
    q0[robot.index("gripper_crank")] = float(MECH.inverse(0.0))
    x, s0 = make_inputs(robot, qt), initial_state(robot, q=q0)
    roll = make_mjx_rollout(robot, mx=mjx_model(robot))
    _, out = jax.jit(roll)({k: jnp.asarray(v) for k, v in robot.nominal_params().items()}, x, s0)
    _, native = rollout_native(robot, robot.nominal_params(), x, s0)
    assert np.abs(np.asarray(out.qpos) - native.qpos).max() < 1e-9  # measured 5e-12
    m = robot.model()
    jaw, crank = np.asarray(out.qpos)[:, _adr(m, "gripper_left_joint")], np.asarray(out.qpos)[:, _adr(m, "gripper_crank")]
    assert np.abs(jaw - MECH.position(crank)).max() < 0.5e-3  # [m] measured 0.22 mm while the jaw moves
    assert jaw[-1] == pytest.approx(float(MECH.position(crank[-1])), abs=POLY_TOLERANCE)


def test_mjcf_export_refuses_a_mechanism(robot, tmp_path):
    model = {"format": "actuatorlab-arm-model", "format_version": "1", "robot": "open_manipulator_x", "model": "m1",
             "params": {"kt": 2.478, "R": 5.217, "armature": 0.045, "friction_base": 0.0}}
    with pytest.raises(ModelError, match="gripper_crank are built by the loader"):
        export_robot_mjcf(model, tmp_path / "omx.xml", robot=robot)


@pytest.mark.parametrize("theta", [LO + 0.01, -0.3, HI - 0.01])
def test_force_ratio_by_virtual_work(robot, theta):
    # at a pose on the equality's curve, at rest, no gravity: a torque tau on the crank and a force
    # F on the jaw. (1) The equality's forces do no work along the mechanism: its torque on the
    # crank over its force on the jaw is -dq/dtheta. (2) F = -tau / (dq/dtheta) of the closed form
    # holds the torque (F dq + tau dtheta = 0): the crank barely moves, where no jaw force, or the
    # linear linkage's, lets it turn.
    m = copy.copy(robot.model())
    m.opt.gravity[:] = 0.0
    jaw, right, crank = _adr(m, "gripper_left_joint"), _adr(m, "gripper_right_joint"), _adr(m, "gripper_crank")
    eq = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_EQUALITY, "gripper_crank_to_gripper_left_joint")
    poly = np.polynomial.Polynomial(m.eq_data[eq, :5])
    tau, ratio = 0.01, float(MECH.ratio(theta))  # [N.m], [m/rad]
    drift = {}
    for label, force in (("none", 0.0), ("closed form", -tau / ratio), ("linear", tau / LINEAR)):
        d = mujoco.MjData(m)
        q = poly(theta - m.qpos0[crank])
        d.qpos[[crank, jaw, right]] = theta, q, q
        d.qfrc_applied[[_dof(m, "gripper_crank"), _dof(m, "gripper_left_joint")]] = tau, force
        mujoco.mj_forward(m, d)
        row = np.flatnonzero((d.efc_type == mujoco.mjtConstraint.mjCNSTR_EQUALITY) & (d.efc_id == eq))
        assert -d.qfrc_constraint[_dof(m, "gripper_crank")] / d.efc_force[row[0]] == pytest.approx(ratio, rel=RATIO_TOLERANCE)
        for _ in range(100):  # 0.2 s
            mujoco.mj_step(m, d)
        drift[label] = d.qpos[crank] - theta
    assert drift["none"] == pytest.approx(0.5 * tau / m.dof_armature[_dof(m, "gripper_crank")] * 0.2 ** 2, rel=0.05)
    assert abs(drift["closed form"]) < 0.03 * drift["none"]  # measured 2.6 % (near open), 1.5 %, 0.5 %
    assert abs(drift["linear"]) > 0.15 * drift["none"]


def test_camera_sees_the_jaw_through_the_crank(robot):
    # the renderer's kinematics on the mechanism's model, given the servo angle alone (no jaw
    # encoder): the jaw (and the mimic finger) are drawn where the crank puts them, and the
    # gradient of the jaw's image position reaches the servo angle by the crank-slider's ratio
    m = robot.model()
    rm = load_meshes(m)
    jaw, right, crank = _adr(m, "gripper_left_joint"), _adr(m, "gripper_right_joint"), _adr(m, "gripper_crank")
    assert sorted((f, lead) for f, lead, *_ in rm.followers) == sorted([(right, jaw), (jaw, crank)])
    left, other = rm.body_id("gripper_left_link"), rm.body_id("gripper_right_link")

    def fingers(th):  # [m] world y of both fingers' frames, arm at zero (link5's y is the world's)
        qpos = jnp.zeros(m.nq, dtype=jnp.float64).at[crank].set(th)
        return jnp.stack([body_point(rm, qpos, left, jnp.zeros(3))[1], body_point(rm, qpos, other, jnp.zeros(3))[1]])

    y0 = np.asarray(fingers(jnp.asarray(float(MECH.inverse(0.0)))))
    for th in (LO, -0.3, HI):
        dy = np.asarray(fingers(jnp.asarray(th))) - y0
        assert dy == pytest.approx([float(MECH.position(th)), -float(MECH.position(th))], abs=POLY_TOLERANCE)
        slope = float(jax.grad(lambda t: fingers(t)[0])(jnp.asarray(th)))
        assert slope == pytest.approx(float(MECH.ratio(th)), rel=RATIO_TOLERANCE)


@pytest.mark.parametrize("change, field", [
    ({"crank_radius": -0.01}, "mechanisms.gripper_crank.crank_radius must be > 0"),
    ({"rod_length": 0.02}, "mechanisms.gripper_crank.rod_length 0.02 m must exceed crank_radius + |offset|"),
    ({"theta0": -1.2}, "reaches a dead centre"),
    ({"travel": [0.92, -1.52]}, "mechanisms.gripper_crank.travel: lower"),
    ({"sign": 2}, "mechanisms.gripper_crank.sign must be 1 or -1"),
    ({"type": "four_bar"}, "mechanisms.gripper_crank.type: unknown mechanism"),
    ({"rod_length": 0.032}, "too far from a quartic"),
    ({"slider": "joint1"}, "mechanisms.gripper_crank.slider: 'joint1' is not a slide joint"),
    ({"parent": "link9"}, "mechanisms.gripper_crank.parent: no body named 'link9'"),
    ({"jaw_zero": 0.06}, "outside the range"),
])
def test_bad_geometry_names_the_file_and_the_field(tmp_path, change, field):
    path = _config(tmp_path, **change)
    with pytest.raises(ModelError) as e:
        load_robot(path)
    assert str(path) in str(e.value) and field in str(e.value)

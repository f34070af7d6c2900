"""The gripper in the virtual hardware (suite ``cameras_gripper``, issue 45 item 5): the gripper
servo is simulated like the arm's, its jaw is the crank-slider's closed form of the servo angle,
the masks see the jaw move, the model's renderer puts the jaw where the truth did, the jaw's
held-out score, the suites without a gripper unchanged, and bad input refused in one line.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from actuatorlab.errors import DataError
from actuatorlab.logs import load_native
from actuatorlab.robots import load_robot
from actuatorlab.logs.importers.mcap_ros2 import robot_for_joints
from actuatorlab.robots.mechanisms import POLY_TOLERANCE, CrankSlider
from actuatorlab.sim.arm_data import evaluate_arm
from actuatorlab.sim.silhouette import follow_joints, load_meshes
from actuatorlab.synth import SUITES, run_synth
from actuatorlab.synth.cameras import CameraRig, MaskDefects, draw_rig, record_masks
from actuatorlab.synth.commands import plan_of
from actuatorlab.synth.dataset import _sim_to_trajectory
from actuatorlab.synth.gripper import (JAW_JOINTS, camera_joints, gripper_command, gripper_mechanism, gripper_scene,
                                       with_gripper)
from actuatorlab.synth.robot import get_robot, locate_mjcf
from actuatorlab.synth.simulate import Rates, RunConditions, simulate
from actuatorlab.synth.suites import TrajectorySpec
from actuatorlab.synth.truth import ENCODER_STEP, draw_joint_truths, draw_supply

OMX = "open_manipulator_x"
CRANK = "open_manipulator_x_crank"
#: digest of the smoke suite (seed 0: dataset.json and every logged array) written by main before
#: the gripper existed (commit f64ebcd): the suites without a gripper write what they wrote before
SMOKE_DIGEST = "df98ee1a94ef1cc97368b5ce0b900ea31b1eb98f9053521a158af0a8548e3443"


def _digest(root: Path) -> str:
    card = (root / "dataset.json").read_bytes()
    h = hashlib.sha256(card)
    for r in json.loads(card)["trajectories"]:
        t = load_native(root / r["split"] / r["name"], strict=False)
        h.update(t.name.encode() + np.ascontiguousarray(t.time, dtype=np.float64).tobytes())
        for k in sorted(t.data):
            h.update(k.encode() + np.ascontiguousarray(t.data[k], dtype=np.float64).tobytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def run():
    """A 4 s log of the arm at home with the gripper commanded (the suite's generator)."""
    spec, rates = get_robot(OMX), Rates()
    truths = draw_joint_truths(np.random.default_rng(0), spec.joints)
    mech, truths, scene = gripper_scene(OMX, truths, rates.physics_dt, np.random.default_rng(1))
    T = 400
    plan = with_gripper(plan_of(np.tile(np.array(spec.home), (T, 1))), mech, np.random.default_rng(2), rates.log_dt)
    cond = RunConditions([800.0] * 5, ambient=25.0, temperature0=[30.0] * 5, rates=rates, preroll=0.3)
    sim = simulate(scene, truths, draw_supply(np.random.default_rng(3)), plan, cond, np.random.default_rng(4))
    return mech, truths, scene, plan, sim


def test_the_gripper_servo_is_a_simulated_joint_that_follows_its_commands(run):
    mech, truths, scene, plan, sim = run
    assert scene.robot.joints == get_robot(OMX).joints + ("gripper_crank",) and scene.model.nq == 5
    assert scene.model.dof_armature[4] == pytest.approx(truths["gripper_crank"].output_inertia)
    lo, hi = mech.travel
    cmd = plan.q_cmd[:, 4]
    assert cmd.min() >= lo + 0.05 * (hi - lo) - 1e-12 and cmd.max() <= hi - 0.05 * (hi - lo) + 1e-12
    assert cmd.max() - cmd.min() > 0.4 * (hi - lo)  # open/close moves over much of the travel
    assert np.abs(sim.q[:, 4] - cmd).mean() < 0.2  # [rad] the servo tracks (P law, friction, no load)
    assert np.ptp(sim.q[:, 4]) > 0.3 * (hi - lo)


def test_jaw_is_the_closed_form_of_the_logged_servo_angle(run):
    mech, truths, scene, plan, sim = run
    names, q = camera_joints(mech, scene.robot.joints, sim.q)
    assert names == get_robot(OMX).joints + JAW_JOINTS
    jaw = q[:, 4]
    assert np.array_equal(jaw, mech.position(sim.q[:, 4])) and np.array_equal(q[:, 5], jaw)  # mimic finger
    # the logged angle is the true one to the encoder count and offset: the jaw of the log to 0.1 mm
    logged = sim.position[:, 4]
    assert np.abs(logged - sim.q[:, 4]).max() <= ENCODER_STEP + abs(truths["gripper_crank"].encoder_offset) + 1e-12
    assert np.abs(mech.position(logged) - jaw).max() < 1e-4
    lo, hi = mech.jaw_range
    assert jaw.min() >= lo and jaw.max() <= hi and jaw.max() - jaw.min() > 0.01  # > 1 cm of jaw travel
    # the model's renderer (MuJoCo's quartic equality) puts the jaw where the truth did
    robot = load_robot(CRANK)
    rm = load_meshes(robot.model())
    qpos = np.zeros((len(sim.q), robot.nq))
    for k, j in enumerate(scene.robot.joints):
        qpos[:, robot.joint(j).qpos_adr] = sim.q[:, k]
    m = robot.model()
    model_jaw = np.array([follow_joints(rm, jnp.asarray(p))[m.joint("gripper_left_joint").qposadr[0]] for p in qpos[::40]])
    assert np.abs(model_jaw - jaw[::40]).max() < POLY_TOLERANCE


def test_masks_change_when_only_the_gripper_moves():
    model = mujoco.MjModel.from_xml_path(str(locate_mjcf(OMX)))
    rig = draw_rig(CameraRig(), np.random.default_rng([0, 13]))
    clean = MaskDefects(time_jitter=0.0, edge_flip=0.0, missing_blobs=0.0, extra_blobs=0.0)
    names = get_robot(OMX).joints + JAW_JOINTS
    time = np.array([0.0, 0.1, 0.2, 0.3])
    home = np.array(get_robot(OMX).home)
    q = np.column_stack([np.tile(home, (4, 1)), [0.019, 0.019, -0.01, -0.01], [0.019, 0.019, -0.01, -0.01]])
    out = record_masks(model, names, time, q, rig, clean, 10.0, np.random.default_rng(0))
    for cam, _ in rig:
        m = out[f"masks_{cam.name}"].astype(bool)  # frames at 0.05 s (open), 0.15 (between), 0.25 (closed)
        assert len(m) == 3
        assert (m[0] ^ m[2]).sum() > 100  # measured 248 / 177 px between open and closed at 160 x 120
        assert m[0].sum() > m[2].sum()  # the open jaws cover more pixels


def test_suites_without_a_gripper_write_what_they_wrote_before(tmp_path):
    run_synth(OMX, "smoke", tmp_path / "smoke", seed=0)
    assert _digest(tmp_path / "smoke") == SMOKE_DIGEST
    cams, grip = SUITES["cameras"], SUITES["cameras_gripper"]
    assert not cams.gripper and grip.gripper and grip.cameras == cams.cameras == 2
    rng = np.random.default_rng
    assert cams.build(1.0, rng(1)) == grip.build(1.0, rng(1))  # the same arm trajectories


def test_jaw_score_lies_between_the_servo_score_times_the_linkage_ratios(run):
    mech, truths, scene, plan, sim = run
    spec = TrajectorySpec("gripper", "teleop", 4.0, 800.0, 0)
    traj = _sim_to_trajectory(spec, "s01", sim, OMX, scene.robot.joints, truths, 12.0, np.random.default_rng(5),
                              "cameras_gripper", {}, CRANK)
    assert traj.setup.extra["robot"] == CRANK
    per = evaluate_arm(CRANK, None, [traj], horizons=(100,), jaws=True)["per_joint"]
    servo, jaw = per["gripper_crank"]["100"], per["gripper_left_joint"]["100"]
    r = np.abs(mech.ratio(np.linspace(*mech.travel, 201)))
    assert r.min() * servo <= jaw <= r.max() * servo and jaw > 0
    assert "gripper_left_joint" not in evaluate_arm(CRANK, None, [traj], horizons=(100,))["per_joint"]


def test_bad_input_is_one_line():
    with pytest.raises(DataError, match="has no gripper mechanism") as e:
        gripper_mechanism(dataclasses.replace(get_robot(OMX), gripper_config=None))
    assert "\n" not in str(e.value)
    with pytest.raises(DataError, match=r"open_manipulator_x\.json.*exactly one mechanism") as e:
        gripper_mechanism(dataclasses.replace(get_robot(OMX), gripper_config=OMX))
    assert "\n" not in str(e.value)
    assert gripper_command(np.random.default_rng(0), 50, 0.01, (-1.52, 0.92)).shape == (50,)


def test_the_crank_config_is_the_documented_geometry_and_takes_no_log_of_the_arm():
    assert gripper_mechanism(get_robot(OMX)) == CrankSlider("gripper_crank", "gripper_left_joint", "link5", 0.0154244,
                                                            0.06, 0.015, -2.2, 0.0527589, (-1.52, 0.92))
    # a ROS log of the arm names MJCF joints: the variant with a crank does not claim it
    assert robot_for_joints(["joint1", "joint2"]) == OMX
    assert robot_for_joints(["joint1", "gripper_left_joint"]) == OMX
    assert robot_for_joints(["joint1", "gripper_crank"]) == CRANK

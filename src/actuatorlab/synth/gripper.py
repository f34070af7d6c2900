"""The gripper in the virtual hardware (suite ``cameras_gripper``): a servo, a crank-slider, two jaws.

In the other suites the ground-truth scene welds the gripper (:mod:`actuatorlab.synth.robot`). In a
suite with ``gripper=True`` the gripper servo is a fifth simulated servo (the same truth model as
the arm's, :mod:`actuatorlab.synth.truth`, its units drawn from a stream of their own so the arm's
units are those of the suite without the gripper). It turns a crank: in the physics scene a hinge
joint ``gripper_crank`` of a massless body under the wrist (:func:`add_crank`), limited to the
servo's travel, its armature the servo's output inertia. The jaws themselves are not simulated:
they weigh 1 g each, and their inertia seen by the servo through the linkage, at most
2 x 1 g x (14.6 mm/rad)^2 = 4e-7 kg.m^2, is five orders of magnitude below the servo's output
inertia. They are placed kinematically, by the exact closed form of the robot config's crank-slider
(:class:`~actuatorlab.robots.mechanisms.CrankSlider`: Norton, "Design of Machinery", sec. 4.6,
eqs. 4.16-4.17) at the crank's true angle, and the mimic finger copies the jaw (the MJCF's joint
equality ``gripper_right_joint = gripper_left_joint``), wherever the cameras render the robot.

The logs carry the servo's command and its own encoder (``position_target/gripper_crank``,
``position/gripper_crank``: the servo's output shaft, before the linkage), like a real gripper
servo; nothing measures the jaw. The model to identify is the robot config
:attr:`~actuatorlab.synth.robot.RobotSpec.gripper_config` (``open_manipulator_x_crank``), whose
jaw follows the crank through MuJoCo's quartic joint equality instead of the closed form.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from ..errors import DataError
from ..robots import load_robot
from ..robots.mechanisms import CrankSlider
from .cameras import record_cameras
from .commands import Plan, min_jerk_path
from .robot import RobotSpec, Scene, build_scene, get_robot
from .truth import JointTruth, draw_joint_truths

__all__ = ["gripper_mechanism", "add_crank", "gripper_command", "jaw_positions", "gripper_scene", "with_gripper",
           "camera_joints", "gripper_truth", "gripper_masks", "JAW_JOINTS", "MIMIC_JOINT"]

#: the jaw joints a camera sees move, in the order of :func:`jaw_positions`' columns
JAW_JOINTS = ("gripper_left_joint", "gripper_right_joint")
#: the finger that copies the jaw (the MJCF's equality ``gripper_right_joint = 0 + 1 gripper_left_joint``)
MIMIC_JOINT = "gripper_right_joint"
#: fraction of the servo's travel kept free at each end by the commands (the crank's limits are hard stops)
_MARGIN = 0.05
#: [rad/s] peak speed of the gripper's commands (the XM430-W350 runs 4.8 rad/s without load)
_V_CAP = 3.0


def gripper_mechanism(spec: RobotSpec) -> CrankSlider:
    """The crank-slider of ``spec``'s gripper: the mechanism of its robot config
    :attr:`~actuatorlab.synth.robot.RobotSpec.gripper_config` (one, named like the crank joint)."""
    if spec.gripper_config is None:
        raise DataError(None, f"robot {spec.name!r} has no gripper mechanism: a suite with a gripper needs a robot "
                              "whose gripper_config names a robot config with a crank-slider")
    robot = load_robot(spec.gripper_config)
    if len(robot.mechanisms) != 1:
        raise DataError(robot.config_path, f"a gripper needs exactly one mechanism, the config has "
                                           f"{len(robot.mechanisms)}")
    return robot.mechanisms[0]


def add_crank(spec: mujoco.MjSpec, mech: CrankSlider, truth: JointTruth) -> None:
    """Add the gripper servo's crank to the ground-truth scene ``spec`` (edited in place): a
    massless body (1e-6 kg) under ``mech.parent`` with the hinge ``mech.name`` (axis z, limited to
    the travel, armature the servo's output inertia, no damping, friction or stiffness: the servo
    model carries them)."""
    body = spec.body(mech.parent).add_body(name=f"{mech.name}_link", mass=1e-6, inertia=[1e-9] * 3,
                                           explicitinertial=True)
    body.add_joint(name=mech.name, type=mujoco.mjtJoint.mjJNT_HINGE, axis=[0.0, 0.0, 1.0], range=list(mech.travel),
                   limited=mujoco.mjtLimited.mjLIMITED_TRUE, armature=float(truth.output_inertia))


def gripper_command(rng: np.random.Generator, T: int, dt: float, travel: tuple[float, float]) -> np.ndarray:
    """(T,) [rad] gripper servo command: open/close moves, then a chirp.

    Inside the travel less :data:`_MARGIN` at each end: over the first 55 % of the log, minimum-jerk
    moves (peak speed <= :data:`_V_CAP`, at least 0.4 s) between random targets that alternate
    between the open and the closed half of the travel, each held 0.15-0.5 s; then, after a 0.3 s
    minimum-jerk move to the chirp's centre, a chirp c + w(t) A(f) sin(2 pi (f0 s + (f1 - f0)
    s^2 / (2 S))) from f0 = 0.3 Hz to f1 ~ U(1.5, 2.5) Hz over the remaining S seconds, A ~
    U(0.3, 0.6) rad capped by the speed (A(f) <= V / (2 pi f)), w a 0.3 s raised-cosine taper at
    both ends.
    """
    lo, hi = travel
    lo, hi = lo + _MARGIN * (hi - lo), hi - _MARGIN * (hi - lo)
    mid = 0.5 * (lo + hi)
    t_moves = 0.55 * T * dt
    poses, moves, holds = [np.array([rng.uniform(lo, hi)])], [], []
    elapsed, opening = 0.0, bool(rng.integers(2))
    while elapsed < t_moves:
        target = rng.uniform(lo, mid) if opening else rng.uniform(mid, hi)
        move = max(0.4, 1.875 * abs(target - float(poses[-1][0])) / _V_CAP)
        holds.append(float(rng.uniform(0.15, 0.5)))
        moves.append(move)
        poses.append(np.array([target]))
        elapsed += holds[-1] + move
        opening = not opening
    amp = float(rng.uniform(0.3, 0.6))
    centre = float(rng.uniform(lo + amp, hi - amp))
    holds.append(0.0)
    moves.append(0.3)
    poses.append(np.array([centre]))
    q = min_jerk_path(poses, moves, holds, dt, T)[:, 0]
    start = int(np.ceil((elapsed + 0.3) / dt))
    if start < T - 1:
        s = np.arange(T - start) * dt
        dur = s[-1]
        f0, f1 = 0.3, float(rng.uniform(1.5, 2.5))
        f = f0 + (f1 - f0) * s / dur
        phase = 2 * np.pi * (f0 * s + 0.5 * (f1 - f0) * s**2 / dur)
        taper = 0.5 * (1 - np.cos(np.pi * np.clip(np.minimum(s, dur - s) / 0.3, 0.0, 1.0)))
        q[start:] = centre + taper * np.minimum(amp, _V_CAP / (2 * np.pi * f)) * np.sin(phase)
    return np.clip(q, lo, hi)


def jaw_positions(mech: CrankSlider, theta: np.ndarray) -> np.ndarray:
    """(T, 2) [m] positions of :data:`JAW_JOINTS` at crank angles ``theta`` (T,) [rad]: the jaw by
    the closed form (module docstring), the mimic finger equal to it."""
    jaw = np.asarray(mech.position(np.asarray(theta, dtype=np.float64)))
    return np.stack([jaw, jaw], axis=1)


def gripper_scene(robot: str, truths: dict[str, JointTruth], physics_dt: float, rng: np.random.Generator
                  ) -> tuple[CrankSlider, dict[str, JointTruth], Scene]:
    """(the gripper's crank-slider, the arm's ``truths`` plus the gripper servo's drawn from
    ``rng``, the ground-truth scene with the crank as the last joint)."""
    spec = get_robot(robot)
    mech = gripper_mechanism(spec)
    truths = {**truths, **draw_joint_truths(rng, (mech.name,))}
    scene = build_scene(robot, truths, physics_dt, edit=lambda s: add_crank(s, mech, truths[mech.name]),
                        joints=spec.joints + (mech.name,))
    return mech, truths, scene


def with_gripper(plan: Plan, mech: CrankSlider, rng: np.random.Generator, dt: float) -> Plan:
    """``plan`` (the arm's commands) with the gripper servo's command (:func:`gripper_command`) as
    its last column, torque enabled throughout."""
    g = gripper_command(rng, plan.n, dt, mech.travel)
    return replace(plan, q_cmd=np.column_stack([plan.q_cmd, g]), enable=np.column_stack([plan.enable, np.ones(plan.n)]))


def camera_joints(mech: CrankSlider, joints: tuple[str, ...], q: np.ndarray) -> tuple[tuple[str, ...], np.ndarray]:
    """What the cameras render from a gripper suite's true state: (the arm joints then
    :data:`JAW_JOINTS`, (T, n + 1) [rad | m] their positions) from ``joints`` (the arm's, then the
    crank ``mech.name``) and the true positions ``q`` (T, n)."""
    k = joints.index(mech.name)
    arm = tuple(j for j in joints if j != mech.name)
    return arm + JAW_JOINTS, np.column_stack([np.delete(q, k, axis=1), jaw_positions(mech, q[:, k])])


def gripper_truth(mech: CrankSlider, config: str) -> dict[str, object]:
    """The dataset card's ground truth of the gripper: the robot config of the model, the linkage
    (closed form) and its constants [m, rad]."""
    return {"model_robot": config, "servo_joint": mech.name, "jaw_joints": list(JAW_JOINTS),
            "law": "jaw = sign (a cos(phi) + sqrt(b^2 - (a sin(phi) - e)^2) - d), phi = theta - theta0; "
                   "gripper_right_joint = gripper_left_joint (docs/robots.md, Mechanisms)",
            "a_crank_radius_m": mech.crank_radius, "b_rod_length_m": mech.rod_length, "e_offset_m": mech.offset,
            "theta0_rad": mech.theta0, "d_jaw_zero_m": mech.jaw_zero, "sign": mech.sign,
            "travel_rad": list(mech.travel), "command_margin": _MARGIN,
            "jaw_inertia": "left out (jaws 1 g each: < 4e-7 kg.m^2 through the linkage)"}


def gripper_masks(out: Path, n_cameras: int, scene: Scene, mech: CrankSlider | None,
                  true_q: dict[str, tuple[np.ndarray, np.ndarray]], split: dict[str, str], seed: int) -> dict[str, Any]:
    """Record the masks (:func:`~actuatorlab.synth.cameras.record_cameras`) of the logs' true
    joint angles ``true_q`` (name -> (time (T,) [s], q (T, n))) in ``scene``'s joints; with a
    gripper (``mech``) the cameras see the jaws where its crank puts them (:func:`camera_joints`);
    returns the cameras' ground truth for the dataset card."""
    joints = scene.robot.joints
    if mech is not None:
        true_q = {k: (t, camera_joints(mech, scene.robot.joints, q)[1]) for k, (t, q) in true_q.items()}
        joints = camera_joints(mech, joints, np.zeros((1, len(joints))))[0]
    return record_cameras(out, scene.mjcf, joints, n_cameras, true_q, split, seed)

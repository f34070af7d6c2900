"""The ground-truth scene: a robot's MJCF edited in memory (``mujoco.MjSpec``), plus kinematics.

The robot's own MJCF comes from the robot registry (:mod:`actuatorlab.robots`). In memory, for the
ground-truth physics only:

* the MJCF's position actuators, keyframes, gripper joints and mimic equality are removed: the
  servos are simulated by :mod:`actuatorlab.synth.truth` and act through ``qfrc_applied``; the
  gripper is rigid (its fingers weigh 2 g), or, in a suite with a gripper, its servo turns a crank
  joint and the jaws are placed by the crank-slider's closed form (:mod:`actuatorlab.synth.gripper`);
* each arm joint's placeholder armature / damping / frictionloss (0.1 / 0.1 / 0.1) is replaced by the
  drawn output-side inertia of its servo and zero damping and frictionloss (the servo model carries
  the friction; the output bearing friction is applied by the simulator);
* geoms and meshes are dropped and contacts disabled: nothing touches the arm except the labelled
  payload and pushes (mesh bookkeeping would cost 3x the dynamics);
* a ``payload`` body is welded to the wrist at the end-effector point; its mass is set at run time
  (0 when nothing is carried), so the payload exists in the ground truth only, never in a model to
  be identified;
* the time step is the physics step of the simulator (0.5 ms, semi-implicit Euler).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import mujoco
import numpy as np

from ..errors import DataError, UnknownNameError
from .truth import JointTruth
from ..robots import load_robot

__all__ = ["RobotSpec", "ROBOTS", "get_robot", "locate_mjcf", "Scene", "build_scene", "Kinematics"]


@dataclass(frozen=True)
class RobotSpec:
    """A robot the generator can simulate.

    Attributes:
        name: registry name.
        model_folder: folder of the MJCF under the shared models folder (``../shared/models``).
        model_file: MJCF file name in that folder.
        joints: actuated arm joints, in log order.
        ee_body: body whose origin is the end-effector point (force labels act there).
        payload_parent: body the payload is welded to.
        payload_pos: (3,) [m] payload centre of mass in the parent's frame (the end-effector point).
        actuator: servo identifier written to ``Setup.actuator``.
        home: (n,) [rad] resting pose of the arm.
        reach: [m] comfortable horizontal reach of the end effector (task-space generators).
        gripper_config: robot config (registry name) whose crank-slider drives the gripper in a
            suite with a gripper (:mod:`actuatorlab.synth.gripper`); None: the gripper is always rigid.
    """

    name: str
    model_folder: str
    model_file: str
    joints: tuple[str, ...]
    ee_body: str
    payload_parent: str
    payload_pos: tuple[float, float, float]
    actuator: str
    home: tuple[float, ...]
    reach: float
    gripper_config: str | None = None


ROBOTS: dict[str, RobotSpec] = {
    "open_manipulator_x": RobotSpec(
        name="open_manipulator_x", model_folder="open_manipulator_x", model_file="open_manipulator_x.xml",
        joints=("joint1", "joint2", "joint3", "joint4"), ee_body="end_effector_link", payload_parent="link5",
        payload_pos=(0.126, 0.0, 0.0), actuator="xm430-w350", home=(0.0, -1.0, 0.3, 0.7), reach=0.38,
        gripper_config="open_manipulator_x_crank",
    ),
}


def get_robot(name: str) -> RobotSpec:
    """The :class:`RobotSpec` called ``name``; an unknown name lists what exists."""
    try:
        return ROBOTS[name]
    except KeyError:
        raise UnknownNameError("robot", name, list(ROBOTS)) from None


def locate_mjcf(name: str) -> Path:
    """Path of the robot's MJCF, from the robot registry (:func:`actuatorlab.robots.load_robot`)."""

    get_robot(name)  # the synth suite must know the robot too (its truth and trajectories)
    path = Path(load_robot(name).mjcf_path)
    if not path.is_file():
        raise DataError(path, f"MJCF of robot {name!r} not found")
    return path


@dataclass(frozen=True, eq=False)
class Scene:
    """A compiled ground-truth scene.

    Attributes:
        robot: the :class:`RobotSpec`.
        mjcf: path of the source MJCF.
        model: the compiled ``mujoco.MjModel`` (its payload mass is set at run time).
        dof: (n,) int, dof index of each arm joint (log order).
        qpos: (n,) int, qpos index of each arm joint.
        ee_body: body id of the end effector.
        payload_body: body id of the payload.
        payload_radius: [m] radius of the payload sphere (its inertia 2/5 m r^2).
        joint_range: (n, 2) [rad] joint limits from the MJCF.
    """

    robot: RobotSpec
    mjcf: Path
    model: mujoco.MjModel
    dof: np.ndarray
    qpos: np.ndarray
    ee_body: int
    payload_body: int
    payload_radius: float
    joint_range: np.ndarray

    def set_payload(self, mass: float) -> None:
        """Set the carried payload mass [kg] (0 = nothing carried); a solid sphere of radius 3 cm."""
        i = self.payload_body
        self.model.body_mass[i] = mass
        self.model.body_inertia[i] = 0.4 * mass * self.payload_radius**2


def build_scene(robot: str, truths: dict[str, JointTruth], physics_dt: float,
                edit: Callable[[mujoco.MjSpec], None] | None = None, joints: tuple[str, ...] | None = None) -> Scene:
    """Compile the ground-truth scene of ``robot`` with per-joint output inertia from ``truths``.

    ``edit`` (a suite with a gripper, :func:`actuatorlab.synth.gripper.add_crank`) adds joints to
    the edited MJCF before the payload; ``joints`` (default the robot's arm joints) are then the
    scene's joints, in log order (its :attr:`Scene.robot` carries them)."""
    spec_r = get_robot(robot)
    path = locate_mjcf(robot)
    try:
        spec = mujoco.MjSpec.from_file(str(path))
    except Exception as e:  # mujoco raises ValueError with its own message
        raise DataError(path, f"MuJoCo cannot load this MJCF: {e}") from None
    for items in (spec.actuators, spec.keys, spec.equalities, spec.excludes, spec.geoms, spec.meshes):
        for item in list(items):
            spec.delete(item)
    names = set(spec_r.joints)
    for joint in list(spec.joints):
        if joint.name not in names:
            spec.delete(joint)
    for name in spec_r.joints:
        joint = spec.joint(name)
        if joint is None:
            raise DataError(path, f"joint {name!r} of robot {robot!r} is not in the MJCF")
        joint.armature = float(truths[name].output_inertia)
        joint.damping = [0.0, 0.0, 0.0]
        joint.frictionloss = 0.0
        joint.stiffness = [0.0, 0.0, 0.0]
    if edit is not None:
        edit(spec)
    if joints is not None:
        spec_r = replace(spec_r, joints=joints)
    parent = spec.body(spec_r.payload_parent)
    payload = parent.add_body(name="payload", pos=list(spec_r.payload_pos), mass=0.0, inertia=[0.0, 0.0, 0.0],
                              ipos=[0.0, 0.0, 0.0])
    payload.explicitinertial = True
    spec.option.timestep = physics_dt
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_EULER
    spec.option.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
    spec.option.enableflags |= int(mujoco.mjtEnableBit.mjENBL_ENERGY)
    model = spec.compile()
    dof = np.array([model.joint(j).dofadr[0] for j in spec_r.joints], dtype=int)
    qpos = np.array([model.joint(j).qposadr[0] for j in spec_r.joints], dtype=int)
    rng = np.array([model.joint(j).range for j in spec_r.joints], dtype=np.float64)
    return Scene(robot=spec_r, mjcf=path, model=model, dof=dof, qpos=qpos, ee_body=model.body(spec_r.ee_body).id,
                 payload_body=model.body("payload").id, payload_radius=0.03, joint_range=rng)


class Kinematics:
    """Forward kinematics, Jacobian and a damped least-squares IK of the end-effector point.

    Holds its own ``MjData`` (kinematics only); the scene's model is only read.
    """

    def __init__(self, scene: Scene):
        self.scene = scene
        self.data = mujoco.MjData(scene.model)
        self._jacp = np.zeros((3, scene.model.nv))

    def ee(self, q: np.ndarray) -> np.ndarray:
        """End-effector position (3,) [m] in the base (world) frame for joint angles q (n,) [rad]."""
        self.data.qpos[self.scene.qpos] = q
        mujoco.mj_kinematics(self.scene.model, self.data)
        return self.data.xpos[self.scene.ee_body].copy()

    def jacobian(self, q: np.ndarray) -> np.ndarray:
        """(3, n) [m/rad] d(ee)/dq at q."""
        self.ee(q)
        mujoco.mj_comPos(self.scene.model, self.data)
        mujoco.mj_jacBody(self.scene.model, self.data, self._jacp, None, self.scene.ee_body)
        return self._jacp[:, self.scene.dof].copy()

    def ik(self, target: np.ndarray, q0: np.ndarray, posture: np.ndarray | None = None,
           iters: int = 50, tol: float = 1e-5, damping: float = 1e-3, posture_weight: float = 0.05) -> np.ndarray:
        """Joint angles (n,) [rad] whose end effector reaches ``target`` (3,) [m], from ``q0``.

        Damped least squares, dq = J^T (J J^T + lambda^2 I)^-1 e, plus a null-space pull towards
        ``posture`` (default q0) to pick one of the redundant solutions (4 joints, 3 task
        coordinates); angles are clipped to 95 % of the joint range. Deterministic.
        """
        lo, hi = self.scene.joint_range[:, 0], self.scene.joint_range[:, 1]
        mid, half = 0.5 * (lo + hi), 0.5 * (hi - lo)
        lo95, hi95 = mid - 0.95 * half, mid + 0.95 * half
        q = np.clip(np.asarray(q0, dtype=np.float64).copy(), lo95, hi95)
        posture = q.copy() if posture is None else np.asarray(posture, dtype=np.float64)
        eye = np.eye(3)
        for _ in range(iters):
            e = target - self.ee(q)
            if math.sqrt(float(e @ e)) < tol:
                break
            J = self.jacobian(q)
            JJt = J @ J.T + damping**2 * eye
            Jpinv = J.T @ np.linalg.solve(JJt, eye)
            null = np.eye(q.size) - Jpinv @ J
            dq = Jpinv @ e + posture_weight * (null @ (posture - q))
            q = np.clip(q + dq, lo95, hi95)
        return q

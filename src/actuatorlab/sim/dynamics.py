"""Rigid-body dynamics of a robot's arm joints for model-based force estimation (MuJoCo, float64).

:class:`ArmDynamics` compiles a reduced copy of the robot's MJCF (``mujoco.MjSpec``, in memory):
actuators, equalities and every joint that is not an estimated joint are removed (their bodies
become rigid parts of their parents, so a gripper's mass stays in the tree), contacts are
disabled, joint damping / dry friction / stiffness are zeroed (the estimators model friction
themselves) and each joint's armature is the robot config's reflected rotor inertia. It exposes
the terms of the joint-space equation of motion

    M(q) qdd + C(q, qd) qd + g(q) = tau_m - tau_f + tau_ext                              (1)

(tau_m motor torque, tau_f friction, tau_ext external torque) through MuJoCo:

* ``M(q)``: ``mj_fullM`` after ``mj_crb``;
* ``g(q)``: ``qfrc_bias`` at qd = 0 (``mj_rne`` without acceleration);
* ``C qd + g``: ``qfrc_bias`` at (q, qd);
* ``C^T qd = Mdot qd - C qd`` (skew-symmetry of ``Mdot - 2C`` with Christoffel symbols,
  ``Mdot = C + C^T``), with ``Mdot qd = (d M / d q . qd) qd`` taken by a central difference of
  ``M`` along ``qd`` (current sample only, hence causal);
* the translational Jacobian ``J_p (3, n)`` of the end-effector point (``mj_jac`` at the origin of
  the end-effector body), which maps an end-effector force ``f`` (base frame) to joint torque
  ``tau = J_p^T f``; the inverse map is ``f = pinv(J_p^T) tau`` (least squares, see
  :func:`force_from_torque`).

References: Featherstone, "Rigid Body Dynamics Algorithms" (2008) for (1); De Luca & Mattone,
"Sensorless robot collision detection and hybrid force/motion control", ICRA 2005 for the
``C^T qd`` identity used by the momentum observer.
"""

from __future__ import annotations

import mujoco
import numpy as np

from ..errors import ModelError
from ..robots.loader import Robot

__all__ = ["ArmDynamics", "force_from_torque", "default_ee_body"]


def default_ee_body(robot: Robot) -> str:
    """The end-effector body of ``robot`` where force labels act: the config's ``ee_body`` (the one
    the virtual hardware, :mod:`actuatorlab.synth`, uses for this robot); a robot whose config
    names none needs an explicit ``ee_body``."""
    if robot.ee_body is None:
        raise ModelError(f"robot {robot.name!r}: no default end-effector body; pass ee_body= (a body of "
                         f"{robot.mjcf_path})")
    return robot.ee_body


def force_from_torque(J: np.ndarray, tau: np.ndarray, rcond: float = 1e-3) -> np.ndarray:
    """End-effector force (3,) [N] from external joint torque ``tau`` (n,) [N.m]:
    ``f = pinv(J_p^T) tau``, the least-squares solution of ``J_p^T f = tau`` (exact when ``tau``
    lies in the range of ``J_p^T``); singular values below ``rcond`` times the largest are cut, so
    a near-singular pose gives a bounded force."""
    return np.linalg.pinv(np.asarray(J, float).T, rcond=rcond) @ np.asarray(tau, float)


def _full_m(model, data, dst) -> None:
    """Dense M into ``dst``: ``mj_fullM(m, d, dst)`` (MuJoCo >= 3.4 signature) or
    ``mj_fullM(m, dst, d.qM)`` (older releases)."""
    try:
        mujoco.mj_fullM(model, data, dst)
    except TypeError:
        mujoco.mj_fullM(model, dst, data.qM)


class ArmDynamics:
    """Reduced rigid-body model of the estimated joints of ``robot`` (see the module docstring).

    joints: estimated joints (robot joint names, in the order of every array here; default: the
    robot's revolute arm joints except gripper-like joints named ``gripper*``); ee_body: body whose
    origin is the end-effector point (default :func:`default_ee_body`); armature: (n,) [kg.m^2]
    reflected rotor inertia per joint (default: the robot's nominal parameters, joint side).

    Owns an ``MjData`` (not thread-safe); every method takes the state explicitly and returns new
    arrays.
    """

    def __init__(self, robot: Robot, joints: tuple[str, ...] | None = None, ee_body: str | None = None,
                 armature: np.ndarray | None = None):
        self.robot = robot
        if joints is None:
            joints = tuple(j for j in robot.joint_names if not j.startswith("gripper"))
        self.joints = tuple(joints)
        for j in self.joints:
            robot.joint(j)  # unknown names list what exists
        self.ee_body = ee_body or default_ee_body(robot)
        if armature is None:
            arm = robot.joint_params(robot.nominal_params())["armature"]
            armature = np.array([arm[robot.index(j)] for j in self.joints])
        self.armature = np.asarray(armature, float)
        try:
            spec = mujoco.MjSpec.from_file(robot.mjcf_path)
        except Exception as e:  # mujoco raises ValueError with its own message
            raise ModelError(f"{robot.mjcf_path}: MuJoCo cannot load this MJCF: {e}") from None
        for items in (spec.actuators, spec.keys, spec.equalities, spec.excludes, spec.tendons):
            for item in list(items):
                spec.delete(item)
        keep = set(self.joints)
        for joint in list(spec.joints):
            if joint.name not in keep:
                spec.delete(joint)
        for name, a in zip(self.joints, self.armature):
            jt = spec.joint(name)
            jt.armature = float(a)
            jt.damping = [0.0, 0.0, 0.0] if isinstance(jt.damping, (list, np.ndarray)) else 0.0
            jt.frictionloss = 0.0
            jt.stiffness = [0.0, 0.0, 0.0] if isinstance(jt.stiffness, (list, np.ndarray)) else 0.0
        spec.option.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
        if spec.body(self.ee_body) is None:
            raise ModelError(f"{robot.mjcf_path}: no body {self.ee_body!r} (end-effector body)")
        self.model = spec.compile()
        if self.model.nv != len(self.joints) or self.model.nq != len(self.joints):
            raise ModelError(f"{robot.name}: the estimated joints must be the only joints left "
                             f"(nq={self.model.nq}, nv={self.model.nv}, joints {list(self.joints)})")
        order = [self.model.joint(j).dofadr[0] for j in self.joints]
        if order != list(range(len(self.joints))):
            raise ModelError(f"{robot.name}: joints {list(self.joints)} must be listed in kinematic-tree order")
        self.n = len(self.joints)
        self.data = mujoco.MjData(self.model)
        self._body = self.model.body(self.ee_body).id
        self._M = np.zeros((self.n, self.n))
        self._jacp = np.zeros((3, self.n))

    # -- state helpers ---------------------------------------------------------------------------
    def _set(self, q, dq=None) -> None:
        d = self.data
        d.qpos[:] = q
        d.qvel[:] = 0.0 if dq is None else dq
        d.qacc[:] = 0.0

    def mass_matrix(self, q) -> np.ndarray:
        """M(q) (n, n) [kg.m^2], rotor armature included."""
        self._set(q)
        mujoco.mj_kinematics(self.model, self.data)
        mujoco.mj_comPos(self.model, self.data)
        mujoco.mj_crb(self.model, self.data)
        _full_m(self.model, self.data, self._M)
        return self._M.copy()

    def bias(self, q, dq) -> np.ndarray:
        """C(q, qd) qd + g(q) (n,) [N.m]."""
        self._set(q, dq)
        mujoco.mj_fwdPosition(self.model, self.data)
        mujoco.mj_fwdVelocity(self.model, self.data)
        return self.data.qfrc_bias.copy()

    def gravity(self, q) -> np.ndarray:
        """g(q) (n,) [N.m]: the torque gravity demands (bias at rest)."""
        return self.bias(q, np.zeros(self.n))

    def inverse_dynamics(self, q, dq, ddq) -> np.ndarray:
        """M(q) qdd + C(q, qd) qd + g(q) (n,) [N.m] (armature included; ``mj_rne`` alone leaves it out)."""
        return self.mass_matrix(q) @ np.asarray(ddq, float) + self.bias(q, dq)

    def coriolis_transpose(self, q, dq, eps: float = 1e-6) -> np.ndarray:
        """C(q, qd)^T qd (n,) [N.m] = Mdot qd - C qd, Mdot = dM/dq . qd by a central difference."""
        q, dq = np.asarray(q, float), np.asarray(dq, float)
        s = float(np.linalg.norm(dq))
        if s == 0.0:
            return np.zeros(self.n)
        h = eps / s
        Mdot = (self.mass_matrix(q + h * dq) - self.mass_matrix(q - h * dq)) / (2 * h)
        c_qd = self.bias(q, dq) - self.gravity(q)
        return Mdot @ dq - c_qd

    def ee_position(self, q) -> np.ndarray:
        """End-effector point (3,) [m] in the world (base) frame."""
        self._set(q)
        mujoco.mj_kinematics(self.model, self.data)
        return self.data.xpos[self._body].copy()

    def jacobian(self, q) -> np.ndarray:
        """Translational Jacobian J_p (3, n) [m/rad] of the end-effector point (body origin)."""
        self._set(q)
        mujoco.mj_kinematics(self.model, self.data)
        mujoco.mj_comPos(self.model, self.data)
        mujoco.mj_jac(self.model, self.data, self._jacp, None, self.data.xpos[self._body], self._body)
        return self._jacp.copy()

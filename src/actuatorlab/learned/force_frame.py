"""Joint-space force head: the network predicts external joint torques, the model maps them to an
end-effector force through the arm's kinematics (JAX, differentiable, float32).

With ``force_frame="joint"`` (:func:`~actuatorlab.learned.heads.train_heads`) the force head of a
whole-robot learned actuator has one output per channel, read as the external torque on that
joint, and :meth:`JointForceMap.force` turns it into the base-frame force the rest of the package
uses (the contact gate, the force prior, the estimators and the metrics are unchanged)::

    tau_hat  = force head (C,)                     [N.m]  external torque per channel
    tau      = tau_hat of the n chain joints (the arm joints from the root to the end effector)
    J_p(q)   = translational Jacobian (3, n) of the end-effector point at the measured q
               (column of a hinge: a_j x (p_ee - p_j); of a slide: a_j)          [m/rad | -]
    f_raw    = (J_p J_p^T + lambda^2 I)^-1 J_p tau                              [N]

the damped least-squares solution of J_p^T f = tau (Nakamura & Hanafusa 1986; Wampler 1986):
the minimiser of |J_p^T f - tau|^2 + lambda^2 |f|^2, which equals pinv(J_p^T) tau up to
O(lambda^2 / sigma_min^2) and stays bounded (|f| <= |tau| / (2 lambda)) where the arm is near a
singular pose (the end effector on the yaw axis). lambda = :data:`DAMPING` (3 mm): on the
OpenMANIPULATOR-X, whose smallest singular value of J_p is about 0.04 m over its usual poses, the
bias lambda^2 / sigma_min^2 is below 1 %.

Why: a force head in the base frame must learn sin / cos of the yaw angle and the lever arms to
point and scale a lateral push, which it did not (docs/force.md, "Force frame"). An external joint
torque is what the joint's current residual shows directly, it does not change when the whole arm
is yawed (J_p^T f is invariant under a common rotation of the arm and the force), and the
kinematics the mapping needs are known exactly from the MJCF.

The chain (body offsets, joint axes and anchors, qpos0) is read from the robot's MJCF with
MuJoCo (the reduced model of :class:`~actuatorlab.sim.dynamics.ArmDynamics`) and stored as
plain tuples, so a :class:`JointForceMap` is hashable (a static field of
:class:`~actuatorlab.sim.arm_learned.LearnedArm`); the forward kinematics follow MuJoCo's
``mj_kinematics`` (xpos = parent xpos + parent xmat body_pos, xquat = parent xquat body_quat, a
joint rotating the body about its anchor by q - qpos0).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import ModelError
from ..sim.dynamics import ArmDynamics

__all__ = ["DAMPING", "JointForceMap", "joint_force_map", "joint_force_map_of", "force_frame_dict", "force_yaw_of",
           "force_joint_of"]

#: lambda of the damped least squares [m]: a pose whose Jacobian's smallest singular value is
#: below a few mm (the end effector within a few mm of a singular line) gets a bounded force
#: (at most |tau| / (2 lambda) = 167 N per N.m)
DAMPING = 0.003

_HINGE, _SLIDE = 3, 2  # mujoco.mjtJoint values


def _axis_angle(axis, angle):
    """Rotation matrix (3, 3) about the unit ``axis`` by ``angle`` (Rodrigues), JAX."""
    a = jnp.asarray(axis, angle.dtype)
    K = jnp.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]], angle.dtype)
    return jnp.eye(3, dtype=angle.dtype) + jnp.sin(angle) * K + (1 - jnp.cos(angle)) * (K @ K)


@dataclass(frozen=True)
class JointForceMap:
    """The map from a joint-space force head to a base-frame end-effector force (module docstring).

    ee_body: the body whose origin is the force's point; joints: the chain joints, root first;
    q_cols: the raw window column of each chain joint's measured angle (its channel's ``q``);
    head_index: the force-head output of each chain joint (its channel index); bodies: per body
    from the root to ``ee_body``: (pos (3,) [m], rotation (9,) row-major, joint k in ``joints`` or
    -1, joint type (3 hinge, 2 slide), axis (3,), anchor (3,) [m] in the body frame, qpos0);
    damping: lambda [m]."""

    ee_body: str
    joints: tuple
    q_cols: tuple
    head_index: tuple
    bodies: tuple
    damping: float = DAMPING

    @property
    def n(self) -> int:
        return len(self.joints)

    def jacobian(self, q) -> tuple[jax.Array, jax.Array]:
        """Translational Jacobian J_p (3, n) of the end-effector point at chain angles ``q`` (n,),
        and the point (3,) [m] (base frame)."""
        q = jnp.asarray(q)
        dt = q.dtype
        R = jnp.eye(3, dtype=dt)
        p = jnp.zeros(3, dt)
        cols: list = [None] * self.n  # per chain joint: (axis (3,), anchor (3,) | None for a slide), world frame
        for pos, rot, k, jtype, axis, anchor, q0 in self.bodies:
            p = p + R @ jnp.asarray(pos, dt)
            R = R @ jnp.asarray(rot, dt).reshape(3, 3)
            if k < 0:
                continue
            a_w = R @ jnp.asarray(axis, dt)
            if jtype == _HINGE:
                x_anchor = p + R @ jnp.asarray(anchor, dt)
                R = R @ _axis_angle(axis, q[k] - q0)
                p = x_anchor - R @ jnp.asarray(anchor, dt)
                cols[k] = (a_w, x_anchor)
            else:  # slide: translation along the axis
                p = p + a_w * (q[k] - q0)
                cols[k] = (a_w, None)
        J = jnp.stack([jnp.cross(a, p - x) if x is not None else a for a, x in cols], axis=1)
        return J, p

    def force(self, frame, tau_head):
        """Base-frame force (3,) [N] from the force head's outputs ``tau_head`` (C,) [N.m] and the
        newest raw frame ``frame`` (n_features,) (its measured joint angles)."""
        tau_head = jnp.asarray(tau_head)
        q = jnp.asarray(frame)[np.asarray(self.q_cols)].astype(tau_head.dtype)
        tau = tau_head[np.asarray(self.head_index)]
        J, _ = self.jacobian(q)
        A = J @ J.T + (self.damping ** 2) * jnp.eye(3, dtype=J.dtype)
        return jnp.linalg.solve(A, J @ tau)

    def to_dict(self) -> dict:
        """arm_model.json's ``force_frame`` entry (the chain is rebuilt from the robot's MJCF)."""
        return {"kind": "joint", "ee_body": self.ee_body, "joints": list(self.joints), "damping": float(self.damping)}


def joint_force_map(robot, layout, ee_body: str | None = None, damping: float = DAMPING) -> JointForceMap:
    """The :class:`JointForceMap` of ``robot`` for a model ``layout``: the chain of the robot's arm
    joints (:class:`~actuatorlab.sim.dynamics.ArmDynamics`' joints) to ``ee_body`` (default: the
    robot's end-effector body). Every chain joint must be a channel with a ``q`` feature (its
    external torque is a head output); channels off the chain (a gripper) are ignored."""
    import mujoco


    dyn = ArmDynamics(robot, ee_body=ee_body)
    m = dyn.model
    if "q" not in layout.per_channel:
        raise ModelError("force_frame 'joint' needs the per-channel feature 'q' (the measured joint angles)")
    body = m.body(dyn.ee_body).id
    chain = []
    while body != 0:
        chain.append(body)
        body = int(m.body_parentid[body])
    chain.reverse()
    F = len(layout.per_channel)
    joints: list[str] = []
    bodies: list[tuple] = []
    for b in chain:
        nj = int(m.body_jntnum[b])
        if nj > 1:
            raise ModelError(f"{robot.name}: body {m.body(b).name!r} has {nj} joints; force_frame 'joint' handles one "
                             "joint per body")
        axis: tuple[float, ...] = (0.0, 0.0, 0.0)
        anchor: tuple[float, ...] = (0.0, 0.0, 0.0)
        k, jtype, q0 = -1, 0, 0.0
        if nj == 1:
            j = int(m.body_jntadr[b])
            jtype = int(m.jnt_type[j])
            if jtype not in (_HINGE, _SLIDE):
                raise ModelError(f"{robot.name}: joint {m.joint(j).name!r} is neither a hinge nor a slide")
            k = len(joints)
            joints.append(m.joint(j).name)
            axis = tuple(float(v) for v in m.jnt_axis[j] / np.linalg.norm(m.jnt_axis[j]))
            anchor = tuple(float(v) for v in m.jnt_pos[j])
            q0 = float(m.qpos0[m.jnt_qposadr[j]])
        rot = np.zeros(9)
        mujoco.mju_quat2Mat(rot, m.body_quat[b])
        bodies.append((tuple(float(v) for v in m.body_pos[b]), tuple(float(v) for v in rot),
                       k, jtype, axis, anchor, q0))
    if not joints:
        raise ModelError(f"{robot.name}: no joint between the base and {dyn.ee_body!r}")
    missing = [j for j in joints if j not in layout.channels]
    if missing:
        raise ModelError(f"force_frame 'joint': chain joints {missing} of {robot.name} are not channels of the model "
                         f"(channels {list(layout.channels)})")
    qi = layout.per_channel.index("q")
    return JointForceMap(ee_body=dyn.ee_body, joints=tuple(joints),
                         q_cols=tuple(layout.channels.index(j) * F + qi for j in joints),
                         head_index=tuple(layout.channels.index(j) for j in joints), bodies=tuple(bodies),
                         damping=float(damping))


def joint_force_map_of(d: dict, robot, layout, where) -> JointForceMap:
    """The map of an arm_model.json ``force_frame`` entry of kind "joint", rebuilt from the robot's
    MJCF and checked against the stored chain; errors name the file."""
    try:
        fm = joint_force_map(robot, layout, ee_body=d.get("ee_body"), damping=float(d.get("damping", DAMPING)))
    except ModelError as e:
        raise ModelError(f"{where}: {e}") from None
    if list(fm.joints) != list(d.get("joints", fm.joints)):
        raise ModelError(f"{where}: force_frame chain {d.get('joints')} does not match the robot's {list(fm.joints)}")
    return fm


def force_frame_dict(model) -> dict:
    """arm_model.json's ``force_frame`` entry of a model whose force head predicts in the yaw
    joint's frame (LearnedArm.force_yaw): the joint, its world axis and the feature read."""
    F = len(model.layout.per_channel)
    col = int(model.force_yaw[0])
    return {"kind": "yaw", "joint": model.layout.channels[col // F], "feature": model.layout.per_channel[col % F],
            "axis": [float(v) for v in model.force_yaw[1:]]}


def force_yaw_of(d: dict | None, layout, where) -> tuple:
    """LearnedArm.force_yaw from an arm_model.json ``force_frame`` entry (``()`` when absent or
    "base"); errors name the file."""
    if d is None or d.get("kind", "base") in ("base", "joint"):
        return ()
    if d.get("kind") != "yaw":
        raise ModelError(f"{where}: force_frame kind {d.get('kind')!r} is unknown; known: base, yaw, joint")
    j, feat, axis = d.get("joint"), d.get("feature", "q"), d.get("axis")
    if j not in layout.channels or feat not in layout.per_channel or axis is None or len(axis) != 3:
        raise ModelError(f"{where}: force_frame needs a channel joint, a per-channel feature and a 3-vector axis "
                         f"(got joint {j!r}, feature {feat!r}, axis {axis!r})")
    col = layout.channels.index(j) * len(layout.per_channel) + layout.per_channel.index(feat)
    return (col, *(float(v) for v in axis))


def force_joint_of(d: dict | None, robot, layout, where) -> JointForceMap | None:
    """The JointForceMap of an arm_model.json ``force_frame`` entry of kind "joint" (else None)."""
    if d is None or d.get("kind") != "joint":
        return None
    return joint_force_map_of(d, robot, layout, where)

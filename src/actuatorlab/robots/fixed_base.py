"""A floating-base robot hung in the air: its base welded to the world (the identification protocol).

:func:`on_fixed_base` returns the same robot config with the MJCF's free joint removed in the in-memory
MjSpec (:func:`~actuatorlab.robots.loader.model_spec`), so the base body stays where the MJCF puts it
(ANYmal C: 0.62 m above the floor), contacts off (the legs swing in the air), and the joint addresses
of the compiled model. The virtual hardware's in-air protocol (:mod:`actuatorlab.synth.legged`) and
the whole-robot fit of its logs (:func:`actuatorlab.identify.arm_space.robot_for_log`) use the same edit.
"""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np

from .loader import Robot, build_model, model_spec

__all__ = ["on_fixed_base", "joint_types", "links_spec"]


def on_fixed_base(robot: Robot) -> Robot:
    """``robot`` with its base welded to the world (no free joint, contacts off); a robot without a free
    joint comes back with only the contacts switched off."""
    r = dataclasses.replace(robot, fixed_base=True, contacts=False)
    m = build_model(r)
    joints = tuple(dataclasses.replace(
        j, qpos_adr=int(m.jnt_qposadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j.name)]),
        dof_adr=int(m.jnt_dofadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j.name)])) for j in r.joints)
    return dataclasses.replace(r, joints=joints, nq=int(m.nq), nv=int(m.nv))


def links_spec(robot: Robot) -> mujoco.MjSpec:
    """The robot's links alone (:func:`~actuatorlab.robots.loader.model_spec` with its options and loads): the
    MJCF's actuators removed, every joint's armature, damping and friction loss 0, keyframe controls cleared;
    what a drive adds is the caller's (the in-air truth's rotors, the drive-side identification's regression)."""
    spec = model_spec(robot)
    for a in list(spec.actuators):
        spec.delete(a)
    for j in robot.joints:
        sj = spec.joint(j.name)
        sj.armature, sj.frictionloss = 0.0, 0.0
        sj.damping = np.zeros_like(np.asarray(sj.damping, dtype=float))
    for k in spec.keys:
        k.ctrl = []
    return spec


def joint_types(joint_names) -> dict[str, str] | None:
    """{joint: type} where the joints' names end in a type shared by several joints (ANYmal C: ``LF_HAA``
    -> ``HAA``, three types of four joints), else None (every suffix distinct, or one for all): the
    parameter sets of the in-air fit (:func:`~actuatorlab.identify.arm_space.robot_for_log`)."""
    names = list(joint_names)
    of = {j: j.rsplit("_", 1)[-1] for j in names}
    return of if 1 < len(set(of.values())) < len(names) else None

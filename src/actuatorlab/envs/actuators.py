"""Which actuator an environment puts on each joint: an actuatorlab model loaded from a fitted
model file (analytic or learned), the robot config's nominal model, MuJoCo's built-in actuators
of the robot's MJCF (for comparison), or a mix: ``builtin_joints`` keep the MJCF's own actuator
(and their joint's armature, damping and friction) while the other joints run the model
(:func:`mixed_robot`).

Joints are matched by name: the robot config (:mod:`actuatorlab.robots`) names every modelled
joint and its actuator type; an ``arm_model.json`` (``actuatorlab fit --robot`` /
``actuatorlab train --robot``, docs/model_file.md) gives the fitted parameters per parameter set or
per joint name. The environments then step the same functions as the whole-robot rollouts
(:mod:`actuatorlab.sim.arm`, :mod:`actuatorlab.sim.arm_native`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from ..errors import ModelError
from ..robots.loader import Robot, home_qpos, load_robot
from ..models.actuator_model import check_robot, load
from ..sim.arm_data import _param_sets, robot_with_model
from ..sim.arm_learned import LearnedArm
from ..errors import UnknownNameError
from ..robots.loader import model_spec
from ..learned.arm import load_arm_model

__all__ = ["DEFAULT_ROBOT", "Actuator", "load_actuator", "mixed_robot", "builtin_model", "builtin_ctrl_index", "home_qpos"]

#: the robot of an environment given neither a robot nor a model file that names one
DEFAULT_ROBOT = "open_manipulator_x"


@dataclass(frozen=True, eq=False)
class Actuator:
    """kind: "analytic" | "learned" | "builtin"; robot: the robot with the model's parameter sets;
    params: analytic parameter sets name -> (n_groups,) servo-side values (a learned model's
    ``base``; the nominal ones for "builtin", unused); learned: the
    :class:`~actuatorlab.sim.arm_learned.LearnedArm` or None; envelope: the model file's
    operating envelope (dict, or {joint: dict}) or None; source: where it came from.

    Mixed robots: builtin: the joints that keep MuJoCo's built-in actuator (empty: none);
    model_robot: the robot the actuatorlab rollout steps (:func:`mixed_robot`: only the modelled
    joints; ``robot`` itself when nothing is built in); ``params`` are then ``model_robot``'s
    parameter sets, ``robot`` keeps every joint (the policy's action covers all of them)."""

    kind: str
    robot: Robot
    params: dict
    learned: Any = None
    envelope: Any = None
    source: str = "nominal"
    builtin: tuple = ()
    model_robot: Any = None

    @property
    def rollout_robot(self) -> Robot:
        """The robot whose joints the actuatorlab rollout models."""
        return self.model_robot if self.model_robot is not None else self.robot


def mixed_robot(robot: Robot, builtin: tuple[str, ...] | list[str]) -> tuple[Robot, np.ndarray]:
    """The robot with the joints ``builtin`` no longer modelled: (that robot, indices (n_kept,) of
    the parameter sets it keeps, into ``robot.groups``).

    Its MuJoCo model (:meth:`Robot.model`, :func:`~actuatorlab.robots.loader.build_model`) then
    keeps, for the built-in joints, the MJCF's actuators, armature, damping and friction. The
    config's ``joint_overrides`` are dropped: they describe the robot with every listed joint
    modelled (e.g. a mimic finger's friction that belongs to the modelled gripper servo), so a
    mixed robot keeps the MJCF's values there too."""
    import dataclasses

    names = set(builtin)
    keep = [j for j in robot.joints if j.name not in names]
    if not keep:
        raise ModelError(f"{robot.name}: every joint is built in; use model='builtin'")
    kept_groups = sorted({j.group for j in keep})
    remap = {g: k for k, g in enumerate(kept_groups)}
    kept_names = {j.name for j in keep}
    groups = tuple(dataclasses.replace(robot.groups[g], joints=tuple(x for x in robot.groups[g].joints
                                                                      if x in kept_names)) for g in kept_groups)
    joints = tuple(dataclasses.replace(j, group=remap[j.group]) for j in keep)
    sub = dataclasses.replace(robot, joints=joints, groups=groups, joint_overrides=())
    return sub, np.array(kept_groups, dtype=np.int64)


def load_actuator(robot: str | Robot | None, model: Any = None, builtin_joints: Any = None) -> Actuator:
    """The actuator of every modelled joint.

    ``robot``: a name, config path or :class:`Robot`; None: the robot the model file names (a
    one-joint model.json: its bench robot), else :data:`DEFAULT_ROBOT`.

    ``model``: None or "nominal" (the robot config's model and values), "builtin" (MuJoCo's own
    actuators of the MJCF), a path to a model file (an ``arm_model.json``: analytic, learned or
    residual; a one-joint analytic ``model.json``: its bench robot's servo), an
    arm-model dict ({"model", "params"} as ``fit --robot`` writes), an :class:`Actuator`, or a
    :class:`~actuatorlab.sim.arm_learned.LearnedArm` (with the robot carrying its base model).

    ``builtin_joints``: names of joints that keep MuJoCo's built-in actuator while the others run
    ``model`` (analytic models; :func:`mixed_robot`). Every joint built in is ``"builtin"``.
    """
    if builtin_joints:
        return _mixed(robot, model, tuple(builtin_joints))

    am = None
    if isinstance(model, (str, Path)) and str(model) not in ("nominal", "builtin"):
        am = load(model)
        if am.one_joint:
            r = load_robot(am) if robot is None else robot if isinstance(robot, Robot) else load_robot(robot)
            if r.name != am.robot:
                raise ModelError(f"{model}: fitted for robot {am.robot!r}, not {r.name!r}")
            return Actuator("analytic", r, r.nominal_params(), envelope=am.envelope, source=str(model))
        if robot is None:
            robot = check_robot(am, None)
    if robot is None:
        robot = DEFAULT_ROBOT
    r = robot if isinstance(robot, Robot) else load_robot(robot)
    if isinstance(model, Actuator):
        return model
    if model is None or (isinstance(model, str) and model in ("nominal", "builtin")):
        return Actuator("builtin" if model == "builtin" else "analytic", r, r.nominal_params(),
                        source=model or "nominal")
    if isinstance(model, LearnedArm):
        return Actuator("learned", r, dict(model.base), learned=model, source="LearnedArm")
    d: Mapping[str, Any]
    if isinstance(model, dict):
        d, src = model, "dict"
    else:
        if am is None:
            raise ModelError(f"model: expected a model file path, an arm-model dict, an Actuator or a LearnedArm, "
                             f"got {type(model).__name__}")
        p = Path(model)
        d, src = am.document, str(p)
        if d.get("robot") != r.name:
            raise ModelError(f"{p}: fitted for robot {d.get('robot')!r}, not {r.name!r}")
        if am.kind in ("learned", "residual"):
            rl, lm, _ = load_arm_model(p, r.name)
            return Actuator("learned", rl, {k: np.asarray(v) for k, v in lm.base.items()}, learned=lm,
                            envelope=d.get("envelope"), source=src)
    rr = robot_with_model(r, d["model"]) if d.get("model") else r
    rr, params = _param_sets(rr, d.get("params"))
    return Actuator("analytic", rr, params, envelope=d.get("envelope"), source=src)


def _mixed(robot: str | Robot | None, model: Any, builtin: tuple[str, ...]) -> Actuator:
    base = load_actuator(robot, model)
    r = base.robot
    for j in builtin:
        if j not in r.joint_names:
            raise UnknownNameError(f"joint of {r.name} (builtin_joints)", j, r.joint_names)
    if len(set(builtin)) != len(builtin):
        raise ModelError(f"builtin_joints lists a joint twice: {list(builtin)}")
    if base.kind == "builtin" or set(builtin) == set(r.joint_names):
        return Actuator("builtin", r, r.nominal_params(), source="builtin")
    if base.learned is not None:
        raise ModelError(f"{base.source}: builtin_joints with a learned model: its network reads every channel "
                         f"({', '.join(r.joint_names[i] for i in base.learned.channel_index)}) as one input; "
                         "mixed robots take analytic models")
    sub, kept = mixed_robot(r, builtin)
    params = {k: np.asarray(v)[..., kept] for k, v in base.params.items()}
    env = base.envelope
    if isinstance(env, dict) and env:  # the fitted envelope of the modelled joints only
        per = {j: env for j in r.joint_names} if "version" in env else dict(env)
        env = {j: v for j, v in per.items() if j not in builtin} or None
    order = tuple(j for j in r.joint_names if j in builtin)
    return Actuator(base.kind, r, params, envelope=env, source=f"{base.source} + builtin {', '.join(order)}",
                    builtin=order, model_robot=sub)


def builtin_model(robot: Robot, for_mjx: bool = False) -> mujoco.MjModel:
    """The robot's MJCF as it ships (its own actuators, joint damping, armature and friction), with
    the MJCF's integrator, the config's physics timestep and contact setting (and MJX's solver settings with ``for_mjx``,
    as :func:`~actuatorlab.robots.loader.build_model`)."""

    return model_spec(robot, for_mjx, config_integrator=False).compile()


def builtin_ctrl_index(robot: Robot, m: mujoco.MjModel, joints: Any = None) -> np.ndarray:
    """(n,) index into ``ctrl`` of the MJCF actuator that drives each modelled joint (by name), or
    each of ``joints``."""
    idx = []
    for j in (robot.joint_names if joints is None else joints):
        jid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j)
        hits = [a for a in range(m.nu) if m.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT
                and m.actuator_trnid[a, 0] == jid]
        if not hits:
            raise ModelError(f"{robot.mjcf_path}: no built-in actuator drives joint {j!r}")
        idx.append(hits[0])
    return np.array(idx, dtype=np.int64)

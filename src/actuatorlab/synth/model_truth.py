"""Synthetic multi-joint logs whose ground truth is a member of the fitted model family.

The virtual hardware of :func:`actuatorlab.synth.run_synth` is deliberately richer than any model
actuatorlab fits, so its parameters cannot be recovered exactly. This module is its counterpart
for checking identification itself: the logs come from the whole-robot native path
(:func:`actuatorlab.sim.arm_native.rollout_native`) running a registry model (``m1``, ``m3``,
``m3+delay`` ...) with one known parameter set per joint, so a fit of the same model must give the
per-joint values back, and a nested selection must pick the model that made the data.

Per joint j and parameter k, the truth is the robot config's nominal value times a unit-to-unit
factor drawn log-uniformly in ``[1/(1+s), 1+s]`` (``spread`` s), after
:func:`actuatorlab.identify.arm_fit.robot_with_model` has switched the mechanisms the model lacks
off. Parameters whose nominal is 0 (e.g. viscous friction) get the values given in ``set_values``.

Commands are the synth generators (:mod:`actuatorlab.synth.commands`): leader-arm teleoperation,
random steps, and a chirp on each arm joint in turn, sampled at the robot's control rate; the
gripper (not in :data:`~actuatorlab.synth.commands.SAFE_BOX`) holds its rest position and is not
logged. Positions are optionally quantised to the 4096 counts/rev encoder.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..logs.format import Channel, Kind, Setup, Trajectory
from ..models.registry import get_model
from ..robots.loader import Robot, load_robot
from . import commands as cmd
from .truth import ENCODER_STEP
from ..sim.arm_data import per_joint_robot, robot_with_model
from ..sim.arm import initial_state, make_inputs
from ..sim.arm_native import rollout_native

__all__ = ["FAMILIES", "Provenance", "draw_param_sets", "model_logs", "rollout_trajectory"]

#: command families in the order logs cycle through them
FAMILIES: tuple[str, ...] = ("teleop", "steps", "chirp")


def draw_param_sets(robot: Robot | str, model: str, seed: int = 0, *, spread: float = 0.25,
                    names: tuple[str, ...] = ("kt", "friction_base", "friction_viscous", "load_friction"),
                    set_values: dict[str, float] | None = None) -> dict[str, np.ndarray]:
    """Per-joint truth for ``model`` on ``robot``: name -> (n_joints,) servo-side values.

    Parameters in ``names`` free in ``model`` vary from joint to joint (module docstring); the
    others keep the config's nominal value. ``set_values`` (name -> value) replaces the nominal
    before the variation (needed for parameters whose nominal is 0).
    """

    robot = load_robot(robot) if isinstance(robot, str) else robot
    r = per_joint_robot(robot_with_model(robot, model))
    p = r.nominal_params()
    free = set(get_model(model).free)
    rng = np.random.default_rng(seed)
    lo, hi = np.log(1.0 / (1.0 + spread)), np.log(1.0 + spread)
    for k, v in (set_values or {}).items():
        if k in free:
            p[k] = np.full_like(p[k], float(v))
    for k in names:
        if k in free:
            p[k] = p[k] * np.exp(rng.uniform(lo, hi, size=p[k].shape))
    return p


def _command(family: str, rng: np.random.Generator, T: int, dt: float, k: int) -> np.ndarray:
    if family == "teleop":
        return cmd.teleop(rng, T, dt, amplitude=0.8)
    if family == "steps":
        return cmd.steps(rng, T, dt)
    return cmd.chirp(rng, T, dt, joint=k % cmd.SAFE_BOX.shape[0])


def model_logs(robot: Robot | str, model: str, param_sets: dict[str, np.ndarray], *, n_logs: int = 6,
               duration: float = 4.0, seed: int = 0, quantize: bool = True,
               families: tuple[str, ...] = FAMILIES) -> list[Trajectory]:
    """``n_logs`` multi-joint logs of ``robot`` simulated with ``model`` and per-joint parameters
    ``param_sets`` (name -> (n_joints,), as :func:`draw_param_sets` returns), on the control grid.

    Log i uses command family ``families[i % len(families)]``; its condition tags are
    ``{"excitation": family, "truth": model}``. Channels per arm joint: position_target, position
    (quantised to 2 pi / 4096 rad if ``quantize``), velocity (the simulator's, rad/s) and
    torque_enable; plus supply_voltage. Same arguments, same arrays.
    """

    robot = load_robot(robot) if isinstance(robot, str) else robot
    r = per_joint_robot(robot_with_model(robot, model))
    n_arm = cmd.SAFE_BOX.shape[0]
    arm = list(robot.joint_names[:n_arm])
    dt = robot.control_dt
    T = int(round(duration / dt))
    rest = np.asarray(robot.model().qpos0)[robot.qpos_adr]
    logs = []
    for i in range(int(n_logs)):
        fam = families[i % len(families)]
        rng = np.random.default_rng([int(seed), i])
        qt = np.tile(rest, (T, 1))
        qt[:, :n_arm] = _command(fam, rng, T, dt, i // len(families))
        _, o = rollout_native(r, param_sets, make_inputs(r, qt), initial_state(r, q=qt[0]))
        logs.append(rollout_trajectory(robot, f"{fam}_{i:02d}", qt, o.q, o.dq, arm, quantize=quantize,
                                       conditions={"excitation": fam, "truth": get_model(model).name},
                                       provenance=Provenance({"truth_model": get_model(model).name},
                                                             f"synthetic:{robot.name}/{get_model(model).name}/"
                                                             f"{fam}_{i:02d}")))
    return logs


@dataclass(frozen=True)
class Provenance:
    """Where a synthetic log comes from: setup extras (added to robot and joints) and the source name
    (None: ``synthetic:<robot>/<name>``)."""

    extra: dict | None = None
    source_file: str | None = None


def rollout_trajectory(robot: Robot, name: str, q_target: np.ndarray, q: np.ndarray, dq: np.ndarray,
                       joints: list[str], *, quantize: bool = True, conditions: dict | None = None,
                       provenance: Provenance = Provenance()) -> Trajectory:
    """A multi-joint log (docs/synth.md convention) of one rollout: targets ``q_target`` and the
    simulated ``q``, ``dq`` (T, n_joints) [rad | m], robot joint order, recording ``joints``.
    Positions are quantised to 2 pi / 4096 rad (times |output_to_joint| behind a linkage) if
    ``quantize``; supply_voltage is the first joint's configured supply."""
    T = q_target.shape[0]
    data, ch = {}, {}
    for j in joints:
        c = robot.index(j)
        step = ENCODER_STEP * abs(robot.joint(j).output_to_joint)
        qj = np.round(q[:, c] / step) * step if quantize else q[:, c]
        unit, vunit = ("m", "m/s") if robot.joint(j).joint_type == "prismatic" else ("rad", "rad/s")
        columns: tuple[tuple[str, np.ndarray, str, Kind], ...] = (
            (f"position/{j}", qj, unit, "measured"), (f"velocity/{j}", dq[:, c], vunit, "estimated"),
            (f"position_target/{j}", q_target[:, c], unit, "commanded"),
            (f"torque_enable/{j}", np.ones(T), "bool", "commanded"))
        for cn, val, u, kind in columns:
            data[cn], ch[cn] = np.asarray(val, float), Channel(u, kind)
    data["supply_voltage"] = np.full(T, robot.joints[0].supply_voltage)
    ch["supply_voltage"] = Channel("V", "commanded")
    setup = Setup(robot.joints[0].actuator, controller=robot.joints[0].law,
                  gains=dict(robot.joints[0].gains), supply_voltage=robot.joints[0].supply_voltage,
                  extra={"robot": robot.name, "joints": list(joints), **(provenance.extra or {})})
    return Trajectory(name=name, time=np.arange(T) * robot.control_dt, data=data, channels=ch, setup=setup,
                      conditions=dict(conditions or {}), source_file=provenance.source_file or f"synthetic:{robot.name}/{name}")

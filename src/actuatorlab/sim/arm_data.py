"""Multi-joint logs on a robot's control grid, the robot's parameter sets, and open-loop replay scores.

Logs in the multi-joint convention of docs/synth.md (channels ``position/<joint>`` [rad | m],
``position_target/<joint>``, optional ``velocity/<joint>``, ``torque_enable/<joint>``,
``temperature/<joint>`` and a shared ``supply_voltage`` [V]; ``Setup.extra["robot"]`` and
``Setup.extra["joints"]``), sampled on the robot's control grid (``control_dt``), are read into
robot-ordered arrays (:func:`log_arrays`) and cut into windows that restart from the *measured*
state (:func:`fit_windows`, :func:`actuatorlab.sim.arm_windows.make_windows`). Replay score
(:func:`evaluate_arm`), with the native MuJoCo path :func:`actuatorlab.sim.arm_native.rollout_native`::

    MAE_j(h) = sum_w sum_k |q_sim[w, k, j] - q_meas[w, k, j]| / (number of samples)   [rad | m]

Robot joints the log does not list (the OpenManipulator-X gripper in the synth logs) are held at
their rest position (target = qpos0) and not scored; a listed joint without a ``position/<joint>``
channel, declared in ``Setup.extra["unmeasured"]`` (no encoder, or one withheld), is commanded but
not scored, its command standing in for its state where a window restarts; an undeclared missing
channel is an error. Used by the whole-robot fit
(:mod:`actuatorlab.identify.arm_fit`), the learned actuators, the force estimators and the
virtual hardware alike.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, NamedTuple

import numpy as np

from ..errors import DataError, ModelError, UnknownNameError
from ..logs.format import Trajectory
from ..models.params import PARAMS, bounds_for, neutral_params
from ..models.registry import get_model
from ..precision import physics
from ..robots.loader import Robot, load_robot
from .arm import ArmConfig, ArmInputs
from .arm_native import native_model
from .backends import rollout
from .arm_windows import Windows, make_windows

__all__ = ["LogArrays", "log_arrays", "per_joint_robot", "robot_with_model", "model_params", "evaluate_arm",
           "fit_windows", "ReplaySetup", "replay_setup"]


@dataclasses.dataclass(frozen=True)
class LogArrays:
    """One multi-joint log on the control grid, robot joint order.

    q_meas, dq_meas: (T, n) [rad | m], [rad/s | m/s]; inputs: :class:`ArmInputs` (T, n);
    scored: (n,) bool, True for joints whose position the log records; units: joint -> unit of the
    logged joints; temperature: (T, n) [degC] winding temperature from temperature/<joint> channels
    (joints without one: the nominal ambient temperature), or None when the log has none;
    commanded: (n,) bool, True for the log's joints (scored, or commanded without an encoder: such
    a joint, listed in ``Setup.extra["unmeasured"]``, has q_meas and dq_meas that are its command
    and the command's derivative, stand-ins for the
    window's initial state that no loss compares with; image supervision sees it,
    :mod:`actuatorlab.identify.images`); None: as ``scored``.
    """

    name: str
    q_meas: np.ndarray
    dq_meas: np.ndarray
    inputs: ArmInputs
    scored: np.ndarray
    units: dict
    temperature: np.ndarray | None = None
    commanded: np.ndarray | None = None


def _where(traj: Trajectory) -> str:
    return traj.location


def _robot(robot: str | Robot) -> Robot:
    return robot if isinstance(robot, Robot) else load_robot(robot)


def log_arrays(robot: Robot, traj: Trajectory) -> LogArrays:
    """Read one multi-joint log into robot-ordered arrays; :class:`DataError` names the log and
    the problem (another robot, a joint it lacks, a missing channel, a wrong sample period)."""
    where = _where(traj)
    extra = traj.setup.extra or {}
    if extra.get("robot") not in (None, robot.name):
        raise DataError(where, f"log was recorded on robot {extra['robot']!r}, not {robot.name!r}")
    joints = list(extra.get("joints") or robot.joint_names)
    unmeasured = set(extra.get("unmeasured") or ())
    if unmeasured - set(joints) or any(traj.has(f"position/{j}") for j in unmeasured):
        raise DataError(where, f"Setup.extra['unmeasured'] {sorted(unmeasured)} must list joints of the log "
                               f"({', '.join(joints)}) that have no position/<joint> channel")
    for j in joints:
        if j not in robot.joint_names:
            raise DataError(where, f"log joint {j!r} is not a joint of {robot.name} "
                                   f"({', '.join(robot.joint_names)})")
        for ch in (f"position/{j}", f"position_target/{j}"):
            if not traj.has(ch) and not (j in unmeasured and ch.startswith("position/")):
                raise DataError(where, f"no {ch!r} channel for joint {j!r} of {robot.name} (multi-joint logs need "
                                       f"position/<joint> and position_target/<joint>; a joint without an "
                                       f"encoder is listed in Setup.extra['unmeasured'])")
    T = traj.n
    if T < 2:
        raise DataError(where, f"log has {T} samples; at least 2 are needed")
    dt = float(np.median(np.diff(traj.time)))
    if abs(dt - robot.control_dt) > 0.01 * robot.control_dt:
        raise DataError(where, f"sample period {dt:.6g} s differs from {robot.name}'s control_dt "
                               f"{robot.control_dt:.6g} s; resample the log first")
    m = robot.model()
    n = robot.n_joints
    rest = np.asarray(m.qpos0)[robot.qpos_adr]
    q = np.tile(rest, (T, 1))
    dq = np.zeros((T, n))
    qt = np.tile(rest, (T, 1))
    en = np.ones((T, n))
    vs = np.tile(np.array([js.supply_voltage for js in robot.joints], float), (T, 1))
    if traj.has("supply_voltage"):
        vs[:] = np.asarray(traj["supply_voltage"], float)[:, None]
    scored = np.zeros(n, bool)
    units = {}
    commanded = np.zeros(n, bool)
    for j in joints:
        i = robot.index(j)
        qt[:, i] = traj[f"position_target/{j}"]
        commanded[i] = True
        if traj.has(f"torque_enable/{j}"):
            en[:, i] = traj[f"torque_enable/{j}"]
        if j in unmeasured:  # commanded, not measured: the command stands in (not scored)
            q[:, i] = qt[:, i]
            dq[:, i] = np.gradient(qt[:, i], traj.time)
            continue
        q[:, i] = traj[f"position/{j}"]
        if traj.has(f"velocity/{j}"):
            dq[:, i] = traj[f"velocity/{j}"]
        else:
            dq[:, i] = np.gradient(q[:, i], traj.time)
        scored[i] = True
        units[j] = traj.channels[f"position/{j}"].unit
    if not np.all(np.isfinite(q[:, scored])) or not np.all(np.isfinite(qt)):
        raise DataError(where, "position or position_target channels hold NaN/inf samples")
    dq = np.nan_to_num(dq)
    temp = None
    if any(traj.has(f"temperature/{j}") for j in joints):
        amb = robot.joint_params({"ambient_temperature": robot.nominal_params()["ambient_temperature"]})
        temp = np.tile(amb["ambient_temperature"], (T, 1))
        for j in joints:
            if traj.has(f"temperature/{j}"):
                i = robot.index(j)
                col = np.asarray(traj[f"temperature/{j}"], float)
                temp[:, i] = np.where(np.isfinite(col), col, temp[:, i])
    return LogArrays(traj.name, q, dq, ArmInputs(qt, en, vs), scored, units, temp, commanded)


# ---------------------------------------------------------------------------------------------
def per_joint_robot(robot: Robot) -> Robot:
    """The same robot with one parameter set per joint (group ``<actuator>@<joint>``, its type's nominal
    values and search bounds)."""
    groups = tuple(dataclasses.replace(robot.groups[j.group], name=f"{robot.groups[j.group].actuator}@{j.name}",
                                       joints=(j.name,)) for j in robot.joints)
    joints = tuple(dataclasses.replace(j, group=i) for i, j in enumerate(robot.joints))
    return dataclasses.replace(robot, joints=joints, groups=groups)


def _type_sets(robot: Robot, keys: set) -> dict[str, list[int]]:
    """{label: joint indices} of the labels ``<actuator>@<type>`` among ``keys`` that are neither a
    parameter set nor a joint of ``robot``: the joints of that actuator whose names end in ``_<type>``
    (the sets by joint type of an in-air fit, :func:`~actuatorlab.identify.arm_space.robot_for_log`)."""
    out = {}
    for key in keys - {g.name for g in robot.groups} - set(robot.joint_names):
        a, _, t = str(key).rpartition("@")
        idx = [i for i, j in enumerate(robot.joints) if a and j.actuator == a and j.name.endswith("_" + t)]
        if idx:
            out[key] = idx
    return out


def _param_sets(robot: Robot, params: dict | None) -> tuple[Robot, dict]:
    """(robot, name -> (n_groups,) servo-side values) from None (nominal), the robot's own format
    (name -> (n_groups,)) or :func:`fit_arm`'s ``params`` (name -> {group or joint: value}). Sets by
    joint type (``anydrive@KFE``, an in-air fit's labels) on a robot that shares one set give one set per
    joint, each with its type's values (a per-actuator randomization then draws per joint)."""
    if params is None:
        return robot, robot.nominal_params()
    nested = [v for v in params.values() if isinstance(v, dict)]
    if nested:
        keys = set().union(*[set(v) for v in nested])
        types = _type_sets(robot, keys)
        per_joint = bool(types) or bool(keys <= set(robot.joint_names) and keys - {g.name for g in robot.groups})
        r = per_joint_robot(robot) if per_joint else robot
        where = {g.joints[0] if r is not robot else g.name: [i] for i, g in enumerate(r.groups)}
        where.update(types)
        out = r.nominal_params()
        for k, v in params.items():
            _check_name(k)
            if isinstance(v, dict):
                for key, val in v.items():
                    if key not in where:
                        raise ModelError(f"parameter {k!r}: {key!r} is neither a parameter set nor a joint "
                                         f"of {robot.name} ({', '.join(where)})")
                    out[k][where[key]] = float(val)
            else:
                out[k][:] = float(v)
        return r, out
    out = robot.nominal_params()
    for k, v in params.items():
        _check_name(k)
        out[k] = np.broadcast_to(np.asarray(v, float), (len(robot.groups),)).copy()
    return robot, out


def _check_name(k: str) -> None:
    if k not in PARAMS:
        raise UnknownNameError("parameter", k, tuple(PARAMS))


def _windows(robot: Robot, logs: list[LogArrays], h: int, cfg: ArmConfig) -> tuple[Windows, np.ndarray] | None:
    """Windows of ``h`` steps of every log at least ``h`` samples long, stacked; with (W, n) scored."""
    ws, sc = [], []
    for lg in logs:
        if h > lg.q_meas.shape[0]:
            continue
        w = make_windows(robot, lg.q_meas, lg.dq_meas, lg.inputs, h, cfg=cfg, temperature=lg.temperature)
        ws.append(w)
        sc.append(np.tile(lg.scored, (len(w.start), 1)))
    if not ws:
        return None
    return _stack(ws), np.concatenate(sc)


@physics
class ReplaySetup(NamedTuple):
    """What a replay of multi-joint logs runs on: ``robot`` (with ``model`` applied: the robot the
    logs are read with), ``sim`` (the robot the parameter sets apply to; per joint when they are),
    ``params`` (name -> (n_groups,) values), ``cfg`` (timing) and ``native`` (the native MuJoCo
    model with those parameters)."""

    robot: Robot
    sim: Robot
    params: dict
    cfg: ArmConfig
    native: Any


def replay_setup(robot_name: str | Robot, params: dict | None, model: str | None = None) -> ReplaySetup:
    """The :class:`ReplaySetup` of :func:`evaluate_arm`'s arguments (and of every replay that must
    score the same rollouts)."""
    robot = _robot(robot_name)
    if model is not None:
        robot = robot_with_model(robot, model)
    r, p = _param_sets(robot, params)
    return ReplaySetup(robot, r, p, ArmConfig.from_robot(r), native_model(r, p))


def evaluate_arm(robot_name: str | Robot, params: dict | None, trajs: Iterable[Trajectory],
                 horizons: Iterable[int] = (100, 300, 600), model: str | None = None,
                 jaws: bool = False) -> dict[str, Any]:
    """Open-loop replay score of multi-joint logs (see the module docstring).

    Args:
        robot_name: a bundled robot name (``"open_manipulator_x"``) or a :class:`Robot`.
        params: None (the robot's nominal parameters), name -> (n_groups,) servo-side values, or
            :func:`fit_arm`'s ``params``.
        trajs: logs in the multi-joint convention on the control grid.
        horizons: window lengths [control steps]; a horizon longer than a log skips that log.
        model: registry model of every parameter set (:func:`robot_with_model`); default: the
            robot config's own.
        jaws: also score the jaw of every mechanism (:mod:`actuatorlab.robots.mechanisms`) whose
            crank is scored: ``per_joint[<slider>]`` [m] is the MAE of the jaw's closed form at the
            simulated against at the measured crank angle (not pooled into ``position_mae``).

    Returns:
        {"per_joint": {joint: {str(h): MAE}}, "position_mae": MAE pooled over the scored joints at
        the longest horizon that fits some log (None if none fits), "horizon": that horizon,
        "unit": "rad", "units": {joint: unit}, "n_windows": {str(h): W}}. MAEs in the log's unit.
    """
    robot, r, p, cfg, native = replay_setup(robot_name, params, model)
    logs = [log_arrays(robot, t) for t in trajs]
    if not logs:
        raise DataError(None, "no logs to evaluate")
    units: dict = {}
    for lg in logs:
        units.update(lg.units)
    scored_any = np.any([lg.scored for lg in logs], axis=0)
    per_joint: dict[str, dict[str, float]] = {j: {} for j, s in zip(robot.joint_names, scored_any) if s}
    n_windows, pooled, longest = {}, None, None
    for h in sorted({int(h) for h in horizons}):
        got = _windows(r, logs, h, cfg)
        if got is None:
            continue
        w, sc = got
        _, out = rollout(r, p, w.inputs, w.state0, backend="native", cfg=cfg, model=native)
        wgt = w.mask[..., None] * sc[:, None, :]  # (W, L, n)
        err = np.abs(out.q - w.q_meas) * wgt
        num, den = err.sum(axis=(0, 1)), wgt.sum(axis=(0, 1))
        for i, j in enumerate(robot.joint_names):
            if j in per_joint and den[i] > 0:
                per_joint[j][str(h)] = float(num[i] / den[i])
        for mech in robot.mechanisms if jaws else ():
            i = robot.index(mech.name)
            if mech.name in per_joint and den[i] > 0:
                e = np.abs(mech.position(out.q[..., i]) - mech.position(w.q_meas[..., i])) * wgt[..., i]
                per_joint.setdefault(mech.slider, {})[str(h)] = float(e.sum() / den[i])
                units[mech.slider] = "m"
        n_windows[str(h)] = int(len(w.start))
        pooled, longest = float(num.sum() / max(den.sum(), 1.0)), h
    return {"per_joint": per_joint, "position_mae": pooled, "horizon": longest, "unit": "rad",
            "units": units, "n_windows": n_windows}


# ---------------------------------------------------------------------------------------------
def robot_with_model(robot: Robot, model: str) -> Robot:
    """The robot with every parameter set's model replaced by ``model`` (a registry name such as
    ``"m1"`` or ``"m3+delay"``). Parameters the new model does not have take their neutral value
    (a config's ``load_friction`` is dropped by ``m1``); parameters it has keep the config's
    nominal value (neutral where the config gives none; a neutral value outside the servo bounds,
    such as the rigid stiffness 1e9 N.m/rad, becomes the geometric mean of the bounds, 20 N.m/rad).
    A compliant model (``+backlash``, ``+compliance``) makes every joint a two-body transmission."""
    spec = get_model(model)
    neutral = neutral_params()
    groups = []
    for g in robot.groups:
        drive = next(j.drive for j in robot.joints if j.name in g.joints)
        free = set(spec.free_for(drive))
        nominal = tuple((k, v if k in free else neutral[k]) for k, v in g.nominal)
        # a mechanism the config leaves at a neutral value outside the servo bounds (stiffness
        # 1e9 = rigid) starts in the middle of the bounds (geometric mean)
        nominal = tuple((k, float(np.sqrt(bounds_for(k, "servo")[0] * bounds_for(k, "servo")[1]))
                         if k in free and v == neutral[k] and not bounds_for(k, "servo")[0] <= v <= bounds_for(k, "servo")[1]
                         and PARAMS[k].scale == "log" else v) for k, v in nominal)
        groups.append(dataclasses.replace(g, model=spec.name, nominal=nominal))
    joints = tuple(dataclasses.replace(j, model=spec.name) for j in robot.joints)
    return dataclasses.replace(robot, groups=tuple(groups), joints=joints)


def model_params(robot: Robot, model: str, fixed: Iterable[str] = ()) -> tuple[str, ...]:
    """Free parameters of ``model`` on this robot's drives, in table order, minus ``fixed``."""
    spec = get_model(model)
    free = set()
    for j in robot.joints:
        free |= set(spec.free_for(j.drive))
    fixed = set(fixed)
    for k in fixed:
        _check_name(k)
    return tuple(k for k in PARAMS if k in free and k not in fixed)


def _pick(n: int, k: int | None) -> np.ndarray:
    """Indices of at most ``k`` of ``n`` windows, evenly spread (deterministic)."""
    if k is None or n <= k:
        return np.arange(n)
    return np.unique(np.round(np.linspace(0, n - 1, int(k))).astype(int))


def fit_windows(robot: Robot, logs: list[LogArrays], length: int, cfg: ArmConfig) -> tuple[Windows, np.ndarray]:
    """Windows of ``length`` control steps of every log, stacked (a log shorter than ``length``
    gives one padded window), and (W, n) bool: the joints each window's log records."""
    ws, sc = [], []
    for lg in logs:
        w = make_windows(robot, lg.q_meas, lg.dq_meas, lg.inputs, int(length), cfg=cfg,
                         temperature=lg.temperature)
        ws.append(w)
        sc.append(np.tile(lg.scored, (len(w.start), 1)))
    return _stack(ws), np.concatenate(sc)


def _stack(ws: list[Windows]) -> Windows:
    return Windows(np.concatenate([x.start for x in ws]),
                   ArmInputs(*[np.concatenate(v) for v in zip(*[x.inputs for x in ws])]),
                   type(ws[0].state0)(*[np.concatenate(v) for v in zip(*[x.state0 for x in ws])]),
                   np.concatenate([x.q_meas for x in ws]), np.concatenate([x.dq_meas for x in ws]),
                   np.concatenate([x.mask for x in ws]))

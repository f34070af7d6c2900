"""Multi-joint logs: open-loop replay scores and a derivative-free fit of a whole robot.

Both work on logs in the multi-joint convention of docs/synth.md (channels ``position/<joint>``
[rad | m], ``position_target/<joint>``, optional ``velocity/<joint>``, ``torque_enable/<joint>``
and a shared ``supply_voltage`` [V]; ``Setup.extra["robot"]`` and ``Setup.extra["joints"]``),
sampled on the robot's control grid (``control_dt``), and replay them with the native MuJoCo
path :func:`actuatorlab.sim.arm_native.rollout_native` (batched over windows, no gradients).

Replay score. Each log is cut into non-overlapping windows of ``h`` control steps that restart
from the *measured* state (:func:`actuatorlab.sim.arm_windows.make_windows`); the per-joint score
is the mean absolute position error over all window samples (padding excluded)::

    MAE_j(h) = sum_w sum_k |q_sim[w, k, j] - q_meas[w, k, j]| / (number of samples)   [rad | m]

Robot joints the log does not list (the OpenManipulator-X gripper in the synth logs) are held at
their rest position (target = qpos0) and not scored.

Fit. CMA-ES (Hansen, "The CMA Evolution Strategy: A Tutorial", arXiv:1604.00772) over the chosen
actuator parameters in a normalised box z in [0, 1]: parameters with a positive nominal value
p0 move on a log scale in [0.2 p0, 5 p0]; parameters whose nominal is 0 move linearly in the
"servo" bound profile of :data:`actuatorlab.models.params.BOUND_PROFILES` (the same normalisation
as :class:`actuatorlab.identify.fit.ParamSpace`). The score is the mean squared position error
of window rollouts of ``horizon`` control steps.
"""

from __future__ import annotations

import dataclasses
import time as _time
from typing import Any, Iterable

import cma
import numpy as np

from ..errors import DataError, ModelError, UnknownNameError
from ..logs.format import Trajectory
from ..models.params import PARAMS, bounds_for
from ..robots.loader import ParamGroup, Robot, load_robot
from ..sim.arm import ArmConfig, ArmInputs, mujoco_armature
from ..sim.arm_native import native_model, rollout_native
from ..sim.arm_windows import Windows, make_windows

__all__ = ["DEFAULT_FIT_PARAMS", "ArmSpace", "LogArrays", "log_arrays", "evaluate_arm", "fit_arm", "per_joint_robot"]

#: actuator parameters fitted by default
DEFAULT_FIT_PARAMS: tuple[str, ...] = ("kt", "friction_base", "friction_viscous", "armature")
#: box of a positive parameter, as factors of its nominal value (log scale)
BOX_FACTORS: tuple[float, float] = (0.2, 5.0)


@dataclasses.dataclass(frozen=True)
class LogArrays:
    """One multi-joint log on the control grid, robot joint order.

    q_meas, dq_meas: (T, n) [rad | m], [rad/s | m/s]; inputs: :class:`ArmInputs` (T, n);
    scored: (n,) bool, True for joints the log records; units: joint -> unit of the logged joints.
    """

    name: str
    q_meas: np.ndarray
    dq_meas: np.ndarray
    inputs: ArmInputs
    scored: np.ndarray
    units: dict


@dataclasses.dataclass(frozen=True)
class ArmSpace:
    """Fitted robot parameters and the map between their values and z in [0, 1]^(P G).

    names: P parameter names; G: parameter sets (groups, or joints when fitted per joint);
    lower, upper: (P G,) bounds, parameter-major (``theta[a G + g]`` is parameter a of set g);
    log: (P G,) True where the parameter moves on a log scale. A parameter with positive nominal
    value p0 moves log-uniformly in [0.2 p0, 5 p0] (:data:`BOX_FACTORS`); one whose nominal is 0
    moves linearly in the "servo" profile of :data:`~actuatorlab.models.params.BOUND_PROFILES`.
    """

    names: tuple[str, ...]
    G: int
    lower: np.ndarray
    upper: np.ndarray
    log: np.ndarray
    nominal: dict

    @staticmethod
    def build(names: Iterable[str], nominal: dict) -> "ArmSpace":
        names = tuple(names)
        G = len(next(iter(nominal.values())))
        lo, hi, log = [], [], []
        for k in names:
            for g in range(G):
                p0 = float(nominal[k][g])
                if p0 > 0:
                    lo.append(BOX_FACTORS[0] * p0), hi.append(BOX_FACTORS[1] * p0), log.append(True)
                else:
                    b = bounds_for(k, "servo")
                    lo.append(b[0]), hi.append(b[1]), log.append(False)
        return ArmSpace(names, G, np.array(lo), np.array(hi), np.array(log),
                        {k: np.asarray(v, float).copy() for k, v in nominal.items()})

    @property
    def n(self) -> int:
        return len(self.names) * self.G

    def to_theta(self, z, xp=np):
        """Values (P G,) from z (P G,), clipped to [0, 1]; ``xp`` numpy or jax.numpy."""
        lo, hi, log = self.lower, self.upper, self.log
        z = xp.clip(z, 0.0, 1.0)
        lo_l = np.log(np.where(log, lo, 1.0))
        span = np.log(np.where(log, hi, 1.0)) - lo_l
        return xp.where(log, xp.exp(lo_l + z * span), lo + z * (hi - lo))

    def to_z(self, theta) -> np.ndarray:
        lo, hi, log = self.lower, self.upper, self.log
        theta = np.clip(np.asarray(theta, float), lo, hi)
        zl = np.log(np.where(log, theta, 1.0) / np.where(log, lo, 1.0)) / np.log(np.where(log, hi / np.where(log, lo, 1.0), 2.0))
        return np.clip(np.where(log, zl, (theta - lo) / (hi - lo)), 0.0, 1.0)

    def z_of(self, params: dict) -> np.ndarray:
        """z of parameter sets (name -> (G,)); names not given take the nominal value."""
        return self.to_z(np.concatenate([np.asarray(params.get(k, self.nominal[k]), float) for k in self.names]))

    def unpack(self, theta, xp=np) -> dict:
        """Parameter sets name -> (G,): the nominal values with the fitted names from theta."""
        p = {k: xp.asarray(v) for k, v in self.nominal.items()}
        for a, k in enumerate(self.names):
            p[k] = theta[a * self.G:(a + 1) * self.G]
        return p


def _where(traj: Trajectory) -> str:
    return traj.source_file or traj.name


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
    for j in joints:
        if j not in robot.joint_names:
            raise DataError(where, f"log joint {j!r} is not a joint of {robot.name} "
                                   f"({', '.join(robot.joint_names)})")
        for ch in (f"position/{j}", f"position_target/{j}"):
            if not traj.has(ch):
                raise DataError(where, f"no {ch!r} channel for joint {j!r} of {robot.name} "
                                       f"(multi-joint logs need position/<joint> and position_target/<joint>)")
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
    for j in joints:
        i = robot.index(j)
        q[:, i] = traj[f"position/{j}"]
        qt[:, i] = traj[f"position_target/{j}"]
        if traj.has(f"velocity/{j}"):
            dq[:, i] = traj[f"velocity/{j}"]
        else:
            dq[:, i] = np.gradient(q[:, i], traj.time)
        if traj.has(f"torque_enable/{j}"):
            en[:, i] = traj[f"torque_enable/{j}"]
        scored[i] = True
        units[j] = traj.channels[f"position/{j}"].unit
    if not np.all(np.isfinite(q[:, scored])) or not np.all(np.isfinite(qt)):
        raise DataError(where, "position or position_target channels hold NaN/inf samples")
    dq = np.nan_to_num(dq)
    return LogArrays(traj.name, q, dq, ArmInputs(qt, en, vs), scored, units)


# ---------------------------------------------------------------------------------------------
def per_joint_robot(robot: Robot) -> Robot:
    """The same robot with one parameter set per joint (group ``<actuator>@<joint>``)."""
    groups = tuple(ParamGroup(f"{robot.groups[j.group].actuator}@{j.name}", robot.groups[j.group].actuator,
                              robot.groups[j.group].model, (j.name,), robot.groups[j.group].nominal)
                   for j in robot.joints)
    joints = tuple(dataclasses.replace(j, group=i) for i, j in enumerate(robot.joints))
    return dataclasses.replace(robot, joints=joints, groups=groups)


def _param_sets(robot: Robot, params: dict | None) -> tuple[Robot, dict]:
    """(robot, name -> (n_groups,) servo-side values) from None (nominal), the robot's own format
    (name -> (n_groups,)) or :func:`fit_arm`'s ``params`` (name -> {group or joint: value})."""
    if params is None:
        return robot, robot.nominal_params()
    nested = [v for v in params.values() if isinstance(v, dict)]
    if nested:
        keys = set().union(*[set(v) for v in nested])
        r = per_joint_robot(robot) if keys <= set(robot.joint_names) and keys - {g.name for g in robot.groups} else robot
        names = [g.joints[0] if r is not robot else g.name for g in r.groups]
        out = r.nominal_params()
        for k, v in params.items():
            _check_name(k)
            if isinstance(v, dict):
                for key, val in v.items():
                    if key not in names:
                        raise ModelError(f"parameter {k!r}: {key!r} is neither a parameter set nor a joint "
                                         f"of {robot.name} ({', '.join(names)})")
                    out[k][names.index(key)] = float(val)
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
        w = make_windows(robot, lg.q_meas, lg.dq_meas, lg.inputs, h, cfg=cfg)
        ws.append(w)
        sc.append(np.tile(lg.scored, (len(w.start), 1)))
    if not ws:
        return None
    stacked = Windows(np.concatenate([w.start for w in ws]),
                      ArmInputs(*[np.concatenate(v) for v in zip(*[w.inputs for w in ws])]),
                      type(ws[0].state0)(*[np.concatenate(v) for v in zip(*[w.state0 for w in ws])]),
                      np.concatenate([w.q_meas for w in ws]), np.concatenate([w.dq_meas for w in ws]),
                      np.concatenate([w.mask for w in ws]))
    return stacked, np.concatenate(sc)


def evaluate_arm(robot_name: str | Robot, params: dict | None, trajs: Iterable[Trajectory],
                 horizons: Iterable[int] = (100, 300, 600)) -> dict[str, Any]:
    """Open-loop replay score of multi-joint logs (see the module docstring).

    Args:
        robot_name: a bundled robot name (``"open_manipulator_x"``) or a :class:`Robot`.
        params: None (the robot's nominal parameters), name -> (n_groups,) servo-side values, or
            :func:`fit_arm`'s ``params``.
        trajs: logs in the multi-joint convention on the control grid.
        horizons: window lengths [control steps]; a horizon longer than a log skips that log.

    Returns:
        {"per_joint": {joint: {str(h): MAE}}, "position_mae": MAE pooled over the scored joints at
        the longest horizon that fits some log (None if none fits), "horizon": that horizon,
        "unit": "rad", "units": {joint: unit}, "n_windows": {str(h): W}}. MAEs in the log's unit.
    """
    robot = _robot(robot_name)
    r, p = _param_sets(robot, params)
    cfg = ArmConfig.from_robot(r)
    logs = [log_arrays(robot, t) for t in trajs]
    if not logs:
        raise DataError(None, "no logs to evaluate")
    units: dict = {}
    for lg in logs:
        units.update(lg.units)
    scored_any = np.any([lg.scored for lg in logs], axis=0)
    per_joint = {j: {} for j, s in zip(robot.joint_names, scored_any) if s}
    n_windows, pooled, longest = {}, None, None
    model = native_model(r, p)
    for h in sorted({int(h) for h in horizons}):
        got = _windows(r, logs, h, cfg)
        if got is None:
            continue
        w, sc = got
        _, out = rollout_native(r, p, w.inputs, w.state0, cfg, model=model)
        wgt = w.mask[..., None] * sc[:, None, :]  # (W, L, n)
        err = np.abs(out.q - w.q_meas) * wgt
        num, den = err.sum(axis=(0, 1)), wgt.sum(axis=(0, 1))
        for i, j in enumerate(robot.joint_names):
            if j in per_joint and den[i] > 0:
                per_joint[j][str(h)] = float(num[i] / den[i])
        n_windows[str(h)] = int(len(w.start))
        pooled, longest = float(num.sum() / max(den.sum(), 1.0)), h
    return {"per_joint": per_joint, "position_mae": pooled, "horizon": longest, "unit": "rad",
            "units": units, "n_windows": n_windows}


# ---------------------------------------------------------------------------------------------
def fit_arm(robot_name: str | Robot, trajs: Iterable[Trajectory], *, params: Iterable[str] = DEFAULT_FIT_PARAMS,
            per_joint: bool = False, max_evals: int = 300, seed: int = 0, horizon: int = 100,
            sigma0: float = 0.3) -> dict[str, Any]:
    """Fit actuator parameters of a whole robot to multi-joint logs with CMA-ES (module docstring).

    Args:
        robot_name: a bundled robot name or a :class:`Robot`.
        trajs: logs in the multi-joint convention on the control grid.
        params: parameter names (:data:`~actuatorlab.models.params.PARAMS`) to fit; the others
            stay nominal.
        per_joint: one value per joint instead of one per parameter set (actuator group).
        max_evals: CMA-ES evaluation budget (each is one batched rollout of every window).
        seed: CMA-ES seed (same seed, same result).
        horizon: window length [control steps]; logs shorter than it give one padded window.
        sigma0: initial CMA-ES step in the normalised box.

    Returns:
        {"params": {name: {set or joint: value}} (servo side), "nominal": same layout,
        "train_mae": [rad] pooled position MAE of the best parameters on the fit windows,
        "train_mae_nominal": the same with nominal parameters, "evaluations": int, "wall_s": float}.
    """
    t0 = _time.perf_counter()
    robot = _robot(robot_name)
    names = tuple(params)
    if not names:
        raise ModelError("fit_arm: no parameters to fit")
    for k in names:
        _check_name(k)
    if horizon < 1 or max_evals < 1:
        raise ModelError(f"fit_arm: horizon ({horizon}) and max_evals ({max_evals}) must be >= 1")
    r = per_joint_robot(robot) if per_joint else robot
    labels = [g.joints[0] if per_joint else g.name for g in r.groups]
    cfg = ArmConfig.from_robot(r)
    logs = [log_arrays(robot, t) for t in trajs]
    if not logs:
        raise DataError(None, "no logs to fit")
    ws, sc = [], []
    for lg in logs:  # every log gives at least one window (padded if shorter than the horizon)
        w = make_windows(r, lg.q_meas, lg.dq_meas, lg.inputs, int(horizon), cfg=cfg)
        ws.append(w)
        sc.append(np.tile(lg.scored, (len(w.start), 1)))
    w = Windows(np.concatenate([x.start for x in ws]),
                ArmInputs(*[np.concatenate(v) for v in zip(*[x.inputs for x in ws])]),
                type(ws[0].state0)(*[np.concatenate(v) for v in zip(*[x.state0 for x in ws])]),
                np.concatenate([x.q_meas for x in ws]), np.concatenate([x.dq_meas for x in ws]),
                np.concatenate([x.mask for x in ws]))
    wgt = w.mask[..., None] * np.concatenate(sc)[:, None, :]
    den = max(float(wgt.sum()), 1.0)

    nominal = r.nominal_params()
    space = ArmSpace.build(names, nominal)
    to_theta, unpack = space.to_theta, space.unpack

    model = native_model(r, nominal)  # private copy: the armature is written in per evaluation

    def sse(p: dict) -> tuple[float, float]:
        arm = r.joint_params({"armature": p["armature"]})["armature"]
        model.dof_armature[r.dof_adr] = mujoco_armature(r.compliant, arm)
        _, out = rollout_native(r, p, w.inputs, w.state0, cfg, model=model)
        e = out.q - w.q_meas
        if not np.all(np.isfinite(e)):
            return float("inf"), float("inf")
        return float(np.sum(e**2 * wgt) / den), float(np.sum(np.abs(e) * wgt) / den)

    z0 = space.z_of(nominal)
    es = cma.CMAEvolutionStrategy(z0, sigma0, {"bounds": [0.0, 1.0], "maxfevals": int(max_evals),
                                               "seed": int(seed) + 1, "verbose": -9, "tolfun": 1e-12,
                                               "tolx": 1e-6})
    best_z, best_f, evals = z0, np.inf, 0
    while not es.stop():
        zs = es.ask()
        fs = []
        for z in zs:
            f = sse(unpack(to_theta(z)))[0]
            evals += 1
            f = f if np.isfinite(f) else 1e6
            fs.append(f)
            if f < best_f:
                best_z, best_f = np.asarray(z), f
        es.tell(zs, fs)
    best = unpack(to_theta(best_z))
    _, mae = sse(best)
    _, mae0 = sse(nominal)

    def nest(p):
        return {k: {lab: float(p[k][g]) for g, lab in enumerate(labels)} for k in names}

    return {"params": nest(best), "nominal": nest(nominal), "train_mae": mae, "train_mae_nominal": mae0,
            "evaluations": evals, "wall_s": float(_time.perf_counter() - t0), "horizon": int(horizon),
            "n_windows": int(len(w.start)), "unit": "rad", "per_joint": bool(per_joint)}

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
from typing import Any, Callable, Iterable

import cma
import numpy as np

from ..precision import physics
from ..errors import DataError, ModelError, UnknownNameError
from ..logs.format import Trajectory
from ..models.params import PARAMS, bounds_for, neutral_params
from ..models.registry import contains, embed_params, get_model
from ..robots.loader import ParamGroup, Robot, load_robot
from ..sim.arm import ArmConfig, ArmInputs
from ..sim.arm_native import native_model, rollout_native
from ..sim.arm_windows import Windows, make_windows
from .fit import cma_stream

__all__ = ["DEFAULT_FIT_PARAMS", "ARM_LADDER", "ArmSpace", "robot_with_model", "model_params", "select_arm", "LogArrays", "log_arrays", "evaluate_arm", "fit_arm", "per_joint_robot"]

#: actuator parameters fitted by default
DEFAULT_FIT_PARAMS: tuple[str, ...] = ("kt", "friction_base", "friction_viscous", "armature")
#: box of a positive parameter, as factors of its nominal value (log scale)
BOX_FACTORS: tuple[float, float] = (0.2, 5.0)


@dataclasses.dataclass(frozen=True)
class LogArrays:
    """One multi-joint log on the control grid, robot joint order.

    q_meas, dq_meas: (T, n) [rad | m], [rad/s | m/s]; inputs: :class:`ArmInputs` (T, n);
    scored: (n,) bool, True for joints the log records; units: joint -> unit of the logged joints;
    temperature: (T, n) [degC] winding temperature from temperature/<joint> channels (joints
    without one: the nominal ambient temperature), or None when the log has none.
    """

    name: str
    q_meas: np.ndarray
    dq_meas: np.ndarray
    inputs: ArmInputs
    scored: np.ndarray
    units: dict
    temperature: np.ndarray | None = None


@dataclasses.dataclass(frozen=True)
class ArmSpace:
    """Fitted robot parameters and the map between their values and z in [0, 1]^(P G).

    names: P parameter names; G: fitted parameter sets (groups, or joints when fitted per joint;
    ``sets`` their indices among all sets, the others stay nominal);
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
    sets: tuple[int, ...] = ()

    @staticmethod
    def build(names: Iterable[str], nominal: dict, sets: Iterable[int] | None = None) -> "ArmSpace":
        """Box of ``names`` around ``nominal`` (name -> (n_sets,)) for the parameter sets ``sets``
        (indices; default all). Sets not fitted keep their nominal values."""
        names = tuple(names)
        n_sets = len(next(iter(nominal.values())))
        sets = tuple(range(n_sets)) if sets is None else tuple(int(g) for g in sets)
        if not sets:
            raise ModelError("ArmSpace: no parameter set to fit")
        lo, hi, log = [], [], []
        for k in names:
            for g in sets:
                p0 = float(nominal[k][g])
                if p0 > 0:
                    lo.append(BOX_FACTORS[0] * p0), hi.append(BOX_FACTORS[1] * p0), log.append(True)
                else:
                    b = bounds_for(k, "servo")
                    lo.append(b[0]), hi.append(b[1]), log.append(False)
        return ArmSpace(names, len(sets), np.array(lo), np.array(hi), np.array(log),
                        {k: np.asarray(v, float).copy() for k, v in nominal.items()}, sets)

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
        """z of parameter sets (name -> (n_sets,)); names not given take the nominal value."""
        idx = list(self.sets)
        return self.to_z(np.concatenate([np.asarray(params.get(k, self.nominal[k]), float)[idx] for k in self.names]))

    def unpack(self, theta, xp=np) -> dict:
        """Parameter sets name -> (n_sets,): the nominal values with the fitted ones from theta."""
        p = {k: xp.asarray(v) for k, v in self.nominal.items()}
        every = self.sets == tuple(range(len(next(iter(self.nominal.values())))))
        idx = np.array(self.sets)
        for a, k in enumerate(self.names):
            val = theta[a * self.G:(a + 1) * self.G]
            if every:
                p[k] = val
            elif xp is np:
                p[k] = p[k].copy()
                p[k][idx] = val
            else:
                p[k] = p[k].at[idx].set(val)
        return p

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
    temp = None
    if any(traj.has(f"temperature/{j}") for j in joints):
        amb = robot.joint_params({"ambient_temperature": robot.nominal_params()["ambient_temperature"]})
        temp = np.tile(amb["ambient_temperature"], (T, 1))
        for j in joints:
            if traj.has(f"temperature/{j}"):
                i = robot.index(j)
                col = np.asarray(traj[f"temperature/{j}"], float)
                temp[:, i] = np.where(np.isfinite(col), col, temp[:, i])
    return LogArrays(traj.name, q, dq, ArmInputs(qt, en, vs), scored, units, temp)


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
        w = make_windows(robot, lg.q_meas, lg.dq_meas, lg.inputs, h, cfg=cfg, temperature=lg.temperature)
        ws.append(w)
        sc.append(np.tile(lg.scored, (len(w.start), 1)))
    if not ws:
        return None
    return _stack(ws), np.concatenate(sc)


@physics
def evaluate_arm(robot_name: str | Robot, params: dict | None, trajs: Iterable[Trajectory],
                 horizons: Iterable[int] = (100, 300, 600), model: str | None = None) -> dict[str, Any]:
    """Open-loop replay score of multi-joint logs (see the module docstring).

    Args:
        robot_name: a bundled robot name (``"open_manipulator_x"``) or a :class:`Robot`.
        params: None (the robot's nominal parameters), name -> (n_groups,) servo-side values, or
            :func:`fit_arm`'s ``params``.
        trajs: logs in the multi-joint convention on the control grid.
        horizons: window lengths [control steps]; a horizon longer than a log skips that log.
        model: registry model of every parameter set (:func:`robot_with_model`); default: the
            robot config's own.

    Returns:
        {"per_joint": {joint: {str(h): MAE}}, "position_mae": MAE pooled over the scored joints at
        the longest horizon that fits some log (None if none fits), "horizon": that horizon,
        "unit": "rad", "units": {joint: unit}, "n_windows": {str(h): W}}. MAEs in the log's unit.
    """
    robot = _robot(robot_name)
    if model is not None:
        robot = robot_with_model(robot, model)
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


def _cma(z0: np.ndarray, sigma0: float, opts: dict) -> "cma.CMAEvolutionStrategy":
    """CMA-ES from ``z0``; a one-dimensional search gets a second, ignored coordinate (cma 4.5
    fails on bounded 1-D problems: "not yet initialized (dimension needed)"), so callers use
    ``z[:n]`` of each candidate."""
    z0 = np.asarray(z0, float)
    return cma.CMAEvolutionStrategy(np.r_[z0, 0.5] if z0.size == 1 else z0, sigma0, opts)


def _inside(space: ArmSpace, p: dict) -> dict:
    """``p`` with every fitted value outside the box replaced by its nominal value: the CMA-ES
    start from a contained model's fit, whose switched-off mechanism (a 0 on a log scale) would
    otherwise sit on the box edge. (The point itself has been scored as given.)"""
    out = {k: np.asarray(v, float).copy() for k, v in p.items()}
    i = 0
    for k in space.names:
        for g in space.sets:
            if not space.lower[i] <= out[k][g] <= space.upper[i]:
                out[k][g] = space.nominal[k][g]
            i += 1
    return out


def _coevolve(names, nominal: dict, sets: list[int], start: dict, score, max_evals: int,
              seed: int, sigma0: float, z_start: dict | None = None) -> tuple[dict, int]:
    """Per-joint fit by cooperative coevolution: one CMA-ES per parameter set (joint), each on the
    position error of its own joint(s). Generation g draws candidate c of every set, assembles
    them into one parameter vector per c, scores all c in one batched rollout, and tells each set's
    CMA-ES its own joint's errors. Joint coupling makes each set's score depend a little on the
    others' candidates (noise that shrinks as they converge); the best assembled vector (by the
    summed error) is kept, so the result is never worse than ``start``.
    (Potter & De Jong, "A cooperative coevolutionary approach to function optimization", PPSN 1994,
    with CMA-ES sub-searches: Hansen, arXiv:1604.00772.)"""
    spaces = [ArmSpace.build(names, nominal, [g]) for g in sets]
    # the sub-searches share one private stream, seeded as pycma's global reseeding left it (by the
    # last sub-search's seed): same draws as before, NumPy's global generator untouched
    stream = cma_stream(int(seed) + 1 + sets[-1]) if sets else {}
    opts = [_cma(sp.z_of(z_start or start), sigma0, {"bounds": [0.0, 1.0], **stream,
                                                               "verbose": -9, "tolfun": 1e-12, "tolx": 1e-6})
            for g, sp in zip(sets, spaces)]
    pop = max(es.popsize for es in opts)
    best = {k: np.asarray(v, float).copy() for k, v in start.items()}
    best_f = float(score([best])[0, sets].sum())
    evals = 1
    while evals + pop <= max_evals and not all(es.stop() for es in opts):
        zs = [es.ask(number=pop) for es in opts]
        cands = []
        for c in range(pop):
            p = {k: np.asarray(v, float).copy() for k, v in best.items()}
            for sp, zz in zip(spaces, zs):
                th = sp.to_theta(zz[c][:sp.n])
                for a, k in enumerate(names):
                    p[k][sp.sets[0]] = th[a]
            cands.append(p)
        f = score(cands)  # (pop, n_sets)
        evals += pop
        for es, g, zz in zip(opts, sets, zs):
            if not es.stop():
                es.tell(zz, list(f[:, g]))
        tot = f[:, sets].sum(axis=1)
        i = int(np.argmin(tot))
        if tot[i] < best_f:
            best, best_f = cands[i], float(tot[i])
    return best, evals


def fit_setup(robot_name: str | Robot, model: str | None, params: Iterable[str] | None, fixed: Iterable[str],
              who: str) -> tuple[Robot, tuple[str, ...]]:
    """(robot with ``model`` applied, names of the parameters to fit) for a whole-robot fitter:
    ``params`` if given, else the free parameters of ``model`` minus ``fixed``, else
    :data:`DEFAULT_FIT_PARAMS`. Unknown names raise :class:`UnknownNameError`."""
    robot = _robot(robot_name)
    if model is not None:
        robot = robot_with_model(robot, model)
    names = tuple(params) if params is not None else (
        model_params(robot, model, fixed) if model is not None else DEFAULT_FIT_PARAMS)
    if not names:
        raise ModelError(f"{who}: no parameters to fit")
    for k in names:
        _check_name(k)
    return robot, names


@physics
def fit_arm(robot_name: str | Robot, trajs: Iterable[Trajectory], *, model: str | None = None,
            params: Iterable[str] | None = None, fixed: Iterable[str] = ("R",), per_joint: bool = False,
            max_evals: int = 300, seed: int = 0, horizon: int = 100, sigma0: float | None = None,
            init: Iterable[dict] = (), max_windows: int | None = None) -> dict[str, Any]:
    """Fit actuator parameters of a whole robot to multi-joint logs with CMA-ES (module docstring).

    Args:
        robot_name: a bundled robot name or a :class:`Robot`.
        trajs: logs in the multi-joint convention on the control grid.
        model: registry model of every parameter set (:func:`robot_with_model`); default: the
            robot config's own.
        params: parameter names (:data:`~actuatorlab.models.params.PARAMS`) to fit; default: the
            free parameters of ``model`` minus ``fixed`` (:data:`DEFAULT_FIT_PARAMS` when no model
            is given). The others stay nominal.
        fixed: with ``model`` and no ``params``: free parameters kept at their nominal value
            (default R: the winding resistance from the datasheet stall current; kt then sets the
            motor gain kt/R and the free viscous friction the damping).
        per_joint: one value per joint instead of one per parameter set (actuator group).
            Parameter sets of joints the logs never record stay nominal.
        max_evals: CMA-ES evaluation budget (each is one batched rollout of the fit windows).
        seed: CMA-ES seed (same seed, same result).
        horizon: window length [control steps]; logs shorter than it give one padded window.
        sigma0: initial CMA-ES step in the normalised box (default 0.3 from the nominal values,
            0.1 when ``init`` gives fitted starting points: a local refinement).
        init: starting points, parameter sets as returned in ``param_sets`` (e.g. the fits of
            contained models). Each is scored as given (even outside the box) and CMA-ES starts
            from the best, so the result is never worse on the fit windows than any of them.
        max_windows: fit on at most this many windows, evenly spread over the logs (None: all).

    Returns:
        {"model", "params": {name: {set or joint: value}} (servo side), "nominal": same layout,
        "param_sets": {name: [value per parameter set]} (every parameter, fitted or not),
        "train_mae": [rad] pooled position MAE of the best parameters on the fit windows,
        "train_mse": [rad^2] the mean squared error CMA-ES minimised,
        "train_mae_nominal": the same with nominal parameters, "evaluations", "wall_s", "horizon",
        "n_windows", "unit", "per_joint"}.
    """
    t0 = _time.perf_counter()
    robot, names = fit_setup(robot_name, model, params, fixed, "fit_arm")
    if horizon < 1 or max_evals < 1:
        raise ModelError(f"fit_arm: horizon ({horizon}) and max_evals ({max_evals}) must be >= 1")
    r = per_joint_robot(robot) if per_joint else robot
    labels = [g.joints[0] if per_joint else g.name for g in r.groups]
    cfg = ArmConfig.from_robot(r)
    logs = [log_arrays(robot, t) for t in trajs]
    if not logs:
        raise DataError(None, "no logs to fit")
    w, sc = fit_windows(r, logs, int(horizon), cfg)
    keep = _pick(len(w.start), max_windows)
    w = Windows(*[type(v)(*[x[keep] for x in v]) if isinstance(v, tuple) else v[keep] for v in w])
    wgt = w.mask[..., None] * sc[keep][:, None, :]
    den = max(float(wgt.sum()), 1.0)
    scored = np.any(sc, axis=0)
    sets = [g for g, grp in enumerate(r.groups) if any(scored[robot.index(j)] for j in grp.joints)]

    nominal = r.nominal_params()
    space = ArmSpace.build(names, nominal, sets)
    model_ = native_model(r, nominal)  # private copy: the armature is written in per evaluation
    W = len(w.start)

    def scores(cands: list[dict]) -> list[tuple[float, float]]:
        """(mean squared, mean absolute) position error of each candidate, all candidates in one
        batched rollout (the windows repeated once per candidate)."""
        P = len(cands)
        batch = {k: np.repeat(np.stack([np.asarray(c[k], float) for c in cands]), W, axis=0) for k in nominal}
        x = ArmInputs(*[np.concatenate([v] * P) for v in w.inputs])
        s0 = type(w.state0)(*[np.concatenate([v] * P) for v in w.state0])
        _, out = rollout_native(r, batch, x, s0, cfg, model=model_)
        e = (out.q.reshape((P,) + w.q_meas.shape) - w.q_meas[None])
        res = []
        for c in range(P):
            if not np.all(np.isfinite(e[c])):
                res.append((float("inf"), float("inf")))
            else:
                res.append((float(np.sum(e[c]**2 * wgt) / den), float(np.sum(np.abs(e[c]) * wgt) / den)))
        return res

    def scores_per_joint(cands: list[dict]) -> np.ndarray:
        """(P, n_sets) mean squared position error of each candidate on the joints of each set."""
        P = len(cands)
        batch = {k: np.repeat(np.stack([np.asarray(c[k], float) for c in cands]), W, axis=0) for k in nominal}
        x = ArmInputs(*[np.concatenate([v] * P) for v in w.inputs])
        s0 = type(w.state0)(*[np.concatenate([v] * P) for v in w.state0])
        _, out = rollout_native(r, batch, x, s0, cfg, model=model_)
        e2 = (out.q.reshape((P,) + w.q_meas.shape) - w.q_meas[None]) ** 2 * wgt[None]  # (P, W, L, n)
        per_joint_err = e2.sum(axis=(1, 2)) / np.maximum(wgt.sum(axis=(0, 1)), 1.0)  # (P, n)
        per_joint_err = np.where(np.isfinite(per_joint_err), per_joint_err, 1e6)
        return np.stack([per_joint_err[:, [robot.index(j) for j in grp.joints]].sum(axis=1)
                         for grp in r.groups], axis=1)

    init = list(init)
    sigma0 = float(sigma0 if sigma0 is not None else (0.1 if init else 0.3))
    starts = [nominal] + [{k: np.asarray(st.get(k, nominal[k]), float).copy() for k in nominal} for st in init]
    f0 = [f for f, _ in scores(starts)]
    evals = len(starts)
    b = int(np.argmin(f0))
    best_p, best_f = starts[b], f0[b]
    if per_joint and len(sets) > 1:
        best_p, n_ev = _coevolve(names, nominal, sets, best_p, scores_per_joint, max_evals, seed, sigma0,
                                 _inside(space, best_p))
        evals += n_ev
    else:
        z0 = space.z_of(_inside(space, best_p))
        es = _cma(z0, sigma0, {"bounds": [0.0, 1.0], "maxfevals": int(max_evals),
                                                   **cma_stream(int(seed) + 1), "verbose": -9, "tolfun": 1e-12,
                                                   "tolx": 1e-6})
        while not es.stop():
            zs = es.ask()
            cands = [space.unpack(space.to_theta(z[:space.n])) for z in zs]
            fs = [f if np.isfinite(f) else 1e6 for f, _ in scores(cands)]
            evals += len(zs)
            i = int(np.argmin(fs))
            if fs[i] < best_f:
                best_p, best_f = cands[i], fs[i]
            es.tell(zs, fs)
    (mse, mae), (_, mae0) = scores([best_p, nominal])
    return fit_result(model, names, labels, sets, best_p, nominal, mse, mae, mae0, per_joint,
                      evaluations=evals, wall_s=float(_time.perf_counter() - t0), horizon=int(horizon),
                      n_windows=int(len(w.start)))


def fit_result(model: str | None, names, labels, sets, best: dict, nominal: dict, mse: float, mae: float,
               mae0: float, per_joint: bool, **extra) -> dict[str, Any]:
    """The result dict every whole-robot fitter returns (see :func:`fit_arm`), plus ``extra``."""
    def nest(p):
        return {k: {lab: float(p[k][g]) for g, lab in enumerate(labels) if g in sets} for k in names}

    return {"model": model if model is None else get_model(model).name,
            "params": nest(best), "nominal": nest(nominal),
            "param_sets": {k: [float(v) for v in best[k]] for k in PARAMS},
            "train_mae": mae, "train_mse": mse, "train_mae_nominal": mae0, **extra,
            "unit": "rad", "per_joint": bool(per_joint)}


# ---------------------------------------------------------------------------------------------
#: Nested ladder fitted by ``actuatorlab fit --robot`` without ``--model``: Coulomb + viscous,
#: Stribeck, load-dependent friction, gear-mesh efficiency, and a command delay.
ARM_LADDER: tuple[str, ...] = ("m1", "m2", "m3", "g1", "m3+delay")


@physics
def select_arm(robot_name: str | Robot, fit_trajs: Iterable[Trajectory], val_trajs: Iterable[Trajectory],
               ladder: Iterable[str] = ARM_LADDER, *, per_joint: bool = False, max_evals: int = 300,
               seed: int = 0, horizon: int = 100, val_horizon: int = 300, min_gain: float = 0.02,
               fixed: Iterable[str] = ("R",), max_windows: int | None = 64, final_evals: int | None = None,
               method: str = "cma", child_sigma0: float = 0.2,
               progress: Callable[[str, int, int], None] | None = None) -> dict[str, Any]:
    """Nested model selection on a whole robot: each model must earn its place on validation logs.

    Every model of ``ladder`` is fitted (:func:`fit_arm`) on ``fit_trajs``, starting from the fits
    of the models it contains (:func:`~actuatorlab.models.registry.contains`), so it is never
    worse than them on the fit windows. It is scored by the pooled position MAE of
    ``val_horizon``-step window rollouts of ``val_trajs`` (:func:`evaluate_arm`; logs shorter than
    that are scored at the longest horizon that fits). A model is *eligible* when its validation
    MAE is at least ``min_gain`` (relative) below the best eligible model it contains, the same
    rule as the one-joint :func:`actuatorlab.identify.select.fit_family`; the eligible model with
    the lowest validation MAE is selected and refitted on fit + validation logs (``final_evals``
    evaluations, default ``max_evals // 2``), starting from its fit.

    A model that contains others starts CMA-ES from their best fit with step ``child_sigma0`` (a
    new mechanism moves the others' optimum: Coulomb friction that absorbed load-dependent
    friction in m1 must give it back in m3); the final refit starts at 0.1.

    ``method``: "cma" (:func:`fit_arm`, CMA-ES through the native path) or "grad"
    (:func:`actuatorlab.identify.arm_grad.fit_arm_grad`, Adam through the MJX rollout with its
    default window curriculum and step counts; ``max_evals``, ``horizon``, ``max_windows`` and
    ``final_evals`` do not apply to it).

    Returns:
        {"selected", "table": [{"model", "parent", "n_free", "train_mae", "validation_mae",
        "gain_vs_parent", "earns_place", "selected", "wall_s"}], "fits": {model: fit_arm result},
        "final": fit_arm result on all logs, "fit_names", "val_names", "val_horizon"}.
    """
    if method not in ("cma", "grad"):
        raise UnknownNameError("fit method", method, ("cma", "grad"))
    if method == "grad":
        from .arm_grad import fit_arm_grad
    robot = _robot(robot_name)
    fit_trajs, val_trajs = list(fit_trajs), list(val_trajs)
    if not fit_trajs or not val_trajs:
        raise DataError(None, "select_arm needs fit and validation logs "
                              f"(got {len(fit_trajs)} and {len(val_trajs)})")
    ladder = tuple(get_model(m).name for m in ladder)
    fits: dict[str, dict] = {}
    val_mae: dict[str, float] = {}
    eligible: dict[str, bool] = {}
    table = []
    longest = max(t.n for t in val_trajs)
    vh = int(min(val_horizon, longest))
    for i, m in enumerate(ladder):
        if progress:
            progress(m, i, len(ladder))
        inner = [x for x in fits if contains(m, x)]
        starts = [{k: [embed_params({kk: vv[g] for kk, vv in fits[x]["param_sets"].items()}, m).get(k, v[g])
                       for g in range(len(v))] for k, v in fits[x]["param_sets"].items()}
                  for x in inner]
        if method == "grad":
            r = fit_arm_grad(robot, fit_trajs, model=m, fixed=fixed, per_joint=per_joint, seed=seed + i,
                             init=starts)
        else:
            r = fit_arm(robot, fit_trajs, model=m, fixed=fixed, per_joint=per_joint, max_evals=max_evals,
                        seed=seed + i, horizon=horizon, init=starts, max_windows=max_windows,
                        sigma0=child_sigma0 if starts else None)
        fits[m] = r
        ev = evaluate_arm(robot, r["params"], val_trajs, horizons=(vh,), model=m)
        v = ev["position_mae"]
        val_mae[m] = float("inf") if v is None or not np.isfinite(v) else float(v)
        ref = [x for x in inner if eligible[x]]
        parent = min(ref, key=lambda x: val_mae[x]) if ref else None
        gain = None if parent is None else 1.0 - val_mae[m] / val_mae[parent]
        eligible[m] = bool(np.isfinite(val_mae[m])) and (parent is None or gain >= min_gain)
        table.append({"model": m, "parent": parent, "n_free": len(r["params"]) * len(next(iter(r["params"].values()))),
                      "train_mae": r["train_mae"], "validation_mae": val_mae[m], "gain_vs_parent": gain,
                      "earns_place": eligible[m], "wall_s": r["wall_s"]})
    if not any(eligible.values()):
        raise ModelError("select_arm: no model gave a finite validation error")
    selected = min((m for m in ladder if eligible[m]), key=lambda m: val_mae[m])
    for row in table:
        row["selected"] = row["model"] == selected
    if progress:
        progress(selected + " (all data)", len(ladder), len(ladder))
    if method == "grad":
        final = fit_arm_grad(robot, fit_trajs + val_trajs, model=selected, fixed=fixed, per_joint=per_joint,
                             seed=seed + 100, init=[fits[selected]["param_sets"]])
    else:
        final = fit_arm(robot, fit_trajs + val_trajs, model=selected, fixed=fixed, per_joint=per_joint,
                        max_evals=final_evals or max(max_evals // 2, 20), seed=seed + 100, horizon=horizon,
                        init=[fits[selected]["param_sets"]], max_windows=max_windows)
    return {"selected": selected, "table": table, "fits": fits, "final": final,
            "fit_names": [t.name for t in fit_trajs], "val_names": [t.name for t in val_trajs],
            "val_horizon": vh}

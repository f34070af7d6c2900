"""Drive-side identification of series-elastic joints from drive-rate logs (linear least squares).

A log sampled at the drive's own rate (a period of a few ms or less) with the output encoder ``position``,
the motor-side encoder ``motor_position`` (divided by the gear ratio) and the current register ``current``
of every joint determines the rotor's inertia and friction, which a position log at a policy's 50 Hz does
not (its samples do not resolve the rotor's acceleration; journal/legged.md). Per joint, output side, with
theta the rotor angle, q the link angle, d = theta - q the deflection (backlash inside it)::

    link:   tau_link = M(q) qdd + c(q, dq) + g(q)                         (inverse dynamics of the known links)
    spring: tau_link = k d - k (b/2) sign(d) + c_s (w - dq) - F_b sign(dq)   for |d| > d_min   (Pratt &
            Williamson 1995's series spring with a dead band; F_b the output bearing's friction)
    rotor:  kt i - tau_c = J dw/dt + sign(w) (F_c + F_s exp(-(|w|/v_s)^alpha) + F_v |w| + eta |tau_c|)
            tau_c = tau_link + F_b sign(dq),  eta = eta_d where tau_c w > 0 (driving) else eta_b

(the SEA drive of Hutter et al., Advanced Robotics 2017; the friction law of Duclusaud et al., ICRA 2025;
the inverse-model least squares with parallel filtering of the EMPS reference, Janot, Gautier and Brunot
2019). Velocities and accelerations are central differences of the encoders low-passed at :data:`CUTOFF_HZ` (zero-phase
Butterworth); every column and the regressand of an equation get that same filter, so the filtered equation
holds where the rotor moves faster than the filter passes. The spring equation is fitted first (k, b, c_s,
F_b), then the rotor equation, by bounded linear least squares on the samples outside the dead band
(|d| > :data:`MIN_DEFLECTION`) and where the rotor slides (|w| > :data:`MIN_SPEED`) over the whole filter
window, with v_s and alpha on a grid (the lowest residual). Every coefficient is >= 0.

Where the logs also carry the host's ``position_target`` and the drive runs the PD law (``law`` "pd": torque
target kp (q_target - q) - kd dq on its own encoder and velocity estimate), the command delay is measured too
(:func:`command_delay`): the drive's torque target, computed from the logged commands shifted by a candidate
delay d, must explain the logged current; per joint the d of least residual of the linear regression::

    i = a [kp (q_target(t - d) - q) - kd v] + b tau_s + c (w - dq) + e        (samples inside the effort limit)

(tau_s the logged spring torque ``effort`` where there is one, w - dq the deflection rate: the torque loop of a
series-elastic drive around the PD's torque, Hutter et al. 2017). Every signal of a log is read at the same
instant, so d is the command's delay plus a reading's age, the family's ``delay`` (what the replay sees); it
includes the wait for the drive's next control tick, which a nominal delay does not. A position log at 50 Hz
does not resolve a few ms of delay (journal/legged.md, 2026-12-07).

``kt`` is the datasheet's output-side torque constant (a drive-rate log's ``Setup.extra["drive"]
["torque_constant"]``); a unit's own kt scales every rotor-side value by the same factor (kt(T) drops about
a per mille per degC: ignored). Results per joint (:class:`DriveFit`), and per parameter set of a
fitted robot (:func:`set_values`), under the family's parameter names."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Iterable, Sequence

import mujoco
import numpy as np
from scipy.ndimage import minimum_filter1d
from scipy.optimize import lsq_linear
from scipy.signal import butter, filtfilt

from ..errors import DataError
from ..logs.format import Trajectory
from ..models.registry import get_model
from ..robots.fixed_base import links_spec
from ..robots.loader import Robot

__all__ = ["CUTOFF_HZ", "DelaySegment", "DriveFit", "MAX_DELAY", "MAX_DRIVE_DT", "MEASURED_MEMBER", "MIN_SPEED",
           "SMOOTH_S", "command_delay", "drive_logs", "identify_drives", "measured_values", "set_values"]

#: [s] a log sampled at this period or faster, with current and motor-side position, is a drive-rate log
MAX_DRIVE_DT = 0.0025
#: [rad/s] output-side rotor speed above which the rotor equation's samples count (the rotor slides)
MIN_SPEED = 0.05
#: [Hz] cut-off of the low-pass before the derivatives (and on both sides of the rotor equation)
CUTOFF_HZ = 40.0
#: [s] the filter's settling at a log's edges, dropped (and the sliding window of the rotor equation's samples)
SMOOTH_S = 0.02
#: [rad] smallest |deflection| of the spring equation's samples (outside a dead band of up to 2 x this)
MIN_DEFLECTION = 0.003
#: grid of the Stribeck velocity [rad/s] and exponent
STRIBECK_VELOCITIES = tuple(float(v) for v in np.geomspace(0.02, 0.5, 9))
STRIBECK_ALPHAS = (1.0, 1.5, 2.0)
#: [s] longest command delay searched by :func:`command_delay`
MAX_DELAY = 0.02
#: candidate delays per log sample period (the grid's step), before the parabolic refinement
DELAY_STEPS_PER_SAMPLE = 4
#: samples whose PD torque is within this fraction of the effort limit count for the delay (the clip cuts the rest)
DELAY_LIMIT_SHARE = 0.9


@dataclasses.dataclass(frozen=True)
class DriveFit:
    """One joint's drive, output side: stiffness [N.m/rad], backlash [rad] (full width), spring_damping
    [N.m.s/rad], bearing [N.m] output bearing friction, armature [kg.m^2] rotor + gear inertia,
    friction_base [N.m] Coulomb, friction_stribeck [N.m], stribeck_velocity [rad/s], stribeck_alpha [1],
    friction_viscous [N.m.s/rad], mesh_friction_drive / mesh_friction_back [1] load-dependent friction
    while driving / backdriven; rms [N.m] the rotor equation's residual, spring_rms [N.m] the spring
    equation's, n_samples: the rotor equation's samples; delay [s] the command delay
    (:func:`command_delay`; None where the logs have no position target or the drive no PD law)."""

    joint: str
    stiffness: float
    backlash: float
    spring_damping: float
    bearing: float
    armature: float
    friction_base: float
    friction_stribeck: float
    stribeck_velocity: float
    stribeck_alpha: float
    friction_viscous: float
    mesh_friction_drive: float
    mesh_friction_back: float
    rms: float
    spring_rms: float
    n_samples: int
    delay: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


#: the DriveFit fields that are parameters of the family's models (names of actuatorlab.models.params)
MODEL_PARAMS = ("armature", "stiffness", "backlash", "friction_base", "friction_stribeck", "stribeck_velocity",
                "stribeck_alpha", "friction_viscous", "mesh_friction_drive", "mesh_friction_back", "delay")


def _period(t: Trajectory) -> float:
    return float(np.median(np.diff(t.time))) if t.n > 1 else math.inf


def drive_logs(trajs: Iterable[Trajectory], joints: Sequence[str]) -> tuple[list[Trajectory], list[Trajectory]]:
    """(drive-rate logs, the others): a drive-rate log is sampled every :data:`MAX_DRIVE_DT` or faster and
    has ``position/J``, ``motor_position/J`` and ``current/J`` of every joint J of ``joints``."""
    fast: list[Trajectory] = []
    rest: list[Trajectory] = []
    for t in trajs:
        cols = set(t.data)
        has = all(f"{c}/{j}" in cols for j in joints for c in ("position", "motor_position", "current"))
        (fast if has and _period(t) <= MAX_DRIVE_DT else rest).append(t)
    return fast, rest


def _torque_constant(t: Trajectory, kt: float | None) -> float:
    if kt is not None:
        return float(kt)
    d = (t.setup.extra or {}).get("drive") or {}
    if "torque_constant" not in d:
        raise DataError(t.source_file, "a drive-rate log needs the drive's output-side torque constant [N.m/A] "
                                       "(Setup.extra['drive']['torque_constant'], or give kt)")
    return float(d["torque_constant"])


def _smooth(x: np.ndarray, dt: float) -> np.ndarray:
    """Zero-phase low-pass (Butterworth, order 4 forward and back, :data:`CUTOFF_HZ`) of (T, ...) ``x`` along
    time: the same filter on every column of the rotor equation, both sides (the parallel filtering of
    inverse-model identification, Janot et al. 2019), so that the filtered acceleration is the filtered equation's."""
    b, a = butter(4, min(CUTOFF_HZ * 2.0 * dt, 0.9))
    return filtfilt(b, a, x, axis=0)


def _derivatives(x: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """(first, second) derivatives of (T, n) ``x`` along time: central differences of the low-passed signal."""
    v = np.gradient(_smooth(x, dt), dt, axis=0)
    return v, np.gradient(v, dt, axis=0)


def _links_model(robot: Robot) -> mujoco.MjModel:
    """The links alone (:func:`~actuatorlab.robots.fixed_base.links_spec`), contacts off."""
    spec = links_spec(robot)
    spec.option.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
    return spec.compile()


def _link_torque(m: mujoco.MjModel, robot: Robot, q: np.ndarray, dq: np.ndarray, ddq: np.ndarray) -> np.ndarray:
    """(T, n) [N.m] inverse dynamics of the links of ``m`` (:func:`_links_model` of ``robot``)."""
    d = mujoco.MjData(m)
    qa, da = robot.qpos_adr, robot.dof_adr
    out = np.empty_like(q)
    for k in range(q.shape[0]):
        d.qpos[qa], d.qvel[da], d.qacc[da] = q[k], dq[k], ddq[k]
        mujoco.mj_inverse(m, d)
        out[k] = d.qfrc_inverse[da]
    return out


def _trim(x: np.ndarray, dt: float) -> np.ndarray:
    """Drop the filter's edges (half a window at each end)."""
    e = int(round(SMOOTH_S / dt))
    return x[e:-e] if x.shape[0] > 2 * e + 1 else x[:0]


def identify_drives(robot: Robot | Sequence[tuple[Robot, Sequence[Trajectory]]], trajs: Sequence[Trajectory] = (),
                    kt: float | None = None) -> dict[str, DriveFit]:
    """{joint: :class:`DriveFit`} from drive-rate logs (module docstring): ``robot`` with ``trajs``, or
    [(robot as the logs were recorded on it, its logs)] (the in-air logs' welded base and loads:
    :func:`~actuatorlab.identify.arm_space.log_groups`). Joints whose logs never move them, or never deflect
    their spring past the dead band (50 samples of each), are left out."""
    groups = [(robot, list(trajs))] if isinstance(robot, Robot) else [(r, list(ts)) for r, ts in robot]
    cols: dict[str, list[list[np.ndarray]]] = {}
    delays: dict[str, list[DelaySegment]] = {}
    names: list[str] = []
    for rb, ts in groups:
        names = list(rb.joint_names)
        links = _links_model(rb)  # one compile per group (its loads), not per log
        for t in ts:
            dt = _period(t)
            if dt > MAX_DRIVE_DT:
                raise DataError(t.source_file, f"sampled every {1e3 * dt:.3g} ms: the drive-side identification "
                                               f"needs a drive-rate log ({1e3 * MAX_DRIVE_DT:g} ms or faster)")
            k_t = _torque_constant(t, kt)
            q = np.stack([t.data[f"position/{j}"] for j in names], 1)
            th = np.stack([t.data[f"motor_position/{j}"] for j in names], 1)
            cur = np.stack([t.data[f"current/{j}"] for j in names], 1)
            if not (np.all(np.isfinite(q)) and np.all(np.isfinite(th)) and np.all(np.isfinite(cur))):
                raise DataError(t.source_file, "NaN or inf in position, motor_position or current")
            dq, ddq = _derivatives(q, dt)
            w, dw = _derivatives(th, dt)
            tau = _link_torque(links, rb, q, dq, ddq)
            for j, name in enumerate(names):
                cols.setdefault(name, []).append([x[:, j] for x in (th - q, w, dw, dq, tau, k_t * cur)] + [dt])
            for name, seg in _delay_segments(t, rb, q, dq, w, cur).items():
                delays.setdefault(name, []).append(seg)
    out: dict[str, DriveFit] = {}
    for name in names:
        if name not in cols:
            continue
        if max(np.ptp(c[0]) for c in cols[name]) < 2 * MIN_DEFLECTION or \
                sum(int(np.sum(np.abs(c[0]) > MIN_DEFLECTION)) for c in cols[name]) < 50 or \
                sum(int(np.sum(np.abs(c[1]) > MIN_SPEED)) for c in cols[name]) < 50:
            continue
        out[name] = dataclasses.replace(_fit_joint(name, cols[name]), delay=command_delay(delays.get(name, [])))
    return out


@dataclasses.dataclass(frozen=True)
class DelaySegment:
    """One joint's signals in one drive-rate log, for :func:`command_delay` (arrays (T,)): time [s], target
    [rad] the host's position target, q [rad] the output encoder, v [rad/s] the drive's velocity reading,
    current [A], spring [N.m] the spring torque (None: not logged), rate [rad/s] the deflection rate w - dq;
    kp [N.m/rad], kd [N.m.s/rad] and limit [N.m] of the drive's PD law."""

    time: np.ndarray
    target: np.ndarray
    q: np.ndarray
    v: np.ndarray
    current: np.ndarray
    spring: np.ndarray | None
    rate: np.ndarray
    kp: float
    kd: float
    limit: float


def _delay_rss(segs: Sequence[DelaySegment], d: float) -> float:
    """Summed squared residual of the current's regression (module docstring) with the commands delayed by d."""
    total = 0.0
    for g in segs:
        pd = g.kp * (np.interp(g.time - d, g.time, g.target) - g.q) - g.kd * g.v
        ok = (np.abs(pd) < DELAY_LIMIT_SHARE * g.limit) & (g.time - g.time[0] >= d)
        cols = [pd, g.rate, np.ones_like(pd)] + ([] if g.spring is None else [g.spring])
        X = np.stack(cols, 1)[ok]
        sol, *_ = np.linalg.lstsq(X, g.current[ok], rcond=None)
        total += float(np.sum((X @ sol - g.current[ok]) ** 2))
    return total


def command_delay(segs: Sequence[DelaySegment], max_delay: float = MAX_DELAY) -> float | None:
    """[s] the command delay of one joint's drive (module docstring): the d in [0, ``max_delay``] of least summed
    residual over ``segs``, searched on the log's sample grid, then every quarter sample around the best, then
    refined by a parabola through the three lowest neighbours. None without segments, or when the best d is at
    ``max_delay`` (the law does not explain the current within the range)."""
    segs = [g for g in segs if g.time.size > 10]
    if not segs:
        return None
    step = min(float(np.median(np.diff(g.time))) for g in segs)
    coarse = np.arange(0.0, max_delay + 0.5 * step, step)
    rss = [_delay_rss(segs, d) for d in coarse]
    k = int(np.argmin(rss))
    if k == len(coarse) - 1:
        return None
    fine = np.clip(coarse[k] + step / DELAY_STEPS_PER_SAMPLE * np.arange(-DELAY_STEPS_PER_SAMPLE,
                                                                         DELAY_STEPS_PER_SAMPLE + 1), 0.0, None)
    fine = np.unique(fine)
    r = np.array([_delay_rss(segs, d) for d in fine])
    i = int(np.argmin(r))
    if 0 < i < len(fine) - 1:
        den = r[i - 1] - 2.0 * r[i] + r[i + 1]
        off = 0.5 * (r[i - 1] - r[i + 1]) / den if den > 0 else 0.0
        return float(fine[i] + off * (fine[1] - fine[0]))
    return float(fine[i])


def _delay_segments(t: Trajectory, rb: Robot, q: np.ndarray, dq: np.ndarray, w: np.ndarray,
                    cur: np.ndarray) -> dict[str, DelaySegment]:
    """{joint: :class:`DelaySegment`} of a drive-rate log for the joints of ``rb`` that run the PD law and have a
    logged ``position_target`` (velocity and spring torque as logged where they are, else the encoder's
    derivative and none)."""
    out: dict[str, DelaySegment] = {}
    for j, js in enumerate(rb.joints):
        name = js.name
        if js.law != "pd" or f"position_target/{name}" not in t.data:
            continue
        target = np.asarray(t.data[f"position_target/{name}"], float)
        v = np.asarray(t.data[f"velocity/{name}"], float) if f"velocity/{name}" in t.data else dq[:, j]
        spring = np.asarray(t.data[f"effort/{name}"], float) if f"effort/{name}" in t.data else None
        if not (np.all(np.isfinite(target)) and np.all(np.isfinite(v))
                and (spring is None or np.all(np.isfinite(spring)))):
            continue
        out[name] = DelaySegment(np.asarray(t.time, float), target, q[:, j], v, cur[:, j], spring, w[:, j] - dq[:, j],
                                 js.gain("kp", 0.0), js.gain("kd", 0.0), js.effort_limit)
    return out


def _held(x: np.ndarray, threshold: float, dt: float) -> np.ndarray:
    """(T') bool, the filter's edges dropped: |x| above ``threshold`` over the whole filter window around each
    sample (so that no filtered sample mixes in one outside the regime of its equation)."""
    half = int(round(SMOOTH_S / dt)) // 2 + 1
    return _trim(minimum_filter1d(np.abs(x), 2 * half + 1) > threshold, dt)


def _rotor_columns(segs: list, f_b: float, vs: float, al: float) -> tuple[np.ndarray, np.ndarray]:
    """(X, y) of the rotor equation over every segment: columns dw, sign w, w, eta_d, eta_b and Stribeck terms,
    both sides smoothed alike, kept where the rotor slides over the whole filter window, the edges dropped."""
    Xs, ys = [], []
    for delta, w, dw, dq, tau, mot, dt in segs:
        tau_c = tau + f_b * np.sign(dq)
        sg, aw, at = np.sign(w), np.abs(w), np.abs(tau_c)
        driving = tau_c * w > 0.0
        raw = np.stack([sg, w, sg * at * driving, sg * at * ~driving, sg * np.exp(-((aw / vs) ** al))], 1)
        X = np.concatenate([dw[:, None], _smooth(raw, dt)], 1)
        y = _smooth(mot - tau_c, dt)
        keep = _held(w, MIN_SPEED, dt)
        Xs.append(_trim(X, dt)[keep])
        ys.append(_trim(y, dt)[keep])
    return np.concatenate(Xs), np.concatenate(ys)


def _fit_joint(name: str, segs: list) -> DriveFit:
    """The spring equation, then the rotor equation (module docstring) of one joint's segments (delta, w, dw,
    dq, tau_link, kt i, dt) of each log."""
    # spring: tau_link = k d - (k b/2) sign(d) + c_s (w - dq) - F_b sign(dq), outside the dead band
    Xl, yl = [], []
    for delta, w, _, dq, tau, _, dt in segs:
        out_band = _held(delta, MIN_DEFLECTION, dt)
        X = _smooth(np.stack([delta, -np.sign(delta), w - dq, -np.sign(dq)], 1), dt)
        Xl.append(_trim(X, dt)[out_band])
        yl.append(_trim(tau, dt)[out_band])
    Xs, ys = np.concatenate(Xl), np.concatenate(yl)
    sol = lsq_linear(Xs, ys, bounds=(0.0, np.inf))
    k, kb2, c_s, f_b = (float(x) for x in sol.x)
    spring_rms = float(np.sqrt(np.mean((Xs @ sol.x - ys) ** 2)))
    # rotor: kt i - tau_c = J dw + sign(w) (F_c + F_v |w| + eta |tau_c| + F_s e), both sides filtered alike
    best: tuple[float, np.ndarray, float, float, int] | None = None
    for vs in STRIBECK_VELOCITIES:
        for al in STRIBECK_ALPHAS:
            X, y = _rotor_columns(segs, f_b, vs, al)
            sol = lsq_linear(X, y, bounds=(0.0, np.inf))
            rms = float(np.sqrt(np.mean((X @ sol.x - y) ** 2)))
            if best is None or rms < best[0]:
                best = (rms, sol.x, vs, al, len(y))
    assert best is not None
    rms, x, vs, al, n = best
    return DriveFit(name, stiffness=k, backlash=2.0 * kb2 / max(k, 1e-12), spring_damping=c_s, bearing=f_b,
                    armature=float(x[0]), friction_base=float(x[1]), friction_stribeck=float(x[5]),
                    stribeck_velocity=vs, stribeck_alpha=al, friction_viscous=float(x[2]),
                    mesh_friction_drive=float(x[3]), mesh_friction_back=float(x[4]), rms=rms, spring_rms=spring_rms,
                    n_samples=n)


#: the family's member whose every free value for an effort or current drive is one of :data:`MODEL_PARAMS`
#: (spring, dead band, mesh and rotor friction, armature, command delay): where every joint's drive-rate logs
#: measure them all, the member has nothing left to search, and it is the one `fit --robot` selects
#: (docs/robots.md; a voltage drive's motor constants are not measured here, so it never is)
MEASURED_MEMBER = "g2+backlash+delay"


def measured_values(robot: Robot, fits: dict[str, DriveFit]) -> dict[str, list[float]] | None:
    """{parameter: [value per joint of ``robot``]} of :data:`MEASURED_MEMBER`'s free parameters (for the joints'
    drives), each joint's own (:func:`set_values` per joint); None where a joint lacks a fit or a value (a spring
    that never left its dead band, a delay beyond :data:`MAX_DELAY`, a joint not in the drive-rate logs, a
    voltage drive's motor constants)."""
    spec = get_model(MEASURED_MEMBER)
    names = tuple(n for n in spec.free if any(n in spec.free_for(j.drive) for j in robot.joints))
    values = set_values(robot, fits, per_joint=True)
    if any(k not in values or any(v is None for v in values[k]) for k in names):
        return None
    return {k: [float(v) for v in values[k] if v is not None] for k in names}


def set_values(robot: Robot, fits: dict[str, DriveFit], per_joint: bool = False) -> dict[str, list[float | None]]:
    """{parameter: [value per parameter set of ``robot``]} (:data:`MODEL_PARAMS`): each set's median over
    its joints that have a fit (per joint with ``per_joint``: each joint's own), None where none has."""
    sets = [(j.name,) for j in robot.joints] if per_joint else [tuple(g.joints) for g in robot.groups]
    out: dict[str, list[float | None]] = {}
    for p in MODEL_PARAMS:
        vals: list[float | None] = []
        for js in sets:
            v = [getattr(fits[j], p) for j in js if j in fits and getattr(fits[j], p) is not None]
            vals.append(float(np.median(v)) if v else None)
        out[p] = vals
    return out

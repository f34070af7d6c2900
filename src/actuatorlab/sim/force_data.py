"""Force logs and the classical force estimators' calibration (:mod:`actuatorlab.sim.force`).

:func:`read_force_log` turns a trajectory with end-effector force channels into a
:class:`ForceLog` of :class:`ForceFrame` s; :func:`fit_calibration` fits, on free-motion logs
(:func:`free_motion`, tau_ext = 0), the per-joint current-to-torque map and, for ``id_friction``,
the Stribeck friction (:func:`stribeck`) and the backlash play operator (:func:`play`) that the
estimators of :mod:`actuatorlab.sim.force` use; the equations are in that module's docstring.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple, Sequence

import numpy as np

from ..errors import DataError, ModelError
from ..logs.format import Trajectory
from ..robots.loader import Robot
from .arm_data import log_arrays
from .dynamics import ArmDynamics

__all__ = ["ForceFrame", "ForceLog", "Calibration", "read_force_log", "fit_calibration", "free_motion", "stribeck",
           "play", "labelled_motion", "lever_arms", "LEVER_MIN", "FORCE_THRESHOLD", "DEFAULT_TAU_S",
           "DEFAULT_MIN_GAIN"]

#: contact label when a log has no ``contact`` channel: |f| above this [N]
FORCE_THRESHOLD = 0.01
#: low-pass time constant of current and velocity for the inverse-dynamics methods [s]
DEFAULT_TAU_S = 0.05
#: smallest accepted current-to-torque gain [N.m/A]; a fitted gain below it is clamped
DEFAULT_MIN_GAIN = 0.1
STRIBECK_VELOCITIES = (0.02, 0.05, 0.1, 0.2)  # grid for v_s [rad/s]
PLAY_WIDTHS = (0.0, 0.01, 0.02, 0.05, 0.1)     # grid for the backlash play width w [A]
SIGN_EPS = 0.01                                # [rad/s] tanh(qd / eps) smooth sign
#: smallest lever arm of :func:`lever_arms` [m] (a joint whose axis passes near the end-effector point)
LEVER_MIN = 0.02


def lever_arms(dyn: ArmDynamics, q) -> np.ndarray:
    """Lever arm of every joint of ``dyn`` to the end-effector point at angles ``q`` (dyn order):
    r_j = max(|J_p[:, j]|, LEVER_MIN) [m] (the end-effector speed per unit joint rate; for a hinge
    the distance of the point from its axis). tau_j / r_j [N] is the force along joint j's own
    end-effector motion that explains its external torque tau_j, i.e. the classical estimate's
    pose-dependent step (J_p^T f = tau) done per joint: for a vertical yaw joint the lateral force
    of a planar arm exactly, since no other joint moves the point sideways. Unchanged by the yaw
    angle and by the arm's mirror (a column's norm), so tau / r is odd where tau is."""
    return np.maximum(np.linalg.norm(dyn.jacobian(np.asarray(q, float)), axis=0), LEVER_MIN)


class ForceFrame(NamedTuple):
    """One log frame, robot joint order (n = robot.n_joints): q_target, q [rad | m], dq [rad/s |
    m/s] (the logged velocity), v_supply [V], enable [0/1], current [A], pwm [-1, 1],
    temperature [degC]; joints a log does not record hold zeros. A leading time axis (T, n) makes
    it a whole log (:attr:`ForceLog.frames`)."""

    q_target: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    v_supply: np.ndarray
    enable: np.ndarray
    current: np.ndarray
    pwm: np.ndarray
    temperature: np.ndarray


@dataclass(frozen=True, eq=False)
class ForceLog:
    """A log for force estimation: frames (T, n), time (T,) [s], force (T, 3) [N] label (base
    frame, environment on robot; zeros when unknown), force_known, contact (T,) bool label (the
    log's ``contact`` channel, else |f| > 0.01 N), split (folder name: ``train``, ``test``,
    ``heldout/<condition>``, ...), task (the ``excitation`` condition), conditions."""

    name: str
    frames: ForceFrame
    time: np.ndarray
    force: np.ndarray
    force_known: bool
    contact: np.ndarray
    split: str
    task: str
    conditions: dict

    @property
    def n(self) -> int:
        return int(self.time.shape[0])

    def frame(self, k: int) -> ForceFrame:
        return ForceFrame(*(a[k] for a in self.frames))


def read_force_log(robot: Robot, traj: Trajectory, split: str = "") -> ForceLog:
    """Read one multi-joint log (``split``: a label for the scores, e.g. the folder it came from);
    problems are one-line :class:`DataError` naming the file."""

    b = log_arrays(robot, traj)
    where = traj.source_file or traj.name
    T, n = b.q_meas.shape
    tel = {k: np.zeros((T, n)) for k in ("current", "pwm_duty", "temperature")}
    for j in robot.joint_names:
        if not b.scored[robot.index(j)]:
            continue
        for k in tel:
            if traj.has(f"{k}/{j}"):
                v = np.asarray(traj[f"{k}/{j}"], float)
                if not np.all(np.isfinite(v)):
                    raise DataError(where, f"channel {k}/{j} holds NaN or inf")
                tel[k][:, robot.index(j)] = v
    if not (np.all(np.isfinite(b.q_meas)) and np.all(np.isfinite(b.dq_meas))):
        raise DataError(where, "positions or velocities hold NaN or inf")
    known = all(traj.has(f"force_{a}") for a in "xyz")
    force = np.stack([np.nan_to_num(np.asarray(traj[f"force_{a}"], float)) for a in "xyz"], -1) if known \
        else np.zeros((T, 3))
    contact = np.asarray(traj["contact"], float) > 0.5 if traj.has("contact") else \
        np.linalg.norm(force, axis=-1) > FORCE_THRESHOLD
    frames = ForceFrame(b.inputs.q_target, b.q_meas, b.dq_meas, b.inputs.v_supply, b.inputs.enable,
                        tel["current"], tel["pwm_duty"], tel["temperature"])
    cond = {k: str(v) for k, v in (traj.conditions or {}).items()}
    return ForceLog(traj.name, frames, np.asarray(traj.time, float), force, known, contact, str(split),
                    cond.get("excitation", "unknown"), cond)


def free_motion(log: ForceLog) -> bool:
    """True for a log without external force: a known zero force label, no payload, no contact,
    no restricted joint (the calibration's premise tau_ext = 0)."""
    c = log.conditions
    return (log.force_known and not np.any(log.contact) and float(np.abs(log.force).max(initial=0.0)) < 0.5
            and c.get("load", "none") == "none" and c.get("contact", "none") == "none"
            and c.get("restricted", "none") == "none")


# -- pure building blocks --------------------------------------------------------------------
def play(y_prev: np.ndarray | float, x: np.ndarray | float, width: np.ndarray | float) -> np.ndarray:
    """Play (backlash) operator, one step: ``y = min(max(y_prev, x - w/2), x + w/2)``."""
    h = 0.5 * np.asarray(width, float)
    return np.minimum(np.maximum(y_prev, x - h), x + h)


def stribeck(dq: np.ndarray, coulomb, static, viscous, v_s) -> np.ndarray:
    """Friction torque opposing the motion (same sign as qd) [N.m]:
    ``(F_c + F_s exp(-(qd/v_s)^2)) tanh(qd/0.01) + F_v qd``."""
    sgn = np.tanh(dq / SIGN_EPS)
    return (coulomb + static * np.exp(-(dq / v_s) ** 2)) * sgn + viscous * dq


@dataclass(frozen=True)
class Calibration:
    """Per-joint motor and friction model of the classical estimators (joints: ArmDynamics order).

    gain (n,) [N.m/A] (after clamping), offset (n,) [N.m], raw_gain (n,) [N.m/A] the unclamped
    least-squares gain; friction: whether the Stribeck + play terms are fitted; coulomb, static,
    viscous (n,) [N.m, N.m, N.m.s/rad]; stribeck_velocity (n,) [rad/s]; play_width (n,) [A];
    rms (n,) [N.m] fit residual on the free-motion samples; n_samples; tau_s [s] filter time
    constant used in the fit; clamped: joints whose gain was clamped to ``min_gain``; warnings:
    one line per clamped joint; labelled: fitted on force-labelled logs (``fit_calibration``'s
    ``labelled``) rather than on free motion."""

    joints: tuple[str, ...]
    gain: np.ndarray
    offset: np.ndarray
    raw_gain: np.ndarray
    friction: bool
    coulomb: np.ndarray
    static: np.ndarray
    viscous: np.ndarray
    stribeck_velocity: np.ndarray
    play_width: np.ndarray
    rms: np.ndarray
    n_samples: int
    tau_s: float
    min_gain: float
    clamped: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    labelled: bool = False

    def to_dict(self) -> dict[str, Any]:
        d = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in self.__dict__.items()}
        d["joints"], d["clamped"], d["warnings"] = list(self.joints), list(self.clamped), list(self.warnings)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Calibration":
        """Inverse of :meth:`to_dict` (a malformed entry is a one-line :class:`ModelError`)."""
        arrays = ("gain", "offset", "raw_gain", "coulomb", "static", "viscous", "stribeck_velocity", "play_width", "rms")
        try:
            n = len(d["joints"])
            kw = {k: np.asarray(d[k], float).reshape(n) for k in arrays}
            return cls(joints=tuple(str(j) for j in d["joints"]), friction=bool(d["friction"]),
                       n_samples=int(d["n_samples"]), tau_s=float(d["tau_s"]), min_gain=float(d["min_gain"]),
                       clamped=tuple(d.get("clamped", ())), warnings=tuple(d.get("warnings", ())),
                       labelled=bool(d.get("labelled", False)), **kw)
        except (KeyError, TypeError, ValueError) as e:
            raise ModelError(f"force calibration: malformed entry ({type(e).__name__}: {e})") from None


def _filtered(log: ForceLog, idx: np.ndarray, tau_s: float, dt: float):
    """Causal signals of the inverse-dynamics methods over a whole log (the same recursions as
    :class:`InverseDynamicsEstimator`): q, low-passed qd and i, backward-difference qdd."""
    a = dt / (tau_s + dt)
    q = log.frames.q[:, idx]
    dq, cur = log.frames.dq[:, idx], log.frames.current[:, idx]
    dq_f, i_f, ddq = np.empty_like(dq), np.empty_like(cur), np.zeros_like(dq)
    yd, yi = dq[0].copy(), cur[0].copy()
    for k in range(log.n):
        if k:
            yd = yd + a * (dq[k] - yd)
            yi = yi + a * (cur[k] - yi)
        dq_f[k], i_f[k] = yd, yi
        if k:
            ddq[k] = (dq_f[k] - dq_f[k - 1]) / dt
    return q, dq_f, ddq, i_f


def _play_series(x: np.ndarray, w: float) -> np.ndarray:
    y = np.empty_like(x)
    yk = x[0]
    for k in range(x.shape[0]):
        yk = play(yk, x[k], w)
        y[k] = yk
    return y


def labelled_motion(log: ForceLog) -> bool:
    """True for a log whose force label accounts for every external joint torque: a known force
    label (zero or not: payload, push) and no restricted joint (whose elastic torque no label
    carries). The premise of :func:`fit_calibration` with ``labelled``."""
    return log.force_known and log.conditions.get("restricted", "none") == "none"


def fit_calibration(dyn: ArmDynamics, logs: Sequence[ForceLog], *, friction: bool, tau_s: float = DEFAULT_TAU_S,
                    min_gain: float = DEFAULT_MIN_GAIN, skip: int = 20, labelled: bool = False) -> Calibration:
    """Least-squares calibration on FREE-MOTION logs only (``free_motion`` must hold; anything
    else is refused): per joint j, ``M qdd + C qd + g = a_j P_w(i_j) + b_j - tau_f(qd_j)`` with
    the signals of :class:`InverseDynamicsEstimator`. Without ``friction`` only a, b (w = 0, no
    tau_f). The first ``skip`` frames of each log (filter start-up) are left out. A gain below
    ``min_gain`` is clamped and the other terms refitted with it fixed.

    ``labelled``: calibrate on force-LABELLED logs instead (:func:`labelled_motion`: payloads and
    pushes too), with the known external torque on the left, ``M qdd + C qd + g - J_p^T f =
    a_j P_w(i_j) + b_j - tau_f``. Loads then separate the current gain from friction, which on
    free motion move together (the classical baselines of the issue stay free-motion-only; this
    is for a learned model's prior, which is trained on the same labels)."""
    logs = list(logs)
    if not logs:
        raise DataError(None, f"force calibration: no {'labelled' if labelled else 'free-motion'} training logs")
    bad = [lg.name for lg in logs if not (labelled_motion(lg) if labelled else free_motion(lg))]
    if bad:
        raise DataError(None, f"force calibration with labels needs logs with a force label and no restricted joint; "
                              f"got {bad[:3]}" if labelled else
                        f"force calibration needs free-motion logs (no payload, contact, force or "
                              f"restriction); got {bad[:3]}")
    idx = np.array([dyn.robot.index(j) for j in dyn.joints])
    dt = float(dyn.robot.control_dt)
    Y_logs: list[np.ndarray] = []  # per log (T - skip, n) [N.m]
    I: list[np.ndarray] = []  # per log (T, n) [A]
    DQ_logs: list[np.ndarray] = []  # per log (T - skip, n) [rad/s]
    for lg in logs:
        q, dq_f, ddq, i_f = _filtered(lg, idx, tau_s, dt)
        tau = np.array([dyn.inverse_dynamics(q[k], dq_f[k], ddq[k]) for k in range(lg.n)])
        if labelled:  # the external torque the label states: J_p^T f
            tau = tau - np.array([dyn.jacobian(q[k]).T @ lg.force[k] for k in range(lg.n)])
        Y_logs.append(tau[skip:])
        I.append(i_f)
        DQ_logs.append(dq_f[skip:])
    Y, DQ = np.concatenate(Y_logs), np.concatenate(DQ_logs)
    n = len(dyn.joints)
    out = {k: np.zeros(n) for k in ("gain", "offset", "raw_gain", "coulomb", "static", "viscous", "rms")}
    out["stribeck_velocity"] = np.full(n, STRIBECK_VELOCITIES[0])
    out["play_width"] = np.zeros(n)
    clamped, warnings = [], []
    for j in range(n):
        y, v = Y[:, j], DQ[:, j]
        best = None
        for w in (PLAY_WIDTHS if friction else (0.0,)):
            i_w = np.concatenate([_play_series(I_[:, j], w)[skip:] for I_ in I]) if w > 0 else \
                np.concatenate([I_[skip:, j] for I_ in I])
            for vs in (STRIBECK_VELOCITIES if friction else (1.0,)):
                cols = [i_w, np.ones_like(y)]
                if friction:
                    sgn = np.tanh(v / SIGN_EPS)
                    cols += [-sgn, -np.exp(-(v / vs) ** 2) * sgn, -v]
                A = np.stack(cols, -1)
                th, *_ = np.linalg.lstsq(A, y, rcond=None)
                raw = float(th[0])
                if raw < min_gain:  # clamp and refit the rest with the gain fixed
                    th2, *_ = np.linalg.lstsq(A[:, 1:], y - min_gain * i_w, rcond=None)
                    th = np.concatenate([[min_gain], th2])
                sse = float(np.sum((A @ th - y) ** 2))
                if best is None or sse < best[0]:
                    best = (sse, th, raw, w, vs)
        assert best is not None  # the loops above try at least one (w, vs)
        sse, th, raw, w, vs = best
        out["gain"][j], out["offset"][j], out["raw_gain"][j] = th[0], th[1], raw
        if friction:
            out["coulomb"][j], out["static"][j], out["viscous"][j] = th[2], th[3], th[4]
            out["stribeck_velocity"][j], out["play_width"][j] = vs, w
        out["rms"][j] = math.sqrt(sse / max(len(y), 1))
        if raw < min_gain:
            clamped.append(dyn.joints[j])
            warnings.append(f"{dyn.joints[j]}: fitted current-to-torque gain {raw:.4g} N.m/A "
                            f"{'is negative' if raw < 0 else 'is below the minimum'}; clamped to {min_gain:g}")
    return Calibration(tuple(dyn.joints), friction=friction, n_samples=int(Y.shape[0]), tau_s=float(tau_s),
                       min_gain=float(min_gain), clamped=tuple(clamped), warnings=tuple(warnings), labelled=bool(labelled),
                       **out)

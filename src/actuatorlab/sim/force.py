"""Sensorless end-effector force estimation, causal, one log frame at a time (control rate).

Every method is a :class:`ForceEstimator`: ``reset()`` then ``step(frame) -> ForceEstimate`` for
each :class:`ForceFrame` in time order; an estimator keeps only what it has already seen, so its
output at frame k never depends on a later frame (:func:`estimate_log` runs a whole log that way;
``tests/test_force.py`` perturbs a future frame and checks every past output is unchanged).
Methods (:data:`METHODS`, built by :func:`make_estimator`):

``learned``
    the learned whole-robot actuator's force head times its contact gate,
    ``f = w f_raw`` with ``w = s = sigmoid(gate)`` where s > 0.5 (the contact rule) and ``w = 0``
    elsewhere (``soft_gate=True``: ``w = s`` everywhere; :func:`~actuatorlab.sim.arm_learned.gate_weight`),
    through :class:`~actuatorlab.sim.arm_learned.OnlineEstimator`
    (Dou et al., "NeuralActuator", RSS 2026). A model trained with a :class:`ForcePrior` (a
    calibrated classical method below) corrects that method's estimate instead of replacing it::

        f = w (f_raw + f_prior)        f_prior: the classical method on the same frames

    so beyond the loads it was trained on the estimate keeps the classical method's linear
    current-to-force growth, and the network supplies what the classical model lacks (gear
    losses, load-dependent friction) and the contact gate (residual learning on top of a physics
    model, as in Zeng et al., "TossingBot", RSS 2019, and Johannink et al., "Residual
    reinforcement learning for robot control", ICRA 2019).
``id_linear``
    inverse-dynamics residual with a per-joint linear current-to-torque map::

        tau_ext = M(q) qdd + C(q, qd) qd + g(q) - (a_j i_j + b_j)

    a_j [N.m/A], b_j [N.m] fitted by least squares on free-motion training logs
    (:func:`fit_calibration`), where tau_ext = 0. qd and i are low-passed (first order,
    ``tau_s``), qdd is the backward difference of the low-passed velocity (all causal).
``id_friction``
    the same plus friction and backlash compensation::

        tau_m   = a_j P_w(i_j) + b_j          P_w: play (backlash) operator of width w_j [A]
        tau_f   = (F_c + F_s exp(-(qd/v_s)^2)) tanh(qd / 0.01) + F_v qd        Stribeck
        tau_ext = M qdd + C qd + g - tau_m + tau_f

    The play operator ``y_k = min(max(y_{k-1}, x_k - w/2), x_k + w/2)`` is the classical
    hysteresis model of backlash (Tao & Kokotovic, "Adaptive control of systems with backlash",
    Automatica 1993): across a torque reversal the gear mesh transmits nothing until the motor has
    crossed the dead band. a, b, F_c, F_s, F_v by least squares, v_s and w by grid search, all
    on free motion. Stribeck: Armstrong-Helouvry et al., Automatica 1994.
``momentum_observer``
    the generalized momentum observer of De Luca et al. (De Luca & Mattone, ICRA 2005;
    Haddadin, De Luca & Albu-Schaeffer, "Robot collisions: a survey on detection, isolation, and
    identification", IEEE T-RO 2017)::

        p(t) = M(q) qd
        r(t) = K_O ( p(t) - p(0) - int_0^t (tau_m - tau_f + C^T(q, qd) qd - g(q) + r) ds )

    so that ``dr/dt = K_O (tau_ext - r)``: a first-order low-pass estimate of tau_ext that needs
    no acceleration. tau_m and tau_f are ``id_friction``'s calibrated models (raw current and
    velocity, no extra filter); the integral is the explicit Euler sum over past frames.

Every classical method maps tau_ext (n,) to the end-effector force with the pseudo-inverse of the
translational Jacobian transpose, ``f = pinv(J_p(q)^T) tau_ext``
(:func:`~actuatorlab.sim.dynamics.force_from_torque`). A fitted gain a_j below ``min_gain``
(negative, or too small to be a motor) is clamped to it and reported
(:attr:`Calibration.warnings`).
"""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, NamedTuple, Sequence

import numpy as np

from ..errors import DataError, ModelError, UnknownNameError
from ..logs.format import Trajectory
from ..robots.loader import Robot
from .dynamics import ArmDynamics, force_from_torque
from .force_data import (Calibration as Calibration, DEFAULT_MIN_GAIN as DEFAULT_MIN_GAIN,
                         DEFAULT_TAU_S as DEFAULT_TAU_S, fit_calibration as fit_calibration,
                         FORCE_THRESHOLD as FORCE_THRESHOLD, ForceFrame as ForceFrame, ForceLog as ForceLog,
                         free_motion as free_motion, labelled_motion as labelled_motion, LEVER_MIN as LEVER_MIN,
                         lever_arms as lever_arms, play as play, read_force_log as read_force_log,
                         stribeck as stribeck)
from .arm_learned import gate_weight, OnlineEstimator, RESIDUAL_FEATURES

__all__ = ["ForceFrame", "ForceLog", "ForceEstimate", "ForceEstimator", "Calibration", "read_force_log",
           "fit_calibration", "free_motion", "LearnedTelemetry", "LearnedForceEstimator", "InverseDynamicsEstimator",
           "MomentumObserver", "IDState", "MOState", "id_step", "mo_step", "stribeck", "METHODS", "CLASSICAL",
           "make_estimator", "estimate_log", "play", "ForcePrior", "prior_forces", "labelled_motion", "lever_arms",
           "LEVER_MIN"]

#: momentum observer gain K_O [1/s] (bandwidth K_O / 2 pi = 1.6 Hz). DEFAULT_TAU_S and DEFAULT_K_O were
#: chosen on the synth suite's VALIDATION split (tau_s 0.02 / 0.05 s, K_O 10 / 20 / 40 1/s; docs/force.md)
DEFAULT_K_O = 10.0


# -- the estimators --------------------------------------------------------------------------
class ForceEstimate(NamedTuple):
    """One estimate: force (3,) [N] end-effector force, base frame, environment on robot;
    contact: contact probability (the learned gate) or NaN (classical methods); tau_ext: (n,)
    [N.m] external joint torque of the classical methods (ArmDynamics order), None for learned."""

    force: np.ndarray
    contact: float
    tau_ext: np.ndarray | None = None


class ForceEstimator(abc.ABC):
    """Causal force estimator: ``reset()`` at the start of a log, then ``step(frame)`` once per
    frame in time order. Implementations hold only state built from frames already seen."""

    name: str  # a class constant, or set per instance (id_linear / id_friction)

    @abc.abstractmethod
    def reset(self) -> None: ...

    @abc.abstractmethod
    def step(self, frame: ForceFrame) -> ForceEstimate: ...


class LearnedTelemetry:
    """The telemetry (C, K) a learned whole-robot model reads (``model.telemetry`` order, channels in
    ``model.layout.channels`` order), assembled from one :class:`ForceFrame` at a time:
    ``current``, ``pwm`` and ``temperature`` of the model's channels as logged, and ``tau_ext``
    [N.m], the estimated external joint torque, from the model's ``residual_input`` (a calibrated
    :class:`ForcePrior`) stepped on the same frame (and ``f_lever`` [N], the same over each joint's
    lever arm at the frame's measured angles, :func:`lever_arms`): the same values
    :func:`~actuatorlab.learned.arm.with_residual_inputs` writes into a log, so a live loop on
    hardware feeds the network what it was trained on. ``reset()`` at the start of a log (the
    residual's filters restart); None when the model reads no telemetry. A feature it cannot
    build from a frame (``load``), or ``tau_ext`` without a ``residual_input``, is a
    :class:`ModelError` naming ``what``."""

    FRAME: ClassVar[dict[str, str]] = {"current": "current", "pwm": "pwm", "temperature": "temperature"}

    def __init__(self, robot: Robot, model, what: str = "learned estimator"):
        feats = tuple(model.telemetry)
        bad = [f for f in feats if f not in self.FRAME and f not in RESIDUAL_FEATURES]
        if bad:
            raise ModelError(f"{what}: telemetry {bad} cannot be read from a frame "
                             f"(supported: {list(self.FRAME) + list(RESIDUAL_FEATURES)})")
        self.features = feats
        self._idx = np.array(model.channel_index)
        self._res = self._dyn = None
        used = [f for f in feats if f in RESIDUAL_FEATURES]
        if used:
            prior = model.residual_input
            if prior is None:
                raise ModelError(f"{what}: the model reads {used[0]!r} but has no residual_input to compute "
                                 "it from (its file lacks the entry)")
            joints = tuple(prior.calibration.joints)
            missing = [j for j in model.layout.channels if j not in joints]
            if missing:
                raise ModelError(f"{what}: the residual_input estimates joints {list(joints)}, not the model's "
                                 f"channels {missing}")
            self._res = prior.estimator(robot)
            self._res_idx = np.array([joints.index(j) for j in model.layout.channels])
            if "f_lever" in feats:
                self._dyn = ArmDynamics(robot, joints=joints, ee_body=prior.ee_body)
                self._q_idx = np.array([robot.index(j) for j in joints])

    def reset(self) -> None:
        if self._res is not None:
            self._res.reset()

    def __call__(self, frame: ForceFrame) -> np.ndarray | None:
        """(C, K) telemetry of ``frame`` (None: the model reads none). Steps the residual once."""
        if not self.features:
            return None
        tau_all = self._res.step(frame).tau_ext if self._res is not None else None
        res = {}
        if tau_all is not None:
            res["tau_ext"] = tau_all[self._res_idx]
            if self._dyn is not None:
                res["f_lever"] = (tau_all / lever_arms(self._dyn, np.asarray(frame.q)[self._q_idx]))[self._res_idx]
        return np.stack([res[f] if f in res else np.asarray(getattr(frame, self.FRAME[f]))[self._idx]
                         for f in self.features], -1)


class LearnedForceEstimator(ForceEstimator):
    """``learned``: w f_raw of a learned whole-robot model (measured q, qd; logged commands and
    telemetry, :class:`LearnedTelemetry`), via :class:`~actuatorlab.sim.arm_learned.OnlineEstimator`,
    w the gate weight (:func:`~actuatorlab.sim.arm_learned.gate_weight`: the contact probability
    above 0.5, else 0; ``soft_gate``: the probability everywhere); for a model with a
    :class:`ForcePrior`, w (f_raw + f_prior) with the prior's estimator stepped on the same frame."""

    name = "learned"

    def __init__(self, robot: Robot, model, soft_gate: bool = False):
        self._gate_weight = gate_weight
        self.model = model
        self.soft_gate = bool(soft_gate)
        self._tel = LearnedTelemetry(robot, model, "learned force estimator")
        self._online = OnlineEstimator(model, soft_gate=soft_gate)
        self._prior = model.force_prior.estimator(robot) if model.force_prior is not None else None

    def reset(self) -> None:
        self._online.reset()
        self._tel.reset()
        if self._prior is not None:
            self._prior.reset()

    def step(self, frame: ForceFrame) -> ForceEstimate:
        o = self._online.step(frame.q_target, frame.q, frame.dq, frame.v_supply, frame.enable, self._tel(frame))
        if self._prior is None:
            return ForceEstimate(np.asarray(o["force"], float), float(o["contact"]), None)
        f_prior = self._prior.step(frame).force
        w = self._gate_weight(o["contact"], self.soft_gate)
        return ForceEstimate(w * (np.asarray(o["force_raw"], float) + f_prior), float(o["contact"]), None)


class IDState(NamedTuple):
    """State of the inverse-dynamics methods after a frame (ArmDynamics order, (n,) each):
    dq_f [rad/s] low-passed velocity, i_f [A] low-passed current, y [A] play-operator output."""

    dq_f: np.ndarray
    i_f: np.ndarray
    y: np.ndarray


def id_step(dyn: ArmDynamics, cal: Calibration, state: IDState | None, frame: ForceFrame
            ) -> tuple[IDState, ForceEstimate]:
    """One frame of ``id_linear`` / ``id_friction`` (module docstring); ``state`` None at a log's
    first frame (filters start at the first sample, qdd = 0). Returns (new state, estimate)."""
    c = cal
    idx = np.array([dyn.robot.index(j) for j in dyn.joints])
    dt = float(dyn.robot.control_dt)
    a = dt / (c.tau_s + dt)
    q, dq, i = (np.asarray(v, float)[idx] for v in (frame.q, frame.dq, frame.current))
    if state is None:
        new, ddq = IDState(dq, i, i), np.zeros_like(dq)
    else:
        dq_f, i_f = state.dq_f + a * (dq - state.dq_f), state.i_f + a * (i - state.i_f)
        new, ddq = IDState(dq_f, i_f, play(state.y, i_f, c.play_width)), (dq_f - state.dq_f) / dt
    tau_m = c.gain * (new.y if c.friction else new.i_f) + c.offset
    tau_f = stribeck(new.dq_f, c.coulomb, c.static, c.viscous, c.stribeck_velocity) if c.friction else 0.0
    tau_ext = dyn.inverse_dynamics(q, new.dq_f, ddq) - tau_m + tau_f
    return new, ForceEstimate(force_from_torque(dyn.jacobian(q), tau_ext), math.nan, tau_ext)


class MOState(NamedTuple):
    """State of the momentum observer after frame k ((n,) each): p0 [kg.m^2/s] p(0), integral
    [kg.m^2/s] dt sum_{l<k} beta_l, beta [N.m] beta_k (enters the integral at k + 1), y [A] play
    output."""

    p0: np.ndarray
    integral: np.ndarray
    beta: np.ndarray
    y: np.ndarray


def mo_step(dyn: ArmDynamics, cal: Calibration, k_o: float, state: MOState | None, frame: ForceFrame
            ) -> tuple[MOState, ForceEstimate]:
    """One frame of the momentum observer: r_k = K_O (p_k - p_0 - dt sum_{l<k} beta_l),
    beta_k = tau_m - tau_f + C^T qd - g + r_k (explicit Euler); ``state`` None at a log's first
    frame (r_0 = 0). Returns (new state, estimate with tau_ext = r_k)."""
    c = cal
    idx = np.array([dyn.robot.index(j) for j in dyn.joints])
    dt = float(dyn.robot.control_dt)
    q, dq, i = (np.asarray(v, float)[idx] for v in (frame.q, frame.dq, frame.current))
    p = dyn.mass_matrix(q) @ dq
    if state is None:
        p0, integral, y = p, np.zeros_like(p), i
    else:
        p0, integral, y = state.p0, state.integral + dt * state.beta, play(state.y, i, c.play_width)
    r = k_o * (p - p0 - integral)
    tau_m = c.gain * (y if c.friction else i) + c.offset
    tau_f = stribeck(dq, c.coulomb, c.static, c.viscous, c.stribeck_velocity) if c.friction else 0.0
    beta = tau_m - tau_f + dyn.coriolis_transpose(q, dq) - dyn.gravity(q) + r
    return MOState(p0, integral, beta, y), ForceEstimate(force_from_torque(dyn.jacobian(q), r), math.nan, r)


class InverseDynamicsEstimator(ForceEstimator):
    """``id_linear`` / ``id_friction``: a stateful wrapper over the pure :func:`id_step` (it holds
    only the :class:`IDState` of the frames already seen)."""

    def __init__(self, dyn: ArmDynamics, cal: Calibration, name: str):
        if tuple(cal.joints) != tuple(dyn.joints):
            raise ModelError(f"calibration joints {list(cal.joints)} differ from the dynamics' {list(dyn.joints)}")
        self.name = name
        self.dyn, self.cal = dyn, cal
        self._state: IDState | None = None

    def reset(self) -> None:
        self._state = None

    def step(self, frame: ForceFrame) -> ForceEstimate:
        self._state, e = id_step(self.dyn, self.cal, self._state, frame)
        return e


class MomentumObserver(ForceEstimator):
    """``momentum_observer``: a stateful wrapper over the pure :func:`mo_step` (it holds only the
    :class:`MOState` of the frames already seen)."""

    name = "momentum_observer"

    def __init__(self, dyn: ArmDynamics, cal: Calibration, k_o: float = DEFAULT_K_O):
        if tuple(cal.joints) != tuple(dyn.joints):
            raise ModelError(f"calibration joints {list(cal.joints)} differ from the dynamics' {list(dyn.joints)}")
        if not (k_o > 0 and math.isfinite(k_o)):
            raise ModelError(f"momentum observer gain K_O must be a positive number, got {k_o}")
        self.dyn, self.cal, self.k_o = dyn, cal, float(k_o)
        self._state: MOState | None = None

    def reset(self) -> None:
        self._state = None

    def step(self, frame: ForceFrame) -> ForceEstimate:
        self._state, e = mo_step(self.dyn, self.cal, self.k_o, self._state, frame)
        return e


#: classical method -> whether its calibration fits friction and backlash
CLASSICAL: dict[str, bool] = {"id_linear": False, "id_friction": True, "momentum_observer": True}


@dataclass(frozen=True)
class _Method:
    build: Callable[..., ForceEstimator]
    description: str
    needs: tuple[str, ...] = field(default=())


METHODS: dict[str, _Method] = {
    "learned": _Method(lambda robot, model=None, soft_gate=False, **_: LearnedForceEstimator(robot, model, soft_gate),
                       "learned force head x contact gate (OnlineEstimator)", ("model",)),
    "id_linear": _Method(lambda robot, dyn=None, calibration=None, **_:
                         InverseDynamicsEstimator(dyn, calibration, "id_linear"),
                         "inverse-dynamics residual, linear current-to-torque map", ("dyn", "calibration")),
    "id_friction": _Method(lambda robot, dyn=None, calibration=None, **_:
                           InverseDynamicsEstimator(dyn, calibration, "id_friction"),
                           "inverse-dynamics residual + Stribeck friction + backlash play",
                           ("dyn", "calibration")),
    "momentum_observer": _Method(lambda robot, dyn=None, calibration=None, k_o=DEFAULT_K_O, **_:
                                 MomentumObserver(dyn, calibration, k_o),
                                 "generalized momentum observer (De Luca et al.)", ("dyn", "calibration")),
}


def make_estimator(name: str, robot: Robot, **kw) -> ForceEstimator:
    """Build the estimator ``name`` of :data:`METHODS`; ``model`` (LearnedArm) for ``learned`` (and
    optionally ``soft_gate``, :class:`LearnedForceEstimator`),
    ``dyn`` (ArmDynamics) and ``calibration`` for the classical ones (``k_o`` for the observer)."""
    if name not in METHODS:
        raise UnknownNameError("force estimation method", name, list(METHODS))
    m = METHODS[name]
    missing = [k for k in m.needs if kw.get(k) is None]
    if missing:
        raise ModelError(f"force estimation method {name!r} needs {missing}")
    if name in ("id_linear", "id_friction") and kw["calibration"].friction != CLASSICAL[name]:
        raise ModelError(f"method {name!r} needs a calibration {'with' if CLASSICAL[name] else 'without'} friction")
    return m.build(robot, **kw)


def estimate_log(est: ForceEstimator, log: ForceLog) -> dict[str, np.ndarray]:
    """Run ``est`` over a whole log causally: reset, then one ``step`` per frame in time order
    (frame k is handed over only after the estimate of frame k - 1 is stored). Returns force
    (T, 3) [N] and contact (T,) (NaN for classical methods), and tau_ext (T, n) [N.m] the external
    joint torque estimate when the estimator gives one (the classical methods)."""
    est.reset()
    F, P, tau = np.zeros((log.n, 3)), np.full(log.n, np.nan), []
    for k in range(log.n):
        e = est.step(log.frame(k))
        F[k], P[k] = e.force, e.contact
        if e.tau_ext is not None:
            tau.append(e.tau_ext)
    out = {"force": F, "contact": P}
    if tau and len(tau) == log.n:
        out["tau_ext"] = np.asarray(tau, float)
    return out


@dataclass(frozen=True, eq=False)
class ForcePrior:
    """The classical estimate a learned force head corrects (module docstring, ``learned``):
    ``method`` one of :data:`CLASSICAL`, its ``calibration`` (fitted on TRAINING logs, free motion
    or all labelled ones: :meth:`fit`; stored with the model), ``k_o`` [1/s] for the momentum observer, ``ee_body`` the end-effector
    body (None: :func:`~actuatorlab.sim.dynamics.default_ee_body`). Compared by identity
    (a static field of :class:`~actuatorlab.sim.arm_learned.LearnedArm`)."""

    method: str
    calibration: Calibration
    k_o: float = DEFAULT_K_O
    ee_body: str | None = None

    def __post_init__(self):
        if self.method not in CLASSICAL:
            raise UnknownNameError("force prior method", self.method, list(CLASSICAL))
        if self.calibration.friction != CLASSICAL[self.method]:
            raise ModelError(f"force prior {self.method!r} needs a calibration "
                             f"{'with' if CLASSICAL[self.method] else 'without'} friction")

    def estimator(self, robot: Robot) -> ForceEstimator:
        """A fresh causal estimator of this prior for ``robot``."""
        dyn = ArmDynamics(robot, joints=tuple(self.calibration.joints), ee_body=self.ee_body)
        return make_estimator(self.method, robot, dyn=dyn, calibration=self.calibration, k_o=self.k_o)

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "k_o": self.k_o, "ee_body": self.ee_body,
                "calibration": self.calibration.to_dict()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ForcePrior":
        try:
            return cls(method=str(d["method"]), calibration=Calibration.from_dict(d["calibration"]),
                       k_o=float(d.get("k_o", DEFAULT_K_O)), ee_body=d.get("ee_body"))
        except (KeyError, TypeError) as e:
            raise ModelError(f"force prior: malformed entry ({type(e).__name__}: {e})") from None

    @classmethod
    def fit(cls, robot: Robot, method: str, trajs: Sequence[Trajectory], *, k_o: float = DEFAULT_K_O,
            ee_body: str | None = None, labelled: bool = False) -> "ForcePrior":
        """Calibrate ``method`` on the free-motion logs among ``trajs`` (training logs only); with
        ``labelled`` on every force-labelled log without a restricted joint, the label's external
        torque subtracted (:func:`fit_calibration`)."""
        if method not in CLASSICAL:
            raise UnknownNameError("force prior method", method, list(CLASSICAL))
        dyn = ArmDynamics(robot, ee_body=ee_body)
        keep = labelled_motion if labelled else free_motion
        logs = [lg for lg in (read_force_log(robot, t) for t in trajs) if keep(lg)]
        if not logs:
            raise DataError(None, f"force prior {method!r}: no {'labelled' if labelled else 'free-motion'} training "
                                  "logs to calibrate it on")
        return cls(method, fit_calibration(dyn, logs, friction=CLASSICAL[method], labelled=labelled), k_o=float(k_o),
                   ee_body=dyn.ee_body)


def prior_forces(robot: Robot, prior: ForcePrior, traj: Trajectory, est: ForceEstimator | None = None) -> np.ndarray:
    """The prior's causal force estimate at every frame of ``traj``: (T, 3) [N] (float32).
    ``est``: an estimator from ``prior.estimator(robot)`` to reuse across logs (it is reset here)."""
    return estimate_log(est or prior.estimator(robot), read_force_log(robot, traj))["force"].astype(np.float32)

"""Closed-loop replay of logs with a joint model.

:func:`make_batches` turns :class:`~actuatorlab.logs.format.Trajectory` objects into padded
arrays on a uniform control grid, grouped by (control law, plant). Model *inputs* (command,
enable, supply voltage) are taken by zero-order hold of the last sample at or before each grid
time, never a later one; measured position/velocity are linearly interpolated because they are
only compared with the simulation (targets), never fed to it, except the initial state.

:func:`rollout` replays one batch from each log's measured initial state, driven by the logged
commands (delayed by the model's ``delay`` with linear interpolation between *past* samples).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from ..precision import physics
from ..errors import DataError
from ..logs.format import Trajectory
from ..logs.lattice import lattice_step
from ..models.actuator import Constants, Inputs, Outputs, State, StepConfig, make_step
from ..models.control import DEFAULT_ERROR_GAIN, LawConstants, get_control_law
from ..models.plant import GRAVITY, PlantConstants

__all__ = ["Batch", "make_batches", "rollout", "rollout_batch", "rollout_batch_state", "one_step", "default_dt",
           "log_arrays", "initial_temperature", "controller_level"]


@dataclass(frozen=True, eq=False)
class Batch:
    """Logs sharing a control law and plant, padded to a common length.

    names: log names (B,); law, plant: static structure; unit: "rad" | "m"; dt [s] grid step.
    t (B, T) [s] grid times from each log's start; q_target, enable, v_supply (B, T) model inputs;
    q_meas, dq_meas (B, T) targets; effort_meas (B, T) measured controller output or NaN;
    mask (B, T) bool, False on padding; consts: per-log constants with leaves of shape (B,);
    temperature0 (B,) [degC] each log's first logged temperature (``temperature`` channel), NaN
    where the log has none: the initial winding temperature of ``+thermal`` models.
    effort_level (B, T) [1] or None: the controller output as a fraction of its limit
    (:func:`controller_level`: measured where logged, else the control law on the measured
    position), NaN where the torque is off; read by the evaluation (the ``stall`` regime), never
    by a model or a fit.
    q_step (B,) [rad | m] or None: the step of the lattice each log's logged positions lie on
    (:func:`~actuatorlab.logs.lattice.lattice_step`; 0: none, continuous positions), read by the
    fit's censored objective (:mod:`actuatorlab.identify.censor`).
    """

    names: tuple[str, ...]
    law: str
    plant: Literal["pendulum", "carriage"]
    unit: str
    dt: float
    t: np.ndarray
    q_target: np.ndarray
    enable: np.ndarray
    v_supply: np.ndarray
    q_meas: np.ndarray
    dq_meas: np.ndarray
    effort_meas: np.ndarray
    mask: np.ndarray
    consts: Constants
    conditions: tuple[dict, ...] = field(default_factory=tuple)
    sources: tuple[str, ...] = field(default_factory=tuple)
    temperature0: np.ndarray | None = None
    effort_level: np.ndarray | None = None
    q_step: np.ndarray | None = None

    @property
    def size(self) -> int:
        return len(self.names)

    @property
    def n_samples(self) -> int:
        return int(self.mask.sum())

    def arrays(self):
        """The array pytree that :func:`rollout_batch` consumes."""
        t0 = np.full(self.size, np.nan) if self.temperature0 is None else self.temperature0
        return dict(t=self.t, q_target=self.q_target, enable=self.enable, v_supply=self.v_supply,
                    q_meas=self.q_meas, dq_meas=self.dq_meas, consts=self.consts, temperature0=t0)

    def step_config(self, compliant: bool = False, substeps: int = 1, thermal: bool = False) -> StepConfig:
        return StepConfig(self.law, self.plant, compliant, substeps, thermal)


def default_dt(trajs: list[Trajectory]) -> float:
    """Median sample period over the logs, rounded to 0.1 ms."""
    med = [float(np.median(np.diff(t.time))) for t in trajs if t.n > 1]
    if not med:
        raise DataError(None, "no log with at least two samples")
    return max(1e-4, round(float(np.median(med)), 4))


def _zoh(time, values, grid, tol):
    """Last sample at or before each grid time; a sample stamped up to ``tol`` [s] after the grid
    time counts as simultaneous (timestamp jitter, e.g. 3e-8 s on EMPS), never a later one."""
    idx = np.searchsorted(time, grid + tol, side="right") - 1
    return values[np.clip(idx, 0, len(time) - 1)]


def log_arrays(tr: Trajectory, dt: float) -> dict:
    """One log on a uniform grid: inputs by zero-order hold, targets by linear interpolation."""
    src = tr.source_file or tr.name
    for ch in ("position", "position_target"):
        if ch not in tr.data:
            raise DataError(src, f"missing channel {ch!r} needed to replay the log "
                                 f"(has: {', '.join(sorted(tr.data))})")
    time = np.asarray(tr.time, float)
    if time.size < 3 or not np.all(np.diff(time) > 0):
        raise DataError(src, "timestamps must be strictly increasing with at least 3 samples")
    n = int(np.floor((time[-1] - time[0]) / dt + 1e-9)) + 1
    grid = time[0] + dt * np.arange(n)
    tol = 1e-3 * dt
    law = get_control_law(tr.setup.controller)
    q = np.interp(grid, time, tr["position"])
    if "velocity" in tr.data:
        dq = np.interp(grid, time, tr["velocity"])
    else:
        dq = np.gradient(q, dt)
    enable = _zoh(time, tr["torque_enable"], grid, tol) if "torque_enable" in tr.data else np.ones(n)
    if "supply_voltage" in tr.data:
        v = _zoh(time, tr["supply_voltage"], grid, tol)
    elif tr.setup.supply_voltage is not None:
        v = np.full(n, float(tr.setup.supply_voltage))
    elif law.drive == "voltage":
        raise DataError(src, "voltage-mode controller but no supply_voltage channel or setup value")
    else:
        v = np.zeros(n)
    effort = (np.interp(grid, time, tr["controller_output"]) if "controller_output" in tr.data
              else np.full(n, np.nan))
    temp0 = np.nan
    if "temperature" in tr.data:  # the first finite reading at or before the grid's start
        tc = np.asarray(tr["temperature"], float)
        ok = np.isfinite(tc) & (time <= grid[0] + tol)
        temp0 = float(tc[ok][-1]) if ok.any() else np.nan
    for name, arr in (("position", q), ("position_target", tr["position_target"]), ("supply_voltage", v)):
        if not np.all(np.isfinite(arr)):
            raise DataError(src, f"channel {name!r} contains NaN or inf")
    return dict(t=grid - grid[0], q_target=_zoh(time, tr["position_target"], grid, tol),
                enable=enable.astype(float), v_supply=v, q_meas=q, dq_meas=dq, effort_meas=effort,
                temperature0=temp0)


def controller_level(tr: Trajectory, a: dict, dt: float) -> tuple[np.ndarray, str]:
    """The controller output as a fraction of its limit [1] on the grid of ``a = log_arrays(tr, dt)``
    (NaN where the torque is off), and where it comes from:

    * ``pwm_duty / max_duty`` for a voltage (PWM) drive that logs its duty (measured);
    * the logged ``controller_output`` over its limit (``v_supply * max_duty`` for a voltage drive,
      ``u_max`` otherwise);
    * else the control law itself, evaluated on the logged command and the *measured* position
      and velocity (what the firmware computes from them: causal, no model parameter).

    1 means the controller is at its limit (saturated). Used by the operating envelope and the
    evaluation's ``stall`` regime; never by a model or a fit.
    """
    law = get_control_law(tr.setup.controller)
    lc, _ = _constants(tr, dt)
    time = np.asarray(tr.time, float)
    grid = time[0] + a["t"]
    q, dq, qt, v = a["q_meas"], a["dq_meas"], a["q_target"], a["v_supply"]
    n = q.size
    limit = v * float(lc.max_duty) if law.drive == "voltage" else np.full(n, float(lc.u_max))
    if "pwm_duty" in tr.data and law.drive == "voltage":
        effort = np.interp(grid, time, np.asarray(tr["pwm_duty"], float)) / float(lc.max_duty)
        source = "measured pwm_duty / max_duty"
    elif "controller_output" in tr.data:
        with np.errstate(divide="ignore", invalid="ignore"):
            effort = np.interp(grid, time, np.asarray(tr["controller_output"], float)) / limit
        source = "logged controller_output / its limit"
    else:
        q_prev = np.concatenate([q[:1], q[:-1]])
        q_prev2 = np.concatenate([q[:1], q[:1], q[:-2]])[:n]
        u = np.asarray(law.fn(lc, {"gain_scale": jnp.float64(1.0)}, qt, q, q_prev, q_prev2, dq, v), float)
        with np.errstate(divide="ignore", invalid="ignore"):
            effort = u / limit
        source = f"{law.name} law on the logged command and measured position"
    enabled = a["enable"] > 0.5
    return np.where(enabled & np.isfinite(effort), effort, np.nan), source


def _constants(tr: Trajectory, dt: float) -> tuple[LawConstants, PlantConstants]:
    s, g = tr.setup, tr.setup.gains
    src = tr.source_file or tr.name
    law = s.controller
    if law in ("dynamixel_pwm", "feetech_pwm", "emps_cascade") and "kp" not in g:
        raise DataError(src, f"controller {law!r} needs gain 'kp' in the setup")
    if law == "emps_cascade" and ("kv" not in g or "gtau" not in s.bench):
        raise DataError(src, "controller 'emps_cascade' needs gains kp, kv and bench gtau")
    kd = g.get("kv", g.get("kd", 0.0))
    u_max = g.get("u_max", 10.0 if law == "emps_cascade" else g.get("effort_limit", 1e9))
    lc = LawConstants(kp=float(g.get("kp", 0.0)), kd=float(kd),
                      error_gain=float(g.get("error_gain", DEFAULT_ERROR_GAIN.get(law, 1.0))),
                      max_duty=float(g.get("max_duty", 1.0)), u_max=float(u_max),
                      drive_gain=float(s.bench.get("gtau", 1.0)), dt=float(dt))
    b = s.bench
    if s.joint_type == "revolute" and ("mass" not in b or "length" not in b):
        raise DataError(src, "revolute bench needs 'mass' [kg] and 'length' [m] in setup.bench")
    pc = PlantConstants(mass=float(b.get("mass", 0.0)), length=float(b.get("length", 0.0)),
                        arm_mass=float(b.get("arm_mass", 0.0)),
                        gravity=float(b.get("gravity", GRAVITY if s.joint_type == "revolute" else 0.0)))
    return lc, pc


@physics
def make_batches(trajs: list[Trajectory], dt: float | None = None) -> list[Batch]:
    """Group logs by (control law, plant) and pad each group to its longest log."""
    if not trajs:
        raise DataError(None, "no logs given")
    dt = default_dt(trajs) if dt is None else float(dt)
    groups: dict[tuple[str, Literal["pendulum", "carriage"]], list[Trajectory]] = {}
    for tr in trajs:
        get_control_law(tr.setup.controller)
        plant: Literal["pendulum", "carriage"] = "pendulum" if tr.setup.joint_type == "revolute" else "carriage"
        groups.setdefault((tr.setup.controller, plant), []).append(tr)
    batches = []
    for (law, plant), group in groups.items():
        arrs = [log_arrays(tr, dt) for tr in group]
        for tr, a in zip(group, arrs):
            a["effort_level"] = controller_level(tr, a, dt)[0]
        T = max(a["t"].size for a in arrs)

        def pad(key, fill_edge=True):
            out = np.empty((len(arrs), T))
            for i, a in enumerate(arrs):
                x = a[key]
                out[i, : x.size] = x
                out[i, x.size:] = x[-1] if fill_edge else np.nan
            return out

        mask = np.zeros((len(arrs), T), bool)
        for i, a in enumerate(arrs):
            mask[i, : a["t"].size] = True
        t = np.broadcast_to(np.arange(T) * dt, (len(arrs), T)).copy()
        consts = [_constants(tr, dt) for tr in group]
        lc = LawConstants(*[np.array([c[0][j] for c in consts]) for j in range(len(LawConstants._fields))])
        pc = PlantConstants(*[np.array([c[1][j] for c in consts]) for j in range(len(PlantConstants._fields))])
        batches.append(Batch(
            names=tuple(tr.name for tr in group), law=law, plant=plant,
            unit="rad" if plant == "pendulum" else "m", dt=dt, t=t,
            q_target=pad("q_target"), enable=pad("enable"), v_supply=pad("v_supply"),
            q_meas=pad("q_meas"), dq_meas=pad("dq_meas"), effort_meas=pad("effort_meas", False),
            mask=mask, consts=Constants(lc, pc),
            conditions=tuple(dict(tr.conditions) for tr in group),
            sources=tuple(tr.source_file for tr in group),
            temperature0=np.array([a["temperature0"] for a in arrs], float),
            effort_level=pad("effort_level", False),
            q_step=np.array([lattice_step(np.asarray(tr["position"], float)) for tr in group])))
    return batches


def _delayed(x, delay, dt):
    """x (T,) delayed by ``delay`` [s] >= 0 with linear interpolation between past samples."""
    T = x.shape[0]
    f = jnp.arange(T) - jnp.maximum(delay, 0.0) / dt
    f = jnp.clip(f, 0.0, T - 1)
    k0 = jnp.floor(f).astype(jnp.int32)
    w = f - k0
    k1 = jnp.minimum(k0 + 1, T - 1)
    return (1.0 - w) * x[k0] + w * x[k1]


@physics
def rollout(cfg: StepConfig, params, consts: Constants, q_target, enable, v_supply, q0, dq0,
            temperature0=None) -> Outputs:
    """Closed-loop rollout of one log (arrays (T,)) from the initial state (q0, dq0).

    temperature0 [degC]: the winding's initial temperature for ``+thermal`` models (the log's first
    logged temperature); None or NaN: the parameter ``ambient_temperature``. Unused otherwise."""
    return _scan(cfg, params, consts, q_target, enable, v_supply, q0, dq0, temperature0)[1]


def _scan(cfg: StepConfig, params, consts: Constants, q_target, enable, v_supply, q0, dq0, temperature0):
    """(final :class:`State`, :class:`Outputs` (T,)) of :func:`rollout`."""
    step = make_step(cfg)
    dt = consts.law.dt
    x = Inputs(_delayed(q_target, params["delay"], dt), _delayed(enable, params["delay"], dt), v_supply)
    # the controller's memory of past positions is reconstructed from the measured initial
    # velocity, so a log cut while moving does not start with a spurious velocity estimate of 0
    s0 = State(q0, dq0, q0, dq0, q0 - dq0 * dt, q0 - 2.0 * dq0 * dt,
               initial_temperature(cfg, params, temperature0))

    def body(s, xi):
        return step(params, consts, s, xi)

    return jax.lax.scan(body, s0, x)


def initial_temperature(cfg: StepConfig, params, temperature0=None):
    """The winding's initial temperature [degC] of a ``+thermal`` rollout: ``temperature0`` where
    finite, else ``params["ambient_temperature"]``; None for models without ``+thermal``."""
    if not cfg.thermal:
        return None
    amb = params["ambient_temperature"]
    if temperature0 is None:
        return jnp.asarray(amb)
    return jnp.where(jnp.isfinite(temperature0), temperature0, amb)


def _temperature0(arrays):
    """(B,) initial temperatures of a batch's arrays (NaN: not logged; older array dicts: NaN)."""
    t0 = arrays.get("temperature0")
    return jnp.full(arrays["q_meas"].shape[:1], jnp.nan) if t0 is None else t0


@physics
@partial(jax.jit, static_argnames=("cfg",))
def rollout_batch(cfg: StepConfig, params, arrays) -> Outputs:
    """Rollouts of every log of a batch (leaves (B, T)); ``arrays`` from :meth:`Batch.arrays`."""
    return _scan_batch(cfg, params, arrays)[1]


@physics
@partial(jax.jit, static_argnames=("cfg",))
def rollout_batch_state(cfg: StepConfig, params, arrays) -> tuple[State, Outputs]:
    """:func:`rollout_batch` and the final :class:`State` of every log (leaves (B,)): the one-joint
    scan backend of :func:`actuatorlab.sim.backends.rollout` (:mod:`actuatorlab.sim.scan`)."""
    return _scan_batch(cfg, params, arrays)


def _scan_batch(cfg: StepConfig, params, arrays) -> tuple[State, Outputs]:
    def one(consts, qt, en, vs, qm, dqm, t0):
        return _scan(cfg, params, consts, qt, en, vs, qm[0], dqm[0], t0)

    return jax.vmap(one)(arrays["consts"], arrays["q_target"], arrays["enable"], arrays["v_supply"],
                         arrays["q_meas"], arrays["dq_meas"], _temperature0(arrays))


@physics
@partial(jax.jit, static_argnames=("cfg",))
def one_step(cfg: StepConfig, params, arrays):
    """One-step-ahead prediction from every *measured* state: q_pred[k+1] from (q[k], dq[k]).

    Returns (B, T) with q_pred[:, 0] = q_meas[:, 0]. The winding temperature of a ``+thermal``
    model is not measured: each step starts from the temperature of the closed-loop rollout of
    the same log at that time (it depends on the inputs up to then only).
    """
    step = make_step(cfg)

    def one(consts, qt, en, vs, qm, dqm, t0):
        dt = consts.law.dt
        x = Inputs(_delayed(qt, params["delay"], dt), _delayed(en, params["delay"], dt), vs)
        # the controller's memory as in :func:`rollout`: measured past positions, reconstructed
        # from the initial velocity before the log starts
        back1 = qm[:1] - dqm[:1] * dt
        back2 = qm[:1] - 2.0 * dqm[:1] * dt
        q_prev = jnp.concatenate([back1, qm[:-1]])
        q_prev2 = jnp.concatenate([back2, back1, qm[:-2]])
        temp = (rollout(cfg, params, consts, qt, en, vs, qm[0], dqm[0], t0).temperature
                if cfg.thermal else None)
        s = State(qm, dqm, qm, dqm, q_prev, q_prev2, temp)
        new, _ = jax.vmap(lambda si, xi: step(params, consts, si, xi))(s, x)
        return jnp.concatenate([qm[:1], new.q[:-1]])

    return jax.vmap(one)(arrays["consts"], arrays["q_target"], arrays["enable"], arrays["v_supply"],
                         arrays["q_meas"], arrays["dq_meas"], _temperature0(arrays))

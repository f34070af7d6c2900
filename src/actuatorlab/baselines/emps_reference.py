"""Plain-NumPy reference simulator of the EMPS closed loop (the oracle for the JAX version).

Source of the loop: Janot, Gautier, Brunot, *Data Set and Reference Models of EMPS*, 2019
(nonlinearbenchmark.org), eqs. (1), (3), (6), (7), section 2.2 (velocity filter) and section 3.5
(simulation settings: 10 V saturation, filter [0.5 0.5], sample time ``tec = t(10) - t(9)``).
Timing details not written in the paper (unit delay, time base, logging) were settled by
reproducing the paper's printed relative errors; docs/emps.md gives the evidence.

Discrete-time equations (k = 0 .. T-1, dt = (t[T-1] - t[0]) / (T - 1), d = ``output_delay``)::

    controller at sample k (uses the plant position at t_k; encoder noise and its 5e-8 m
    quantum are not modelled inside the loop):
        qf[k]   = 0.5 q[k] + 0.5 q[k-1]                 2-tap average, q[-1] = q[0]
        qdh[k]  = (qf[k] - qf[k-1]) / dt                backward difference, qf[-1] = q[0]
                = (q[k] - q[k-2]) / (2 dt)              (same thing, q[-2] = q[-1] = q[0])
        u[k]    = kv (kp (qg[k] - q[k]) - qdh[k])       eq. (6)                      [V]
        us[k]   = clip(u[k], -v_sat, +v_sat)                                          [V]
        v[k]    = us[k - d]  (v[k] = 0 for k < d)       d = 1: the benchmark's unit delay
        force[k] = gtau v[k]                            eq. (7)                      [N]
    plant, v[k] held constant on [t_k, t_k + dt):
        qdd = (gtau v[k] - Fv qd - Fc s(qd) - offset) / M          eq. (3)
        (with f_ext: gtau v[k] + f_ext[k] in place of gtau v[k])
        (q[k+1], qd[k+1]) = classic RK4 (stages at 0, h/2, h/2, h) of (q, qd)' = (qd, qdd)
                            from (q[k], qd[k]) with ``substeps`` equal steps h = dt / substeps;
                            s(x) = sign(x) with sign(0) = 0 (``coulomb_eps`` = 0), or
                            tanh(x / coulomb_eps) if coulomb_eps > 0; evaluated at every stage
        qdd[k]  = (gtau v[k] - Fv qd[k] - Fc s(qd[k]) - offset) / M   (logged acceleration)
    initial state: q[0] = q0, qd[0] = qd0 (default 0), filter memories at q0, delay memory 0.

With ``output_delay=1``, ``substeps=10`` and the benchmark's time base (see
:func:`benchmark_time_base`), the published IDIM-LS parameters give position / velocity /
acceleration / force errors 0.01375 / 0.2293 / 8.593 / 5.847 % on DATA_EMPS, against the printed
0.013752 / 0.22911 / 8.6036 / 5.848 %. The logged data themselves satisfy the controller law
with d = 0 (vir[k] is computed from qm[k], qm[k-1], qm[k-2] and qg[k]); on the data's own time
base d = 0 also fits the measurements better than d = 1 (see docs/emps.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import signal

from actuatorlab.baselines.idim_ls import (
    IDIM_PARAMETER_NAMES,
    PUBLISHED_IDIM_LS,
    central_difference,
    zero_phase_filter,
)
from actuatorlab.errors import DataError, ModelError
from ..logs.importers.emps import read_mat

__all__ = [
    "EmpsLoop",
    "EmpsRecord",
    "PUBLISHED_IDIM_LS_PARAMS",
    "PUBLISHED_SIMULATION_ERRORS_PCT",
    "bang_bang_reference",
    "benchmark_simulation",
    "benchmark_time_base",
    "load_emps_mat",
    "measured_signals",
    "relative_errors",
    "simulate_emps_closed_loop",
]

#: The published IDIM-LS parameters (Janot et al. 2019, section 3.4): M [kg], Fv [N.s/m],
#: Fc [N], offset [N].
PUBLISHED_IDIM_LS_PARAMS: dict[str, float] = {n: PUBLISHED_IDIM_LS[n] for n in IDIM_PARAMETER_NAMES}

#: Closed-loop simulation errors printed in the paper (section 3.5) for DATA_EMPS [%], keyed like
#: :func:`relative_errors`: q position, qd velocity, qdd acceleration, force.
PUBLISHED_SIMULATION_ERRORS_PCT: dict[str, float] = {
    "q": 0.013752,
    "qd": 0.22911,
    "qdd": 8.6036,
    "force": 5.848,
}

SIGNALS: tuple[str, ...] = ("q", "qd", "qdd", "force")


@dataclass(frozen=True, eq=False)
class EmpsRecord:
    """One EMPS benchmark file (``DATA_EMPS.mat`` layout).

    Attributes:
        t: (T,) [s] sample times (1 kHz).
        qm: (T,) [m] measured position, load side (encoder quantum 5e-8 m).
        qg: (T,) [m] reference position.
        vir: (T,) [V] measured controller output.
        gtau: [N/V] drive gain (force = gtau * vir).
        kp: [1/s] position-loop gain.
        kv: [V/(m/s)] velocity-loop gain.
        source_file: the file it was read from.
    """

    t: np.ndarray
    qm: np.ndarray
    qg: np.ndarray
    vir: np.ndarray
    gtau: float
    kp: float
    kv: float
    source_file: str = ""


def load_emps_mat(path: str | Path) -> EmpsRecord:
    """Read an EMPS ``.mat`` file (variables t, qm, qg, vir, gtau, kp, kv).

    Raises:
        DataError: the file is missing or unreadable, or a variable is missing or malformed.
    """

    path = Path(path)
    raw = read_mat(path, numeric=("t", "qm", "qg", "vir", "gtau", "kp", "kv"))  # structure checked first
    missing = [k for k in ("t", "qm", "qg", "vir", "gtau", "kp", "kv") if k not in raw]
    if missing:
        raise DataError(path, f"missing variables {missing}")
    series = {k: np.asarray(raw[k], dtype=np.float64).reshape(-1) for k in ("t", "qm", "qg", "vir")}
    n = series["t"].shape[0]
    for k, x in series.items():
        if x.shape[0] != n:
            raise DataError(path, f"{k} has {x.shape[0]} samples, t has {n}")
        if not np.all(np.isfinite(x)):
            raise DataError(path, f"{k} has non-finite values")
    scalars = {}
    for k in ("gtau", "kp", "kv"):
        arr = np.asarray(raw[k], dtype=np.float64).reshape(-1)
        if arr.shape[0] != 1:
            raise DataError(path, f"{k} should be a scalar, has shape {np.shape(raw[k])}")
        scalars[k] = float(arr[0])
    return EmpsRecord(source_file=str(path), t=series["t"], qm=series["qm"], qg=series["qg"], vir=series["vir"],
                      gtau=scalars["gtau"], kp=scalars["kp"], kv=scalars["kv"])


def _uniform_step(t: np.ndarray) -> float:
    n = t.shape[0]
    dt = (t[-1] - t[0]) / (n - 1)
    if not dt > 0 or np.max(np.abs(np.diff(t) - dt)) > 0.01 * dt:
        raise DataError(None, "t is not uniformly sampled (steps differ by more than 1 %)")
    return float(dt)


@dataclass(frozen=True)
class EmpsLoop:
    """The EMPS cascade controller and its integration (see :func:`simulate_emps_closed_loop`).

    Attributes:
        kp: [1/s] position gain.
        kv: [V/(m/s)] velocity gain.
        gtau: [N/V] drive gain.
        v_sat: [V] controller output saturation.
        substeps: RK4 steps per sample (>= 1).
        output_delay: samples between computing the controller output and applying it
            (1 = the benchmark's Simulink unit delay, 0 = applied at once).
        coulomb_eps: [m/s] 0 for sign(qd) (sign(0) = 0); > 0 for tanh(qd / coulomb_eps).
    """

    kp: float
    kv: float
    gtau: float
    v_sat: float = 10.0
    substeps: int = 1
    output_delay: int = 1
    coulomb_eps: float = 0.0


def _closed_loop_inputs(t: np.ndarray, qg: np.ndarray, params: dict[str, float], loop: EmpsLoop,
                        f_ext: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, list[float], float]:
    """(t, qg, external force per sample, dt) checked: same lengths, parameters present, uniform t."""
    t = np.asarray(t, dtype=np.float64).reshape(-1)
    qg = np.asarray(qg, dtype=np.float64).reshape(-1)
    if t.shape != qg.shape or t.shape[0] < 3:
        raise DataError(None, f"t and qg must have the same length >= 3, got {t.shape[0]} and "
                        f"{qg.shape[0]}")
    missing = [n for n in IDIM_PARAMETER_NAMES if n not in params]
    if missing:
        raise ModelError(f"EMPS parameters lack {missing}; need {list(IDIM_PARAMETER_NAMES)}")
    if loop.substeps < 1 or loop.output_delay < 0:
        raise ValueError(f"substeps must be >= 1 and output_delay >= 0, got {loop.substeps}, "
                         f"{loop.output_delay}")
    if f_ext is None:
        fe = [0.0] * t.shape[0]
    else:
        f_ext = np.asarray(f_ext, dtype=np.float64).reshape(-1)
        if f_ext.shape != t.shape:
            raise DataError(None, f"f_ext has {f_ext.shape[0]} samples, t has {t.shape[0]}")
        fe = f_ext.tolist()
    return t, qg, fe, _uniform_step(t)


def simulate_emps_closed_loop(
    t: np.ndarray,
    qg: np.ndarray,
    q0: float,
    params: dict[str, float],
    loop: EmpsLoop,
    *,
    qd0: float = 0.0,
    f_ext: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Simulate the EMPS cascade P / velocity loop around the rigid-body plant.

    Equations: see the module docstring (index by index).

    Args:
        t: (T,) [s] uniform sample times; dt = (t[-1] - t[0]) / (T - 1).
        qg: (T,) [m] reference position, sampled at t.
        q0: [m] initial position.
        params: {"M" [kg], "Fv" [N.s/m], "Fc" [N], "offset" [N]}.
        loop: gains, saturation, RK4 substeps, output delay, Coulomb smoothing (:class:`EmpsLoop`).
        qd0: [m/s] initial velocity.
        f_ext: (T,) [N] or None: external force added to gtau v[k] on [t_k, t_k + dt), e.g. the
            ``pulses_N`` of DATA_EMPS_PULSES (paper Fig. 2 adds them after gtau). Not part of
            ``v`` / ``force`` / ``v_cmd``; it is part of ``qdd``.

    Returns:
        dict of (T,) arrays: ``q`` [m], ``qd`` [m/s], ``qdd`` [m/s^2] (plant at t_k, under the
        applied v[k]), ``v`` [V] applied (delayed, saturated) controller output, ``force`` [N]
        = gtau v, ``v_cmd`` [V] saturated controller output before the delay, ``qd_hat`` [m/s]
        the controller's velocity estimate.
    """
    t, qg, fe, dt = _closed_loop_inputs(t, qg, params, loop, f_ext)
    substeps, output_delay = loop.substeps, loop.output_delay
    m, fv, fc, off = (float(params[n]) for n in IDIM_PARAMETER_NAMES)
    if not m > 0:
        raise ModelError(f"EMPS mass M must be > 0, got {m}")
    kp, kv, gtau, v_sat = float(loop.kp), float(loop.kv), float(loop.gtau), float(loop.v_sat)
    eps = float(loop.coulomb_eps)
    h = dt / substeps
    inv_m = 1.0 / m

    def s(x: float) -> float:
        if eps > 0.0:
            return math.tanh(x / eps)
        return 1.0 if x > 0.0 else (-1.0 if x < 0.0 else 0.0)

    n = t.shape[0]
    qgl = qg.tolist()
    q_out = np.empty(n)
    qd_out = np.empty(n)
    qdd_out = np.empty(n)
    v_out = np.empty(n)
    vcmd_out = np.empty(n)
    qdh_out = np.empty(n)
    pending = [0.0] * output_delay  # FIFO of computed outputs not yet applied
    x, y = float(q0), float(qd0)
    q_prev, qf_prev = x, x
    for k in range(n):
        # controller at t_k
        qf = 0.5 * x + 0.5 * q_prev
        qdh = (qf - qf_prev) / dt
        u = kv * (kp * (qgl[k] - x) - qdh)
        us = -v_sat if u < -v_sat else (v_sat if u > v_sat else u)
        pending.append(us)
        v = pending.pop(0)
        q_prev, qf_prev = x, qf
        fext = gtau * v + fe[k] - off
        q_out[k], qd_out[k], v_out[k], vcmd_out[k], qdh_out[k] = x, y, v, us, qdh
        qdd_out[k] = (fext - fv * y - fc * s(y)) * inv_m
        if k == n - 1:
            break
        # plant over [t_k, t_k + dt), v held
        for _ in range(substeps):
            a1 = (fext - fv * y - fc * s(y)) * inv_m
            y2 = y + 0.5 * h * a1
            a2 = (fext - fv * y2 - fc * s(y2)) * inv_m
            y3 = y + 0.5 * h * a2
            a3 = (fext - fv * y3 - fc * s(y3)) * inv_m
            y4 = y + h * a3
            a4 = (fext - fv * y4 - fc * s(y4)) * inv_m
            x = x + h / 6.0 * (y + 2.0 * y2 + 2.0 * y3 + y4)
            y = y + h / 6.0 * (a1 + 2.0 * a2 + 2.0 * a3 + a4)
    return {"q": q_out, "qd": qd_out, "qdd": qdd_out, "v": v_out, "force": gtau * v_out,
            "v_cmd": vcmd_out, "qd_hat": qdh_out}


def measured_signals(
    t: np.ndarray,
    qm: np.ndarray,
    vir: np.ndarray,
    gtau: float,
    *,
    cutoff_hz: float = 100.0,
    filter_order: int = 4,
) -> dict[str, np.ndarray]:
    """The benchmark's "measured" q, qd, qdd, force for comparison with a simulation.

    q = zero-phase 4th-order Butterworth (100 Hz) of qm; qd, qdd = central differences of it
    (step = nominal dt); force = gtau vir. As in the paper's simulation script.

    Returns:
        dict of (T,) arrays ``q`` [m], ``qd`` [m/s], ``qdd`` [m/s^2], ``force`` [N].
    """
    t = np.asarray(t, dtype=np.float64).reshape(-1)
    dt = _uniform_step(t)
    b, a = signal.butter(filter_order, cutoff_hz / (0.5 / dt))
    q = zero_phase_filter(b, a, np.asarray(qm, dtype=np.float64).reshape(-1))
    qd = central_difference(q, dt)
    return {"q": q, "qd": qd, "qdd": central_difference(qd, dt),
            "force": gtau * np.asarray(vir, dtype=np.float64).reshape(-1)}


def relative_errors(
    meas: dict[str, np.ndarray],
    sim: dict[str, np.ndarray],
    n_skip: int = 49,
    stop: int | None = None,
) -> dict[str, float]:
    """Relative errors 100 ||y - y_sim|| / ||y|| [%] (paper eq. (11)) for each signal in both dicts.

    Args:
        meas: measured signals, e.g. from :func:`measured_signals` (keys q, qd, qdd, force).
        sim: simulated signals, e.g. from :func:`simulate_emps_closed_loop`.
        n_skip: samples ignored at the start (benchmark: 49, i.e. MATLAB ``n_border = 50``).
        stop: end of the scored window (exclusive), None for the end. Use n_skip / stop to score
            a held-out time window.

    Returns:
        {name: error [%]} for the names of :data:`SIGNALS` present in both dicts.
    """
    out = {}
    for name in SIGNALS:
        if name in meas and name in sim:
            y = np.asarray(meas[name])[n_skip:stop]
            ys = np.asarray(sim[name])[n_skip:stop]
            if y.shape != ys.shape:
                raise ValueError(f"{name}: measured and simulated lengths differ "
                                 f"({y.shape[0]} vs {ys.shape[0]})")
            out[name] = float(100.0 * np.linalg.norm(y - ys) / np.linalg.norm(y))
    return out


def benchmark_time_base(t: np.ndarray) -> np.ndarray:
    """The Simulink clock of the benchmark's simulation: t[0] + k * tec, tec = t[9] - t[8].

    On DATA_EMPS tec = 0.99998396 ms while the data span 24.84 s in 24 840 steps (1 ms mean).
    The published simulation runs on this clock and compares sample k with measured sample k,
    so the simulated record drifts up to 0.4 ms behind the data by the end. This drift dominates
    the published position error (0.0138 % with it, 0.0016 % without).
    """
    t = np.asarray(t, dtype=np.float64).reshape(-1)
    return t[0] + np.arange(t.shape[0]) * (t[9] - t[8])


def benchmark_simulation(
    rec: EmpsRecord,
    params: dict[str, float] | None = None,
    *,
    time_base: str = "benchmark",
    substeps: int = 10,
    output_delay: int = 1,
    qd0: float = 0.0,
    coulomb_eps: float = 0.0,
    n_skip: int = 49,
) -> dict[str, Any]:
    """Run the paper's closed-loop validation on a record and score it.

    Args:
        rec: the record.
        params: plant parameters; default :data:`PUBLISHED_IDIM_LS_PARAMS`.
        time_base: "benchmark" (reproduces the paper: simulate on :func:`benchmark_time_base`
            with qg linearly interpolated onto it, compare index by index) or "data" (simulate
            on the data's own 1 ms grid).
        substeps, output_delay, qd0, coulomb_eps: see :func:`simulate_emps_closed_loop`.
        n_skip: start of the scored window.

    Returns:
        {"errors": {q, qd, qdd, force: [%]}, "sim": simulated dict, "meas": measured dict}.
    """
    params = PUBLISHED_IDIM_LS_PARAMS if params is None else params
    if time_base == "benchmark":
        t_sim = benchmark_time_base(rec.t)
        qg_sim = np.interp(t_sim, rec.t, rec.qg)
    elif time_base == "data":
        t_sim, qg_sim = rec.t, rec.qg
    else:
        raise ValueError(f"time_base must be 'benchmark' or 'data', got {time_base!r}")
    sim = simulate_emps_closed_loop(t_sim, qg_sim, float(rec.qm[0]), params,
                                    EmpsLoop(rec.kp, rec.kv, rec.gtau, 10.0, substeps, output_delay=output_delay,
                                             coulomb_eps=coulomb_eps), qd0=qd0)
    meas = measured_signals(rec.t, rec.qm, rec.vir, rec.gtau)
    return {"errors": relative_errors(meas, sim, n_skip=n_skip), "sim": sim, "meas": meas}


def bang_bang_reference(
    speeds: list[float] | tuple[float, ...],
    durations: list[float] | tuple[float, ...],
    a_max: float,
    dt: float = 1e-3,
    q_start: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """A reference with bang-bang acceleration between speed plateaus (EMPS-like excitation).

    The EMPS excitation (paper section 2.1) moves back and forth at a few constant speeds with
    acceleration bursts in between. Here the reference speed starts at 0, heads for
    ``speeds[i]`` [m/s] with |acceleration| ``a_max`` [m/s^2] (bang-bang), holds it, and after
    ``durations[i]`` [s] (ramp included) heads for the next one; the position is the exact
    integral of this piecewise-linear speed.

    Returns:
        t: (T,) [s] from 0 with step dt; qg: (T,) [m], T = round(sum(durations) / dt) + 1.
    """
    if len(speeds) != len(durations):
        raise ValueError("need one duration per speed")
    n = int(round(sum(durations) / dt)) + 1
    ends = np.cumsum(durations)
    t = np.arange(n) * dt
    vel = np.zeros(n)
    seg = 0
    dv = a_max * dt
    for k in range(1, n):
        while seg < len(ends) - 1 and t[k] > ends[seg] + 0.5 * dt:
            seg += 1
        err = speeds[seg] - vel[k - 1]
        vel[k] = vel[k - 1] + min(max(err, -dv), dv)
    qg = q_start + np.concatenate([[0.0], np.cumsum(0.5 * (vel[1:] + vel[:-1]) * dt)])
    return t, qg

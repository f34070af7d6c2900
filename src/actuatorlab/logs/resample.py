"""Resampling onto a uniform time grid, with a causality rule per channel kind.

Rule: a *commanded* channel is what the controller had sent, so at grid time ``g`` it takes the
last sample at or before ``g`` (zero-order hold; never a future sample): a model driven by the
resampled command sees only what had already been sent. A *measured* or *estimated* channel is
only ever a target (compared with a model's output), so it is linearly interpolated between its
neighbouring samples, which is the best estimate of its value at ``g``.

``latency_s`` is kept as it is for both: a held command is the command in force at ``g`` (a sent
command stays in force until the next one), and an interpolated measurement estimates the signal
at ``g`` itself, so neither adds a delay relative to the grid timestamps. The transformation is
appended to each channel's ``source``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from actuatorlab.errors import DataError
from actuatorlab.logs.format import Trajectory

__all__ = ["infer_dt", "resample_uniform", "uniform_grid", "zero_order_hold", "is_uniform"]


def infer_dt(traj: Trajectory) -> float:
    """[s] median time step of ``traj`` (robust to jitter and to a few gaps)."""
    if traj.n < 2:
        raise DataError(traj.source_file or traj.name, f"cannot infer a time step from {traj.n} sample(s)")
    dt = np.diff(np.asarray(traj.time, dtype=np.float64))
    dt = dt[np.isfinite(dt)]
    if dt.size == 0:
        raise DataError(traj.source_file or traj.name, "cannot infer a time step: no finite time differences")
    return float(np.median(dt))


def is_uniform(traj: Trajectory, rtol: float = 1e-4) -> bool:
    """Whether every step equals the median step within ``rtol`` (relative)."""
    if traj.n < 2:
        return True
    dt = np.diff(traj.time)
    med = float(np.median(dt))
    return bool(med > 0 and np.all(np.abs(dt - med) <= rtol * med))


def uniform_grid(t0: float, t1: float, dt: float) -> np.ndarray:
    """(N,) [s] ``t0 + k*dt`` for k = 0..N-1, the last point at or before ``t1`` (1e-9 relative slack)."""
    n = int(np.floor((t1 - t0) / dt * (1.0 + 1e-12) + 1e-9)) + 1
    return t0 + dt * np.arange(n, dtype=np.float64)


def zero_order_hold(t_src: np.ndarray, x: np.ndarray, t_query: np.ndarray) -> np.ndarray:
    """Value of the last source sample at or before each query time.

    (T,) [s] strictly increasing, (T,), (N,) [s] -> (N,). Query times before ``t_src[0]`` are an
    error (there is no past sample to hold).
    """
    idx = np.searchsorted(t_src, t_query, side="right") - 1
    if np.any(idx < 0):
        raise ValueError("zero_order_hold: query time before the first source sample")
    return np.asarray(x)[idx]


def resample_uniform(traj: Trajectory, dt: float) -> Trajectory:
    """``traj`` on the uniform grid ``t0, t0+dt, ...`` up to its last time (commanded: zero-order
    hold of the last sample at or before each grid time; measured/estimated: linear interpolation).

    Args:
        traj: a validated trajectory (strictly increasing time).
        dt: [s] grid step, > 0.

    Returns:
        A new trajectory; ``setup.extra["resampled_dt_s"]`` records ``dt``.
    """
    where = traj.source_file or traj.name
    if not (np.isfinite(dt) and dt > 0):
        raise DataError(where, f"resample step must be positive, got {dt!r}")
    t = np.asarray(traj.time, dtype=np.float64)
    if traj.n < 2:
        raise DataError(where, f"cannot resample {traj.n} sample(s)")
    if not np.all(np.diff(t) > 0):
        raise DataError(where, "cannot resample: timestamps are not strictly increasing (load it with strict=True)")
    grid = uniform_grid(float(t[0]), float(t[-1]), float(dt))
    # a sample stamped up to 1e-3 dt after a grid time is simultaneous (timestamp jitter: EMPS
    # stamps wander by 3e-8 s around the 1 ms grid, which would otherwise delay every command)
    idx = np.searchsorted(t, grid + 1e-3 * dt, side="right") - 1  # >= 0 since grid[0] == t[0]
    hold_age = grid - t[idx]
    data: dict[str, np.ndarray] = {}
    channels = {}
    for name, ch in traj.channels.items():
        x = np.asarray(traj.data[name], dtype=np.float64)
        if ch.kind == "commanded":
            data[name] = x[idx]
            how = (f"zero-order hold onto a uniform {dt * 1e3:g} ms grid (last sample at or before each grid "
                   f"time; held value up to {hold_age.max() * 1e3:.3g} ms old)")
        else:
            data[name] = np.interp(grid, t, x)
            how = f"linear interpolation onto a uniform {dt * 1e3:g} ms grid (uses the next sample: target only)"
        channels[name] = dataclasses.replace(ch, source=f"{ch.source}; {how}")
    setup = dataclasses.replace(traj.setup, extra={**traj.setup.extra, "resampled_dt_s": float(dt)})
    return traj.replace(time=grid, data=data, channels=channels, setup=setup)

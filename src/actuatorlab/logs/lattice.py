"""The lattice a log's positions lie on: the encoder's step, read from the samples alone.

An encoder that counts steps of ``s`` logs positions ``q = q0 + n s``; the step is what a perfect
model of the joint can never beat (the position is known only to within the cell ``[-s/2, s/2]``
about each reading). :func:`lattice_step` reads it from the logged positions; the sensor floor
(:mod:`actuatorlab.evaluate.diagnose`) and the fit's censored objective
(:mod:`actuatorlab.identify.censor`) use it.
"""

from __future__ import annotations

import numpy as np

__all__ = ["lattice_step"]


def lattice_step(q: np.ndarray, *, tol: float = 0.05, share: float = 0.95) -> float:
    """[unit of q] the step of the lattice the positions ``q`` (T,) lie on; 0 if none.

    Candidates are the smallest non-zero absolute difference ``d_min`` (differences below 1e-9 of
    the range are float noise) and its fractions ``d_min / k``, k = 1..4 (a fast log may never move
    by one step). The first candidate ``s`` for which at least ``share`` of the differences are
    within ``tol`` steps of a multiple of ``s`` wins; it is then refined as the median of
    ``d / round(d / s)``. No candidate passing means continuous positions (noise, a filter).
    """
    q = np.asarray(q, np.float64)
    q = q[np.isfinite(q)]
    if q.size < 3:
        return 0.0
    scale = max(float(np.ptp(q)), float(np.max(np.abs(q))), 1e-12)
    d = np.abs(np.diff(q))
    d = d[d > 1e-9 * scale]
    if d.size < 2:
        return 0.0
    d_min = float(np.min(d))
    for k in (1, 2, 3, 4):
        s = d_min / k
        n = d / s
        if np.mean(np.abs(n - np.round(n)) <= tol) >= share and np.median(np.round(n)) < 1e6:
            return float(np.median(d / np.maximum(np.round(n), 1.0)))
    return 0.0

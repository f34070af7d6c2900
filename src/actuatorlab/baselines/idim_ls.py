"""IDIM-LS: the inverse dynamic identification model with least squares, as used by the EMPS
benchmark (Janot, Gautier, Brunot, *Data Set and Reference Models of EMPS*, 2019, section 3).

Model (rigid prismatic axis, symmetric Coulomb + viscous friction, eq. (1)-(2) of the paper)::

    tau(t) = gtau * v(t) = M qdd(t) + Fv qd(t) + Fc sign(qd(t)) + offset
           = phi(qd, qdd) theta,   phi = [qdd, qd, sign(qd), 1],   theta = [M, Fv, Fc, offset]

Estimation procedure (paper section 3.1-3.3; the settings are those of the benchmark's
IDIM-LS script, which this module reproduces to the printed digits on DATA_EMPS):

1. ``q_f = filtfilt(butter(4, 100 Hz), q)``: 4th-order Butterworth low-pass, cut-off
   ``5 * 20 Hz`` (five times the 20 Hz position-loop bandwidth), run forward and backward with
   MATLAB's edge handling (odd reflection of ``3 * order`` samples, steady-state initial
   conditions).
2. ``qd = diffcent(q_f) / dt``, ``qdd = diffcent(qd) / dt`` where ``diffcent`` is the central
   difference ``(y[k+1] - y[k-1]) / 2`` with one-sided differences at both ends
   (``numpy.gradient``). ``dt`` is the nominal step (1 ms for EMPS).
3. Drop the first ``n_skip = 49`` samples (the script keeps ``n_border:N`` with
   ``n_border = 50``, 1-based) to remove the start-up edge; the end is kept.
4. "Parallel decimation": every column of ``Phi = [qdd, qd, sign(qd), 1]`` and the force
   ``y = gtau * v`` go through MATLAB's ``decimate(x, r)``: an 8th-order Chebyshev type-I
   low-pass (0.05 dB ripple, cut-off ``0.8 / r`` of Nyquist) run forward and backward, then one
   sample in ``r`` is kept, aligned so that the *last* sample is kept. ``r = 10``
   (``round(0.8 * 500 Hz / (2 * 20 Hz))``), so 2 480 rows remain on DATA_EMPS.
5. ``theta = argmin ||y - Phi theta||`` (ordinary least squares); the error is
   ``e = y - Phi theta``; ``sigma_i = std(e) * sqrt(inv(Phi' Phi)_ii)`` with the unbiased
   (N-1) standard deviation; the force relative error is ``100 ||e|| / ||y||`` [%] (eq. (11));
   the condition number is that of the decimated ``Phi``; ``|diag R|`` is from the QR
   factorisation of the *undecimated* ``Phi`` (as printed in the paper).

Published on DATA_EMPS (paper, section 3.4): M = 95.1089 (sigma 0.1085) kg, Fv = 203.5034
(1.1460) N.s/m, Fc = 20.3935 (0.1012) N, offset = -3.1648 (0.0444) N, cond = 25.9883, error norm
108.7569 N, relative error 4.0834 %, error std 2.1843 N. This module gives the same digits.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import signal

from actuatorlab.errors import DataError, ModelError

__all__ = [
    "IDIM_PARAMETER_NAMES",
    "PUBLISHED_IDIM_LS",
    "central_difference",
    "decimate",
    "fit_idim_ls",
    "force_relative_error",
    "idim_observation",
    "zero_phase_filter",
]

#: Order of theta and of the columns of the observation matrix.
IDIM_PARAMETER_NAMES: tuple[str, ...] = ("M", "Fv", "Fc", "offset")

#: IDIM-LS results printed in Janot et al. 2019, section 3.4, for DATA_EMPS. Units: M [kg],
#: Fv [N.s/m], Fc [N], offset [N]; force_rel_err_pct [%]; error_norm, error_std [N].
PUBLISHED_IDIM_LS: dict[str, float] = {
    "M": 95.1089,
    "Fv": 203.5034,
    "Fc": 20.3935,
    "offset": -3.1648,
    "sigma_M": 0.1085,
    "sigma_Fv": 1.1460,
    "sigma_Fc": 0.1012,
    "sigma_offset": 0.0444,
    "cond": 25.9883,
    "force_rel_err_pct": 4.0834,
    "error_norm": 108.7569,
    "error_std": 2.1843,
}


def zero_phase_filter(b: np.ndarray, a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Forward-backward IIR filtering with MATLAB ``filtfilt``'s edge handling.

    Args:
        b, a: transfer-function coefficients of the filter.
        x: (T,) signal.

    Returns:
        (T,) filtered signal. The edges are extended by odd reflection of
        ``3 * (max(len(a), len(b)) - 1)`` samples (MATLAB's pad length; SciPy's default is three
        samples longer) and the filter starts in steady state.
    """
    padlen = 3 * (max(len(a), len(b)) - 1)
    return signal.filtfilt(b, a, np.asarray(x, dtype=np.float64), padtype="odd", padlen=padlen)


def central_difference(y: np.ndarray, dt: float) -> np.ndarray:
    """Central difference ``(y[k+1] - y[k-1]) / (2 dt)``, one-sided ``/ dt`` at both ends.

    This is the ``diffcent`` derivative of the robotics identification literature
    (Gautier 1997) used by the EMPS scripts.

    Args:
        y: (T,) samples, T >= 2.
        dt: [s] sample step.

    Returns:
        (T,) derivative [unit of y / s].
    """
    return np.gradient(np.asarray(y, dtype=np.float64), dt)


def decimate(x: np.ndarray, r: int) -> np.ndarray:
    """MATLAB-style ``decimate(x, r)``: zero-phase Chebyshev-I low-pass, then keep 1 sample in r.

    Filter: ``cheby1(8, 0.05 dB, 0.8 / r)`` run through :func:`zero_phase_filter`. Kept samples
    (0-based): ``s, s + r, ...`` with ``s = r - (r * ceil(T / r) - T) - 1``, so the last sample
    is always kept (SciPy's ``signal.decimate`` starts at 0 instead).

    Args:
        x: (T,) signal.
        r: decimation factor, >= 1.

    Returns:
        (ceil(T / r),) decimated signal.
    """
    x = np.asarray(x, dtype=np.float64)
    if r == 1:
        return x.copy()
    b, a = signal.cheby1(8, 0.05, 0.8 / r)
    y = zero_phase_filter(b, a, x)
    n = x.shape[0]
    n_out = -(-n // r)
    start = r - (r * n_out - n) - 1
    return y[start::r]


def _check_inputs(t: np.ndarray, q: np.ndarray, v_ctrl: np.ndarray, min_len: int) -> tuple:
    t = np.asarray(t, dtype=np.float64).reshape(-1)
    q = np.asarray(q, dtype=np.float64).reshape(-1)
    v_ctrl = np.asarray(v_ctrl, dtype=np.float64).reshape(-1)
    if not (t.shape == q.shape == v_ctrl.shape):
        raise DataError(None, f"t, q and v_ctrl differ in length: {t.shape[0]}, {q.shape[0]}, "
                        f"{v_ctrl.shape[0]}")
    if t.shape[0] < min_len:
        raise DataError(None, f"{t.shape[0]} samples; IDIM-LS with these settings needs at "
                        f"least {min_len}")
    for name, x in (("t", t), ("q", q), ("v_ctrl", v_ctrl)):
        if not np.all(np.isfinite(x)):
            raise DataError(None, f"{name} has non-finite values (first at sample "
                            f"{int(np.argmin(np.isfinite(x)))})")
    if np.any(np.diff(t) <= 0):
        raise DataError(None, "t is not strictly increasing")
    return t, q, v_ctrl


def idim_observation(
    t: np.ndarray,
    q: np.ndarray,
    v_ctrl: np.ndarray,
    gtau: float,
    *,
    cutoff_hz: float = 100.0,
    filter_order: int = 4,
    decimation: int = 10,
    n_skip: int = 49,
) -> tuple[np.ndarray, np.ndarray]:
    """Build the decimated IDIM observation matrix and force vector (steps 1-4 of the module doc).

    Args:
        t: (T,) [s] sample times (uniform; the nominal step is ``(t[-1] - t[0]) / (T - 1)``).
        q: (T,) [m] measured position.
        v_ctrl: (T,) [V] measured controller output.
        gtau: [N/V] drive gain; force = gtau * v_ctrl.
        cutoff_hz: [Hz] Butterworth cut-off for the position (benchmark: 5 x 20 Hz).
        filter_order: Butterworth order (benchmark: 4).
        decimation: decimation factor r (benchmark: 10).
        n_skip: samples dropped at the start before decimation (benchmark: 49).

    Returns:
        phi: (ceil((T - n_skip) / r), 4) columns [qdd [m/s^2], qd [m/s], sign(qd) [1], 1 [1]].
        y: (ceil((T - n_skip) / r),) [N] decimated force.
    """
    t, q, v_ctrl = _check_inputs(t, q, v_ctrl, min_len=n_skip + 30 * max(decimation, 1))
    dt = (t[-1] - t[0]) / (t.shape[0] - 1)
    wn = cutoff_hz / (0.5 / dt)
    if not 0.0 < wn < 1.0:
        raise DataError(None, f"cutoff {cutoff_hz} Hz is not below the Nyquist frequency "
                        f"{0.5 / dt:.1f} Hz")
    b, a = signal.butter(filter_order, wn)
    q_f = zero_phase_filter(b, a, q)
    qd = central_difference(q_f, dt)
    qdd = central_difference(qd, dt)
    raw = np.column_stack([qdd, qd, np.sign(qd), np.ones_like(qd)])[n_skip:]
    force = gtau * v_ctrl[n_skip:]
    phi = np.column_stack([decimate(raw[:, i], decimation) for i in range(raw.shape[1])])
    return phi, decimate(force, decimation)


def fit_idim_ls(
    t: np.ndarray,
    q: np.ndarray,
    v_ctrl: np.ndarray,
    gtau: float,
    *,
    cutoff_hz: float = 100.0,
    filter_order: int = 4,
    decimation: int = 10,
    n_skip: int = 49,
) -> dict[str, Any]:
    """IDIM-LS estimate of theta = [M, Fv, Fc, offset] from one closed-loop record.

    Arguments are those of :func:`idim_observation` (the defaults are the benchmark's).

    Returns:
        dict with
        ``M`` [kg], ``Fv`` [N.s/m], ``Fc`` [N], ``offset`` [N];
        ``sigma_M``, ``sigma_Fv``, ``sigma_Fc``, ``sigma_offset`` (same units): standard
        deviations ``std(e) sqrt(diag(inv(Phi' Phi)))``;
        ``rel_sigma_pct``: {name: 100 sigma / |value|} [%];
        ``cond``: condition number of the decimated Phi;
        ``force_rel_err_pct``: 100 ||e|| / ||y|| [%];
        ``error_norm`` [N], ``error_std`` [N] (N-1 normalisation);
        ``abs_diag_r``: {name: |R_ii|} of the QR of the undecimated Phi (what the paper prints);
        ``n_rows``: rows of the decimated Phi.
    """
    t_, q_, v_ = _check_inputs(t, q, v_ctrl, min_len=n_skip + 30 * max(decimation, 1))
    phi, y = idim_observation(t_, q_, v_, gtau, cutoff_hz=cutoff_hz, filter_order=filter_order,
                              decimation=decimation, n_skip=n_skip)
    theta, *_ = np.linalg.lstsq(phi, y, rcond=None)
    err = y - phi @ theta
    err_std = float(np.std(err, ddof=1))
    sigma = err_std * np.sqrt(np.diag(np.linalg.inv(phi.T @ phi)))
    # |diag R| of the undecimated observation matrix, as the paper prints it.
    dt = (t_[-1] - t_[0]) / (t_.shape[0] - 1)
    b, a = signal.butter(filter_order, cutoff_hz / (0.5 / dt))
    qd = central_difference(zero_phase_filter(b, a, q_), dt)
    raw = np.column_stack([central_difference(qd, dt), qd, np.sign(qd), np.ones_like(qd)])
    r_diag = np.abs(np.diag(np.linalg.qr(raw[n_skip:], mode="r")))
    out: dict[str, Any] = {}
    for i, name in enumerate(IDIM_PARAMETER_NAMES):
        out[name] = float(theta[i])
        out[f"sigma_{name}"] = float(sigma[i])
    out["rel_sigma_pct"] = {n: float(100 * sigma[i] / abs(theta[i]))
                            for i, n in enumerate(IDIM_PARAMETER_NAMES)}
    out["cond"] = float(np.linalg.cond(phi))
    out["force_rel_err_pct"] = float(100 * np.linalg.norm(err) / np.linalg.norm(y))
    out["error_norm"] = float(np.linalg.norm(err))
    out["error_std"] = err_std
    out["abs_diag_r"] = {n: float(r_diag[i]) for i, n in enumerate(IDIM_PARAMETER_NAMES)}
    out["n_rows"] = int(phi.shape[0])
    return out


def force_relative_error(
    params: dict[str, float],
    t: np.ndarray,
    q: np.ndarray,
    v_ctrl: np.ndarray,
    gtau: float,
    **observation_kwargs: Any,
) -> float:
    """Force reconstruction error 100 ||y - Phi theta|| / ||y|| [%] of given parameters on a record.

    This is the paper's cross-test validation (section 3.4, Script IDIM LS CTV): ``Phi`` and
    ``y`` are built from the *new* record with :func:`idim_observation` (same keyword options),
    ``theta`` comes from elsewhere.

    Args:
        params: {"M" [kg], "Fv" [N.s/m], "Fc" [N], "offset" [N]}.
        t, q, v_ctrl, gtau: the record, as in :func:`idim_observation`.
    """
    missing = [n for n in IDIM_PARAMETER_NAMES if n not in params]
    if missing:
        raise ModelError(f"EMPS parameters lack {missing}; need {list(IDIM_PARAMETER_NAMES)}")
    phi, y = idim_observation(t, q, v_ctrl, gtau, **observation_kwargs)
    theta = np.array([params[n] for n in IDIM_PARAMETER_NAMES], dtype=np.float64)
    return float(100 * np.linalg.norm(y - phi @ theta) / np.linalg.norm(y))

"""Local identifiability of fitted parameters from the residual Jacobian (Gauss-Newton).

For residuals r(theta) in R^N at the optimum theta_hat with Jacobian J = dr/dtheta (N x p)::

    sigma^2 = SSR / (N - p),            SSR = r^T r
    Cov     = sigma^2 (J^T J)^+         (pseudo-inverse; exact inverse when J has full rank)
    se_i    = sqrt(Cov_ii),  rse_i = se_i / |theta_i|
    Corr_ij = Cov_ij / (se_i se_j)

(Seber & Wild, "Nonlinear Regression", Wiley 1989, sec. 2.1; Bates & Watts, "Nonlinear Regression
Analysis and Its Applications", 1988, ch. 2.) The pseudo-inverse and the condition number are
computed on the column-scaled Jacobian J D, D = diag(1 / ||J_:,i||), so that the units of the
parameters do not decide what counts as ill-conditioned:

    Cov = sigma^2 D ((J D)^T (J D))^+ D,     condition_number = cond((J D)^T (J D)) = (s_max / s_min)^2

with s the singular values of J D. Rank is the number of s above max(N, p) * eps * s_max.
Parameters with a component above 1e-3 in a null-space direction are listed as ``unidentifiable``:
their pseudo-inverse standard error is the minimum-norm value, the true one is unbounded.

These errors assume independent, identically distributed residuals. Residuals of trajectory
fits are strongly autocorrelated (one bad sample drags its neighbours), so the effective number of
independent residuals is much smaller than N and the errors are optimistic; correlations and the
condition number, which do not depend on sigma, are the more robust output.

**What the logs determine at all** (``sensitivity``): the Jacobian errors above can call a parameter
well determined when the logs barely depend on it (its residual column is small but not zero, and
the residual level is the sensors'). So each parameter is also moved by itself to
``theta_i (1 -+ step)`` (``step`` = :data:`SENSITIVITY_STEP`, 10 %), the others held at the optimum,
and the in-sample position MAE is compared with the optimum's::

    s_i^-+ = MAE(theta_i (1 -+ step)) / MAE(theta_hat) - 1,      s_i = min(s_i^-, s_i^+)

Refitting the others could only lower these increases (the profile of the MAE lies below the
one-at-a-time cut), so ``|s_i| < MIN_GAIN`` (:data:`~actuatorlab.identify.nested.MIN_GAIN`, 2 %: the
smallest change the model selection counts as a gain) means: on at least one side the logs cannot
tell theta_i from a value 10 % away, and ``not_determined`` lists it; ``s_i < -MIN_GAIN`` means the
move alone improves the fit, i.e. the search stopped short along theta_i (``improvable``). The converse is not claimed:
a parameter can pass alone and still trade against another (``flagged_pairs``). Measured on the
actuator zoo's two family members, seeds 0-2 (bench/journal/zoo.md): every shared parameter but the
Stribeck exponent is recovered within 10 % and moves the MAE by 4.4 % or more; the exponent (13-55 %
off the truth, with Jacobian errors of 1-3 %) moves it by -0.04 to +1.75 % and is flagged on 9 of
the 12 fits (the 6 default fits among them); the 3 it passes (2.1-2.9 %) are the long-budget
m2+delay fits of xl330_family, at an exponent of 1.10-1.17 (-22 to -27 %), where moving it alone is
visible and trading it against the Stribeck velocity is not.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import ModelError
from .nested import MIN_GAIN

__all__ = ["identifiability", "sensitivity", "classify", "sensitivity_rule", "AUTOCORRELATION_NOTE",
           "SENSITIVITY_STEP"]

AUTOCORRELATION_NOTE = (
    "Standard errors assume independent residuals; trajectory residuals are autocorrelated, so the "
    "effective sample size is smaller than n_residuals and these errors are optimistic (too small). "
    "Correlations and the condition number do not depend on the noise level and are more reliable. "
    "model.json's `uncertainty` (jackknife refits leaving out whole logs or condition groups) gives "
    "standard errors that keep the autocorrelation.")

#: relative move of one parameter in :func:`sensitivity` [-]
SENSITIVITY_STEP = 0.1
_NULL_COMPONENT = 1e-3  # |component| of a null-space vector above which a parameter is involved
_FD_REL_STEP = 6e-6  # ~ eps^(1/3): central-difference step relative to |theta_i|


def _jacobian(residual_fn: Callable, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, str]:
    """(r (N,), J (N, p), method): forward-mode autodiff, or central differences when it is not finite."""
    with jax.enable_x64(True):
        t = jnp.asarray(theta, dtype=jnp.float64)
        r = np.asarray(residual_fn(t), dtype=np.float64).reshape(-1)
        try:
            J = np.asarray(jax.jacfwd(lambda x: jnp.reshape(residual_fn(x), (-1,)))(t), dtype=np.float64)
            ok = bool(np.all(np.isfinite(J)))
        except Exception:  # not traceable (e.g. numpy inside): fall back to differences
            ok = False
        if ok:
            return r, J.reshape(r.size, theta.size), "jacfwd"
        cols = []
        for i in range(theta.size):
            h = _FD_REL_STEP * (abs(float(theta[i])) or 1.0)
            tp, tm = theta.copy(), theta.copy()
            tp[i] += h
            tm[i] -= h
            rp = np.asarray(residual_fn(jnp.asarray(tp)), dtype=np.float64).reshape(-1)
            rm = np.asarray(residual_fn(jnp.asarray(tm)), dtype=np.float64).reshape(-1)
            cols.append((rp - rm) / (tp[i] - tm[i]))
        J = np.stack(cols, axis=1) if cols else np.zeros((r.size, 0))
        return r, J, "finite_differences"


def _finite_or_none(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def sensitivity(residual_fn: Callable[[Any], Any], theta_hat: np.ndarray, names: list[str], *,
                step: float = SENSITIVITY_STEP, min_change: float = MIN_GAIN) -> dict[str, Any]:
    """What the logs determine at all (module docstring): the relative change of the position MAE
    (mean |residual|) when each parameter alone moves to theta_i (1 -+ step).

    Args:
        residual_fn, theta_hat, names: as :func:`identifiability` (2 p evaluations of residual_fn).
        step: relative move [-]; min_change: smallest change of the MAE that counts [-].

    Returns:
        ``step``, ``min_change``, ``mae`` (at theta_hat, residual units), ``change``: name ->
        [s^-, s^+] (an entry None where the moved replay's MAE is not finite, which counts as a
        large change; the whole entry None for a parameter at 0, which has no relative move),
        ``not_determined``: names with -min_change <= min(s^-, s^+) < min_change, ``improvable``:
        names with min(s^-, s^+) < -min_change (the search stopped short of the optimum along them),
        ``rule``: one line.
    """
    theta = np.asarray(theta_hat, dtype=np.float64).reshape(-1)
    names = [str(n) for n in names]
    if len(names) != theta.size:
        raise ModelError(f"sensitivity: {len(names)} names for {theta.size} parameters")
    if not 0.0 < step < 1.0:
        raise ModelError(f"sensitivity: step {step} must lie in (0, 1)")

    def mae(t: np.ndarray) -> float:
        return float(np.mean(np.abs(np.asarray(residual_fn(jnp.asarray(t)), dtype=np.float64))))

    m0 = mae(theta)
    change: dict[str, list[float | None] | None] = {}
    for i, n in enumerate(names):
        if theta[i] == 0.0 or not m0 > 0.0:  # no relative move of 0; nothing to compare with a zero MAE
            change[n] = None
            continue
        side = []
        for f in (1.0 - step, 1.0 + step):
            t = theta.copy()
            t[i] *= f
            side.append(mae(t) / m0 - 1.0)  # inf / nan: the replay left the data far behind (a large change)
        change[n] = [_finite_or_none(x) for x in side]
    low, better = classify(change, min_change)
    return {"step": step, "min_change": min_change, "mae": m0, "change": change, "not_determined": low,
            "improvable": better, "rule": sensitivity_rule(step, min_change, "the in-sample position MAE")}


def classify(change: dict[str, Any], min_change: float) -> tuple[list[str], list[str]]:
    """(not determined, improvable) names of a sensitivity ``change`` record (name -> [s^-, s^+] or
    None; None sides count as large changes): ``-min_change <= min(s) < min_change`` and
    ``min(s) < -min_change`` (the move alone lowers the error: the search stopped short of the optimum)."""
    low: list[str] = []
    better: list[str] = []
    for n, c in change.items():
        if c is None:
            continue
        m = min(x if x is not None else np.inf for x in c)
        if m < -min_change:
            better.append(n)
        elif m < min_change:
            low.append(n)
    return low, better


def sensitivity_rule(step: float, min_change: float, error: str) -> str:
    """The one line a sensitivity record states its rule in."""
    return (f"moved alone by -+{100 * step:g} % of its value, the others at the fit's values, a parameter that changes "
            f"{error} by less than {100 * min_change:g} % on a side is not determined to {100 * step:g} % by these "
            f"logs; one whose move lowers it by more than {100 * min_change:g} % is improvable (the search stopped "
            f"short)")


def identifiability(residual_fn: Callable[[Any], Any], theta_hat: np.ndarray, names: list[str], *,
                    threshold: float = 0.95) -> dict[str, Any]:
    """Gauss-Newton covariance, standard errors and correlations of fitted parameters.

    Args:
        residual_fn: maps the free parameter vector (p,) in physical units to the stacked residual
            vector (N,) (JAX-traceable; evaluated in float64).
        theta_hat: (p,) fitted parameters (physical units).
        names: p parameter names, in the order of ``theta_hat``.
        threshold: |correlation| above which a pair of parameters is flagged.

    Returns:
        A JSON-serializable dict: ``names``; ``stderr`` and ``relative_stderr`` (name -> float,
        None where not finite or theta is 0); ``correlation`` (p x p list of lists); ``flagged_pairs``
        ([a, b, corr] with |corr| > threshold, strongest first); ``condition_number`` (of the
        column-scaled J^T J; None if singular); ``rank``; ``n_residuals``; ``n_parameters``;
        ``sigma2`` [residual units^2]; ``ssr``; ``dof``; ``unidentifiable`` (names in the null
        space of J); ``jacobian_method`` ("jacfwd" | "finite_differences"); ``threshold``; ``note``.
    """
    theta = np.asarray(theta_hat, dtype=np.float64).reshape(-1)
    names = [str(n) for n in names]
    p = theta.size
    if len(names) != p:
        raise ModelError(f"identifiability: {len(names)} names for {p} parameters")
    if not np.all(np.isfinite(theta)):
        raise ModelError("identifiability: theta_hat contains NaN or inf")
    r, J, method = _jacobian(residual_fn, theta)
    n = r.size
    if not np.all(np.isfinite(r)):
        raise ModelError("identifiability: the residuals at theta_hat are not finite")
    if not np.all(np.isfinite(J)):
        raise ModelError("identifiability: the Jacobian is not finite even by finite differences")
    ssr = float(r @ r)
    dof = n - p
    sigma2 = ssr / dof if dof > 0 else float("nan")

    norms = np.linalg.norm(J, axis=0)  # (p,)
    d = np.where(norms > 0, 1.0 / np.where(norms > 0, norms, 1.0), 0.0)
    Js = J * d  # (N, p) column-scaled
    _, s, vt = np.linalg.svd(Js, full_matrices=False) if p else (None, np.zeros(0), np.zeros((0, 0)))
    s_max = float(s[0]) if s.size else 0.0
    tol = max(n, p) * np.finfo(np.float64).eps * s_max
    keep = s > tol
    rank = int(np.sum(keep))
    # (Js^T Js)^+ = V diag(1/s^2) V^T over the kept singular values
    inv = (vt[keep].T / s[keep] ** 2) @ vt[keep] if rank else np.zeros((p, p))
    cov = sigma2 * (d[:, None] * inv * d[None, :])  # (p, p)
    var = np.diag(cov)
    stderr = np.sqrt(np.where(var >= 0, var, np.nan))
    with np.errstate(divide="ignore", invalid="ignore"):
        corr = cov / np.outer(stderr, stderr)
        rel = stderr / np.abs(theta)
    corr = np.clip(corr, -1.0, 1.0)
    np.fill_diagonal(corr, np.where(stderr > 0, 1.0, np.nan))
    cond = (s_max / float(s[-1])) ** 2 if rank == p and p else float("inf")

    null_vecs = vt[~keep]
    unident = [names[i] for i in range(p)
               if norms[i] == 0 or (null_vecs.size and np.max(np.abs(null_vecs[:, i])) > _NULL_COMPONENT)]

    flagged: list[list[Any]] = []  # [name_i, name_j, correlation]
    for i in range(p):
        for j in range(i + 1, p):
            c = corr[i, j]
            if np.isfinite(c) and abs(c) > threshold:
                flagged.append([names[i], names[j], float(c)])
    flagged.sort(key=lambda t: -abs(t[2]))

    return {
        "names": names,
        "stderr": {k: _finite_or_none(v) for k, v in zip(names, stderr)},
        "relative_stderr": {k: _finite_or_none(v) for k, v in zip(names, rel)},
        "correlation": [[_finite_or_none(x) for x in row] for row in corr],
        "flagged_pairs": flagged,
        "condition_number": _finite_or_none(cond),
        "rank": rank,
        "n_residuals": int(n),
        "n_parameters": int(p),
        "sigma2": _finite_or_none(sigma2),
        "ssr": ssr,
        "dof": int(dof),
        "unidentifiable": unident,
        "jacobian_method": method,
        "threshold": float(threshold),
        "note": AUTOCORRELATION_NOTE,
    }

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
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import ModelError

__all__ = ["identifiability", "AUTOCORRELATION_NOTE"]

AUTOCORRELATION_NOTE = (
    "Standard errors assume independent residuals; trajectory residuals are autocorrelated, so the "
    "effective sample size is smaller than n_residuals and these errors are optimistic (too small). "
    "Correlations and the condition number do not depend on the noise level and are more reliable. "
    "model.json's `uncertainty` (jackknife refits leaving out whole logs or condition groups) gives "
    "standard errors that keep the autocorrelation.")

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

"""Levenberg-Marquardt polish of a search's optimum: a local search that stops on convergence.

CMA-ES (:mod:`actuatorlab.identify.search`) finds the basin; from its best point this module
descends to the bottom of it with Gauss-Newton steps on the closed-loop replay residuals. With
z in [0, 1]^n the free parameters in the unit box (:class:`~actuatorlab.identify.space.ParamSpace`),
r(z) (N,) the position errors q_sim - q of every valid sample of the fold's training logs and
J = dr/dz (N, n) their Jacobian, one step solves

    (J^T J + lambda diag(J^T J)) dz = -J^T r          (Levenberg 1944; Marquardt 1963)

and is kept when the objective falls (lambda / 3), else retried with lambda x 10. Coordinates on a
bound whose step points out of the box are held there (projected Levenberg-Marquardt). The
iteration stops when an accepted step lowers the objective by less than ``rtol`` of it, after
``max_iters`` steps, or when lambda exceeds ``max_lambda``.

With a measured controller output (``effort_weight`` w > 0) the objective is that of
:func:`~actuatorlab.identify.fit.make_loss`, log(mean e_q^2) + w log(mean e_u^2); its Gauss-Newton
model stacks the residuals scaled by 1 / ||e_q|| and sqrt(w) / ||e_u|| at the current point. The
position MAE (w = 0) is not a sum of squares: the steps minimise the squared error outside each
reading's quantisation cell (``c(e) = e - clip(e, -h, h)``, :mod:`actuatorlab.identify.censor`; its
Jacobian is J where |e| > h and 0 inside the cell), and the point kept is the iterate with the
lowest censored MAE, the fit's objective (the start included), so the polish never returns a worse
point than it was given.

The Jacobian comes from forward-mode differentiation of the rollout (``jax.jvp``, one tangent per
free parameter, vmapped), with respect to the full parameter vector
(:data:`~actuatorlab.identify.space.PARAM_ORDER`) along directions given as input: one compilation
serves every model of the same structure (compliant, thermal) and the same padded number of
directions (:data:`DIRECTIONS`). Measured on the in-family zoo truth (m2+delay, bench/journal/
fit_rules.md "R45"): from the m1+delay optimum at 2.50 mrad, five steps reach the sensor floor
(0.36 mrad) and the truth's parameters, where CMA-ES fold searches of 500-2000 evaluations stay at
6-8 mrad.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from ..models.registry import ModelSpec
from ..sim.rollout import Batch, rollout_batch
from .censor import censored, half_cells
from .search import FoldSearch, default_workers, run_sliced
from .space import PARAM_ORDER, ParamSpace, full_vectors, substeps_for

__all__ = ["PolishSettings", "POLISH", "DIRECTIONS", "ResidualJacobian", "polish_folds"]

#: padded numbers of directions (free parameters) of the compiled Jacobian: one compilation each
DIRECTIONS = (8, 16, 24)


@dataclass(frozen=True)
class PolishSettings:
    """Budget and stopping rule of :func:`polish_folds`."""

    max_iters: int = 12  #: accepted-or-rejected Jacobians per fold
    rtol: float = 1e-3  #: stop when an accepted step lowers the objective by less than this fraction
    lambda0: float = 1e-3  #: initial damping (relative to diag(J^T J))
    max_lambda: float = 1e6  #: stop when the damping needed exceeds this


#: the polish of every fold search and final refit of the selection
POLISH = PolishSettings()


class ResidualJacobian:
    """Residuals and their Jacobian along given directions, for every log of ``batches``.

    Called with a full parameter vector p (len(PARAM_ORDER),) and directions D (K, P) it returns
    ``rq`` (N,), ``Jq`` (N, K), ``ru`` (N,), ``Ju`` (N, K) over the N = sum of batch sizes x
    samples entries (0 where a sample is padding or not finite; ``ru`` 0 where no controller
    output is measured), ``self.log`` (N,) the log index (scorer order) of every entry and
    ``self.valid`` (N,) whether it is a real sample, ``self.half`` (N,) [rad | m] the half-width of
    its reading's censored band (:func:`~actuatorlab.identify.censor.half_cells`; ``censor`` as
    there). Float64 (the physics precision)."""

    def __init__(self, batches: list[Batch], spec: ModelSpec, censor: float | None = None):
        sub = substeps_for(spec)
        self.cfgs = tuple(b.step_config(spec.compliant, sub, spec.thermal) for b in batches)
        self.data = [(b.arrays(), jnp.asarray(b.mask, jnp.float64),
                      jnp.asarray(np.nan_to_num(b.effort_meas), jnp.float64),
                      jnp.asarray(np.isfinite(b.effort_meas), jnp.float64)) for b in batches]
        starts = np.cumsum([0] + [b.size for b in batches])
        self.log = np.concatenate([(starts[i] + np.arange(b.size))[:, None].repeat(b.mask.shape[1], 1).ravel()
                                   for i, b in enumerate(batches)])
        self.valid = np.concatenate([b.mask.ravel() for b in batches]).astype(bool)
        self._batches = batches
        self.half = _half_per_entry(batches, censor)
        cfgs = self.cfgs

        def residuals(pvec, data):
            p = {n: pvec[i] for i, n in enumerate(PARAM_ORDER)}
            rq, ru = [], []
            for cfg, (arr, mask, u_meas, u_ok) in zip(cfgs, data):
                out = rollout_batch(cfg, p, arr)
                rq.append(((out.q - arr["q_meas"]) * mask).ravel())
                ru.append(((out.u - u_meas) * mask * u_ok).ravel())
            return jnp.concatenate(rq), jnp.concatenate(ru)

        def lin(pvec, dirs, data):
            f = lambda v: residuals(v, data)  # noqa: E731
            (rq, ru), (jq, ju) = jax.vmap(lambda d: jax.jvp(f, (pvec,), (d,)), out_axes=(None, 0))(dirs)
            return rq, jq.T, ru, ju.T

        self._res = jax.jit(residuals)
        self._lin = jax.jit(lin)

    def censored_at(self, censor: float | None) -> "ResidualJacobian":
        """The same residuals (the same compiled programs, nothing recompiled) with the band ``censor``."""
        out = copy.copy(self)
        out.half = _half_per_entry(self._batches, censor)
        return out

    def residuals(self, pvec: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rq, ru = self._res(jnp.asarray(pvec, jnp.float64), self.data)
        return _finite(rq), _finite(ru)

    def __call__(self, pvec: np.ndarray, dirs: np.ndarray):
        rq, jq, ru, ju = self._lin(jnp.asarray(pvec, jnp.float64), jnp.asarray(dirs, jnp.float64), self.data)
        return _finite(rq), _finite(jq), _finite(ru), _finite(ju)


def _half_per_entry(batches: list[Batch], censor: float | None) -> np.ndarray:
    """(N,) [rad | m] the censored band's half-width of every residual entry (batch order, as ``rq``)."""
    return np.concatenate([np.broadcast_to(h, b.mask.shape).ravel() for b, h in zip(batches, half_cells(batches, censor))])


def _finite(x) -> np.ndarray:
    x = np.asarray(x)
    return np.where(np.isfinite(x), x, 1e3)


def _directions(space: ParamSpace, z: np.ndarray) -> np.ndarray:
    """(K, P): row j is d(full vector)/dz_j of free parameter j (K padded to DIRECTIONS)."""
    K = next((k for k in DIRECTIONS if k >= space.n), space.n)
    theta = np.asarray(space.to_theta(z, np), float)
    lo, hi = np.asarray(space.lower, float), np.asarray(space.upper, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        dtheta = np.where(space.log, theta * np.log(np.where(space.log, hi / lo, 1.0)), hi - lo)
    D = np.zeros((K, len(PARAM_ORDER)))
    for j, n in enumerate(space.names):
        D[j, PARAM_ORDER.index(n)] = dtheta[j]
    return D


def _objective(rq: np.ndarray, ru: np.ndarray, w: np.ndarray, n: float, effort_weight: float,
               half: np.ndarray | float = 0.0) -> float:
    if effort_weight > 0:
        return float(np.log(w @ rq**2 / n + 1e-30) + effort_weight * np.log(w @ ru**2 / n + 1e-30))
    return float(w @ np.abs(censored(rq, half)) / n)


def _polish_one(space: ParamSpace, jac: ResidualJacobian, z0: np.ndarray, w: np.ndarray, n: float,
                effort_weight: float, settings: PolishSettings) -> tuple[np.ndarray, float, int]:
    """One fold: the LM iterates from z0 on the samples weighted by w (N,). Returns the best
    point by the objective (z0 included), its objective and the rollouts spent."""
    half = jac.half

    def merit(rq, ru) -> float:  # what the steps lower: the squared censored error, or the scale-free objective
        return _objective(rq, ru, w, n, effort_weight) if effort_weight > 0 else float(w @ censored(rq, half)**2)

    z = np.asarray(z0, float)
    rq, ru = jac.residuals(full_vectors(space, space.to_theta(z[None], np))[0])
    m = merit(rq, ru)
    best_z, best_obj, evals, lam = z, _objective(rq, ru, w, n, effort_weight, half), 1, settings.lambda0
    for _ in range(settings.max_iters):
        rq, Jq, ru, Ju = jac(full_vectors(space, space.to_theta(z[None], np))[0], _directions(space, z))
        evals += 1 + space.n
        Jq, Ju = Jq[:, :space.n], Ju[:, :space.n]
        if effort_weight > 0:  # Gauss-Newton model of log SSq + w log SSu at z
            sq, su = max(w @ rq**2, 1e-300), max(w @ ru**2, 1e-300)
            A = (Jq.T * w) @ Jq / sq + effort_weight * (Ju.T * w) @ Ju / su
            g = (Jq.T * w) @ rq / sq + effort_weight * (Ju.T * w) @ ru / su
        else:  # Gauss-Newton on the censored residual: zero, with no slope, inside the cell
            # (a sample without a band keeps its slope where its error is exactly 0: the plain MAE's steps)
            rc, Jc = censored(rq, half), Jq * ((np.abs(rq) > half) | (half == 0.0))[:, None]
            A, g = (Jc.T * w) @ Jc, (Jc.T * w) @ rc
        free = ~(((z <= 0.0) & (g > 0)) | ((z >= 1.0) & (g < 0)))  # held on a bound it presses on
        gain = None
        while lam <= settings.max_lambda:
            Af = A[np.ix_(free, free)]
            dz = np.zeros_like(z)
            try:
                dz[free] = -np.linalg.solve(Af + lam * np.diag(np.diag(Af) + 1e-12), g[free])
            except np.linalg.LinAlgError:
                lam *= 10.0
                continue
            zn = np.clip(z + dz, 0.0, 1.0)
            rqn, run = jac.residuals(full_vectors(space, space.to_theta(zn[None], np))[0])
            evals += 1
            mn = merit(rqn, run)
            if np.isfinite(mn) and mn < m:
                gain, z, m = (m - mn) / max(abs(m), 1e-300), zn, mn
                obj = _objective(rqn, run, w, n, effort_weight, half)
                if obj < best_obj:
                    best_z, best_obj = z, obj
                lam = max(lam / 3.0, 1e-9)
                break
            lam *= 10.0
        if gain is None or gain < settings.rtol:
            break
    return best_z, best_obj, evals


def polish_folds(space: ParamSpace, jac: ResidualJacobian, weights: np.ndarray,
                 res: list[FoldSearch], effort_weight: float = 0.0,
                 settings: PolishSettings = POLISH, workers: int | None = None) -> list[FoldSearch]:
    """Polish every fold search's optimum (``res[f].theta``) on the logs with ``weights[f] == 1``
    (weights (F, L), scorer order); a fold keeps its point when the polish finds nothing lower.
    Returns new :class:`~actuatorlab.identify.search.FoldSearch` records (objective: float64;
    evaluations: rollouts, a Jacobian counting one per direction plus one). The folds run on
    ``workers`` threads (default :func:`~actuatorlab.identify.search.default_workers`); each fold's
    result does not depend on it."""
    if space.n == 0 or settings.max_iters < 1:
        return res

    def one(f: int) -> FoldSearch:
        r = res[f]
        w = np.asarray(weights[f], float)[jac.log] * jac.valid
        z0 = space.to_z(r.theta)
        z, obj, ev = _polish_one(space, jac, z0, w, float(w.sum()), effort_weight, settings)
        if np.array_equal(z, z0):  # nothing lower than the search's own point
            return FoldSearch(r.theta, r.objective, r.evaluations + ev, r.history)
        return FoldSearch(np.asarray(space.to_theta(z[None], np), float)[0], obj, r.evaluations + ev, r.history)

    # the folds are independent: side by side on the scorer's threads (one XLA call runs on ~one core)
    return run_sliced(one, range(len(res)), default_workers() if workers is None else workers)

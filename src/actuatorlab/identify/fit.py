"""Identification: closed-loop replay error minimised by CMA-ES, then gradient refinement.

For a model (see :mod:`actuatorlab.models.registry`) and a set of logs, the free parameters are
searched in a normalised box z in [0, 1]^n (log-scaled parameters map log-uniformly), so every
parameter has bounds and CMA-ES steps are scale-free. Each candidate is scored by the position
mean absolute error of full closed-loop rollouts of every log from its measured initial state,
outside each reading's quantisation cell (:mod:`actuatorlab.identify.censor`; the reported MAE is
the plain one);
CMA-ES (Hansen, ``cma`` package) evaluates whole populations in one batched ``vmap`` call. The
best point is then refined with Adam (optax) on the same loss through ``jax.grad`` of the rollout.
The CMA-ES budget is a pool of ``n_starts x max_evals`` evaluations: a start ends at ``max_evals``
or when it stalls (:class:`~actuatorlab.identify.search.Stall`), and what is left goes to a restart
from the same first point with a fresh stream (deterministic seeds); the best training loss wins. A richer model
starts from its parent's optimum with its extra mechanisms switched off, and that point is scored
first, so a child never ends worse than its parent on the training data.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Callable, cast

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..errors import UnknownNameError
from ..precision import on_fixed_blas_threads, physics, physics_fn
from ..logs.format import Trajectory
from ..models.params import PARAMS
from ..models.registry import ModelSpec, embed_params, get_model
from ..sim.rollout import Batch, make_batches, rollout_batch
from .censor import censored, half_cells
from .search import BestSoFar, Stall, UnitBoxCMA, cma_stream, default_workers, run_cma, run_sliced
from .space import ParamSpace, box_adam_step, effort_available, profile_for, substeps_for

__all__ = ["FitResult", "fit_model", "make_loss", "LOSS_KINDS", "ParamSpace", "profile_for", "substeps_for",
           "effort_available"]


#: what :func:`make_loss` computes: the plain MAE (reported), the fit's censored MAE, its smooth form, the MSE
LOSS_KINDS = ("mae", "censored", "smooth", "mse")


@physics_fn
def make_loss(spec: ModelSpec, space: ParamSpace, batches: list[Batch], kind: str = "mae",
              effort_weight: float = 0.0, censor: float | None = None) -> Callable:
    """Loss(theta) over all samples of all batches (jit-able).

    effort_weight = 0: pooled position error, in the log's unit: ``kind`` "mae" the plain MAE (what
    is reported), "censored" the MAE of the error outside each reading's quantisation cell (the
    fit's objective, :mod:`actuatorlab.identify.censor`; ``censor`` the band's half-width as a
    fraction of the lattice step, None: :data:`~actuatorlab.identify.censor.CENSOR`), "smooth" its
    smooth form for gradients (sqrt(c^2 + eps^2)), "mse" the mean squared error.
    effort_weight = w > 0 (logs with a measured controller output):
        log(mean (q_sim - q)^2) + w log(mean (u_sim - u)^2)  (= 2 log ||e_q|| + 2 w log ||e_u|| + const)
    scale-free, so a relative improvement counts the same in either signal. A stiff position loop
    (EMPS: kp kv gtau = 1.4e6 N/m) hides friction and delay in position, but not in the
    controller output it needs; fitting position alone let a 0.13 ms command delay trade against
    viscous friction (Fv 5.6 instead of ~200 N.s/m, force error 30 %, bench/emps.py).
    """
    if kind not in LOSS_KINDS:
        raise UnknownNameError("loss kind", kind, LOSS_KINDS)
    sub = substeps_for(spec)
    halves = half_cells(batches, 0.0 if kind in ("mae", "mse") else censor)
    items = [(b.step_config(spec.compliant, sub, spec.thermal), b.arrays(), jnp.asarray(b.mask, jnp.float64),
              jnp.asarray(np.nan_to_num(b.effort_meas), jnp.float64), jnp.asarray(h, jnp.float64))
             for b, h in zip(batches, halves)]
    n_total = float(sum(b.n_samples for b in batches))

    def residual(e, h):
        if kind == "mse":
            r = e**2
        elif kind == "smooth":  # smooth censored MAE for gradients
            r = jnp.sqrt(censored(e, h, jnp)**2 + 1e-12)
        else:
            r = jnp.abs(censored(e, h, jnp))
        return jnp.where(jnp.isfinite(r), r, 1e3)

    def loss(theta):
        p = space.params(theta)
        sq, su = 0.0, 0.0
        for cfg, arr, mask, u_meas, h in items:
            out = rollout_batch(cfg, p, arr)
            sq = sq + jnp.sum(residual(out.q - arr["q_meas"], h) * mask)
            if effort_weight > 0:
                su = su + jnp.sum(residual(out.u - u_meas, 0.0) * mask)
        if effort_weight > 0:
            return jnp.log(sq / n_total + 1e-30) + effort_weight * jnp.log(su / n_total + 1e-30)
        return sq / n_total

    if effort_weight > 0 and kind != "mse":
        # the scale-free objective uses L2 norms, the norm of the benchmark's relative errors
        return make_loss(spec, space, batches, "mse", effort_weight, censor)

    return loss


@dataclass
class FitResult:
    """Outcome of fitting one model: parameters, losses, timing, search record."""

    model: str
    spec: ModelSpec
    space: ParamSpace
    theta: np.ndarray
    train_mae: float
    evaluations: int
    wall_s: float
    profile: str
    dt: float
    history: list = field(default_factory=list)
    objective: float = math.nan  # value of the fitted objective (= train_mae without effort term)
    effort_weight: float = 0.0
    widened: dict | None = None  # boxes.refit_widened's record (a single model refitted in widened boxes)

    @property
    def params(self) -> dict[str, float]:
        p = {k: float(v) for k, v in self.space.base.items()}
        p.update({n: float(v) for n, v in zip(self.space.names, self.theta)})
        return p


@physics
@on_fixed_blas_threads
def fit_model(trajs: list[Trajectory] | list[Batch], model: str = "m1", *, seed: int = 0,
              max_evals: int = 3000, popsize: int = 16, n_starts: int = 2, grad_steps: int = 150,
              init: dict | list[dict] | None = None, dt: float | None = None,
              progress: Callable | None = None, profile: str | None = None,
              sigma0: float = 0.25, effort_weight: float | None = None, workers: int | None = None,
              bounds: dict | None = None, stall: Stall | None = Stall(), censor: float | None = None) -> FitResult:
    """Fit ``model`` to the logs.

    bounds: name -> (lower, upper) replacing the profile's box of those parameters (e.g.
    :func:`actuatorlab.identify.calibrate.free_swing_calibration`'s narrowed boxes).

    init: parameters of models this one contains (one dict or several). Each is scored first and
    the best is the first CMA-ES start, so the result is never worse on these logs than any of them.

    max_evals: rollout evaluations for CMA-ES per start, n_starts x max_evals for all starts
    together; a start that stalls (:class:`~actuatorlab.identify.search.Stall`) hands the rest to
    a restart from the first start's point with a fresh CMA-ES stream, as long as at least one
    stall window is left, so a fit may run more than ``n_starts`` starts (measured: in-family
    m2+delay truth 21.2 -> 0.36 mrad on seed 0, see :class:`~actuatorlab.identify.search.Stall`).
    ``stall`` None: the search before that rule (starts to max_evals, later ones from a 0.2-wide
    perturbation of the best point), kept by the free-swing calibration, where the rule moved the
    selection after it (bench/journal/fit_rules.md, R44).
    sigma0: initial CMA-ES step in the normalised box (small values refine around ``init``).
    progress(stage, done, total) is called.
    effort_weight: weight of the controller-output error (see :func:`make_loss`); None means 1.0
    when every log has a measured controller output and 0 otherwise. workers: threads each CMA-ES
    population is scored on, in slices of one compiled shape (default :func:`default_workers`;
    the same candidates are scored, up to floating-point rounding between compiled batch sizes).
    censor: the objective's band about each reading, as a fraction of its log's encoder step
    (:mod:`actuatorlab.identify.censor`; None: :data:`~actuatorlab.identify.censor.CENSOR`, 0: the
    plain MAE). ``train_mae`` is the plain MAE at the result, ``objective`` the fitted objective.
    """
    t_start = time.perf_counter()
    spec = get_model(model)
    batches = (trajs if trajs and isinstance(trajs[0], Batch)
               else make_batches(list(cast(list[Trajectory], trajs)), dt))
    profile = profile or profile_for(batches)
    space = ParamSpace.build(spec, batches, profile, bounds=bounds)
    if effort_weight is None:
        effort_weight = 1.0 if effort_available(batches) else 0.0
    loss = make_loss(spec, space, batches, "censored", effort_weight, censor)
    pop_loss = jax.jit(jax.vmap(lambda z: loss(space.to_theta(z))))
    n_workers = max(1, int(default_workers() if workers is None else workers))
    part = -(-popsize // n_workers)  # candidates per compiled call
    rng = np.random.default_rng(seed)

    evals = 0
    best = BestSoFar()
    history: list[dict[str, float]] = []

    def score(Z):
        nonlocal evals
        Z = np.asarray(Z, float)
        n = Z.shape[0]
        padded = np.concatenate([Z, np.repeat(Z[-1:], part - n % part if n % part else 0, 0)])
        fs = np.concatenate(run_sliced(lambda i: np.asarray(pop_loss(padded[i:i + part])),
                                       range(0, len(padded), part), n_workers))[:n]
        fs = np.where(np.isfinite(fs), fs, 1e3)
        evals += n
        best.update(fs, Z)
        return fs

    inits = [init] if isinstance(init, dict) else list(init or [])
    if inits:
        Z0 = np.array([space.to_z(space.theta_from(embed_params(d, spec.name))) for d in inits])
        z_init = Z0[int(np.argmin(score(Z0)))]
    else:  # mid-box for always-on quantities, off for optional mechanisms
        z_init = space.to_z(space.theta_from({}))
        z_init = np.where([PARAMS[n].neutral == 0.0 for n in space.names], z_init, 0.5)
    score(z_init[None])

    pool = n_starts * max_evals  # CMA-ES evaluations of all starts together
    total_work = pool + grad_steps
    if stall is not None:
        stall = replace(stall, log_objective=effort_weight > 0)
    window = stall.generations * popsize if stall is not None else max_evals
    spent, si = 0, 0
    while si == 0 or pool - spent >= window:
        # a start ends at max_evals or when it stalls (converged, or caught in a basin); the
        # evaluations left go to a restart from the same first point with a fresh stream (the wide
        # perturbation of the best point that later starts used before stayed in that basin)
        z0 = z_init if si == 0 or stall is not None else np.clip(best.x + rng.normal(0.0, 0.2, space.n), 0.0, 1.0)
        es = UnitBoxCMA(z0, sigma0, {
            "popsize": popsize, **cma_stream(int(rng.integers(1, 2**31 - 1))),
            "maxfevals": max_evals, "verbose": -9, "tolfun": 1e-9, "tolx": 1e-7})
        done = spent
        used = int(run_cma([es], lambda Zs: {0: score(Zs[0])}, min(max_evals, pool - spent),
                           (lambda u: progress("cma", done + int(u[0]), total_work)) if progress else None,
                           stall)[0])
        history.append({"start": si, "evals": used, "best_f": float(es.result.fbest)})
        spent, si = spent + (used if stall is not None else max_evals), si + 1

    if grad_steps > 0 and space.n > 0:  # gradient refinement from the best point
        step = (lambda k: progress("grad", pool + k + 1, total_work)) if progress else None
        score(_adam_path(make_loss(spec, space, batches, "smooth", effort_weight, censor), space, best.x, grad_steps,
                         step))  # the refined point is kept only if it is better in MAE
    theta = np.asarray(space.to_theta(jnp.asarray(best.x)))
    train_mae = _plain_mae(spec, space, batches, theta, best.f, effort_weight, censor)
    return FitResult(spec.name, spec, space, theta, train_mae, evals, time.perf_counter() - t_start,
                     profile, batches[0].dt, history, objective=best.f, effort_weight=effort_weight)




def _plain_mae(spec: ModelSpec, space: ParamSpace, batches: list[Batch], theta: np.ndarray, objective: float,
               effort_weight: float, censor: float | None) -> float:
    """The plain position MAE at ``theta``: the objective itself where it is that MAE (no effort term, no
    band), else a float64 replay."""
    if effort_weight == 0 and not any(np.any(h) for h in half_cells(batches, censor)):
        return objective
    return float(jax.jit(make_loss(spec, space, batches, "mae"))(theta))


def _adam_path(smooth: Callable, space: ParamSpace, z0: np.ndarray, steps: int, step: Callable | None) -> np.ndarray:
    """Adam (3e-3) on ``smooth(theta(z))`` from z0, projected into the unit box after every step;
    returns the points every 10 steps and the last one (k, space.n). step(k) is called per step.
    One compiled call per step: the gradient, the optimiser's update and the projection."""
    opt = optax.adam(3e-3)
    vg = jax.value_and_grad(lambda z: smooth(space.to_theta(z)))

    @jax.jit
    def one(z, state):
        g = vg(z)[1]
        return box_adam_step(opt, jnp.where(jnp.isfinite(g), g, 0.0), state, z)

    z = jnp.asarray(z0)
    state = opt.init(z)
    zs = []
    for k in range(steps):
        z, state = one(z, state)
        if k % 10 == 9 or k == steps - 1:
            zs.append(np.asarray(z))
        if step:
            step(k)
    return np.array(zs)

"""Identification: closed-loop replay error minimised by CMA-ES, then gradient refinement.

For a model (see :mod:`actuatorlab.models.registry`) and a set of logs, the free parameters are
searched in a normalised box z in [0, 1]^n (log-scaled parameters map log-uniformly), so every
parameter has bounds and CMA-ES steps are scale-free. Each candidate is scored by the position
mean absolute error of full closed-loop rollouts of every log from its measured initial state;
CMA-ES (Hansen, ``cma`` package) evaluates whole populations in one batched ``vmap`` call. The
best point is then refined with Adam (optax) on the same loss through ``jax.grad`` of the rollout.
Several starts (``n_starts``) with deterministic seeds; the best training loss wins. A richer model
starts from its parent's optimum with its extra mechanisms switched off, and that point is scored
first, so a child never ends worse than its parent on the training data.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import warnings

with warnings.catch_warnings():  # cma warns when matplotlib is absent; plotting is not used
    warnings.simplefilter("ignore")
    import cma
import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..precision import physics, physics_fn
from ..errors import DataError
from ..logs.format import Trajectory
from ..models.control import get_control_law
from ..models.params import BOUND_PROFILES, PARAMS, bounds_for, neutral_params
from ..models.registry import ModelSpec, embed_params, get_model
from ..sim.rollout import Batch, make_batches, rollout_batch

__all__ = ["ParamSpace", "FitResult", "fit_model", "make_loss", "profile_for", "substeps_for",
           "effort_available"]


def profile_for(trajs_or_batches) -> str:
    """Bound profile: "drive" for prismatic / current-mode drives, "servo" otherwise."""
    for b in trajs_or_batches:
        plant = b.plant if isinstance(b, Batch) else ("carriage" if b.setup.joint_type == "prismatic" else "pendulum")
        if plant == "carriage":
            return "drive"
    return "servo"


def substeps_for(spec: ModelSpec) -> int:
    return 4 if spec.compliant else 1


@dataclass(frozen=True)
class ParamSpace:
    """Free parameters, their bounds and the map between physical values and z in [0, 1]."""

    names: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray
    log: np.ndarray
    base: dict = field(default_factory=dict)  # values of the non-free parameters

    @staticmethod
    def build(spec: ModelSpec, batches: list[Batch], profile: str, fixed: dict | None = None) -> "ParamSpace":
        drives = {get_control_law(b.law).drive for b in batches}
        plants = {b.plant for b in batches}
        names = [n for n in spec.free if any(n in spec.free_for(d) for d in drives)
                 and (n != "q_offset" or "pendulum" in plants)]  # a carriage has no gravity angle
        lo = np.array([bounds_for(n, profile)[0] for n in names])
        hi = np.array([bounds_for(n, profile)[1] for n in names])
        base = neutral_params()
        base.update(fixed or {})
        return ParamSpace(tuple(names), lo, hi, np.array([PARAMS[n].scale == "log" for n in names]), base)

    @property
    def n(self) -> int:
        return len(self.names)

    def to_theta(self, z):
        z = jnp.clip(z, 0.0, 1.0)
        lin = self.lower + z * (self.upper - self.lower)
        lg = jnp.exp(jnp.log(self.lower, where=self.log, out=None) if False else
                     jnp.log(jnp.where(self.log, self.lower, 1.0))
                     + z * (jnp.log(jnp.where(self.log, self.upper, 1.0)) - jnp.log(jnp.where(self.log, self.lower, 1.0))))
        return jnp.where(self.log, lg, lin)

    def to_z(self, theta) -> np.ndarray:
        theta = np.clip(np.asarray(theta, float), self.lower, self.upper)
        with np.errstate(divide="ignore", invalid="ignore"):
            zl = (np.log(theta) - np.log(np.where(self.log, self.lower, 1.0))) / (
                np.log(np.where(self.log, self.upper, 2.0)) - np.log(np.where(self.log, self.lower, 1.0)))
        zlin = (theta - self.lower) / (self.upper - self.lower)
        return np.clip(np.where(self.log, zl, zlin), 0.0, 1.0)

    def params(self, theta) -> dict:
        p = {k: jnp.asarray(v, dtype=jnp.float64) for k, v in self.base.items()}
        for i, n in enumerate(self.names):
            p[n] = theta[i]
        return p

    def theta_from(self, values: dict) -> np.ndarray:
        """Physical vector from a dict (missing names take the neutral value, clipped to bounds)."""
        return np.clip(np.array([float(values.get(n, self.base[n])) for n in self.names]), self.lower, self.upper)


def effort_available(batches: list[Batch]) -> bool:
    """True if every log of every batch has a measured controller output (e.g. EMPS ``vir``)."""
    return all(np.isfinite(b.effort_meas[b.mask]).all() for b in batches)


@physics_fn
def make_loss(spec: ModelSpec, space: ParamSpace, batches: list[Batch], kind: str = "mae",
              effort_weight: float = 0.0) -> Callable:
    """Loss(theta) over all samples of all batches (jit-able).

    effort_weight = 0: pooled position error (MAE for ``kind="mae"``), in the log's unit.
    effort_weight = w > 0 (logs with a measured controller output):
        log(mean (q_sim - q)^2) + w log(mean (u_sim - u)^2)  (= 2 log ||e_q|| + 2 w log ||e_u|| + const)
    scale-free, so a relative improvement counts the same in either signal. A stiff position loop
    (EMPS: kp kv gtau = 1.4e6 N/m) hides friction and delay in position, but not in the
    controller output it needs; fitting position alone let a 0.13 ms command delay trade against
    viscous friction (Fv 5.6 instead of ~200 N.s/m, force error 30 %, bench/emps.py).
    """
    sub = substeps_for(spec)
    items = [(b.step_config(spec.compliant, sub, spec.thermal), b.arrays(), jnp.asarray(b.mask, jnp.float64),
              jnp.asarray(np.nan_to_num(b.effort_meas), jnp.float64)) for b in batches]
    n_total = float(sum(b.n_samples for b in batches))

    def residual(e):
        if kind == "mae":
            r = jnp.abs(e)
        elif kind == "mse":
            r = e**2
        else:  # smooth MAE for gradients: sqrt(e^2 + eps^2)
            r = jnp.sqrt(e**2 + 1e-12)
        return jnp.where(jnp.isfinite(r), r, 1e3)

    def loss(theta):
        p = space.params(theta)
        sq, su = 0.0, 0.0
        for cfg, arr, mask, u_meas in items:
            out = rollout_batch(cfg, p, arr)
            sq = sq + jnp.sum(residual(out.q - arr["q_meas"]) * mask)
            if effort_weight > 0:
                su = su + jnp.sum(residual(out.u - u_meas) * mask)
        if effort_weight > 0:
            return jnp.log(sq / n_total + 1e-30) + effort_weight * jnp.log(su / n_total + 1e-30)
        return sq / n_total

    if effort_weight > 0 and kind != "mse":
        # the scale-free objective uses L2 norms, the norm of the benchmark's relative errors
        return make_loss(spec, space, batches, "mse", effort_weight)

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

    @property
    def params(self) -> dict[str, float]:
        p = {k: float(v) for k, v in self.space.base.items()}
        p.update({n: float(v) for n, v in zip(self.space.names, self.theta)})
        return p


@physics
def fit_model(trajs: list[Trajectory] | list[Batch], model: str = "m1", *, seed: int = 0,
              max_evals: int = 3000, popsize: int = 16, n_starts: int = 2, grad_steps: int = 150,
              init: dict | list[dict] | None = None, dt: float | None = None,
              progress: Callable | None = None, profile: str | None = None,
              sigma0: float = 0.25, effort_weight: float | None = None) -> FitResult:
    """Fit ``model`` to the logs.

    init: parameters of models this one contains (one dict or several). Each is scored first and
    the best is the first CMA-ES start, so the result is never worse on these logs than any of them.

    max_evals: rollout evaluations for CMA-ES per start; sigma0: initial CMA-ES step in the
    normalised box (small values refine around ``init``). progress(stage, done, total) is called.
    effort_weight: weight of the controller-output error (see :func:`make_loss`); None means 1.0
    when every log has a measured controller output and 0 otherwise.
    """
    t_start = time.perf_counter()
    spec = get_model(model)
    batches = trajs if trajs and isinstance(trajs[0], Batch) else make_batches(list(trajs), dt)
    profile = profile or profile_for(batches)
    space = ParamSpace.build(spec, batches, profile)
    if effort_weight is None:
        effort_weight = 1.0 if effort_available(batches) else 0.0
    loss = make_loss(spec, space, batches, "mae", effort_weight)
    pop_loss = jax.jit(jax.vmap(lambda z: loss(space.to_theta(z))))
    rng = np.random.default_rng(seed)

    evals = 0
    best_z, best_f = None, math.inf
    history = []

    def score(Z):
        nonlocal evals, best_z, best_f
        Z = np.asarray(Z, float)
        n = Z.shape[0]
        padded = np.concatenate([Z, np.repeat(Z[-1:], popsize - n % popsize if n % popsize else 0, 0)])
        fs = np.concatenate([np.asarray(pop_loss(padded[i:i + popsize])) for i in range(0, len(padded), popsize)])[:n]
        fs = np.where(np.isfinite(fs), fs, 1e3)
        evals += n
        i = int(np.argmin(fs))
        if fs[i] < best_f:
            best_f, best_z = float(fs[i]), Z[i].copy()
        return fs

    inits = [init] if isinstance(init, dict) else list(init or [])
    if inits:
        Z0 = np.array([space.to_z(space.theta_from(embed_params(d, spec.name))) for d in inits])
        z_init = Z0[int(np.argmin(score(Z0)))]
    else:  # mid-box for always-on quantities, off for optional mechanisms
        z_init = space.to_z(space.theta_from({}))
        z_init = np.where([PARAMS[n].neutral == 0.0 for n in space.names], z_init, 0.5)
    score(z_init[None])

    total_work = n_starts * max_evals + grad_steps
    for si in range(n_starts):
        # later starts: a wide perturbation of the best point so far (a uniform draw in the box
        # often lands where the joint never leaves stiction and the loss is flat)
        z0 = z_init if si == 0 else np.clip(best_z + rng.normal(0.0, 0.2, space.n), 0.0, 1.0)
        es = cma.CMAEvolutionStrategy(list(z0), sigma0, {
            "bounds": [0.0, 1.0], "popsize": popsize, "seed": int(rng.integers(1, 2**31 - 1)),
            "maxfevals": max_evals, "verbose": -9, "tolfun": 1e-9, "tolx": 1e-7})
        used = 0
        while not es.stop() and used < max_evals:
            Z = np.array(es.ask())
            fs = score(Z)
            es.tell(list(Z), list(fs))
            used += len(Z)
            if progress:
                progress("cma", si * max_evals + used, total_work)
        history.append({"start": si, "evals": used, "best_f": float(es.result.fbest)})

    # gradient refinement from the best point
    if grad_steps > 0 and space.n > 0:
        smooth = make_loss(spec, space, batches, "smooth", effort_weight)
        vg = jax.jit(jax.value_and_grad(lambda z: smooth(space.to_theta(z))))
        opt = optax.adam(3e-3)
        z = jnp.asarray(best_z)
        state = opt.init(z)
        zs = []
        for k in range(grad_steps):
            f, g = vg(z)
            g = jnp.where(jnp.isfinite(g), g, 0.0)
            upd, state = opt.update(g, state, z)
            z = jnp.clip(optax.apply_updates(z, upd), 0.0, 1.0)
            if k % 10 == 9 or k == grad_steps - 1:
                zs.append(np.asarray(z))
            if progress:
                progress("grad", n_starts * max_evals + k + 1, total_work)
        score(np.array(zs))  # keep the refined point only if it is better in MAE
    theta = np.asarray(space.to_theta(jnp.asarray(best_z)))
    train_mae = best_f if effort_weight == 0 else float(jax.jit(make_loss(spec, space, batches, "mae"))(theta))
    return FitResult(spec.name, spec, space, theta, train_mae, evals, time.perf_counter() - t_start,
                     profile, batches[0].dt, history, objective=best_f, effort_weight=effort_weight)

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
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
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

from ..precision import physics, physics_fn, x64_enabled
from ..errors import ActuatorlabError, UnknownNameError
from ..logs.format import Trajectory
from ..models.control import get_control_law
from ..models.params import PARAMS, bounds_for, neutral_params
from ..models.registry import ModelSpec, embed_params, get_model
from ..sim.rollout import Batch, make_batches, rollout, rollout_batch

__all__ = ["ParamSpace", "FitResult", "fit_model", "make_loss", "profile_for", "substeps_for",
           "effort_available", "PARAM_ORDER", "full_vectors", "PopulationScorer", "objective_from_sums",
           "TRAIN_OBJECTIVES", "TRAIN_OBJECTIVE", "SPREAD_WEIGHT",
           "FoldSearch", "search_folds", "default_workers", "run_sliced"]


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
    def build(spec: ModelSpec, batches: list[Batch], profile: str, fixed: dict | None = None,
              bounds: dict | None = None) -> "ParamSpace":
        """The search space of ``spec`` on ``batches``: the profile's boxes, except the parameters
        named in ``bounds`` (name -> (lower, upper), e.g. a calibration's narrowed boxes)."""
        drives = {get_control_law(b.law).drive for b in batches}
        plants = {b.plant for b in batches}
        names = [n for n in spec.free if any(n in spec.free_for(d) for d in drives)
                 and (n != "q_offset" or "pendulum" in plants)]  # a carriage has no gravity angle
        box = {n: tuple(map(float, (bounds or {}).get(n, bounds_for(n, profile)))) for n in names}
        for n in (bounds or {}):
            if n not in PARAMS:
                raise UnknownNameError("parameter", n, list(PARAMS))
        for n, (a, b) in box.items():
            if not a < b:
                raise ActuatorlabError(f"bounds of {n!r}: lower {a} must be below upper {b}")
        lo = np.array([box[n][0] for n in names])
        hi = np.array([box[n][1] for n in names])
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
              sigma0: float = 0.25, effort_weight: float | None = None, workers: int | None = None,
              bounds: dict | None = None) -> FitResult:
    """Fit ``model`` to the logs.

    bounds: name -> (lower, upper) replacing the profile's box of those parameters (e.g.
    :func:`actuatorlab.identify.calibrate.free_swing_calibration`'s narrowed boxes).

    init: parameters of models this one contains (one dict or several). Each is scored first and
    the best is the first CMA-ES start, so the result is never worse on these logs than any of them.

    max_evals: rollout evaluations for CMA-ES per start; sigma0: initial CMA-ES step in the
    normalised box (small values refine around ``init``). progress(stage, done, total) is called.
    effort_weight: weight of the controller-output error (see :func:`make_loss`); None means 1.0
    when every log has a measured controller output and 0 otherwise. workers: threads each CMA-ES
    population is scored on, in slices of one compiled shape (default :func:`default_workers`;
    the same candidates are scored, up to floating-point rounding between compiled batch sizes).
    """
    t_start = time.perf_counter()
    spec = get_model(model)
    batches = trajs if trajs and isinstance(trajs[0], Batch) else make_batches(list(trajs), dt)
    profile = profile or profile_for(batches)
    space = ParamSpace.build(spec, batches, profile, bounds=bounds)
    if effort_weight is None:
        effort_weight = 1.0 if effort_available(batches) else 0.0
    loss = make_loss(spec, space, batches, "mae", effort_weight)
    pop_loss = jax.jit(jax.vmap(lambda z: loss(space.to_theta(z))))
    n_workers = max(1, int(default_workers() if workers is None else workers))
    part = -(-popsize // n_workers)  # candidates per compiled call
    rng = np.random.default_rng(seed)

    evals = 0
    best_z, best_f = None, math.inf
    history = []

    def score(Z):
        nonlocal evals, best_z, best_f
        Z = np.asarray(Z, float)
        n = Z.shape[0]
        padded = np.concatenate([Z, np.repeat(Z[-1:], part - n % part if n % part else 0, 0)])
        fs = np.concatenate(run_sliced(lambda i: np.asarray(pop_loss(padded[i:i + part])),
                                       range(0, len(padded), part), n_workers))[:n]
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
        es = UnitBoxCMA(z0, sigma0, {
            "popsize": popsize, **cma_stream(int(rng.integers(1, 2**31 - 1))),
            "maxfevals": max_evals, "verbose": -9, "tolfun": 1e-9, "tolx": 1e-7})
        used = 0
        while not es.stop() and used < max_evals:
            G, Z = es.ask()
            fs = score(Z)
            es.tell(G, fs)
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


# --------------------------------------------------------------------------------------------
# Many fits at once: one compiled scorer for every model of a structure, CMA-ES searches in lockstep
# --------------------------------------------------------------------------------------------

#: order of the full parameter vector used by :class:`PopulationScorer` (every name of PARAMS)
PARAM_ORDER: tuple[str, ...] = tuple(PARAMS)


def _theta_np(space: ParamSpace, Z: np.ndarray) -> np.ndarray:
    """NumPy twin of :meth:`ParamSpace.to_theta` for a population Z (n, space.n) -> (n, space.n)."""
    Z = np.clip(np.asarray(Z, float), 0.0, 1.0)
    lin = space.lower + Z * (space.upper - space.lower)
    lo = np.log(np.where(space.log, space.lower, 1.0))
    hi = np.log(np.where(space.log, space.upper, 1.0))
    return np.where(space.log, np.exp(lo + Z * (hi - lo)), lin)


def full_vectors(space: ParamSpace, theta: np.ndarray) -> np.ndarray:
    """Free parameter vectors (n, space.n) -> full vectors (n, len(PARAM_ORDER)) in PARAM_ORDER,
    the non-free entries at ``space.base``."""
    theta = np.atleast_2d(theta)
    out = np.tile(np.array([space.base[n] for n in PARAM_ORDER], float), (theta.shape[0], 1))
    for i, n in enumerate(space.names):
        out[:, PARAM_ORDER.index(n)] = theta[:, i]
    return out


#: most threads a :class:`PopulationScorer` splits a population over
MAX_WORKERS = 8


_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _scorer_pool(n: int) -> ThreadPoolExecutor:
    """The process's pool of ``n`` scorer threads, made on first use and shared by every scorer (a
    pool per scorer would leave idle threads behind each fit of a long-running process)."""
    with _POOLS_LOCK:
        if n not in _POOLS:
            _POOLS[n] = ThreadPoolExecutor(n, thread_name_prefix=f"actuatorlab-scorer{n}")
        return _POOLS[n]


def run_sliced(fn: Callable, items, workers: int) -> list:
    """``[fn(i) for i in items]``, on the shared pool of ``workers`` threads when there is more
    than one item. XLA's CPU runtime runs one compiled call on about one core and releases the GIL
    while it runs, so slices of one population run side by side (measured on 2 cores: 1.7-1.9x per
    generation). Each thread computes in the caller's precision (JAX's x64 mode is per thread)."""
    items = list(items)
    if workers <= 1 or len(items) <= 1:
        return [fn(i) for i in items]
    x64 = x64_enabled()

    def call(i):
        with jax.enable_x64(x64):
            return fn(i)

    return list(_scorer_pool(workers).map(call, items))


def default_workers() -> int:
    """Threads a :class:`PopulationScorer` splits each population over: the CPU cores this process
    may use (at most :data:`MAX_WORKERS`) when JAX computes on the CPU, else 1 (an accelerator
    wants one large call)."""
    if jax.default_backend() != "cpu":
        return 1
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        n = os.cpu_count() or 1
    return max(1, min(n, MAX_WORKERS))


class PopulationScorer:
    """Per-log error sums of many parameter sets in one compiled call.

    Every model with the same static structure (compliant, substeps, thermal) shares one scorer:
    all parameters are traced, a model only decides which of them vary. Called with full
    parameter vectors P (n, len(PARAM_ORDER)) it returns a dict of (n, L) arrays over the L logs of
    ``batches`` (in batch order, ``self.names``): ``abs_q`` sum |q_sim - q| [rad|m], ``sq_q`` sum of
    squares, ``sq_u`` sum of squared controller-output errors (0 where not measured); ``n`` (L,)
    valid samples per log. Non-finite errors count as 1e3 per sample (as in :func:`make_loss`).
    Populations are padded to a multiple of ``size`` so that one compilation serves all calls. With
    a single batch the unit is a (candidate, log) pair instead (:meth:`pairs`): a fold's candidates
    run on that fold's training logs only, and ``size`` pairs make one call (choose popsize x the
    number of training logs summed over folds: one call per generation).
    ``dtype`` float32 runs the rollouts in single precision (1.6x less CPU on the XL330 logs; the
    per-log MAE agrees with float64 to ~1e-6 relative): for ranking CMA-ES candidates, while
    reported metrics come from float64 replays. ``workers`` (default :func:`default_workers`):
    each call is cut into that many slices of one compiled shape, run side by side on threads.
    """

    def __init__(self, batches: list[Batch], spec: ModelSpec, size: int = 64, dtype=np.float64,
                 workers: int | None = None):
        self.size = int(size)
        self.dtype = dtype
        self.workers = max(1, int(default_workers() if workers is None else workers))
        self.names = tuple(n for b in batches for n in b.names)
        self.n = np.concatenate([b.mask.sum(axis=1) for b in batches]).astype(float)  # (L,)
        self.batch_of = np.concatenate([np.full(b.size, i) for i, b in enumerate(batches)])
        sub = substeps_for(spec)
        cfgs = tuple(b.step_config(spec.compliant, sub, spec.thermal) for b in batches)
        arrays = [(b.arrays(), b.mask, np.nan_to_num(b.effort_meas), np.isfinite(b.effort_meas))
                  for b in batches]
        arrays = jax.tree_util.tree_map(
            lambda x: jnp.asarray(x, dtype) if np.issubdtype(np.asarray(x).dtype, np.floating)
            or np.asarray(x).dtype == bool else jnp.asarray(x), arrays)

        def clean(r):
            return jnp.where(jnp.isfinite(r), r, 1e3)

        def one(pvec, data):
            p = {n: pvec[i] for i, n in enumerate(PARAM_ORDER)}
            aq, sq, su = [], [], []
            for cfg, (arr, mask, u_meas, u_ok) in zip(cfgs, data):
                out = rollout_batch(cfg, p, arr)
                e = out.q - arr["q_meas"]
                aq.append(jnp.sum(clean(jnp.abs(e)) * mask, axis=1))
                sq.append(jnp.sum(clean(e**2) * mask, axis=1))
                su.append(jnp.sum(clean((out.u - u_meas) ** 2) * mask * u_ok, axis=1))
            return jnp.concatenate(aq), jnp.concatenate(sq), jnp.concatenate(su)

        self._arrays = arrays
        self._fn = jax.jit(jax.vmap(one, in_axes=(0, None)))
        self._pair_fn = None
        if len(batches) == 1:  # (candidate, log) pairs: only the logs a candidate is scored on are run
            cfg = cfgs[0]

            def pair(pvec, i, data):
                arr, mask, u_meas, u_ok = data
                p = {n: pvec[k] for k, n in enumerate(PARAM_ORDER)}
                c = jax.tree_util.tree_map(lambda x: x[i], arr["consts"])
                qm, dqm = arr["q_meas"][i], arr["dq_meas"][i]
                out = rollout(cfg, p, c, arr["q_target"][i], arr["enable"][i], arr["v_supply"][i], qm[0], dqm[0],
                              arr["temperature0"][i])
                e = out.q - qm
                return (jnp.sum(clean(jnp.abs(e)) * mask[i]), jnp.sum(clean(e**2) * mask[i]),
                        jnp.sum(clean((out.u - u_meas[i]) ** 2) * mask[i] * u_ok[i]))

            self._pair_fn = jax.jit(jax.vmap(pair, in_axes=(0, 0, None)))

    def pairs(self, P: np.ndarray, idx: np.ndarray, chunk: int) -> dict[str, np.ndarray]:
        """Sums of candidate P[k] (n, len(PARAM_ORDER)) on log idx[k] only: dict of (n,) arrays.
        Needs a single batch (``self.has_pairs``); run as slices of ceil(chunk / workers) pairs
        (the last one padded), so a caller that always passes the same ``chunk`` compiles once."""
        P = np.atleast_2d(np.asarray(P, float))
        idx = np.asarray(idx, np.int32)
        n = P.shape[0]
        part = -(-chunk // self.workers)  # each worker's share of a chunk: one compiled shape
        pad = (-len(P)) % part
        if pad:
            P = np.concatenate([P, np.repeat(P[-1:], pad, 0)])
            idx = np.concatenate([idx, np.repeat(idx[-1:], pad)])

        def run(i):
            out = self._pair_fn(jnp.asarray(P[i:i + part], self.dtype), jnp.asarray(idx[i:i + part]), self._arrays[0])
            return [np.asarray(o, np.float64) for o in out]

        parts = run_sliced(run, range(0, len(P), part), self.workers)
        aq, sq, su = (np.concatenate([p[k] for p in parts])[:n] for k in range(3))
        return {"abs_q": aq, "sq_q": sq, "sq_u": su}

    @property
    def has_pairs(self) -> bool:
        return self._pair_fn is not None

    def __call__(self, P: np.ndarray) -> dict[str, np.ndarray]:
        P = np.atleast_2d(np.asarray(P, float))
        n = P.shape[0]
        if self.has_pairs:  # every (candidate, log) pair through the one compiled pair function
            L = len(self.n)
            flat = self.pairs(np.repeat(P, L, 0), np.tile(np.arange(L), n), self.size)
            return {c: v.reshape(n, L) for c, v in flat.items()}
        part = -(-self.size // self.workers)
        pad = (-n) % part
        if pad:
            P = np.concatenate([P, np.repeat(P[-1:], pad, 0)])

        def run(i):
            return [np.asarray(o, np.float64) for o in self._fn(jnp.asarray(P[i:i + part], self.dtype), self._arrays)]

        parts = run_sliced(run, range(0, len(P), part), self.workers)
        aq, sq, su = (np.concatenate([p[k] for p in parts])[:n] for k in range(3))
        return {"abs_q": aq, "sq_q": sq, "sq_u": su}


#: how a training objective combines condition groups of logs (:func:`objective_from_sums`)
TRAIN_OBJECTIVES: tuple[str, ...] = ("pooled", "mean_std", "worst")
TRAIN_OBJECTIVE = "pooled"

#: weight of the spread across groups in the ``"mean_std"`` objective
SPREAD_WEIGHT = 1.0


def objective_from_sums(sums: dict[str, np.ndarray], n: np.ndarray, weights: np.ndarray,
                        effort_weight: float = 0.0, groups: np.ndarray | None = None,
                        aggregate: str = "pooled") -> np.ndarray:
    """The objective of :func:`make_loss` over the logs selected by ``weights`` (L,) (0/1), from
    :class:`PopulationScorer` sums: pooled position MAE, or with ``effort_weight`` > 0
    log(mean sq position error) + w log(mean sq controller-output error). Returns (n_candidates,).

    groups (L,) int, aggregate (:data:`TRAIN_OBJECTIVES`): with ``"pooled"`` (default) every
    selected sample counts the same and ``groups`` is ignored. Otherwise the objective J_g above is
    computed on each condition group g of the selected logs (e.g. one excitation family) and

    * ``"mean_std"``: J = mean_g J_g + beta std_g J_g (beta = :data:`SPREAD_WEIGHT`; population std):
      a fit that explains one condition at the cost of another pays for the spread. The idea is
      risk extrapolation (V-REx, Krueger et al. 2021, "Out-of-distribution generalization via risk
      extrapolation", ICML), which penalises the variance of per-domain risks; the standard
      deviation is used here so that beta is unit-free;
    * ``"worst"``: J = max_g J_g, the worst group (group DRO, Sagawa et al. 2020, ICLR).

    With one selected group both reduce to the pooled objective of that group."""
    if aggregate not in TRAIN_OBJECTIVES:
        raise UnknownNameError("training objective", aggregate, TRAIN_OBJECTIVES)
    if aggregate == "pooled" or groups is None:
        N = float(np.sum(weights * n))
        if effort_weight > 0:
            return (np.log(sums["sq_q"] @ weights / N + 1e-30)
                    + effort_weight * np.log(sums["sq_u"] @ weights / N + 1e-30))
        return sums["abs_q"] @ weights / N
    groups = np.asarray(groups)
    per = np.stack([objective_from_sums(sums, n, weights * (groups == g), effort_weight)
                    for g in np.unique(groups[np.asarray(weights) > 0])], axis=-1)  # (n_candidates, G)
    if aggregate == "worst":
        return per.max(axis=-1)
    return per.mean(axis=-1) + SPREAD_WEIGHT * per.std(axis=-1)


@dataclass
class FoldSearch:
    """Outcome of one lockstep CMA-ES search (one fold): best free parameters and objective."""

    theta: np.ndarray
    objective: float
    evaluations: int
    history: list = field(default_factory=list)


class UnitBoxCMA:
    """pycma's CMA-ES on the unit box [0, 1]^n, with the box handled exactly as pycma's default
    ``BoundTransform`` handles it, but for the whole population in one NumPy pass.

    pycma maps each sampled genotype x into the box with its piecewise linear-quadratic
    transformation (``BoxConstraintsLinQuadTransformation``: identity inside [lb + a_l, ub - a_u],
    y = lb + (x - lb + a_l)^2 / (4 a_l) below it, y = ub - (x - ub - a_u)^2 / (4 a_u) above it,
    mirrored and periodic further out; a_l, a_u the margin widths) one candidate at a time, and
    keeps an archive to find each genotype again in ``tell``: about a millisecond of Python per
    generation. Here the search runs unbounded on the genotypes, with the initial mean pycma would
    compute (the inverse transformation of ``z0``) and the ``maxstd`` its bounds would imply
    (1/3 of the box), and :meth:`transform` maps a population at once with the same floating-point
    operations, so the candidates, the path and the result are bit-identical to
    ``cma.CMAEvolutionStrategy(z0, sigma0, {"bounds": [0, 1], ...})`` (tested against it).
    ``ask()`` returns (genotypes, candidates in the box); ``tell`` takes the genotypes."""

    def __init__(self, z0, sigma0: float, opts: dict):
        from cma.boundary_handler import BoundTransform

        opts = dict(opts)
        if "bounds" in opts or "maxstd" in opts:
            raise ValueError("UnitBoxCMA sets the bounds [0, 1] and maxstd itself")
        z0 = np.asarray(z0, float)
        bt = BoundTransform([0.0, 1.0])
        tf = bt.bounds_tf
        tf.initialize(z0.size)
        self._lb, self._ub, self._al, self._au = (np.asarray(getattr(tf, a), float)
                                                  for a in ("_lb", "_ub", "_al", "_au"))
        mean0 = np.asarray(bt.inverse(z0.copy()), float)
        self.es = cma.CMAEvolutionStrategy(list(mean0), sigma0, {**opts, "maxstd": 1.0 / 3.0})

    def transform(self, G: np.ndarray) -> np.ndarray:
        """Genotypes (P, n) -> candidates in [0, 1]^n (pycma's transformation, row-wise)."""
        y = np.array(G, float)
        lb, ub, al, au = (np.broadcast_to(a, y.shape) for a in (self._lb, self._ub, self._al, self._au))
        lo = lb - 2 * al - (ub - lb) / 2.0
        idx = (y < lo) | (y > ub + 2 * au + (ub - lb) / 2.0)
        if idx.any():  # periodic shift into one period
            r = 2 * (ub[idx] - lb[idx] + al[idx] + au[idx])
            y[idx] -= r * ((y[idx] - lo[idx]) // r)
        idx = y > ub + au
        y[idx] -= 2 * (y[idx] - ub[idx] - au[idx])
        idx = y < lb - al
        y[idx] += 2 * (lb[idx] - al[idx] - y[idx])
        idx = y < lb + al
        y[idx] = lb[idx] + (y[idx] - (lb[idx] - al[idx]))**2 / 4 / al[idx]
        idx = y > ub - au
        y[idx] = ub[idx] - (y[idx] - (ub[idx] + au[idx]))**2 / 4 / au[idx]
        return y

    def ask(self) -> tuple[np.ndarray, np.ndarray]:
        G = np.array(self.es.ask())
        return G, self.transform(G)

    def tell(self, G: np.ndarray, fs) -> None:
        self.es.tell(list(G), list(fs))

    def stop(self):
        return self.es.stop()

    @property
    def result(self):
        return self.es.result


def cma_stream(seed: int) -> dict:
    """pycma options that draw a search's Gaussian samples from a private ``RandomState(seed)``.

    pycma's own ``seed`` option reseeds NumPy's *global* generator and samples from it: that
    changes the caller's global state (a library must not), and searches running in different
    threads would interleave their draws. ``RandomState(seed).randn`` is the same stream that
    ``np.random.seed(seed)`` followed by ``np.random.randn`` gives, so results are unchanged
    (measured: the default XL330 family fit's table and parameters are identical)."""
    return {"seed": float("nan"), "randn": np.random.RandomState(int(seed)).randn}


def search_folds(spec: ModelSpec, space: ParamSpace, scorer: PopulationScorer, weights: np.ndarray, *,
                 inits: list[list[dict]], max_evals: int, popsize: int = 16, n_starts: int = 1,
                 sigma0: float = 0.25, seed: int = 0, effort_weight: float = 0.0,
                 stds: np.ndarray | None = None, progress: Callable | None = None,
                 groups: np.ndarray | None = None, aggregate: str = "pooled") -> list[FoldSearch]:
    """CMA-ES on several training sets at once: fold f minimises the objective over the logs with
    ``weights[f] == 1`` (weights (F, L)). All folds' candidates are scored in one
    :class:`PopulationScorer` call per generation, so F folds cost about one fit's overhead.

    inits[f]: parameter dicts of models this one contains, fitted on the *same* fold; each is
    scored first and the best is the fold's first start (as in :func:`fit_model`), so a fold's
    result is never worse than its parents' on its training logs. Starts after the first are a
    wide perturbation of the fold's best point so far. stds (space.n,): per-coordinate multipliers
    of sigma0 (e.g. small for parameters inherited from a fitted parent, 1 for new mechanisms).
    groups (L,), aggregate: how each fold's objective combines condition groups
    (:func:`objective_from_sums`; default pooled over samples)."""
    if aggregate not in TRAIN_OBJECTIVES:
        raise UnknownNameError("training objective", aggregate, TRAIN_OBJECTIVES)
    F = weights.shape[0]
    rng = np.random.default_rng(seed)
    best_z = [None] * F
    best_f = np.full(F, np.inf)
    evals = np.zeros(F, int)
    history = [[] for _ in range(F)]

    def score(Zs: list[np.ndarray | None]) -> list[np.ndarray | None]:
        rows = [(f, Z) for f, Z in enumerate(Zs) if Z is not None and len(Z)]
        if not rows:
            return [None] * F
        P = np.concatenate([full_vectors(space, _theta_np(space, Z)) for _, Z in rows])
        if scorer.has_pairs:  # run each candidate on its own fold's training logs only
            owner = np.concatenate([np.full(len(Z), f) for f, Z in rows])
            cand, logs = [], []
            for k_, f in enumerate(owner):
                li = np.flatnonzero(weights[f])
                cand.append(np.full(li.size, k_))
                logs.append(li)
            cand, logs = np.concatenate(cand), np.concatenate(logs)
            flat = scorer.pairs(P[cand], logs, scorer.size)
            sums = {c: np.zeros((len(P), len(scorer.n))) for c in flat}
            for c in flat:
                np.add.at(sums[c], (cand, logs), flat[c])
        else:
            sums = scorer(P)
        out, k = [None] * F, 0
        for f, Z in rows:
            sl = slice(k, k + len(Z))
            fs = objective_from_sums({c: v[sl] for c, v in sums.items()}, scorer.n, weights[f], effort_weight,
                                     groups, aggregate)
            fs = np.where(np.isfinite(fs), fs, 1e3)
            evals[f] += len(Z)
            i = int(np.argmin(fs))
            if fs[i] < best_f[f]:
                best_f[f], best_z[f] = float(fs[i]), np.asarray(Z[i], float).copy()
            out[f] = fs
            k += len(Z)
        return out

    if space.n == 0:
        score([np.zeros((1, 0))] * F)
        return [FoldSearch(np.zeros(0), float(best_f[f]), int(evals[f])) for f in range(F)]
    z_neutral = space.to_z(space.theta_from({}))
    z_neutral = np.where([PARAMS[n].neutral == 0.0 for n in space.names], z_neutral, 0.5)
    starts = []
    for f in range(F):
        Z0 = [space.to_z(space.theta_from(embed_params(d, spec.name))) for d in inits[f]]
        starts.append(np.array(Z0 + [z_neutral]))
    fs0 = score(starts)
    z_first = [starts[f][int(np.argmin(fs0[f]))] for f in range(F)]
    total = n_starts * max_evals
    for si in range(n_starts):
        z0s, seeds = [], []
        for f in range(F):  # the generator's draws in the order they always had
            z0s.append(z_first[f] if si == 0 else np.clip(best_z[f] + rng.normal(0.0, 0.2, space.n), 0.0, 1.0))
            seeds.append(int(rng.integers(1, 2**31 - 1)))
        # the F lockstep searches share one private stream seeded by the last seed: the stream that
        # pycma's global reseeding gave them before (same draws, same results)
        stream = cma_stream(seeds[-1])
        es = [UnitBoxCMA(z0, sigma0, {
            "popsize": popsize, **stream,
            "maxfevals": max_evals, "verbose": -9, "verb_log": 0, "tolfun": 1e-9, "tolx": 1e-7,
            **({"CMA_stds": list(stds)} if stds is not None and si == 0 else {})}) for z0 in z0s]
        used = np.zeros(F, int)
        while True:
            live = [f for f in range(F) if not es[f].stop() and used[f] < max_evals]
            if not live:
                break
            asked = [es[f].ask() if f in live else (None, None) for f in range(F)]
            fs = score([Z for _, Z in asked])
            for f in live:
                es[f].tell(asked[f][0], fs[f])
                used[f] += len(asked[f][0])
            if progress:
                progress("cma", si * max_evals + int(used.max()), total)
        for f in range(F):
            history[f].append({"start": si, "evals": int(used[f]), "best_f": float(es[f].result.fbest)})
    return [FoldSearch(np.asarray(_theta_np(space, best_z[f][None]))[0], float(best_f[f]), int(evals[f]), history[f])
            for f in range(F)]

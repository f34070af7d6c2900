"""Many fits at once: one compiled scorer for every model of a structure, CMA-ES searches in lockstep.

:class:`PopulationScorer` scores whole populations of full parameter vectors (every name of
:data:`~actuatorlab.identify.space.PARAM_ORDER`) on every log in one compiled call, sliced over
threads; :func:`search_folds` runs one CMA-ES per fold (a 0/1 weighting of the logs) in lockstep,
so F folds cost about one fit's overhead. :class:`UnitBoxCMA` is pycma's bounded CMA-ES with the
box transform applied to the whole population at once.
"""

from __future__ import annotations

import math
import os
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

with warnings.catch_warnings():  # cma warns when matplotlib is absent; plotting is not used
    warnings.simplefilter("ignore")
    import cma
    from cma.boundary_handler import BoundTransform
import jax
import jax.numpy as jnp
import numpy as np

from ..precision import in_this_precision
from ..models.params import PARAMS
from ..models.registry import ModelSpec, embed_params
from ..sim.rollout import Batch, rollout, rollout_batch
from .censor import censored, half_cells
from .space import PARAM_ORDER, ParamSpace, full_vectors, substeps_for

__all__ = ["PopulationScorer", "objective_from_sums", "FoldSearch", "SearchSettings", "search_folds",
           "UnitBoxCMA", "BestSoFar", "Stall", "run_cma", "cma_stream", "default_workers", "run_sliced", "MAX_WORKERS"]


#: most threads a :class:`PopulationScorer` splits a population over
MAX_WORKERS = 8


_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()

#: pycma's constructor evaluates its option strings (``eval``, ``ast.literal_eval``), and CPython 3.11 can
#: fail when two threads build syntax trees at once ("SystemError: AST constructor recursion depth
#: mismatch", reported in threaded programs, python/cpython gh-106905): seen once on 3.11.7 in the walk's
#: side-by-side fits (zoo high_gear, 2026-12-07). CMA-ES objects are therefore built one at a time.
_CMA_INIT = threading.Lock()


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
    return list(_scorer_pool(workers).map(in_this_precision(fn), items))


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
    ``batches`` (in batch order, ``self.names``): ``abs_q`` sum |q_sim - q| [rad|m], ``cens_q`` the
    same of the error outside each reading's quantisation cell (the fit's objective,
    :mod:`actuatorlab.identify.censor`; ``censor`` the band's half-width as a fraction of the lattice
    step, None: :data:`~actuatorlab.identify.censor.CENSOR`), ``sq_q`` sum of squares, ``sq_u`` sum
    of squared controller-output errors (0 where not measured); ``n`` (L,) valid samples per log.
    Non-finite errors count as 1e3 per sample (as in :func:`make_loss`).
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
                 workers: int | None = None, censor: float | None = None):
        self.size = int(size)
        self.dtype = dtype
        self.workers = max(1, int(default_workers() if workers is None else workers))
        self.names = tuple(n for b in batches for n in b.names)
        self.n = np.concatenate([b.mask.sum(axis=1) for b in batches]).astype(float)  # (L,)
        self.batch_of = np.concatenate([np.full(b.size, i) for i, b in enumerate(batches)])
        sub = substeps_for(spec)
        cfgs = tuple(b.step_config(spec.compliant, sub, spec.thermal) for b in batches)
        halves = half_cells(batches, censor)
        banded = any(np.any(h) for h in halves)  # without a band the censored sums are the plain ones
        arrays = [(b.arrays(), b.mask, np.nan_to_num(b.effort_meas), np.isfinite(b.effort_meas), h)
                  for b, h in zip(batches, halves)]
        arrays = jax.tree_util.tree_map(
            lambda x: jnp.asarray(x, dtype) if np.issubdtype(np.asarray(x).dtype, np.floating)
            or np.asarray(x).dtype == bool else jnp.asarray(x), arrays)

        def clean(r):
            return jnp.where(jnp.isfinite(r), r, 1e3)

        def one(pvec, data):
            p = {n: pvec[i] for i, n in enumerate(PARAM_ORDER)}
            aq, cq, sq, su = [], [], [], []
            for cfg, (arr, mask, u_meas, u_ok, h) in zip(cfgs, data):
                out = rollout_batch(cfg, p, arr)
                e = out.q - arr["q_meas"]
                aq.append(jnp.sum(clean(jnp.abs(e)) * mask, axis=1))
                cq.append(jnp.sum(clean(jnp.abs(censored(e, h, jnp))) * mask, axis=1) if banded else aq[-1])
                sq.append(jnp.sum(clean(e**2) * mask, axis=1))
                su.append(jnp.sum(clean((out.u - u_meas) ** 2) * mask * u_ok, axis=1))
            return jnp.concatenate(aq), jnp.concatenate(cq), jnp.concatenate(sq), jnp.concatenate(su)

        self._arrays = arrays
        self._fn = jax.jit(jax.vmap(one, in_axes=(0, None)))
        self._pair_fn = None
        if len(batches) == 1:  # (candidate, log) pairs: only the logs a candidate is scored on are run
            cfg = cfgs[0]

            def pair(pvec, i, data):
                arr, mask, u_meas, u_ok, h = data
                p = {n: pvec[k] for k, n in enumerate(PARAM_ORDER)}
                c = jax.tree_util.tree_map(lambda x: x[i], arr["consts"])
                qm, dqm = arr["q_meas"][i], arr["dq_meas"][i]
                out = rollout(cfg, p, c, arr["q_target"][i], arr["enable"][i], arr["v_supply"][i], qm[0], dqm[0],
                              arr["temperature0"][i])
                e = out.q - qm
                aq = jnp.sum(clean(jnp.abs(e)) * mask[i])
                return (aq, jnp.sum(clean(jnp.abs(censored(e, h[i], jnp))) * mask[i]) if banded else aq,
                        jnp.sum(clean(e**2) * mask[i]),
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
        aq, cq, sq, su = (np.concatenate([p[k] for p in parts])[:n] for k in range(4))
        return {"abs_q": aq, "cens_q": cq, "sq_q": sq, "sq_u": su}

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
        aq, cq, sq, su = (np.concatenate([p[k] for p in parts])[:n] for k in range(4))
        return {"abs_q": aq, "cens_q": cq, "sq_q": sq, "sq_u": su}


def objective_from_sums(sums: dict[str, np.ndarray], n: np.ndarray, weights: np.ndarray,
                        effort_weight: float = 0.0) -> np.ndarray:
    """The objective of :func:`~actuatorlab.identify.fit.make_loss` over the logs selected by
    ``weights`` (L,) (0/1), from :class:`PopulationScorer` sums: pooled position MAE (every
    selected sample counts the same) outside each reading's quantisation cell (``cens_q``), or with
    ``effort_weight`` > 0
    log(mean sq position error) + w log(mean sq controller-output error). Returns (n_candidates,)."""
    N = float(np.sum(weights * n))
    if effort_weight > 0:
        return (np.log(sums["sq_q"] @ weights / N + 1e-30)
                + effort_weight * np.log(sums["sq_u"] @ weights / N + 1e-30))
    return sums["cens_q"] @ weights / N


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
    ``ask()`` returns (genotypes, candidates in the box); ``tell`` takes the genotypes.

    ``pad_1d``: a one-dimensional search runs as a two-dimensional one whose second coordinate
    (started at 0.5) is ignored: ``ask`` returns the first coordinate only. The whole-robot fit has
    always searched so (pycma's bounded CMA-ES fails on 1-D problems: "not yet initialized
    (dimension needed)"); kept there so its one-parameter fits draw the same stream."""

    def __init__(self, z0, sigma0: float, opts: dict, *, pad_1d: bool = False):
        opts = dict(opts)
        if "bounds" in opts or "maxstd" in opts:
            raise ValueError("UnitBoxCMA sets the bounds [0, 1] and maxstd itself")
        z0 = np.asarray(z0, float)
        self.n = z0.size
        if pad_1d and z0.size == 1:
            z0 = np.r_[z0, 0.5]
        bt = BoundTransform([0.0, 1.0])
        tf = bt.bounds_tf
        tf.initialize(z0.size)
        self._lb, self._ub, self._al, self._au = (np.asarray(getattr(tf, a), float)
                                                  for a in ("_lb", "_ub", "_al", "_au"))
        mean0 = np.asarray(bt.inverse(z0.copy()), float)
        with _CMA_INIT:
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
        return G, self.transform(G)[:, :self.n]

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


@dataclass
class BestSoFar:
    """The lowest objective value scored so far (``f``) and its point (``x``: a z vector, a
    parameter dict, ...); every CMA-ES fit keeps its result this way."""

    f: float = math.inf
    x: Any = None

    def update(self, fs, xs) -> None:
        """Keep the candidate of ``xs`` with the lowest value of ``fs`` if it is strictly better."""
        i = int(np.argmin(fs))
        if fs[i] < self.f:
            x = xs[i]
            self.f, self.x = float(fs[i]), (np.array(x, float) if isinstance(x, np.ndarray) else x)


@dataclass(frozen=True)
class Stall:
    """When a CMA-ES start has converged to what it will find: its best objective value improved by
    less than ``rel`` over the last ``generations`` generations (relative to the value for a
    position MAE, absolute for a log objective, where a difference of 0.01 is a 1 % ratio).

    Measured on the in-family truth xl330_family (m2+delay, ``fit --model m2+delay``, population
    16; bench/journal/fit_rules.md, R44): the objective has two basins, the truth's (0.355 mrad,
    the sensor floor 0.36) and one where the back-EMF damping kt^2/R is traded for viscous
    friction at the same kt/R (22 mrad; only the torque-off drops tell them apart). A start
    caught in the second stalls after 600-2000 evaluations; one in the truth's basin improves by
    more than 1 % per 25 generations until 2000-4000 evaluations. A restart from the first point
    with a fresh stream reached the truth in 10 of 12 tries, the wide perturbation of the best
    point it replaces in 0 of 4. Default single-model budget (4000 x 2): seed 0 21.2 -> 0.36 mrad,
    seeds 0-4 all at 0.355-0.39 mrad now."""

    generations: int = 40  #: window of the test [CMA-ES generations]
    rel: float = 0.01  #: least improvement over the window (relative; absolute with ``log_objective``)
    log_objective: bool = False  #: the objective is a log (the effort-weighted objective)

    def __call__(self, trace: Sequence[float]) -> bool:
        """True when the best values ``trace`` (one per generation, non-increasing) have stalled."""
        if len(trace) <= self.generations:
            return False
        old, new = trace[-1 - self.generations], trace[-1]
        return bool(old - new < self.rel * (1.0 if self.log_objective else abs(new)))


def run_cma(searches: Sequence[UnitBoxCMA], score: Callable[[list[np.ndarray | None]], Mapping[int, np.ndarray]],
            max_evals: int | None = None, progress: Callable[[np.ndarray], None] | None = None,
            stall: Callable[[Sequence[float]], bool] | None = None) -> np.ndarray:
    """The CMA-ES generation loop of every derivative-free fit (one joint, the folds of a family,
    a whole robot, the per-joint co-evolution), several searches in lockstep.

    Each generation asks every *live* search (not stopped, fewer than ``max_evals`` candidates
    asked so far; None: no limit but pycma's own; not stalled: ``stall(best values per generation)``
    False, e.g. a :class:`Stall`) for its population in the unit box, scores all populations in
    one call ``score(Zs)`` (Zs[i] (P_i, n_i), None for a search that is not live) -> {i: objective
    values (P_i,)}, and tells each live search its values, until no search is live.
    ``progress(asked)`` after every generation. Returns the candidates asked per search (S,)."""
    used = np.zeros(len(searches), int)
    trace: list[list[float]] = [[] for _ in searches]
    while True:
        live = [i for i, es in enumerate(searches) if not es.stop() and (max_evals is None or used[i] < max_evals)
                and not (stall is not None and stall(trace[i]))]
        if not live:
            return used
        asked = {i: searches[i].ask() for i in live}  # (G, Z) of each live search, in order
        fs = score([asked[i][1] if i in asked else None for i in range(len(searches))])
        for i in live:
            searches[i].tell(asked[i][0], fs[i])
            used[i] += len(asked[i][0])
            trace[i].append(min(float(np.min(fs[i])), trace[i][-1] if trace[i] else math.inf))
        if progress:
            progress(used)


@dataclass(frozen=True)
class SearchSettings:
    """Settings of one lockstep CMA-ES search (:func:`search_folds`)."""

    max_evals: int  #: CMA-ES evaluations per start, for every fold
    popsize: int = 16  #: CMA-ES population
    n_starts: int = 1  #: starts (the first from the best init, later ones a wide perturbation)
    sigma0: float = 0.25  #: initial step in the unit box
    seed: int = 0  #: seed of the starts' draws and of the CMA-ES stream
    stds: np.ndarray | None = None  #: (space.n,) multipliers of sigma0 in the first start (None: 1)
    #: a later start's optimum replaces the best so far only when it is at least this much lower
    #: (relative; for a log objective, by log(1 - restart_gain)); 0: whenever it is lower
    restart_gain: float = 0.0


def _lowered(f: float, gain: float, log_objective: bool) -> float:
    """The value a restart must beat to replace a point of objective ``f`` by a relative ``gain``."""
    if gain <= 0.0:
        return f
    return f + math.log1p(-gain) if log_objective else f * (1.0 - gain)


def _best(z: np.ndarray | None) -> np.ndarray:
    """A fold's best point in :func:`search_folds`, which the first scoring sets for every fold."""
    assert z is not None
    return z


def search_folds(spec: ModelSpec, space: ParamSpace, scorer: PopulationScorer, weights: np.ndarray,
                 inits: list[list[dict]], settings: SearchSettings, *, effort_weight: float = 0.0,
                 objective: Callable | None = None, progress: Callable | None = None) -> list[FoldSearch]:
    """CMA-ES on several training sets at once: fold f minimises the objective over the logs with
    ``weights[f] == 1`` (weights (F, L)). All folds' candidates are scored in one
    :class:`PopulationScorer` call per generation, so F folds cost about one fit's overhead.

    inits[f]: parameter dicts of models this one contains, fitted on the *same* fold; each is
    scored first and the best is the fold's first start (as in
    :func:`~actuatorlab.identify.fit.fit_model`), so a fold's result is never worse than its
    parents' on its training logs. Starts after the first are a wide perturbation of the fold's
    best point so far; with ``settings.restart_gain`` > 0 a later start's optimum replaces that
    point only when it is at least that much lower (else the search goes on from, and returns, the
    point it had). ``settings.stds`` (space.n,): per-coordinate multipliers of sigma0 (e.g.
    small for parameters inherited from a fitted parent, 1 for new mechanisms).
    objective(sums, n, weights_f) -> (n_candidates,): a fold's objective from the scorer's sums
    (default :func:`objective_from_sums` with ``effort_weight``: pooled over samples)."""
    if objective is None:
        def objective(sums, n, w):
            return objective_from_sums(sums, n, w, effort_weight)
    max_evals, popsize, n_starts = settings.max_evals, settings.popsize, settings.n_starts
    sigma0, stds = settings.sigma0, settings.stds
    F = weights.shape[0]
    rng = np.random.default_rng(settings.seed)
    best = [BestSoFar() for _ in range(F)]
    evals = np.zeros(F, int)
    history: list[list[dict[str, float]]] = [[] for _ in range(F)]

    def score(Zs: Sequence[np.ndarray | None]) -> dict[int, np.ndarray]:
        """Objective values of the candidates Zs[f] (None or empty: fold f not scored), by fold."""
        rows = [(f, Z) for f, Z in enumerate(Zs) if Z is not None and len(Z)]
        if not rows:
            return {}
        P = np.concatenate([full_vectors(space, space.to_theta(Z, np)) for _, Z in rows])
        if scorer.has_pairs:  # run each candidate on its own fold's training logs only
            owner = np.concatenate([np.full(len(Z), f) for f, Z in rows])
            li_of = [np.flatnonzero(weights[f]) for f in owner]  # each candidate's training logs
            cand = np.concatenate([np.full(li.size, k_) for k_, li in enumerate(li_of)])
            logs = np.concatenate(li_of)
            flat = scorer.pairs(P[cand], logs, scorer.size)
            sums = {c: np.zeros((len(P), len(scorer.n))) for c in flat}
            for c in flat:
                np.add.at(sums[c], (cand, logs), flat[c])
        else:
            sums = scorer(P)
        out, k = {}, 0
        for f, Z in rows:
            sl = slice(k, k + len(Z))
            fs = objective({c: v[sl] for c, v in sums.items()}, scorer.n, weights[f])
            fs = np.where(np.isfinite(fs), fs, 1e3)
            evals[f] += len(Z)
            best[f].update(fs, Z)
            out[f] = fs
            k += len(Z)
        return out

    if space.n == 0:
        score([np.zeros((1, 0))] * F)
        return [FoldSearch(np.zeros(0), best[f].f, int(evals[f])) for f in range(F)]
    z_neutral = space.to_z(space.theta_from({}))
    z_neutral = np.where([PARAMS[n].neutral == 0.0 for n in space.names], z_neutral, 0.5)
    starts = []
    for f in range(F):
        Z0 = [space.to_z(space.theta_from(embed_params(d, spec.name))) for d in inits[f]]
        starts.append(np.array(Z0 + [z_neutral]))
    fs0 = score(starts)
    z_first = [starts[f][int(np.argmin(fs0[f]))] for f in range(F)]
    kept = [BestSoFar() for _ in range(F)]  # the point each fold's search returns (restart_gain)
    total = n_starts * max_evals
    for si in range(n_starts):
        z0s, seeds = [], []
        for f in range(F):  # the generator's draws in the order they always had
            z0s.append(z_first[f] if si == 0 else np.clip(_best(best[f].x) + rng.normal(0.0, 0.2, space.n), 0.0, 1.0))
            seeds.append(int(rng.integers(1, 2**31 - 1)))
        # the F lockstep searches share one private stream seeded by the last seed: the stream that
        # pycma's global reseeding gave them before (same draws, same results)
        stream = cma_stream(seeds[-1])
        es = [UnitBoxCMA(z0, sigma0, {
            "popsize": popsize, **stream,
            "maxfevals": max_evals, "verbose": -9, "verb_log": 0, "tolfun": 1e-9, "tolx": 1e-7,
            **({"CMA_stds": list(stds)} if stds is not None and si == 0 else {})}) for z0 in z0s]
        used = run_cma(es, score, max_evals,
                       (lambda u: progress("cma", si * max_evals + int(u.max()), total)) if progress else None)
        for f in range(F):
            history[f].append({"start": si, "evals": int(used[f]), "best_f": float(es[f].result.fbest)})
            if si == 0 or best[f].f < _lowered(kept[f].f, settings.restart_gain, effort_weight > 0):
                kept[f] = BestSoFar(best[f].f, best[f].x)
                history[f][-1]["kept"] = True  # this start's point is the search's result so far
            else:  # the restart did not earn its place: back to the point the search had
                best[f] = BestSoFar(kept[f].f, kept[f].x)
                history[f][-1]["kept"] = False
    return [FoldSearch(np.asarray(space.to_theta(_best(best[f].x)[None], np))[0], best[f].f, int(evals[f]),
                       history[f]) for f in range(F)]


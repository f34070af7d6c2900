"""Fit the nested family and let each mechanism earn its place on *conditions* it was not fitted on.

Leave-one-group-out (LOGO) over the logs' condition tags (:func:`condition_folds`): the logs are
grouped by a tag of ``Trajectory.conditions`` (default ``excitation``: one group per excitation
family); fold g fits on every log outside group g and is judged on group g. A group is a set of
whole logs, so no log has samples on both sides. With fewer than 2 groups the old single split is
used (:func:`split_validation`: every 4th log by excitation, or a 70/30 time split of 1-2 logs) and
the result says so (``scheme == "split"``). Held-out data given elsewhere (``compare --holdout``,
bench/) is never seen here.

Every model is fitted on every fold, starting from the fold optima of the models it contains (same
fold), so on its fold's training logs it never ends worse than they do. All folds of a model run
as CMA-ES searches in lockstep, scored by one compiled scorer shared by every model of the same
structure (:func:`actuatorlab.identify.fit.search_folds`).

Rule (``min_gain`` = 0.02). For model m, its *reference* is the eligible model it contains with
the lowest mean held-out MAE (mean over groups of each group's pooled position MAE); m1, or the
first model of the ladder, is always eligible. m *earns its place* when both hold:

1. mean rule: ``1 - mean_g(MAE_m,g) / mean_g(MAE_ref,g) >= min_gain``;
2. paired rule: m has a lower held-out MAE than its reference in more groups than it has a higher
   one (``wins > losses``; groups where both are equal, e.g. the fold fit stayed at the reference's
   optimum, are ties and drop out, as in a sign test). The one-sided sign-test p-value and a paired
   t statistic on the log MAE ratios are reported beside it, not used: with 3-4 groups no test can
   reach 5 %.

The selected model is the eligible one with the lowest mean held-out MAE. Extensions
(:data:`~actuatorlab.models.registry.SELECTION_EXTENSIONS`) are tried on top of the
``top_bases`` best eligible models of the base ladder, one at a time; when several earn their
place on the same base they are then added one by one to the best of them (forward selection, each
step judged by the same rule against the models it contains). The selected model is finally refitted on all the given logs
from the best of its fold optima. Its fold optima are the leave-one-group-out estimates reused by
:func:`group_jackknife` for the parameter uncertainty.

Optimizer noise (options, issue 7; none is the default, see docs/models.md for the measurements):
``fold_seeds=R`` runs R independent CMA-ES replicas of every fold search (lockstep, replica r of a
model starts from replica r of the models it contains) and scores a model on a group by the mean
(``fold_score="median"``: median) of its replicas' held-out MAE, so the score is an estimate of
the model's expected out-of-group error under the optimizer's randomness rather than one draw;
``fold_init="all"`` fits each model on all given logs first and starts every fold from that
optimum with a small step (folds then differ by data more than by the optimizer's path; the start
has seen the held-out group, so scores lean optimistic); ``final_seeds=S`` runs S all-logs refits
and keeps one by ``final_pick`` (``"best"`` training objective, or ``"medoid"``: the optimum
closest to the others in the search box).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from ..precision import physics
from ..errors import ActuatorlabError, DataError, UnknownNameError
from ..logs.format import Trajectory
from ..models.registry import SELECTION_EXTENSIONS, contains, get_model, tied_equivalents
from ..sim.rollout import make_batches
from .fit import (TRAIN_OBJECTIVE, TRAIN_OBJECTIVES, FitResult, ParamSpace, PopulationScorer, effort_available,
                  full_vectors, make_loss, profile_for, search_folds)
from .calibrate import free_swing_calibration

__all__ = ["split_validation", "time_split", "LADDERS", "ladder_for", "SelectionResult", "fit_family",
           "BUDGETS", "SELECTION_BUDGETS", "SELECTION_STARTS", "Fold", "condition_folds", "group_jackknife",
           "GROUP_KEYS", "LOG_KEY", "group_ids", "SELECT_RULES", "one_se_choice", "resampled_uncertainty", "SELECTION_SEEDS", "FOLD_SCORES",
           "FOLD_INITS", "CALIBRATIONS", "CALIBRATION"]

#: base ladders; extensions (SELECTION_EXTENSIONS) are added on top of the best bases by fit_family
LADDERS: dict[str, tuple[str, ...]] = {
    "servo": ("m1", "m2", "m3", "m4", "m5", "m6", "g1", "g2"),
    "drive": ("m1", "m1+offset", "m2+offset", "m1+offset+delay"),
}

#: condition tag(s) whose values define the leave-one-group-out groups, by default
GROUP_KEYS: tuple[str, ...] = ("excitation",)

#: pseudo condition tag whose value is the log's name: ``group_by=("log",)`` is leave-one-log-out
LOG_KEY = "log"

#: CMA-ES step of parameters inherited from a contained model, relative to that of new parameters
INHERITED_STEP = 0.2

#: a model that contains no fitted model (m1) starts from scratch: it gets this many times the
#: per-fold evaluations (every other model starts from its parents' fold optima)
SCRATCH_FACTOR = 4

#: CMA-ES starts of the final all-data refit (the budget is split between them): the first from the
#: best fold optimum, the others a wide perturbation of the best point so far. One start landed in
#: a poor local optimum on one split (train MAE 38.0 vs 33.4 mrad for the same model, held-out 99.8
#: vs 46.3 mrad); a second start guards against that at no extra evaluations.
FINAL_STARTS = 2

#: name -> (CMA-ES evaluations per fold search, evaluations of the final all-data refit of the
#: selected model, population size, number of best base models that get the extensions)
SELECTION_BUDGETS: dict[str, tuple[int, int, int, int]] = {
    "quick": (250, 1000, 10, 1),
    "default": (500, 3000, 20, 2),
    "thorough": (1500, 8000, 16, 3),
}

#: name -> CMA-ES starts of every fold search (each start gets the budget's per-fold evaluations;
#: start 0 from the best contained model's fold optimum, later ones from a wide perturbation of the
#: fold's best point so far; the best training objective of the fold wins). ``fit_family``'s
#: ``fold_starts`` overrides it.
SELECTION_STARTS: dict[str, int] = {"quick": 1, "default": 1, "thorough": 1}

#: name -> independent CMA-ES replicas of every fold search (different seeds, run in lockstep, each
#: chain started from the same replica of the contained models); a model's score on a group is
#: ``FOLD_SCORES[fold_score]`` over its replicas, so one lucky or unlucky optimizer draw does not
#: decide the selection. ``fit_family``'s ``fold_seeds`` overrides it.
SELECTION_SEEDS: dict[str, int] = {"quick": 1, "default": 1, "thorough": 1}

#: how the replicas' held-out MAE of one group combine into the model's score on that group
FOLD_SCORES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "mean": lambda held: np.mean(held, axis=0),
    "median": lambda held: np.median(held, axis=0),
}
FOLD_SCORE = "mean"

#: where every fold search starts: "parents" (the contained models' optima on the same fold) or
#: "all" (the model's own optimum on all given logs, refined per fold with step WARM_SIGMA: the
#: folds then differ by their data more than by the optimizer's path; the start has seen the
#: held-out group, so the score leans optimistic)
FOLD_INITS = ("parents", "all")
FOLD_INIT = "parents"
WARM_SIGMA = 0.1

#: what the selection calibrates before it fits the family: "free_swing" (the armature and the
#: encoder offset from the torque-off runs of pendulum logs, :mod:`actuatorlab.identify.calibrate`;
#: every base then carries q_offset and both parameters are fitted in narrow boxes around the
#: free-swing values; nothing changes for logs without such runs) or "none"
CALIBRATIONS = ("free_swing", "none")
CALIBRATION = "free_swing"



def _lowest_mean(scores: dict[str, np.ndarray], n_free: dict[str, int], best: str) -> str:
    """The eligible model with the lowest mean held-out MAE over the groups."""
    return best


def one_se_choice(scores: dict[str, np.ndarray], n_free: dict[str, int], best: str) -> str:
    """The one-standard-error rule (Breiman, Friedman, Olshen & Stone 1984, "Classification and
    Regression Trees", section 3.4.3; Hastie, Tibshirani & Friedman, "The Elements of Statistical
    Learning", 7.10), paired over the held-out groups: with b = ``best`` (lowest mean) and, for an
    eligible model m, d_g = MAE_m,g - MAE_b,g over the G groups, m is within one standard error of
    b when mean(d) <= sd(d) / sqrt(G) (sd with G - 1 degrees of freedom); among those the model
    with the fewest free parameters is chosen (ties: the lower mean). ``scores``: eligible model
    -> (G,) held-out MAE; ``n_free``: model -> free parameters."""
    vb = np.asarray(scores[best], float)
    G = vb.size
    near = []
    for m, v in scores.items():
        d = np.asarray(v, float) - vb
        if not np.all(np.isfinite(d)):
            continue
        se = float(np.std(d, ddof=1) / np.sqrt(G)) if G > 1 else 0.0
        if float(np.mean(d)) <= se:
            near.append(m)
    return min(near, key=lambda m: (n_free[m], float(np.mean(scores[m]))))


#: how the selected model is picked among the eligible ones (``fit_family(select_rule=)``)
SELECT_RULES: dict[str, Callable] = {"best": _lowest_mean, "one_se": one_se_choice}
SELECT_RULE = "best"


def _pick_best(space, finals) -> int:
    """The final search with the lowest training objective."""
    return int(np.argmin([r.objective for r in finals]))


def _pick_medoid(space, finals) -> int:
    """The final search whose optimum is the medoid of all optima in the unit box of the search
    (lowest sum of Euclidean distances to the others): the typical optimum, not the luckiest."""
    Z = np.array([space.to_z(r.theta) for r in finals])
    if len(Z) < 3:
        return _pick_best(space, finals)
    return int(np.argmin(np.linalg.norm(Z[:, None] - Z[None], axis=-1).sum(axis=1)))


#: how one of ``final_seeds`` independent all-logs searches becomes the final parameters
FINAL_PICKS: dict[str, Callable] = {"best": _pick_best, "medoid": _pick_medoid}
FINAL_PICK = "best"

#: name -> (CMA evaluations per start, starts, gradient steps)
BUDGETS: dict[str, tuple[int, int, int]] = {
    "quick": (1500, 2, 0),
    "default": (4000, 2, 60),
    "thorough": (12000, 3, 200),
}


def ladder_for(trajs) -> tuple[str, ...]:
    """The default ladder for these logs; firmwares whose gain units are not documented (Feetech)
    get the free gain scale (``+gain``) on every model."""
    ladder = LADDERS[profile_for(trajs)]
    if any(getattr(t, "setup", None) is not None and t.setup.controller == "feetech_pwm" for t in trajs):
        ladder = tuple(m + "+gain" if "gain" not in m.split("+") else m for m in ladder)
    return ladder


def time_split(tr: Trajectory, fraction: float = 0.7) -> tuple[Trajectory, Trajectory]:
    """Cut one log in time: the first ``fraction`` for fitting, the rest for validation."""
    k = int(round(tr.n * fraction))
    if k < 10 or tr.n - k < 10:
        raise DataError(tr.source_file or tr.name, f"log too short ({tr.n} samples) to split in time")

    def cut(sl, suffix):
        return replace(tr, name=f"{tr.name}{suffix}", time=tr.time[sl],
                       data={c: v[sl] for c, v in tr.data.items()})

    return cut(slice(0, k), "[:%d%%]" % round(100 * fraction)), cut(slice(k, None), "[%d%%:]" % round(100 * fraction))


def split_validation(trajs: list[Trajectory], every: int = 4) -> tuple[list[Trajectory], list[Trajectory]]:
    """Deterministic split of the given logs into (fit, validation).

    Three or more logs: sorted by (excitation, gain, name), every ``every``-th log (starting with
    the 3rd) validates, so validation spans excitation families. One or two logs: each is cut in
    time, 70 % / 30 % (:func:`time_split`).
    """
    if not trajs:
        raise DataError(None, "no logs given")
    if len(trajs) < 3:
        pairs = [time_split(t) for t in trajs]
        return [a for a, _ in pairs], [b for _, b in pairs]
    order = sorted(trajs, key=lambda t: (t.conditions.get("excitation", ""), t.conditions.get("gain", ""), t.name))
    val = [t for i, t in enumerate(order) if i % every == 2]
    fit = [t for i, t in enumerate(order) if i % every != 2]
    return fit, val


@dataclass(frozen=True)
class Fold:
    """One leave-one-group-out fold: ``label`` (e.g. "excitation=sin_sin"), ``key`` (the tag),
    indices of the training and held-out logs in the given list (disjoint)."""

    label: str
    key: str
    train: tuple[int, ...]
    heldout: tuple[int, ...]


def condition_folds(trajs: list[Trajectory], keys: tuple[str, ...] = GROUP_KEYS) -> list[Fold]:
    """Leave-one-group-out folds: for each tag in ``keys`` with at least 2 distinct values among the
    logs, one fold per value (held out: every log with that value, or with the tag missing for
    the value ""). Several keys give the union of their folds. Empty when no key has 2 values.
    The key ``"log"`` (:data:`LOG_KEY`) makes every log its own group (leave-one-log-out)."""
    folds = []
    for key in keys:
        values = [_group_value(t, key) for t in trajs]
        distinct = sorted(set(values))
        if len(distinct) < 2:
            continue
        for v in distinct:
            held = tuple(i for i, x in enumerate(values) if x == v)
            folds.append(Fold(f"{key}={v}", key, tuple(i for i in range(len(trajs)) if i not in held), held))
    return folds


def _group_value(t: Trajectory, key: str) -> str:
    """The log's value of the condition tag ``key`` ("" when missing; its name for ``"log"``)."""
    return t.name if key == LOG_KEY else str(t.conditions.get(key, ""))


def group_ids(trajs: list[Trajectory], keys: tuple[str, ...] = GROUP_KEYS) -> np.ndarray:
    """(len(trajs),) int: logs with the same values of every tag in ``keys`` (``"log"``: the log's
    name) share an id, the groups :func:`condition_folds` holds out (for several keys, their
    combinations). Ids are numbered in the order groups first appear."""
    seen: dict[tuple, int] = {}
    out = []
    for t in trajs:
        v = tuple(_group_value(t, k) for k in keys)
        out.append(seen.setdefault(v, len(seen)))
    return np.array(out, int)


def group_jackknife(estimates: np.ndarray, names, values: dict, *, flag_fraction: float = 0.5,
                    method: str = "") -> dict:
    """Delete-a-group jackknife standard errors from leave-one-group-out refits.

    estimates (G, p): the parameters refitted without group g; with their mean theta_bar,
    ``se_i = sqrt((G-1)/G * sum_g (theta_(g),i - theta_bar_i)^2)`` (Efron & Stein 1981; for
    deleted groups of logs, Kott's delete-a-group jackknife). Because whole logs are left out,
    the spread carries the autocorrelation of the residuals within a log, which the Jacobian
    standard errors ignore. ``relative`` = se / |value|; parameters with relative > flag_fraction
    are ``flagged`` (their value is not determined by these logs to better than that fraction).
    """
    est = np.asarray(estimates, float)
    G = est.shape[0]
    names = list(names)
    se = np.sqrt((G - 1) / G * np.sum((est - est.mean(axis=0)) ** 2, axis=0)) if G >= 2 else np.full(len(names), np.nan)
    rel = {n: (float(se[i] / abs(values[n])) if values[n] != 0 else None) for i, n in enumerate(names)}
    return {"method": method, "n_resamples": int(G), "flag_fraction": flag_fraction,
            "stderr": {n: float(se[i]) for i, n in enumerate(names)}, "relative": rel,
            "flagged": [n for n in names if rel[n] is None and se[names.index(n)] > 0
                        or rel[n] is not None and rel[n] > flag_fraction],
            "estimates": {n: [float(x) for x in est[:, i]] for i, n in enumerate(names)}}


@dataclass
class SelectionResult:
    """Outcome of :func:`fit_family`. ``table``: one row per model (see fit_family);
    ``groups``: per-group held-out MAE of every model; ``fold_params``: model -> per-fold fitted
    parameters; ``scheme``: "logo" or "split" (fallback)."""

    selected: str
    fits: dict[str, FitResult]
    table: list[dict]
    final: FitResult
    fit_names: list[str]
    val_names: list[str]
    extras: dict = field(default_factory=dict)
    scheme: str = "logo"
    folds: list[Fold] = field(default_factory=list)
    groups: list[dict] = field(default_factory=list)
    fold_params: dict = field(default_factory=dict)
    rule: str = ""
    uncertainty: dict | None = None


def _cpu() -> float:
    """CPU time [s] of this process (user + system), for timings on a shared machine."""
    t = os.times()
    return t.user + t.system


def _sign_p(wins: int, n: int) -> float:
    """One-sided sign-test p-value P(X >= wins), X ~ Binomial(n, 1/2)."""
    from math import comb

    return float(sum(comb(n, k) for k in range(wins, n + 1)) / 2**n)


def _paired_t(ratios: np.ndarray) -> float | None:
    """t statistic of mean(log ratio) (child / reference) over groups; negative: child better."""
    lr = np.log(np.asarray(ratios, float))
    if lr.size < 2 or not np.all(np.isfinite(lr)):
        return None
    sd = float(np.std(lr, ddof=1))
    return float(np.mean(lr) / (sd / np.sqrt(lr.size))) if sd > 0 else None


def _extended(base: str, exts) -> str:
    return get_model("+".join([base, *exts])).name


@physics
def fit_family(trajs: list[Trajectory], ladder: tuple[str, ...] | None = None, *, seed: int = 0,
               budget: str = "default", min_gain: float = 0.02, dt: float | None = None,
               progress: Callable[[str, str, float], None] | None = None,
               group_by: tuple[str, ...] = GROUP_KEYS,
               extensions: tuple[str, ...] | None = None, fold_starts: int | None = None,
               fold_evals: int | None = None, final_starts: int | None = None,
               fold_seeds: int | None = None, fold_score: str | None = None,
               fold_init: str | None = None, final_seeds: int | None = None,
               final_pick: str | None = None, workers: int | None = None,
               popsize: int | None = None, final_evals: int | None = None,
               train_objective: str | None = None, select_rule: str | None = None,
               calibration: str | None = None) -> SelectionResult:
    """Fit every model of ``ladder`` (and extensions of the best ones) on every condition fold and
    select by the rule of the module docstring; refit the selected model on all logs.

    ladder: base models in nesting order (default :func:`ladder_for`); extensions: names tried on
    top of the best bases (default ``SELECTION_EXTENSIONS``; ``()`` for none). group_by: condition
    tags that define the groups. (The checkpoint file of the earlier, minutes-long selection is
    gone: the whole selection now takes seconds.) fold_starts: CMA-ES starts per fold search
    (default ``SELECTION_STARTS[budget]``); the final refit gets ``final_starts`` (default
    max(FINAL_STARTS, fold_starts)). fold_evals:
    evaluations per start of a fold search (default: the budget's). ``extras["starts"]`` records,
    per model, how many folds each start won (lowest training objective) and the evaluations spent.
    fold_seeds (default ``SELECTION_SEEDS[budget]``), fold_score (``FOLD_SCORES``), fold_init
    (``FOLD_INITS``), final_seeds, final_pick (``FINAL_PICKS``): the optimizer-noise options of the
    module docstring; with fold_seeds > 1 rows gain ``per_group_seeds`` (label -> one held-out MAE
    per replica) and ``fold_params[m]`` holds R x F optima, replica-major. workers: threads each
    population is scored on (:class:`~actuatorlab.identify.fit.PopulationScorer`; default
    :func:`~actuatorlab.identify.fit.default_workers`, the CPU cores; the same result up to
    floating-point rounding). popsize: CMA-ES population of the fold searches (default: the
    budget's; the final refit's population scales with it). final_evals: CMA-ES evaluations per start
    of the final all-logs refit (default: the budget's). train_objective: how every fit (fold
    searches and the final refit) combines the condition groups of its training logs
    (:data:`~actuatorlab.identify.fit.TRAIN_OBJECTIVES`, see
    :func:`~actuatorlab.identify.fit.objective_from_sums`; default ``TRAIN_OBJECTIVE``, pooled over
    samples); the groups are those of ``group_by``. The selection score is unchanged (mean over
    held-out groups). select_rule (:data:`SELECT_RULES`, default ``SELECT_RULE``): which eligible
    model is selected, the lowest mean held-out MAE (``"best"``) or :func:`one_se_choice`.
    calibration (:data:`CALIBRATIONS`, default ``CALIBRATION``): ``"free_swing"`` first fits the
    torque-off runs of the logs alone (:func:`~actuatorlab.identify.calibrate.free_swing_calibration`,
    seeded with ``seed``); when there are such runs, every base of the ladder gains ``+qoffset`` and
    every fit (fold searches, final refit) confines the armature and q_offset to the calibration's
    boxes; ``extras["calibration"]`` records it (None when nothing was calibrated).

    Table rows: ``model``, ``parent`` (the reference), ``n_free``, ``train_mae`` (mean over folds
    of the pooled training position MAE), ``validation_mae`` (mean over groups of the held-out MAE),
    ``per_group`` (label -> held-out MAE), ``gain_vs_parent``, ``wins`` / ``losses`` / ``groups``
    (paired comparison with the reference), ``sign_p``, ``paired_t``, ``earns_place``, ``selected``.
    """
    t_begin, cpu_begin = time.perf_counter(), _cpu()
    ladder = tuple(ladder or ladder_for(trajs))
    for m in ladder:
        get_model(m)
    calibration = calibration or CALIBRATION
    if calibration not in CALIBRATIONS:
        raise UnknownNameError("calibration", calibration, CALIBRATIONS)
    cal = None
    if calibration == "free_swing":
        if progress:
            progress("calibration", "free swing", 0.0)
        cal = free_swing_calibration(trajs, seed=seed, dt=dt, workers=workers)
    bounds = cal.bounds if cal is not None else None
    if cal is not None:  # q_offset is free in every base (calibrated box); canonical names
        ladder = tuple(m if "q_offset" in get_model(m).free else get_model(f"{m}+qoffset").name for m in ladder)
    extensions = SELECTION_EXTENSIONS if extensions is None else tuple(extensions)
    budget_evals, final_evals_default, budget_pop, top_bases = SELECTION_BUDGETS[budget]
    popsize = int(popsize or budget_pop)
    fold_evals = int(fold_evals or budget_evals)
    final_evals = final_evals_default if final_evals is None else int(final_evals)
    if final_evals < 1:
        raise ActuatorlabError(f"final_evals must be >= 1 (got {final_evals})")
    n_starts = int(fold_starts or SELECTION_STARTS.get(budget, 1))
    n_seeds = int(SELECTION_SEEDS.get(budget, 1) if fold_seeds is None else fold_seeds)
    if n_seeds < 1 or (final_seeds is not None and int(final_seeds) < 1):  # an explicit 0 is an error
        raise ActuatorlabError(f"fold_seeds and final_seeds must be >= 1 (got {fold_seeds}, {final_seeds})")
    fold_score = fold_score or FOLD_SCORE
    fold_init = fold_init or FOLD_INIT
    train_objective = train_objective or TRAIN_OBJECTIVE
    select_rule = select_rule or SELECT_RULE
    if select_rule not in SELECT_RULES:
        raise UnknownNameError("selection rule", select_rule, tuple(SELECT_RULES))
    if train_objective not in TRAIN_OBJECTIVES:
        raise UnknownNameError("training objective", train_objective, TRAIN_OBJECTIVES)
    for kind, value, known in (("fold score", fold_score, FOLD_SCORES), ("fold init", fold_init, FOLD_INITS),
                               ("final pick", final_pick or FINAL_PICK, FINAL_PICKS)):
        if value not in known:
            raise UnknownNameError(kind, value, tuple(known))
    start_wins: dict[str, dict] = {}
    folds = condition_folds(trajs, group_by)
    scheme = "logo"
    if len(folds) < 2:  # fallback: one split (whole logs when there are 3 or more, else in time)
        scheme = "split"
        fit_part, val_part = split_validation(trajs)
        work = fit_part + val_part
        folds = [Fold("validation split", "split", tuple(range(len(fit_part))),
                      tuple(range(len(fit_part), len(work))))]
    else:
        work = list(trajs)
    batches = make_batches(work, dt)
    dt = batches[0].dt
    order = {n: i for i, n in enumerate(t.name for t in work)}
    names = [n for b in batches for n in b.names]  # scorer order
    by_name = {t.name: t for t in work}
    log_groups = group_ids([by_name[n] for n in names], group_by)  # (L,) condition group of each log
    col = np.array([order[n] for n in names])
    L, F = len(names), len(folds)
    W = np.zeros((F, L))  # training weights per fold, scorer order
    V = np.zeros((F, L))
    for f, fold in enumerate(folds):
        W[f, np.isin(col, fold.train)] = 1.0
        V[f, np.isin(col, fold.heldout)] = 1.0
    assert not np.any(W * V), "a log on both sides of a fold"
    R = n_seeds  # independent CMA-ES replicas of every fold: row r * F + f is replica r of fold f
    Wr, Vr = np.tile(W, (R, 1)), np.tile(V, (R, 1))
    profile = profile_for(batches)
    effort_weight = 1.0 if effort_available(batches) else 0.0
    scorers: dict[tuple, PopulationScorer] = {}

    def scorer_for(spec):
        key = (spec.compliant, spec.thermal)
        if key not in scorers:
            scorers[key] = PopulationScorer(batches, spec, size=int(popsize * Wr.sum()), dtype=np.float32,
                                            workers=workers)
        return scorers[key]

    fold_params: dict[str, list[dict]] = {}  # model -> R * F fold optima (replica-major)
    all_params: dict[str, dict] = {}  # model -> all-training optimum (fold_init="all")
    final_pop = max(popsize, int(popsize * W.sum()) // L)  # population of an all-logs search
    fits: dict[str, FitResult] = {}
    rows: dict[str, dict] = {}
    val: dict[str, np.ndarray] = {}  # model -> (F,) fold score (FOLD_SCORES[fold_score] over replicas)
    val_seeds: dict[str, np.ndarray] = {}  # model -> (R, F) held-out MAE of every replica
    eligible: dict[str, bool] = {}

    def run(m: str, i: int):
        spec = get_model(m)
        space = ParamSpace.build(spec, batches, profile, bounds=bounds)
        inner = [x for x in fold_params if contains(m, x)]
        inits = [[fold_params[x][k] for x in inner] for k in range(R * F)]
        cb = (lambda stage, d, total, _m=m: progress(_m, stage, d / total)) if progress else None
        t0 = time.perf_counter()
        # parameters already fitted in a contained model are refined (small steps), new ones explored
        known = set().union(*(set(get_model(x).free) for x in inner)) if inner else set()
        known |= tied_equivalents(known)
        stds = np.array([INHERITED_STEP if n in known else 1.0 for n in space.names]) if inner else None
        evals_m = fold_evals if inner else SCRATCH_FACTOR * fold_evals
        if fold_init == "all":  # the model on all given logs first; every fold then starts from it
            (ra,) = search_folds(spec, space, scorer_for(spec), np.ones((1, L)),
                                 inits=[[all_params[x] for x in inner]], popsize=final_pop, max_evals=evals_m,
                                 sigma0=0.25, stds=stds, seed=seed + 17 * i + 5, effort_weight=effort_weight,
                                 groups=log_groups, aggregate=train_objective)
            all_params[m] = {**space.base, **dict(zip(space.names, map(float, ra.theta)))}
            res = search_folds(spec, space, scorer_for(spec), Wr, inits=[[all_params[m]]] * (R * F),
                               popsize=popsize, max_evals=fold_evals, n_starts=n_starts, sigma0=WARM_SIGMA,
                               seed=seed + 17 * i, effort_weight=effort_weight, progress=cb,
                               groups=log_groups, aggregate=train_objective)
        else:
            res = search_folds(spec, space, scorer_for(spec), Wr, inits=inits, popsize=popsize, max_evals=evals_m,
                               n_starts=n_starts, sigma0=0.25, stds=stds, seed=seed + 17 * i,
                               effort_weight=effort_weight, progress=cb, groups=log_groups,
                               aggregate=train_objective)
        wins = np.zeros(n_starts, int)  # which start found each fold's best (ties: the earliest)
        for r in res:
            if r.history:
                wins[int(np.argmin([h["best_f"] for h in r.history]))] += 1
        start_wins[m] = {"wins_per_start": wins.tolist(), "evaluations": int(sum(r.evaluations for r in res))}
        theta = np.array([r.theta for r in res])
        sums = scorer_for(spec)(full_vectors(space, theta))  # (R F, L) per-log sums at each fold optimum
        n_logs = scorer_for(spec).n
        held = np.array([float(sums["abs_q"][k] @ Vr[k] / (Vr[k] @ n_logs)) for k in range(R * F)])
        held = np.where(np.isfinite(held), held, np.inf).reshape(R, F)
        val[m] = FOLD_SCORES[fold_score](held)
        val_seeds[m] = held
        fold_params[m] = [{**space.base, **dict(zip(space.names, map(float, t)))} for t in theta]
        best = int(np.argmin([r.objective for r in res]))
        train_mae = float(np.mean([sums["abs_q"][k] @ Wr[k] / (Wr[k] @ n_logs) for k in range(R * F)]))
        fits[m] = FitResult(spec.name, spec, space, theta[best], train_mae,
                            int(sum(r.evaluations for r in res)), time.perf_counter() - t0, profile, dt,
                            [h for r in res for h in r.history], objective=float(np.mean([r.objective for r in res])),
                            effort_weight=effort_weight)
        ref = [x for x in inner if eligible.get(x)]
        parent = min(ref, key=lambda x: float(np.mean(val[x]))) if ref else None
        row = {"model": m, "parent": parent, "n_free": space.n, "train_mae": fits[m].train_mae,
               "validation_mae": float(np.mean(val[m])),
               "per_group": {fold.label: float(v) for fold, v in zip(folds, val[m])},
               **({"per_group_seeds": {fold.label: [float(x) for x in val_seeds[m][:, f]]
                                       for f, fold in enumerate(folds)}} if R > 1 else {}),
               "gain_vs_parent": None, "wins": None, "losses": None, "groups": F, "sign_p": None, "paired_t": None,
               "wall_s": fits[m].wall_s, "evaluations": fits[m].evaluations}
        if parent is None:
            ok = bool(np.all(np.isfinite(val[m]))) and (m == ladder[0] or not inner)
        else:
            gain = 1.0 - float(np.mean(val[m])) / float(np.mean(val[parent]))
            tie = np.isclose(val[m], val[parent], rtol=1e-9, atol=0.0)
            wins = int(np.sum((val[m] < val[parent]) & ~tie))
            losses = int(np.sum((val[m] > val[parent]) & ~tie))
            row.update(gain_vs_parent=gain, wins=wins, losses=losses, sign_p=_sign_p(wins, wins + losses),
                       paired_t=_paired_t(val[m] / val[parent]))
            ok = bool(np.all(np.isfinite(val[m]))) and gain >= min_gain and wins > losses
        eligible[m] = ok
        row["earns_place"] = ok
        rows[m] = row

    i = 0
    for m in ladder:
        run(m, i)
        i += 1
    bases = sorted((m for m in ladder if eligible[m]), key=lambda m: float(np.mean(val[m])))[:top_bases]
    for b in bases:
        won = []
        for e in extensions:
            spec_b = get_model(b)
            if e in spec_b.extensions:
                continue
            m = _extended(b, [e])
            space_m = ParamSpace.build(get_model(m), batches, profile, bounds=bounds)
            if space_m.n == ParamSpace.build(spec_b, batches, profile, bounds=bounds).n or m in rows:
                continue  # the extension adds nothing free for this drive, or was already tried
            run(m, i)
            i += 1
            if eligible[m]:
                won.append(e)
        # forward: from the best single extension, add the other winners one at a time (best
        # first); each must earn its place against what it contains, else the search stops there
        won.sort(key=lambda e: float(np.mean(val[_extended(b, [e])])))
        current = [won[0]] if won else []
        for e in won[1:]:
            m = _extended(b, current + [e])
            if m not in rows:
                run(m, i)
                i += 1
            if not eligible[m]:
                break
            current.append(e)
    best_m = min((m for m in rows if eligible[m]), key=lambda m: float(np.mean(val[m])))
    selected = SELECT_RULES[select_rule]({m: val[m] for m in rows if eligible[m]},
                                         {m: rows[m]["n_free"] for m in rows}, best_m)

    # final: the selected model on all given logs, from the best of its fold optima (same compiled
    # scorer, one more lockstep search with a single "fold"); its MAE is then re-scored in float64
    t_sel = time.perf_counter() - t_begin
    cpu_sel = _cpu() - cpu_begin
    t0 = time.perf_counter()
    spec = get_model(selected)
    all_w = np.ones((1, L))
    if scheme == "split":  # the fallback worked on cut logs: the final fit uses the logs as given
        batches = make_batches(list(trajs), dt)
        all_w = np.ones((1, sum(b.size for b in batches)))
        given = {t.name: t for t in trajs}
        log_groups = group_ids([given[n] for b in batches for n in b.names], group_by)
        scorers.clear()
    space = ParamSpace.build(spec, batches, profile, bounds=bounds)
    S = int(final_seeds or 1)
    warm = [all_params[selected]] if selected in all_params else []
    # replica s of the final search starts from the best of replica s's fold optima (all of them when
    # there are fewer fold replicas than final ones): the S searches differ by data path and seed
    final_inits = [warm + (fold_params[selected][(s % R) * F:(s % R + 1) * F] if R > 1 else fold_params[selected])
                   for s in range(S)]
    finals = search_folds(spec, space, scorer_for(spec), np.tile(all_w, (S, 1)), inits=final_inits,
                          max_evals=final_evals, popsize=max(popsize, int(popsize * W.sum()) // all_w.shape[1]),
                          n_starts=int(final_starts or max(FINAL_STARTS, n_starts)), sigma0=0.1, seed=seed + 100,
                          effort_weight=effort_weight, groups=log_groups, aggregate=train_objective,
                          progress=(lambda s_, d, t: progress(selected + " (all data)", s_, d / t)) if progress else None)
    pick = FINAL_PICKS[final_pick or FINAL_PICK](space, finals)
    res = finals[pick]
    if S > 1:
        start_wins["final seeds"] = {"objective": [float(r.objective) for r in finals], "picked": int(pick),
                                     "rule": final_pick or FINAL_PICK}
    if res.history:
        fw = np.zeros(len(res.history), int)
        fw[int(np.argmin([h["best_f"] for h in res.history]))] = 1
        start_wins["final (all data)"] = {"wins_per_start": fw.tolist(), "evaluations": int(res.evaluations),
                                          "best_f_per_start": [float(h["best_f"]) for h in res.history]}
    f64 = make_loss(spec, space, batches, "mae")
    final = FitResult(spec.name, spec, space, res.theta, float(f64(res.theta)), res.evaluations,
                      time.perf_counter() - t0, profile, dt, res.history,
                      objective=res.objective if effort_weight else float(f64(res.theta)), effort_weight=effort_weight)
    timing = {"selection_s": t_sel, "final_fit_s": final.wall_s, "selection_cpu_s": cpu_sel,
              "final_fit_cpu_s": _cpu() - cpu_begin - cpu_sel, "models": len(rows), "folds": F,
              "evaluations": int(sum(f.evaluations for f in fits.values())) + final.evaluations,
              "fold_starts": n_starts, "fold_evals": fold_evals, "fold_seeds": R, "fold_score": fold_score,
              "fold_init": fold_init, "popsize": popsize, "final_evals": final_evals,
              "train_objective": train_objective, "select_rule": select_rule,
              "workers": next(iter(scorers.values())).workers if scorers else None,
              "calibration": calibration, "calibration_s": cal.wall_s if cal is not None else 0.0}
    table = list(rows.values())
    for row in table:
        row["selected"] = row["model"] == selected
    groups = [{"group": fold.label, "heldout_logs": [work[j].name for j in fold.heldout],
               **{m: float(val[m][f]) for m in rows}} for f, fold in enumerate(folds)]
    unc = None
    if scheme == "logo":
        key0 = folds[0].key
        idx = [f for f, fold in enumerate(folds) if fold.key == key0]
        est = np.array([[fold_params[selected][f][n] for n in final.space.names] for f in idx])  # replica 0
        unc = group_jackknife(est, final.space.names, final.params,
                              method=f"delete-a-group jackknife over the {len(idx)} leave-one-group-out refits "
                                     f"(groups: {key0})")
    rule = (f"leave-one-group-out over {', '.join(sorted({f.key for f in folds}))} ({F} folds)"
            if scheme == "logo" else "single validation split (fewer than 2 condition groups)")
    rule += (f"; a model earns its place when its mean held-out MAE over the folds is >= {100 * min_gain:g} % "
             "below its best eligible contained model AND it is better in more folds than it is worse (ties "
             "dropped); the "
             + ("eligible model with the lowest mean held-out MAE is selected" if select_rule == "best" else
                "eligible model with the fewest free parameters within one paired standard error of the lowest "
                "mean held-out MAE is selected (one-standard-error rule)")
             + ", then refitted on all given logs")
    fit_names = [work[j].name for j in folds[0].train] if scheme == "split" else [t.name for t in work]
    val_names = [work[j].name for j in folds[0].heldout] if scheme == "split" else [t.name for t in work]
    return SelectionResult(selected, fits, table, final, fit_names, val_names, extras={"timing": timing,
                                                                                          "starts": start_wins,
                                                                                          "calibration": cal.to_dict() if cal is not None else None},
                           scheme=scheme, folds=folds,
                           groups=groups, fold_params=fold_params, rule=rule, uncertainty=unc)


def resampled_uncertainty(trajs: list[Trajectory], model: str, params: dict, *, by: str = "log",
                          group_by: tuple[str, ...] = GROUP_KEYS, max_evals: int = 300, popsize: int = 10,
                          seed: int = 0, dt: float | None = None, flag_fraction: float = 0.5,
                          progress: Callable | None = None, bounds: dict | None = None) -> dict | None:
    """Jackknife of ``model`` over whole logs (``by="log"``: leave one log out, L refits) or over
    condition groups (``by="group"``: leave one group of ``group_by`` out). Every refit is a short
    CMA-ES (``max_evals``) started from ``params`` (the all-data optimum) on the logs that remain;
    all refits run in lockstep (:func:`~actuatorlab.identify.fit.search_folds`). Returns
    :func:`group_jackknife`'s dict, or None with fewer than 2 logs / groups. bounds: the boxes of
    the fit being resampled where they differ from the profile's (a calibration's; see
    :func:`fit_family`), so the refits search where the fit did."""
    spec = get_model(model)
    if by == "log":
        folds = [Fold(f"log={t.name}", "log", tuple(j for j in range(len(trajs)) if j != i), (i,))
                 for i, t in enumerate(trajs)]
    elif by == "group":
        folds = [f for f in condition_folds(trajs, group_by[:1])]
    else:
        raise UnknownNameError("jackknife unit", by, ("log", "group"))
    if len(folds) < 2:
        return None
    batches = make_batches(list(trajs), dt)
    names = [n for b in batches for n in b.names]
    order = {t.name: i for i, t in enumerate(trajs)}
    col = np.array([order[n] for n in names])
    W = np.array([np.isin(col, f.train).astype(float) for f in folds])
    space = ParamSpace.build(spec, batches, profile_for(batches), bounds=bounds)
    scorer = PopulationScorer(batches, spec, size=int(popsize * W.sum()), dtype=np.float32)
    ew = 1.0 if effort_available(batches) else 0.0
    res = search_folds(spec, space, scorer, W, inits=[[params]] * len(folds), max_evals=max_evals,
                       popsize=popsize, sigma0=0.05, seed=seed, effort_weight=ew,
                       progress=(lambda s, d, t: progress("jackknife", s, d / t)) if progress else None)
    est = np.array([r.theta for r in res])
    what = "log" if by == "log" else f"group ({folds[0].key})"
    return group_jackknife(est, space.names, params, flag_fraction=flag_fraction,
                           method=f"delete-one-{what} jackknife: {len(folds)} refits ({max_evals} CMA-ES "
                                  "evaluations each, from the all-data optimum)")

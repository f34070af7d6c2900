"""Fit the nested family and let each mechanism earn its place on *conditions* it was not fitted on.

Leave-one-group-out (LOGO) over the logs' condition tags (:func:`~actuatorlab.identify.folds.
condition_folds`, default tag ``excitation``): fold g fits on every log outside group g and is
judged on group g; a group is a set of whole logs. With fewer than 2 groups the single split of
:func:`~actuatorlab.identify.folds.split_validation` is used and the result says so
(``scheme == "split"``). Held-out data given elsewhere (``compare --holdout``, bench/) is never
seen here.

Every model is fitted on every fold, starting from the fold optima of the models it contains (same
fold), so on its fold's training logs it never ends worse than they do. All folds of a model run
as CMA-ES searches in lockstep, scored by one compiled scorer shared by every model of the same
structure (:func:`~actuatorlab.identify.search.search_folds`).

Rule (:data:`~actuatorlab.identify.nested.MIN_GAIN` = 0.02; :mod:`actuatorlab.identify.nested`,
the rule of every selection, here with one score per held-out group). A model's *mean* score is the
geometric mean over groups of each group's pooled position MAE (:func:`~actuatorlab.identify.nested.
center`): held-out groups differ in difficulty by 10x and more, and every group counts by its ratio.
For model m, its *reference* is the eligible model it contains with the lowest mean score; the
first model of the ladder is always eligible. m *earns its place* when both hold:

1. mean rule: ``1 - mean_g(MAE_m,g) / mean_g(MAE_ref,g) >= MIN_GAIN``;
2. paired rule: m has a lower held-out MAE than its reference in more groups than it has a higher
   one (``wins > losses``; equal groups are ties and drop out, as in a sign test). The one-sided
   sign-test p-value and a paired t statistic on the log MAE ratios are reported beside it, not
   used: with 3-4 groups no test can reach 5 %.

The selected model is the eligible one with the lowest mean held-out MAE. Extensions
(:data:`~actuatorlab.models.registry.SELECTION_EXTENSIONS`) are tried on top of the
``top_bases`` best eligible models of the base ladder, one at a time; when several earn their
place on the same base they are then added one by one to the best of them (forward selection, each
step judged by the same rule). An extension that earned its place on one of those bases is then
tried on every other base of the ladder (rule R45): a mechanism whose absence hides the others
(a command delay: without it no friction law beats m1) no longer keeps the richer members out.
Every fold search is CMA-ES followed by a Levenberg-Marquardt polish that stops on convergence
(:mod:`actuatorlab.identify.polish`), so the scores compare optima rather than searches cut short.
The selected model is finally refitted on all the given logs from the best of its fold optima
(and polished), on the error outside each reading's quantisation cell (rule R52,
:data:`~actuatorlab.identify.censor.FINAL_CENSOR`; the walk compares models on the plain MAE); its fold optima are the leave-one-group-out estimates reused by
:func:`~actuatorlab.identify.folds.group_jackknife` for the parameter uncertainty.

:func:`fit_family` runs the named steps :func:`prepare` (calibration, folds, weights),
:func:`walk` over the ladder with :func:`fit_on_folds` per model (:class:`Ladder` records and
judges; its second half is :func:`extend_bases`), :func:`final_refit` and :func:`selection_result`.
Variants measured on the XL330 bench and not adopted (optimizer replicas, warm starts, group
objectives, the one-standard-error rule, other budgets; the delay screened on m1 and carried up
the ladder, rules R42a-c, judged on the zoo too: bench/journal/fit_rules.md) are composed from
these steps in bench/family_recipes.py. Rule R45 (2026-12-05, bench/journal/fit_rules.md): the
polish, the geometric mean, the carried extensions and no free-swing calibration by default.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from ..precision import in_this_precision, on_fixed_blas_threads, physics
from ..models.registry import ModelSpec, get_model, tied_equivalents
from .calibrate import calibration_applies
from .censor import censored
from ..logs.format import Trajectory
from .boxes import box_record, edge_boxes
from .family import (BUDGETS, CALIBRATION, CALIBRATIONS, FINAL_STARTS, INHERITED_STEP, LADDERS, RESTART_GAIN,
                     SCRATCH_FACTOR, SELECTION_BUDGETS, Family, FamilyOptions, SelectionBudget, calibrate, ladder_for, lifted_problem,
                     prepare)
from .fit import FitResult, make_loss
from .nested import MIN_GAIN, center, contained, judge, lowest
from .folds import (GROUP_KEYS, LOG_KEY, Fold, condition_folds, group_ids, group_jackknife, resampled_uncertainty,
                    split_validation, time_split)
from .polish import polish_folds
from .search import FoldSearch, SearchSettings, default_workers, search_folds
from .space import ParamSpace, full_vectors

__all__ = ["LADDERS", "ladder_for", "SelectionBudget", "SELECTION_BUDGETS", "BUDGETS", "CALIBRATIONS",
           "CALIBRATION", "MIN_GAIN", "FamilyOptions", "Family", "prepare", "prepare_judged", "FoldFits", "fold_settings",
           "fit_on_folds", "fold_fits", "SideBySide", "WALK_THREADS", "score_folds", "Ladder", "extend_bases", "walk", "judge_first_base", "judge_calibration",
           "judge_widened",
           "final_refit", "final_record", "final_result", "selection_result", "SelectionResult", "fit_family",
           # groups and folds live in .folds; named here for the callers of the selection
           "GROUP_KEYS", "LOG_KEY", "Fold", "condition_folds", "group_ids", "group_jackknife",
           "resampled_uncertainty", "split_validation", "time_split",
           # the problem's constants live in .family
           "INHERITED_STEP", "SCRATCH_FACTOR", "FINAL_STARTS", "RESTART_GAIN"]


def prepare_judged(trajs: list[Trajectory], ladder: tuple[str, ...] | None, options: FamilyOptions,
                   progress: Callable | None = None) -> tuple[Family, Ladder, dict | None]:
    """:func:`prepare` then :func:`judge_first_base`, with the same results, where the first base
    without the calibration's boxes (which does not need the calibration) is fitted on the folds
    while the calibration, then the first base with its boxes, run on a thread of their own: the
    two first-base fits are independent searches (same seed, their own fold optima), so they fill
    both cores where one after the other left one idle between their generations (on the 11 shared
    XL330 logs about 3 s of wall time saved by the overlap with the calibration, bench/fit_speed.py)."""
    if options.calibration != "judged" or not calibration_applies(trajs):
        return judge_first_base(prepare(trajs, ladder, options, progress), progress)
    plain = lifted_problem(trajs, ladder, options, lifted=True)
    if progress:
        progress("calibration", "free swing", 0.0)

    def calibrated_first() -> tuple[Family, Ladder]:
        fam = replace(plain, calibration=calibrate(trajs, options))
        lad = Ladder()
        if fam.calibration is not None and fam.calibration.on_bound:
            return fam, lad  # not measured: dropped by judge_first_base before any fit with the boxes (R48)
        fit_on_folds(fam, lad, fam.ladder[0], 0,  # a progress name of its own: both fits run at once
                     (lambda m, stage, frac: progress(f"{m} (boxes)", stage, frac)) if progress else None)
        return fam, lad

    with ThreadPoolExecutor(1, thread_name_prefix="actuatorlab-calibration") as pool:
        pending = pool.submit(in_this_precision(calibrated_first))
        lad_plain = Ladder()
        fit_on_folds(plain, lad_plain, plain.ladder[0], 0, progress)
        fam, lad = pending.result()
    return judge_first_base(fam, progress, (plain, lad_plain), lad)


@dataclass(frozen=True)
class FoldFits:
    """A model fitted on every fold search of a :class:`Family`: ``fit`` (the best row's theta,
    mean training MAE over rows, evaluations, wall time), ``params`` (per row, the full parameter
    dict of its optimum), ``held`` (rows,) held-out MAE [rad | m] (inf where not finite),
    ``starts`` (which start won each row, evaluations)."""

    fit: FitResult
    params: list[dict]
    held: np.ndarray
    starts: dict


#: fits the walk runs side by side (:class:`SideBySide`) when the scorers have more than one thread
WALK_THREADS = 2


def fold_settings(fam: Family, m: str, inner: list[str], space: ParamSpace, i: int) -> SearchSettings:
    """The fold searches of model m (the i-th fitted): parameters inherited from the contained
    models ``inner`` are refined (step INHERITED_STEP), new ones explored; a model with no parent
    gets SCRATCH_FACTOR x the evaluations."""
    b = fam.budget
    known = set().union(*(set(get_model(x).free) for x in inner)) if inner else set()
    known |= tied_equivalents(known)
    stds = np.array([INHERITED_STEP if n in known else 1.0 for n in space.names]) if inner else None
    return SearchSettings(b.fold_evals if inner else SCRATCH_FACTOR * b.fold_evals, b.popsize, b.fold_starts,
                          0.25, fam.seed + 17 * i, stds)


def score_folds(fam: Family, spec: ModelSpec, space: ParamSpace, res: list[FoldSearch], t0: float) -> FoldFits:
    """Held-out and training MAE of every fold optimum (float32 scorer), and the model's summary."""
    wins = np.zeros(fam.budget.fold_starts, int)  # which start found each row's best (ties: the earliest)
    for r in res:
        if r.history:
            wins[int(np.argmin([h["best_f"] for h in r.history]))] += 1
    starts = {"wins_per_start": wins.tolist(), "evaluations": int(sum(r.evaluations for r in res))}
    theta = np.array([r.theta for r in res])
    scorer = fam.scorer(spec)
    sums = scorer(full_vectors(space, theta))  # (rows, L) per-log sums at each fold optimum
    held = np.array([float(sums["abs_q"][k] @ fam.V[k] / (fam.V[k] @ scorer.n)) for k in range(len(res))])
    train_mae = float(np.mean([sums["abs_q"][k] @ fam.W[k] / (fam.W[k] @ scorer.n) for k in range(len(res))]))
    best = int(np.argmin([r.objective for r in res]))
    fit = FitResult(spec.name, spec, space, theta[best], train_mae, int(sum(r.evaluations for r in res)),
                    time.perf_counter() - t0, fam.profile, fam.dt, [h for r in res for h in r.history],
                    objective=float(np.mean([r.objective for r in res])), effort_weight=fam.effort_weight)
    return FoldFits(fit, [{**space.base, **dict(zip(space.names, map(float, t)))} for t in theta],
                    np.where(np.isfinite(held), held, np.inf), starts)


@dataclass
class Ladder:
    """The walk's record, model by model: fold optima (one dict per fold search), score per group
    (F,), fold fit summary, table row, eligibility, start record."""

    fold_params: dict[str, list[dict]] = field(default_factory=dict)
    val: dict[str, np.ndarray] = field(default_factory=dict)
    fits: dict[str, FitResult] = field(default_factory=dict)
    rows: dict[str, dict] = field(default_factory=dict)
    eligible: dict[str, bool] = field(default_factory=dict)
    starts: dict[str, dict] = field(default_factory=dict)

    def inner(self, m: str) -> list[str]:
        """The fitted models m contains (in fitting order)."""
        return contained(m, self.fold_params)

    def add(self, fam: Family, m: str, ff: FoldFits, val: np.ndarray, extra: dict | None = None) -> None:
        """Record model m with its per-group score ``val`` (F,) and judge it by the nested rule
        (:func:`~actuatorlab.identify.nested.judge`) against its reference; ``extra`` goes into
        its row after ``per_group``."""
        inner = self.inner(m)
        self.starts[m], self.val[m], self.fold_params[m], self.fits[m] = ff.starts, val, ff.params, ff.fit
        v = judge(val, inner, self.val, self.eligible, m == fam.ladder[0])
        row = {"model": m, "parent": v.parent, "n_free": ff.fit.space.n, "train_mae": ff.fit.train_mae,
               "validation_mae": float(np.mean(val)),
               "per_group": {fold.label: float(x) for fold, x in zip(fam.folds, val)}, **(extra or {}),
               "gain_vs_parent": v.gain, "wins": v.wins, "losses": v.losses, "groups": len(fam.folds),
               "sign_p": v.sign_p, "paired_t": v.paired_t, "wall_s": ff.fit.wall_s,
               "evaluations": ff.fit.evaluations}
        self.eligible[m] = v.earns_place
        row["earns_place"] = v.earns_place
        self.rows[m] = row

    def lowest_mean(self) -> str:
        """The eligible model with the lowest mean held-out MAE (the selection)."""
        return lowest(self.val, self.eligible)


def fold_fits(fam: Family, m: str, i: int, inner: list[str], inits: list[list[dict]],
              progress: Callable | None = None) -> FoldFits:
    """Model m (the i-th) fitted on every fold search of ``fam``: CMA-ES from ``inits`` (per fold
    search, the fold optima of the fitted models ``inner`` that m contains), the polish, and its
    held-out scores. Records nothing (:meth:`Ladder.add` does)."""
    spec = get_model(m)
    space = fam.space(spec)
    cb = (lambda stage, d, total: progress(m, stage, d / total)) if progress else None
    t0 = time.perf_counter()
    res = search_folds(spec, space, fam.scorer(spec), fam.W, inits, fold_settings(fam, m, inner, space, i),
                       effort_weight=fam.effort_weight, progress=cb)
    res = polish_folds(space, fam.jacobian(spec), fam.W, res, fam.effort_weight, workers=fam.workers)
    return score_folds(fam, spec, space, res, t0)


def fit_on_folds(fam: Family, lad: Ladder, m: str, i: int, progress: Callable | None = None) -> None:
    """Fit model m (the i-th) on every fold from the fold optima of the models it contains, score
    it on the held-out groups and record it in ``lad``."""
    inner = lad.inner(m)
    ff = fold_fits(fam, m, i, inner, [[lad.fold_params[x][k] for x in inner] for k in range(len(fam.W))], progress)
    lad.add(fam, m, ff, ff.held)


class SideBySide:
    """The walk's ``run(m, i)`` (:func:`fit_on_folds`) with the fits of models that do not contain
    one another run side by side, on ``workers`` threads; the results are those of the fits one
    after the other, to the last digit.

    :meth:`submit` fixes what a fit starts from when it is submitted: the fitted or submitted
    models it contains, in submission order (what :meth:`Ladder.inner` gives when the fits run one
    after the other), and waits for those still running. :meth:`sync` records every submitted fit
    in ``lad`` in submission order (the table's order, each judged against the models recorded
    before it). Each fit's CMA-ES has its own random stream (seeded by its index ``i``), so a fit
    does not depend on when it runs. Calling the object is submit-then-sync (one at a time). A walk
    submits the models it can decide on without their results and syncs before it reads ``lad``.
    Why: the fold searches of one model leave about a quarter of 2 cores idle between their
    generations and in the polish (CMA-ES updates, the scorer's hand-offs); a second model's fit
    fills it (bench/journal/fit_rules.md, 2026-12-06, ninth session)."""

    def __init__(self, fam: Family, lad: Ladder, progress: Callable | None = None, workers: int = 2):
        self.fam, self.lad, self.progress = fam, lad, progress
        self.pending: dict[str, Future] = {}
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix="actuatorlab-walk")

    def tried(self, m: str) -> bool:
        """Whether m was fitted or submitted."""
        return m in self.lad.rows or m in self.pending

    def submit(self, m: str, i: int) -> None:
        lad = self.lad
        inner = contained(m, [*lad.fold_params, *self.pending])
        waits = {x: self.pending[x] for x in inner if x in self.pending}
        known = {x: lad.fold_params[x] for x in inner if x not in waits}
        rows = len(self.fam.W)

        def fit() -> FoldFits:
            params = {**known, **{x: f.result().params for x, f in waits.items()}}
            return fold_fits(self.fam, m, i, inner, [[params[x][k] for x in inner] for k in range(rows)],
                             self.progress)

        self.pending[m] = self.pool.submit(in_this_precision(fit))

    def sync(self) -> None:
        for m, f in list(self.pending.items()):  # submission order
            ff = f.result()
            del self.pending[m]
            self.lad.add(self.fam, m, ff, ff.held)

    def __call__(self, m: str, i: int) -> None:
        self.submit(m, i)
        self.sync()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> "SideBySide":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _batch(run: Callable[[str, int], None], lad: Ladder) -> tuple[Callable, Callable, Callable]:
    """submit, sync and tried of a walk's ``run``: a :class:`SideBySide`'s own, or a plain
    ``run(m, i)`` that fits and records at once (bench/family_recipes.py's recipes)."""
    if isinstance(run, SideBySide):
        return run.submit, run.sync, run.tried
    return run, (lambda: None), (lambda m: m in lad.rows)


def _extended(base: str, exts) -> str:
    return get_model("+".join([base, *exts])).name


def extend_bases(fam: Family, lad: Ladder, run: Callable[[str, int], None], bases: list[str], i: int) -> None:
    """The extensions of ``fam`` on the ``top_bases`` best eligible models of ``bases`` one at a
    time, then forward selection among those that earned their place on a base, then each
    extension that earned its place there on every other base of ``bases``; fit indices from ``i``.
    With a :class:`SideBySide` ``run``, the single extensions of a base, and the carried ones, are
    fitted side by side."""
    submit, sync, tried = _batch(run, lad)
    ranked = sorted((m for m in bases if lad.eligible[m]), key=lambda m: center(lad.val[m]))
    carried: list[str] = []
    for b in ranked[:fam.budget.top_bases]:
        spec_b = get_model(b)
        singles = []
        for e in fam.extensions:
            if e in spec_b.extensions:
                continue
            m = _extended(b, [e])
            if fam.space(get_model(m)).n == fam.space(spec_b).n or tried(m):
                continue  # the extension adds nothing free for this drive, or was already tried
            submit(m, i)
            i += 1
            singles.append((e, m))
        sync()
        won = [e for e, m in singles if lad.eligible[m]]
        # forward: from the best single extension, add the other winners one at a time (best
        # first); each must earn its place against what it contains, else the search stops there
        won.sort(key=lambda e: center(lad.val[_extended(b, [e])]))
        current = won[:1]
        for e in won[1:]:
            m = _extended(b, current + [e])
            if not tried(m):
                submit(m, i)
                i += 1
                sync()
            if not lad.eligible[m]:
                break
            current.append(e)
        carried += [e for e in won if e not in carried]
    for b in bases:  # an extension that earned its place on a best base, on every other base too (R45)
        for e in carried:
            m = _extended(b, [e])
            if e in get_model(b).extensions or tried(m) or fam.space(get_model(m)).n == fam.space(get_model(b)).n:
                continue
            submit(m, i)
            i += 1
    sync()


def walk(fam: Family, lad: Ladder, run: Callable[[str, int], None]) -> None:
    """The base ladder (base k is the k-th fit; one in ``lad`` already is not refitted), then
    :func:`extend_bases` on it. ``run(m, i)`` fits model m (the i-th) and records it in ``lad``;
    a :class:`SideBySide` fits the bases side by side where they do not contain one another."""
    submit, sync, tried = _batch(run, lad)
    for k, base in enumerate(fam.ladder):
        if not tried(base):
            submit(base, k)
    sync()
    extend_bases(fam, lad, run, list(fam.ladder), len(fam.ladder))


def judge_first_base(fam: Family, progress: Callable | None = None,
                     lifted: tuple[Family, Ladder] | None = None,
                     fitted: Ladder | None = None) -> tuple[Family, Ladder, dict | None]:
    """The first base on the folds with the calibrated boxes (``fam``; ``fitted``: its ladder with
    the first base already fitted) and lifted (q_offset still free; ``lifted``: that problem and
    its ladder with the first base already fitted); returns the problem of lower mean held-out
    score (``fam`` on ties), its ladder record and the judgement's record (None: nothing judged).
    A calibration with a parameter on the edge of its free swing's box (:attr:`~actuatorlab.identify.
    calibrate.FreeSwing.on_bound`) measured nothing: the lifted problem is taken without fitting the
    boxes (rule R48)."""
    lad = Ladder() if fitted is None else fitted
    if fam.calibration is None or not fam.judged:
        return fam, lad, None
    # the same models (q_offset free), the profile's boxes
    plain, lad_plain = (replace(fam, calibration=None), Ladder()) if lifted is None else lifted
    if fam.calibration.on_bound:
        return plain, lad_plain, {"first_base": fam.ladder[0], "first_kept": False,
                                  "on_bound": list(fam.calibration.on_bound)}
    for problem, ladder in ((fam, lad), (plain, lad_plain)):  # the boxed first base, then the lifted one
        if problem.ladder[0] not in ladder.rows:
            fit_on_folds(problem, ladder, problem.ladder[0], 0, progress)
    with_cal, without = center(lad.val[fam.ladder[0]]), center(lad_plain.val[plain.ladder[0]])
    record = {"first_base": fam.ladder[0], "first_calibrated_score": with_cal, "first_uncalibrated_score": without,
              "first_kept": with_cal <= without}
    return (fam, lad, record) if with_cal <= without else (plain, lad_plain, record)


def judge_calibration(fam: Family, lad: Ladder, selected: str, first: dict | None = None
                      ) -> tuple[Family, dict | None]:
    """The selected model's fold optima polished again with the boxes lifted; lifted when that earns
    its place by the nested rule (``lad`` then holds the lifted optima). Returns the problem of the
    final refit and the judgement's record (``first``: :func:`judge_first_base`'s)."""
    if fam.calibration is None or not fam.judged:
        return fam, (None if first is None else {**first, "kept": False})
    t0 = time.perf_counter()
    plain = replace(fam, calibration=None)
    spec = get_model(selected)
    space = plain.space(spec)
    start = [FoldSearch(space.theta_from(d), np.inf, 0) for d in lad.fold_params[selected]]
    res = polish_folds(space, plain.jacobian(spec), plain.W, start, plain.effort_weight, workers=fam.workers)
    ff = score_folds(plain, spec, space, res, t0)
    v = judge(ff.held, [selected], {selected: lad.val[selected]}, {selected: True}, False)
    record = {"model": selected, "calibrated_score": center(lad.val[selected]), "uncalibrated_score": center(ff.held),
              "per_group_uncalibrated": {fold.label: float(x) for fold, x in zip(fam.folds, ff.held)},
              "wins": v.wins, "losses": v.losses, "kept": not v.earns_place, **(first or {})}
    if v.earns_place:
        lad.fold_params[selected], lad.val[selected] = ff.params, ff.held
        return plain, record
    return fam, record


def judge_widened(fam: Family, lad: Ladder, selected: str) -> tuple[Family, dict | None]:
    """Rule R49: where the selected model's fold optima end on an open edge of the profile's box
    (:func:`edge_boxes`; calibrated boxes excepted), the profile has guessed this actuator's scale
    wrong (the zoo's harmonic drive: armature, friction and Stribeck velocity all on their upper edges,
    the reflected inertia 0.15 kg.m^2 against the servo box's 0.05). The fold optima are polished again
    in the widened boxes and scored on the held-out groups; the widened problem replaces ``fam`` (and
    its optima and scores ``lad``'s) when it earns its place over the narrow one by the nested rule.
    Returns the problem of the final refit and the record (None: no parameter on an edge)."""
    spec = get_model(selected)
    space = fam.space(spec)
    wide = edge_boxes(space, lad.fold_params[selected], skip=tuple(fam.calibration.bounds) if fam.calibration else ())
    if not wide:
        return fam, None
    t0 = time.perf_counter()
    wfam = replace(fam, widened={**(fam.widened or {}), **wide})
    wspace = wfam.space(spec)
    start = [FoldSearch(wspace.theta_from(d), np.inf, 0) for d in lad.fold_params[selected]]
    res = polish_folds(wspace, wfam.jacobian(spec), wfam.W, start, wfam.effort_weight, workers=wfam.workers)
    ff = score_folds(wfam, spec, wspace, res, t0)
    v = judge(ff.held, [selected], {selected: lad.val[selected]}, {selected: True}, False)
    record = {"model": selected, **box_record(space, wide), "narrow_score": center(lad.val[selected]), "widened_score": center(ff.held), "wins": v.wins,
              "losses": v.losses, "kept": bool(v.earns_place), "wall_s": time.perf_counter() - t0}
    if v.earns_place:
        lad.fold_params[selected], lad.val[selected] = ff.params, ff.held
        return wfam, record
    return fam, record


def final_result(fam: Family, spec: ModelSpec, space: ParamSpace, res: FoldSearch, t0: float) -> FitResult:
    """The final refit's result, its MAE re-scored in float64 on ``fam``'s batches; without an effort
    term its objective too (the censored error, ``fam.censor``), from the polish's compiled residuals."""
    mae = float(make_loss(spec, space, fam.batches, "mae")(res.theta))
    objective = mae if not fam.effort_weight else res.objective
    if fam.censor and not fam.effort_weight:
        jac = fam.jacobian(spec)
        rq, _ = jac.residuals(full_vectors(space, np.asarray(res.theta)[None])[0])
        objective = float(np.mean(np.abs(censored(rq, jac.half))[jac.valid]))
    return FitResult(spec.name, spec, space, res.theta, mae, res.evaluations, time.perf_counter() - t0,
                     fam.profile, fam.dt, res.history, objective=objective, effort_weight=fam.effort_weight)


def final_refit(fam: Family, selected: str, inits: list[dict],
                progress: Callable | None = None) -> tuple[FitResult, dict | None]:
    """The selected model on all given logs from the best of ``inits`` (its fold optima), with the
    budget's final evaluations and starts (same compiled scorer, one lockstep search of one row).
    Returns the result and the record of which start won."""
    t0 = time.perf_counter()
    ff = fam.for_final()
    spec = get_model(selected)
    space = ff.space(spec)
    b = fam.budget
    pop = max(b.popsize, int(b.popsize * fam.W.sum()) // ff.W.shape[1])
    (res,) = search_folds(spec, space, ff.scorer(spec), ff.W, [inits],
                          SearchSettings(b.final_evals, pop, b.final_starts, 0.1, fam.seed + 100,
                                         restart_gain=RESTART_GAIN),
                          effort_weight=fam.effort_weight,
                          progress=(lambda s, d, t: progress(selected + " (all data)", s, d / t)) if progress else None)
    cma_evals = res.evaluations  # the record's; the polish's rollouts count in the result's
    (res,) = polish_folds(space, ff.jacobian(spec), ff.W, [res], fam.effort_weight)
    return final_result(ff, spec, space, res, t0), final_record(res.history, cma_evals)


def final_record(history: list[dict], evaluations: int) -> dict | None:
    """The final refit's start record (``extras["starts"]["final (all data)"]``): which start's point
    was kept (R53: a restart's only when it beat the point by :data:`RESTART_GAIN`), the CMA-ES
    evaluations, each start's best training objective. None without starts."""
    if not history:
        return None
    fw = np.zeros(len(history), int)
    fw[max(i for i, h in enumerate(history) if h["kept"])] = 1
    return {"wins_per_start": fw.tolist(), "evaluations": int(evaluations),
            "best_f_per_start": [float(h["best_f"]) for h in history], "restart_gain": RESTART_GAIN}


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


def selection_result(fam: Family, lad: Ladder, selected: str, final: FitResult, timing: dict) -> SelectionResult:
    """The table (with ``selected``), per-group scores, the group jackknife from the selected
    model's fold optima and the rule's text."""
    table = list(lad.rows.values())
    for row in table:
        row["selected"] = row["model"] == selected
    folds, work = fam.folds, fam.work
    groups = [{"group": fold.label, "heldout_logs": [work[j].name for j in fold.heldout],
               **{m: float(lad.val[m][f]) for m in lad.rows}} for f, fold in enumerate(folds)]
    unc = None
    if fam.scheme == "logo":
        key0 = folds[0].key
        idx = [f for f, fold in enumerate(folds) if fold.key == key0]
        est = np.array([[lad.fold_params[selected][f][n] for n in final.space.names] for f in idx])
        unc = group_jackknife(est, final.space.names, final.params,
                              method=f"delete-a-group jackknife over the {len(idx)} leave-one-group-out refits "
                                     f"(groups: {key0})")
    rule = (f"leave-one-group-out over {', '.join(sorted({f.key for f in folds}))} ({len(folds)} folds)"
            if fam.scheme == "logo" else "single validation split (fewer than 2 condition groups)")
    rule += (f"; a model earns its place when its mean held-out MAE over the folds is >= {100 * MIN_GAIN:g} % "
             "below its best eligible contained model AND it is better in more folds than it is worse (ties "
             "dropped); the eligible model with the lowest mean held-out MAE is selected, then refitted on all "
             "given logs")
    split = fam.scheme == "split"
    fit_names = [work[j].name for j in folds[0].train] if split else [t.name for t in work]
    val_names = [work[j].name for j in folds[0].heldout] if split else [t.name for t in work]
    cal = fam.calibration.to_dict() if fam.calibration is not None else None
    return SelectionResult(selected, lad.fits, table, final, fit_names, val_names,
                           extras={"timing": timing, "starts": lad.starts, "calibration": cal}, scheme=fam.scheme,
                           folds=folds, groups=groups, fold_params=lad.fold_params, rule=rule, uncertainty=unc)


@physics
@on_fixed_blas_threads
def fit_family(trajs: list[Trajectory], ladder: tuple[str, ...] | None = None,
               options: FamilyOptions = FamilyOptions(),
               progress: Callable[[str, str, float], None] | None = None) -> SelectionResult:
    """Fit every model of ``ladder`` (and extensions of the best ones) on every condition fold and
    select by the rule of the module docstring; refit the selected model on all logs.

    ladder: base models in nesting order (default :func:`ladder_for`); options: budget, seed,
    extensions, grouping tags, calibration (:class:`FamilyOptions`). With the free-swing
    calibration (the default) the torque-off runs of the logs are fitted first
    (:func:`~actuatorlab.identify.calibrate.free_swing_calibration`); when there are such runs,
    every base gains ``+qoffset`` and every fit confines the armature and q_offset to the
    calibration's boxes (``extras["calibration"]``, None when nothing was calibrated).
    ``extras["starts"]`` records, per model, how many folds each CMA-ES start won and the
    evaluations spent; ``extras["timing"]`` wall and CPU times and the budget.

    Table rows: ``model``, ``parent`` (the reference), ``n_free``, ``train_mae`` (mean over folds
    of the pooled training position MAE), ``validation_mae`` (mean over groups of the held-out MAE),
    ``per_group`` (label -> held-out MAE), ``gain_vs_parent``, ``wins`` / ``losses`` / ``groups``
    (paired comparison with the reference), ``sign_p``, ``paired_t``, ``earns_place``, ``selected``.
    """
    t_begin, cpu_begin = time.perf_counter(), _cpu()
    fam, lad, first = prepare_judged(trajs, ladder, options, progress)
    cal_s = fam.calibration.wall_s if fam.calibration is not None else 0.0
    if WALK_THREADS > 1 and (fam.workers or default_workers()) > 1:
        with SideBySide(fam, lad, progress, WALK_THREADS) as run:
            walk(fam, lad, run)
    else:  # one fit after the other (the reference SideBySide must reproduce)
        walk(fam, lad, lambda m, i: fit_on_folds(fam, lad, m, i, progress))
    selected = lad.lowest_mean()
    fam, judged = judge_calibration(fam, lad, selected, first)
    fam, widened = judge_widened(fam, lad, selected)
    t_sel, cpu_sel = time.perf_counter() - t_begin, _cpu() - cpu_begin
    final, record = final_refit(fam, selected, lad.fold_params[selected], progress)
    if record is not None:
        lad.starts["final (all data)"] = record
    b = fam.budget
    timing = {"selection_s": t_sel, "final_fit_s": final.wall_s, "selection_cpu_s": cpu_sel,
              "final_fit_cpu_s": _cpu() - cpu_begin - cpu_sel, "models": len(lad.rows), "folds": len(fam.folds),
              "evaluations": int(sum(f.evaluations for f in lad.fits.values())) + final.evaluations,
              "fold_starts": b.fold_starts, "fold_evals": b.fold_evals, "popsize": b.popsize,
              "final_evals": b.final_evals, "workers": next(iter(fam.scorers.values())).workers if fam.scorers else None,
              "calibration": options.calibration, "calibration_s": cal_s}
    result = selection_result(fam, lad, selected, final, timing)
    result.extras["calibration_judged"] = judged
    result.extras["boxes_widened"] = widened
    return result


def _cpu() -> float:
    """CPU time [s] of this process (user + system), for timings on a shared machine."""
    t = os.times()
    return t.user + t.system

"""Selection recipes measured on the XL330 bench and not adopted, composed from the library's steps.

The library's :func:`actuatorlab.identify.select.fit_family` keeps the adopted selection. The
variants below were measured by ``bench/xl330_recipes.py`` (bench/journal/xl330.md) and are
reproduced here from the same steps (:func:`~actuatorlab.identify.select.prepare`,
:func:`~actuatorlab.identify.select.walk`, :class:`~actuatorlab.identify.select.Ladder`,
:func:`~actuatorlab.identify.select.score_folds`, :func:`~actuatorlab.identify.search.search_folds`),
with the same seeds and the same arithmetic as when they were library options:

* budget overrides (``fold_starts``, ``fold_evals``, ``final_starts``, ``popsize``, ``final_evals``):
  a :class:`~actuatorlab.identify.select.SelectionBudget` other than the named one (journal:
  "Search recipes and seeds", "A smaller fold budget", "A smaller final refit"; population 20 was
  adopted, the others not);
* optimizer replicas (``fold_seeds`` R, ``fold_score`` mean | median): every fold search runs R
  times in lockstep (replica r of a model starts from replica r of the models it contains), a
  model's score on a group is the mean or median of its replicas' held-out MAE ("Optimizer noise in
  the selection", not adopted);
* ``fold_init="all"``: each model is first fitted on all given logs (CMA-ES from its parents'
  all-logs optima), every fold then refines that optimum with a step of :data:`WARM_SIGMA` (not
  adopted; its leave-one-group-out scores lean optimistic: the start has seen the held-out group);
* ``final_seeds`` S, ``final_pick`` best | medoid: S all-logs refits (replica s from replica s's
  fold optima), keeping the lowest training objective or the medoid of the optima in the unit box
  (not adopted);
* ``train_objective`` mean_std | worst: every fit combines the condition groups of its training
  logs, J = mean_g J_g + beta std_g J_g (after V-REx, Krueger et al. 2021) or max_g J_g (group DRO,
  Sagawa et al. 2020) ("Group objectives", not adopted);
* ``select_rule="one_se"``: among the eligible models, the one with the fewest free parameters
  within one paired standard error of the best (Breiman et al. 1984) ("The one-standard-error
  rule", not adopted);
* ``walk`` (bench/journal/fit_rules.md, rule R42 in three forms, none adopted): "library",
  :func:`~actuatorlab.identify.select.walk`, the base ladder and the extensions on its
  ``top_bases`` best bases; "carried" (R42b), the delay tried on the first base right after it
  and, when it earns its place, carried by every later base *instead of* the plain ladder (seeds
  as the plain walk's, the lead model its own);
  "carried_shifted" (R42a), the same with every later fit's seed shifted by the lead model;
  "both" (R42c), the plain ladder and, when the delay earns its place on the first base, the
  ladder again with the delay on every base (seeds of their own), the extensions on the best of
  all of them;
* ``fold_step`` and ``fold_line`` (bench/journal/fit_rules.md, 2026-12-05, "The fold searches'
  step"; not adopted): "physical", the inherited parameters' CMA-ES step in physical terms
  (:func:`physical_stds`: 5 % of the value for a log-scaled parameter, 1 ms for the delay) instead
  of INHERITED_STEP x sigma0 of the unit box ("physical_unless_delay": the same except in a search
  where the delay is a new parameter); ``fold_line``, before CMA-ES a 1-D line search on each
  new parameter alone from the parents' best fold optimum (:func:`line_inits`: LINE_GRID in the unit
  box plus the current value, one parameter after the other), the best point then one more init.

With every field at its default, :func:`fit_family_recipe` is the library's ``fit_family``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from actuatorlab.errors import ActuatorlabError, UnknownNameError
from actuatorlab.identify import select as S
from actuatorlab.identify.search import SearchSettings, objective_from_sums, search_folds
from actuatorlab.identify.space import full_vectors
from actuatorlab.models.registry import embed_params, get_model
from actuatorlab.precision import on_fixed_blas_threads, physics

#: how the replicas' held-out MAE of one group combine into the model's score on that group
FOLD_SCORES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "mean": lambda held: np.mean(held, axis=0),
    "median": lambda held: np.median(held, axis=0),
}
FOLD_INITS = ("parents", "all")
#: CMA-ES step of the fold searches that refine the all-logs optimum (fold_init="all")
WARM_SIGMA = 0.1
#: fold_step values: "library" (select.fold_settings as is), "physical" (physical_stds) or
#: "physical_unless_delay" (physical_stds, except in a search where the delay is a new parameter)
FOLD_STEPS = ("library", "physical", "physical_unless_delay")
#: physical CMA-ES step of an inherited parameter: relative for a log-scaled one [1] ...
PHYSICAL_REL = 0.05
#: ... absolute for a linear one where the name is listed [its unit: s for the delay], else PHYSICAL_REL
#: of the parents' mean value (at least PHYSICAL_FLOOR of the unit box)
PHYSICAL_ABS = {"delay": 1e-3}
PHYSICAL_FLOOR = 0.01
#: unit-box points of the line search on each new parameter (fold_line), beside its current value
LINE_GRID = (0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75)
#: how a training objective combines the condition groups of its logs
TRAIN_OBJECTIVES = ("pooled", "mean_std", "worst")
#: weight of the spread across groups in the "mean_std" objective
SPREAD_WEIGHT = 1.0


def group_objective(sums: dict, n: np.ndarray, weights: np.ndarray, effort_weight: float, groups: np.ndarray,
                    aggregate: str) -> np.ndarray:
    """The objective J_g of each condition group g of the selected logs (``objective_from_sums``)
    combined: "mean_std" mean_g J_g + SPREAD_WEIGHT std_g J_g (population std), "worst" max_g J_g,
    "pooled" every selected sample counts the same. One selected group: the pooled objective."""
    if aggregate not in TRAIN_OBJECTIVES:
        raise UnknownNameError("training objective", aggregate, TRAIN_OBJECTIVES)
    if aggregate == "pooled" or groups is None:
        return objective_from_sums(sums, n, weights, effort_weight)
    groups = np.asarray(groups)
    per = np.stack([objective_from_sums(sums, n, weights * (groups == g), effort_weight)
                    for g in np.unique(groups[np.asarray(weights) > 0])], axis=-1)  # (n_candidates, G)
    if aggregate == "worst":
        return per.max(axis=-1)
    return per.mean(axis=-1) + SPREAD_WEIGHT * per.std(axis=-1)


def one_se_choice(scores: dict[str, np.ndarray], n_free: dict[str, int], best: str) -> str:
    """The one-standard-error rule, paired over the held-out groups: with b = ``best`` (lowest mean)
    and d_g = MAE_m,g - MAE_b,g over the G groups, m is within one standard error of b when
    mean(d) <= sd(d) / sqrt(G) (sd with G - 1 degrees of freedom); among those the model with the
    fewest free parameters is chosen (ties: the lower mean). ``scores``: eligible model -> (G,)."""
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


SELECT_RULES: dict[str, Callable] = {"best": lambda scores, n_free, best: best, "one_se": one_se_choice}


def _pick_best(space, finals) -> int:
    return int(np.argmin([r.objective for r in finals]))


def _pick_medoid(space, finals) -> int:
    """The optimum with the lowest sum of distances to the others in the unit box (>= 3 searches)."""
    Z = np.array([space.to_z(r.theta) for r in finals])
    if len(Z) < 3:
        return _pick_best(space, finals)
    return int(np.argmin(np.linalg.norm(Z[:, None] - Z[None], axis=-1).sum(axis=1)))


FINAL_PICKS: dict[str, Callable] = {"best": _pick_best, "medoid": _pick_medoid}


@dataclass(frozen=True)
class Recipe:
    """A selection recipe: budget overrides (None: the budget's) and the not-adopted variants."""

    fold_starts: int | None = None
    fold_evals: int | None = None
    final_starts: int | None = None
    popsize: int | None = None
    final_evals: int | None = None
    fold_seeds: int = 1
    fold_score: str = "mean"
    fold_init: str = "parents"
    final_seeds: int = 1
    final_pick: str = "best"
    train_objective: str = "pooled"
    select_rule: str = "best"
    walk: str = "library"  #: one of WALKS
    fold_step: str = "library"  #: one of FOLD_STEPS
    fold_line: bool = False  #: a line search on each new parameter before the fold searches

    def check(self) -> None:
        for kind, value, known in (("fold score", self.fold_score, FOLD_SCORES), ("fold init", self.fold_init, FOLD_INITS),
                                   ("final pick", self.final_pick, FINAL_PICKS),
                                   ("training objective", self.train_objective, TRAIN_OBJECTIVES),
                                   ("selection rule", self.select_rule, SELECT_RULES), ("walk", self.walk, WALKS),
                                   ("fold step", self.fold_step, FOLD_STEPS)):
            if value not in known:
                raise UnknownNameError(kind, value, tuple(known))
        if self.fold_seeds < 1 or self.final_seeds < 1:
            raise ActuatorlabError(f"fold_seeds and final_seeds must be >= 1 (got {self.fold_seeds}, "
                                   f"{self.final_seeds})")

    def budget(self, name: str | S.SelectionBudget) -> S.SelectionBudget:
        """The named budget with this recipe's overrides (the final refit gets max(2, fold starts)
        starts unless ``final_starts`` says otherwise, as before)."""
        b = S.SELECTION_BUDGETS[name] if isinstance(name, str) else name
        starts = int(self.fold_starts or b.fold_starts)
        return replace(b, fold_evals=int(self.fold_evals or b.fold_evals), popsize=int(self.popsize or b.popsize),
                       final_evals=b.final_evals if self.final_evals is None else int(self.final_evals),
                       fold_starts=starts, final_starts=int(self.final_starts or max(S.FINAL_STARTS, starts)))


def physical_stds(space, stds: np.ndarray, parents: list[dict], sigma0: float) -> np.ndarray:
    """Multipliers of ``sigma0`` (space.n,): new parameters (``stds`` >= 1) keep theirs; an
    inherited one gets the unit-box step of PHYSICAL_REL of its value (log scale:
    ln(1 + PHYSICAL_REL) / ln(upper / lower)) or of PHYSICAL_ABS[name] (linear), at least
    PHYSICAL_FLOOR of the box and at most the library's (``stds``). ``parents``: the fold optima
    the search starts from (their mean value sets a linear parameter's step)."""
    out = np.array(stds, float)
    for j, n in enumerate(space.names):
        if out[j] >= 1.0:
            continue
        lo, hi = float(space.lower[j]), float(space.upper[j])
        if space.log[j]:
            dz = np.log1p(PHYSICAL_REL) / np.log(hi / lo)
        else:
            v = float(np.mean([abs(d.get(n, 0.0)) for d in parents])) if parents else 0.0
            dz = PHYSICAL_ABS.get(n, PHYSICAL_REL * v) / (hi - lo)
        out[j] = min(max(dz, PHYSICAL_FLOOR) / sigma0, out[j])
    return out


def line_inits(spec, space, scorer, weights: np.ndarray, inits: list[list[dict]], new: np.ndarray,
               objective: Callable) -> list[dict]:
    """Per fold (row of ``weights``), the best of its ``inits`` after a line search on each new
    parameter (``new`` (space.n,) bool) alone: LINE_GRID and the current value, one parameter after
    the other, all folds in one scorer call per parameter. Returns one parameter dict per fold."""
    F = weights.shape[0]

    def values(Zs):
        P = np.concatenate([full_vectors(space, space.to_theta(Z, np)) for Z in Zs])
        sums = scorer(P)
        out, k = [], 0
        for f, Z in enumerate(Zs):
            sl = slice(k, k + len(Z))
            fs = objective({c: v[sl] for c, v in sums.items()}, scorer.n, weights[f])
            out.append(np.where(np.isfinite(fs), fs, np.inf))
            k += len(Z)
        return out

    Z0 = [np.array([space.to_z(space.theta_from(embed_params(d, spec.name))) for d in inits[f]]) for f in range(F)]
    z = [Z[int(np.argmin(v))] for Z, v in zip(Z0, values(Z0))]
    for j in np.flatnonzero(new):
        Zs = []
        for f in range(F):
            Z = np.repeat(z[f][None], len(LINE_GRID) + 1, 0)
            Z[1:, j] = LINE_GRID
            Zs.append(Z)
        z = [Z[int(np.argmin(v))] for Z, v in zip(Zs, values(Zs))]
    return [{**space.base, **dict(zip(space.names, map(float, np.asarray(space.to_theta(zf[None], np))[0])))}
            for zf in z]


#: fit index (seed offset) of the first model of a lead walk that the plain walk does not fit
LEAD_INDEX = 1000


def _walk_carried(fam, lad, run, shifted: bool) -> None:
    """The first base, base+delay right after it, then every later base with the delay when it
    earned its place (without it when not), then the extensions."""
    first = fam.ladder[0]
    run(first, 0)
    walked, carried, i = [first], [], 1
    me = get_model(first + "+delay").name
    if "delay" in fam.extensions and "delay" not in get_model(first).extensions and me not in lad.rows:
        run(me, i if shifted else LEAD_INDEX)
        i += int(shifted)
        walked.append(me)
        carried = ["delay"] if lad.eligible[me] else []
    for k, base in enumerate(fam.ladder[1:], start=1):
        m = get_model("+".join([base, *carried])).name
        if m in lad.rows:
            continue
        run(m, i if shifted else k)
        i += 1
        walked.append(m)
    S.extend_bases(fam, lad, run, walked, i if shifted else len(fam.ladder))


def _walk_both(fam, lad, run) -> None:
    """The plain ladder; then the delay on the first base; when it earns its place there, the
    ladder again with the delay on every base (seeds from LEAD_INDEX, so the plain walk's searches
    are unchanged); then the extensions on the best of all of them."""
    for k, base in enumerate(fam.ladder):
        run(base, k)
    first, walked = fam.ladder[0], list(fam.ladder)
    me = get_model(first + "+delay").name
    if "delay" in fam.extensions and "delay" not in get_model(first).extensions and me not in lad.rows:
        run(me, LEAD_INDEX)
        walked.append(me)
        if lad.eligible[me]:
            for k, base in enumerate(fam.ladder[1:], start=1):
                m = get_model(base + "+delay").name
                if m not in lad.rows:
                    run(m, LEAD_INDEX + 1 + k)
                    walked.append(m)
    S.extend_bases(fam, lad, run, walked, len(fam.ladder))


#: name -> walk(fam, lad, run) of the selection (Recipe.walk)
WALKS: dict[str, Callable] = {
    "library": S.walk,
    "carried": lambda fam, lad, run: _walk_carried(fam, lad, run, False),
    "carried_shifted": lambda fam, lad, run: _walk_carried(fam, lad, run, True),
    "both": _walk_both,
}


@physics
@on_fixed_blas_threads  # as the library's fit_family: the same numbers
def fit_family_recipe(trajs, ladder=None, options: S.FamilyOptions = S.FamilyOptions(), recipe: Recipe = Recipe(),
                      progress: Callable | None = None) -> S.SelectionResult:
    """:func:`~actuatorlab.identify.select.fit_family` with ``recipe`` (module docstring)."""
    recipe.check()
    t_begin, cpu_begin = time.perf_counter(), S._cpu()
    fam0 = S.prepare(trajs, ladder, replace(options, budget=recipe.budget(options.budget)), progress)
    cal_s = fam0.calibration.wall_s if fam0.calibration is not None else 0.0
    R, F, L = recipe.fold_seeds, len(fam0.folds), fam0.W.shape[1]
    lad, first = S.Ladder(), None
    if R == 1:  # the judged calibration's first half (with replicas the boxes stay, as "free_swing")
        fam0, lad, first = S.judge_first_base(fam0, progress)
    Wr = np.tile(fam0.W, (R, 1))  # row r F + f: replica r of fold f
    fam = replace(fam0, W=Wr, V=np.tile(fam0.V, (R, 1)), scorer_size=int(fam0.budget.popsize * Wr.sum()),
                  scorers=fam0.scorers if R == 1 else {}, jacobians=fam0.jacobians if R == 1 else {})
    b = fam.budget
    final_pop = max(b.popsize, int(b.popsize * fam0.W.sum()) // L)  # population of an all-logs search

    def objective(groups):
        return lambda sums, n, w: group_objective(sums, n, w, fam.effort_weight, groups, recipe.train_objective)

    all_params, val_seeds = {}, {}

    def run(m: str, i: int) -> None:
        spec = get_model(m)
        space = fam.space(spec)
        inner = lad.inner(m)
        cb = (lambda stage, d, total: progress(m, stage, d / total)) if progress else None
        t0 = time.perf_counter()
        st = S.fold_settings(fam, m, inner, space, i)
        kw = dict(effort_weight=fam.effort_weight, objective=objective(fam.log_groups))
        inits = [[lad.fold_params[x][k] for x in inner] for k in range(R * F)]
        new_delay = st.stds is not None and "delay" in space.names and st.stds[space.names.index("delay")] >= 1.0
        if st.stds is not None and (recipe.fold_step == "physical"
                                    or (recipe.fold_step == "physical_unless_delay" and not new_delay)):
            st = replace(st, stds=physical_stds(space, st.stds, [d for row in inits for d in row], st.sigma0))
        if recipe.fold_line and st.stds is not None and np.any(st.stds >= 1.0):
            lined = line_inits(spec, space, fam.scorer(spec), fam.W, inits, np.asarray(st.stds) >= 1.0,
                               kw["objective"])
            inits = [row + [d] for row, d in zip(inits, lined)]
        if recipe.fold_init == "all":  # the model on all given logs first; every fold then starts from it
            (ra,) = search_folds(spec, space, fam.scorer(spec), np.ones((1, L)), [[all_params[x] for x in inner]],
                                 SearchSettings(st.max_evals, final_pop, 1, 0.25, st.seed + 5, st.stds), **kw)
            all_params[m] = {**space.base, **dict(zip(space.names, map(float, ra.theta)))}
            res = search_folds(spec, space, fam.scorer(spec), fam.W, [[all_params[m]]] * (R * F),
                               SearchSettings(b.fold_evals, b.popsize, b.fold_starts, WARM_SIGMA, st.seed),
                               progress=cb, **kw)
        else:
            res = search_folds(spec, space, fam.scorer(spec), fam.W, inits, st, progress=cb, **kw)
        res = S.polish_folds(space, fam.jacobian(spec), fam.W, res, fam.effort_weight,
                             workers=fam.workers)  # pooled objective
        ff = S.score_folds(fam, spec, space, res, t0)
        held = ff.held.reshape(R, F)
        val_seeds[m] = held
        extra = ({"per_group_seeds": {fold.label: [float(x) for x in held[:, f]] for f, fold in enumerate(fam.folds)}}
                 if R > 1 else None)
        lad.add(fam0, m, ff, FOLD_SCORES[recipe.fold_score](held), extra)

    WALKS[recipe.walk](fam, lad, run)
    best_m = lad.lowest_mean()
    selected = SELECT_RULES[recipe.select_rule]({m: lad.val[m] for m in lad.rows if lad.eligible[m]},
                                                {m: lad.rows[m]["n_free"] for m in lad.rows}, best_m)
    t_sel, cpu_sel = time.perf_counter() - t_begin, S._cpu() - cpu_begin
    judged = widened = None
    if R == 1:  # the judged calibration's second half: the selected model with the boxes lifted; then R49
        fam, judged = S.judge_calibration(fam, lad, selected, first)
        fam, widened = S.judge_widened(fam, lad, selected)

    # the final refit(s): replica s of the S searches starts from the best of replica s's fold optima
    t0 = time.perf_counter()
    ff = fam.for_final()
    spec = get_model(selected)
    space = ff.space(spec)
    n_final = ff.W.shape[1]
    Sn = recipe.final_seeds
    warm = [all_params[selected]] if selected in all_params else []
    fp = lad.fold_params[selected]
    inits = [warm + (fp[(s % R) * F:(s % R + 1) * F] if R > 1 else fp) for s in range(Sn)]
    finals = search_folds(spec, space, ff.scorer(spec), np.ones((Sn, n_final)), inits,
                          SearchSettings(b.final_evals, max(b.popsize, int(b.popsize * fam0.W.sum()) // n_final),
                                         b.final_starts, 0.1, fam.seed + 100, restart_gain=S.RESTART_GAIN),
                          effort_weight=fam.effort_weight, objective=objective(ff.log_groups),
                          progress=(lambda s_, d, t: progress(selected + " (all data)", s_, d / t)) if progress else None)
    pick = FINAL_PICKS[recipe.final_pick](space, finals)
    (res,) = S.polish_folds(space, ff.jacobian(spec), np.ones((1, n_final)), [finals[pick]], fam.effort_weight)
    if Sn > 1:
        lad.starts["final seeds"] = {"objective": [float(r.objective) for r in finals], "picked": int(pick),
                                     "rule": recipe.final_pick}
    if res.history:
        lad.starts["final (all data)"] = S.final_record(res.history, finals[pick].evaluations)
    final = S.final_result(ff, spec, space, res, t0)
    timing = {"selection_s": t_sel, "final_fit_s": final.wall_s, "selection_cpu_s": cpu_sel,
              "final_fit_cpu_s": S._cpu() - cpu_begin - cpu_sel, "models": len(lad.rows), "folds": F,
              "evaluations": int(sum(f.evaluations for f in lad.fits.values())) + final.evaluations,
              "fold_starts": b.fold_starts, "fold_evals": b.fold_evals, "fold_seeds": R,
              "fold_score": recipe.fold_score, "fold_init": recipe.fold_init, "popsize": b.popsize,
              "final_evals": b.final_evals, "train_objective": recipe.train_objective,
              "select_rule": recipe.select_rule,
              "workers": next(iter(fam.scorers.values())).workers if fam.scorers else None,
              "calibration": options.calibration,
              "calibration_s": cal_s}
    sel = S.selection_result(replace(fam0, calibration=fam.calibration, widened=fam.widened), lad, selected, final,
                             timing)
    sel.extras["calibration_judged"] = judged
    sel.extras["boxes_widened"] = widened
    if recipe.select_rule == "one_se":
        sel.rule = sel.rule.replace("eligible model with the lowest mean held-out MAE is selected",
                                    "eligible model with the fewest free parameters within one paired standard "
                                    "error of the lowest mean held-out MAE is selected (one-standard-error rule)")
    return sel

"""Groups of whole logs: leave-one-group-out folds, the single-split fallback, and the jackknife.

Logs are grouped by a tag of ``Trajectory.conditions`` (default ``excitation``, :data:`GROUP_KEYS`;
the pseudo tag ``"log"`` makes every log its own group). A fold holds out one group of whole logs
(:func:`condition_folds`), so no log has samples on both sides. With fewer than 2 groups the
selection falls back to :func:`split_validation`. The leave-one-group-out refits of a model double
as a delete-a-group jackknife of its parameters (:func:`group_jackknife`);
:func:`resampled_uncertainty` makes such refits on purpose (leave one log or one group out).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from ..errors import DataError, UnknownNameError
from ..logs.format import Trajectory
from ..models.registry import get_model
from ..sim.rollout import make_batches
from .search import PopulationScorer, SearchSettings, search_folds
from .space import ParamSpace, effort_available, profile_for

__all__ = ["GROUP_KEYS", "LOG_KEY", "time_split", "split_validation", "Fold", "condition_folds", "group_ids",
           "group_jackknife", "JACKKNIFE_SEARCH", "resampled_uncertainty"]

#: condition tag(s) whose values define the leave-one-group-out groups, by default
GROUP_KEYS: tuple[str, ...] = ("excitation",)

#: pseudo condition tag whose value is the log's name: ``group_by=("log",)`` is leave-one-log-out
LOG_KEY = "log"

#: the refits of :func:`resampled_uncertainty`: short CMA-ES searches from the all-data optimum
#: with a small step (0.05 of the box), population 10
JACKKNIFE_SEARCH = SearchSettings(max_evals=300, popsize=10, sigma0=0.05)


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
            "flagged": [n for n in names if (r := rel[n]) is None and se[names.index(n)] > 0
                        or r is not None and r > flag_fraction],
            "estimates": {n: [float(x) for x in est[:, i]] for i, n in enumerate(names)}}



def resampled_uncertainty(trajs: list[Trajectory], model: str, params: dict, *, by: str = "log",
                          group_by: tuple[str, ...] = GROUP_KEYS, search: SearchSettings = JACKKNIFE_SEARCH,
                          dt: float | None = None, progress: Callable | None = None,
                          bounds: dict | None = None) -> dict | None:
    """Jackknife of ``model`` over whole logs (``by="log"``: leave one log out, L refits) or over
    condition groups (``by="group"``: leave one group of ``group_by`` out). Every refit is a short
    CMA-ES (``search``, default :data:`JACKKNIFE_SEARCH`) started from ``params`` (the all-data
    optimum) on the logs that remain; all refits run in lockstep
    (:func:`~actuatorlab.identify.search.search_folds`). Returns :func:`group_jackknife`'s dict,
    or None with fewer than 2 logs / groups. bounds: the boxes of the fit being resampled where
    they differ from the profile's (a calibration's), so the refits search where the fit did."""
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
    scorer = PopulationScorer(batches, spec, size=int(search.popsize * W.sum()), dtype=np.float32)
    ew = 1.0 if effort_available(batches) else 0.0
    res = search_folds(spec, space, scorer, W, [[params]] * len(folds), search, effort_weight=ew,
                       progress=(lambda s, d, t: progress("jackknife", s, d / t)) if progress else None)
    est = np.array([r.theta for r in res])
    what = "log" if by == "log" else f"group ({folds[0].key})"
    return group_jackknife(est, space.names, params,
                           method=f"delete-one-{what} jackknife: {len(folds)} refits ({search.max_evals} CMA-ES "
                                  "evaluations each, from the all-data optimum)")

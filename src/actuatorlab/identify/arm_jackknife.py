"""Delete-a-group jackknife of a whole-robot fit (``fit --robot`` with the job's ``jackknife``).

After the all-data fit (:func:`~actuatorlab.identify.arm_fit.fit_arm`), every group of logs is left out
once and the same parameters are refitted on the rest: groups are the values of one condition tag
(``by="group"``: the first key of the job's ``group_by``, default ``excitation``; the legged in-air logs
also carry ``load`` and ``gain``) or single logs (``by="log"``). Each refit is a CMA-ES search of
:data:`REFIT_BUDGET_FRACTION` of the fit's evaluation budget started from the all-data optimum (step 0.1
in the normalised box; per joint when the fit is per joint, each joint keeping its best values by its own
error, :func:`~actuatorlab.identify.arm_fit.fit_arm` ``per_set_best``: the summed rule leaves a short refit
from an optimum where it started), so the refits measure how far the optimum moves when a group's data is
missing. Refit g draws with seed + 1 + g: with one seed for all, short refits sample the same points and pick
the same ones, and the spread collapses; the search's own noise, also in the all-data fit's values, is then
part of the spread. With G refits theta_(g) and their mean theta_bar, per parameter
and per joint (or parameter set)::

    se = sqrt((G - 1) / G * sum_g (theta_(g) - theta_bar)^2)

(:func:`~actuatorlab.identify.folds.group_jackknife`: Efron & Stein 1981; Kott's delete-a-group
jackknife for whole groups of logs), in the parameter's unit and in natural space (z = log p for a
log-scale parameter, :data:`~actuatorlab.models.params.PARAMS` ``scale``; se_z ~ se / p). A refit that
starts at the optimum and stops early understates the spread (the one-joint jackknife's caveat).
"""

from __future__ import annotations

import time as _time
from typing import Any, Iterable

import numpy as np

from ..errors import DataError, UnknownNameError
from ..logs.format import Trajectory
from ..models.params import PARAMS
from ..robots.loader import Robot
from .arm_fit import fit_arm
from .folds import GROUP_KEYS, LOG_KEY, Fold, condition_folds, group_jackknife

__all__ = ["REFIT_BUDGET_FRACTION", "arm_jackknife"]

#: each refit's CMA-ES budget as a fraction of the all-data fit's (at least 10 evaluations)
REFIT_BUDGET_FRACTION = 1 / 3


def _folds(trajs: list[Trajectory], by: str, group_by: tuple[str, ...]) -> tuple[str, list[Fold]]:
    if by not in ("log", "group"):
        raise UnknownNameError("jackknife unit", by, ("log", "group"))
    key = LOG_KEY if by == "log" else (tuple(group_by) or GROUP_KEYS)[0]
    folds = condition_folds(trajs, (key,))
    if len(folds) < 2:
        values = sorted({str(t.name if key == LOG_KEY else t.conditions.get(key, "")) for t in trajs})
        raise DataError(None, f"jackknife by {by}: the {len(trajs)} logs form {len(values)} group(s) of "
                              f"{'logs' if key == LOG_KEY else 'condition ' + repr(key)} ({', '.join(values)}); "
                              "a jackknife needs at least 2 (give more logs or another group_by tag)")
    return key, folds


def _natural(name: str, x: np.ndarray) -> np.ndarray:
    return np.log(np.maximum(x, 1e-300)) if PARAMS[name].scale == "log" else x


def arm_jackknife(robot_name: str | Robot, trajs: Iterable[Trajectory], fit: dict[str, Any], *, by: str = "group",
                  group_by: tuple[str, ...] = GROUP_KEYS, max_evals: int = 300, seed: int = 0, horizon: int = 100,
                  max_windows: int | None = None) -> dict[str, Any]:
    """The jackknife of ``fit`` (a :func:`~actuatorlab.identify.arm_fit.fit_arm` result on ``trajs``; module
    docstring). ``max_evals``: the all-data fit's budget (each refit gets :data:`REFIT_BUDGET_FRACTION` of it);
    seed (refit g: seed + 1 + g), horizon, max_windows: the fit's. The values the fit took from another
    experiment (its ``given``: the drive-side identification) stay as they are in every refit (standard error 0).

    Returns {"method", "by", "key" (the condition tag, or "log"), "groups" (held-out group per refit),
    "n_resamples" (G), "max_evals" (per refit), "space" {name: "log" | "linear"}, "stderr" {name: {joint or
    set: se}} [the parameter's unit], "stderr_natural" (same layout; log space for log-scale parameters),
    "estimates" {name: {joint or set: [G refitted values]}}, "wall_s", "cpu_s"}. Raises DataError with
    fewer than 2 groups."""
    t0, c0 = _time.perf_counter(), _time.process_time()
    trajs = list(trajs)
    key, folds = _folds(trajs, by, group_by)
    budget = max(int(round(max_evals * REFIT_BUDGET_FRACTION)), 10)
    names = list(fit["params"])
    labels = [lab for lab in fit["params"][names[0]]] if names else []
    refits = [fit_arm(robot_name, [trajs[i] for i in f.train], model=fit["model"], params=names,
                      per_joint=bool(fit["per_joint"]), max_evals=budget, seed=seed + 1 + g, horizon=horizon,
                      max_windows=max_windows, init=[fit["param_sets"]], per_set_best=True,
                      given={k: fit["param_sets"][k] for k in fit.get("given") or ()} or None)
              for g, f in enumerate(folds)]
    cols = [(n, lab) for n in names for lab in labels]
    est = np.array([[r["params"][n][lab] for n, lab in cols] for r in refits], float)  # (G, p)
    keys = [f"{n}/{lab}" for n, lab in cols]
    values = {k: float(fit["params"][n][lab]) for k, (n, lab) in zip(keys, cols)}
    raw = group_jackknife(est, keys, values)
    nat = group_jackknife(np.stack([_natural(n, est[:, i]) for i, (n, _) in enumerate(cols)], axis=1), keys,
                          {k: float(_natural(n, np.array(v))) for k, (n, _), v in zip(keys, cols, values.values())})

    def nest(flat: dict) -> dict:
        return {n: {lab: flat[f"{n}/{lab}"] for lab in labels} for n in names}

    what = "log" if key == LOG_KEY else f"group ({key})"
    return {"method": f"delete-one-{what} jackknife: {len(folds)} refits ({budget} CMA-ES evaluations each"
                      f"{', per joint (each joint its best by its own error)' if fit['per_joint'] else ''}, "
                      "from the all-data optimum)",
            "by": by, "key": key, "groups": [f.label for f in folds], "n_resamples": len(folds),
            "max_evals": budget, "space": {n: "log" if PARAMS[n].scale == "log" else "linear" for n in names},
            "stderr": nest(raw["stderr"]), "stderr_natural": nest(nat["stderr"]),
            "estimates": nest(raw["estimates"]),
            "wall_s": float(_time.perf_counter() - t0), "cpu_s": float(_time.process_time() - c0)}

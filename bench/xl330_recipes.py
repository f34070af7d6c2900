"""Search recipes of the XL330 selection: the default fit with more CMA-ES starts, more evaluations,
other groupings, ``+stiction`` among the extensions, other seeds; each scored on held-out logs once.

One command per recipe (from the repo root), e.g.::

    python bench/xl330_recipes.py --fold-starts 3
    python bench/xl330_recipes.py --extensions offset delay climit sag stiction --seed 1
    python bench/xl330_recipes.py --split trajectory=sin_time_square --group-by log
    python bench/xl330_recipes.py --fold-seeds 3 --fold-score median --final-seeds 3 --final-pick medoid

The model is chosen by :func:`family_recipes.fit_family_recipe` (the library's
:func:`actuatorlab.identify.select.fit_family` when no recipe option is given) on the training logs of
``bench/split.py`` alone (leave-one-group-out inside them); the held-out logs are replayed once,
after the choice, with the model refitted on all training logs. Prints one JSON line: selected model,
its mean leave-one-group-out score (training side), train / held-out MAE [mrad], per held-out log,
fit wall and CPU time, load average, which CMA-ES start won each fold (``starts``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import split as bench_split  # noqa: E402
from common import emit  # noqa: E402
from family_recipes import Recipe, fit_family_recipe  # noqa: E402
from xl330 import heldout_mae  # noqa: E402

from actuatorlab.identify.select import FamilyOptions, ladder_for  # noqa: E402
from actuatorlab.logs import load_logs  # noqa: E402


def nominal_supply(trajs):
    """The logs without their supply-voltage channel: the replay then uses the setup's nominal
    supply voltage (``Setup.supply_voltage``), as BAM does."""
    return [tr.without_channels("supply_voltage") if tr.has("supply_voltage") else tr for tr in trajs]


def windows(trajs, window_s: float):
    """Each log cut into consecutive windows of ``window_s`` [s] (a last piece shorter than half a
    window joins the one before), each a log of its own with the log's condition tags, so every
    fit replays it from its measured state at the window start (multiple shooting)."""
    import numpy as np

    out = []
    for tr in trajs:
        t = np.asarray(tr.time, float) - float(tr.time[0])
        edges = list(np.searchsorted(t, np.arange(0.0, t[-1], window_s)))
        if len(edges) > 1 and t[-1] - t[edges[-1]] < 0.5 * window_s:
            edges.pop()
        edges.append(tr.n)
        for k, (a, b) in enumerate(zip(edges[:-1], edges[1:])):
            out.append(tr.slice(a, b).replace(name=f"{tr.name}#w{k}"))
    return out


def lowpass_supply(trajs, tau: float = 0.1):
    """The logs with their supply-voltage channel through a causal first-order low-pass of time
    constant ``tau`` [s] (exact discretisation on the log's own timestamps, started at the first
    sample): y_k = y_(k-1) + (1 - exp(-(t_k - t_(k-1)) / tau)) (v_k - y_(k-1))."""
    import numpy as np

    out = []
    for tr in trajs:
        if "supply_voltage" not in tr.data:
            out.append(tr)
            continue
        v, t = np.asarray(tr["supply_voltage"], float), np.asarray(tr.time, float)
        y = np.empty_like(v)
        y[0] = v[0]
        a = 1.0 - np.exp(-np.diff(t) / tau)
        for k in range(1, v.size):
            y[k] = y[k - 1] + a[k - 1] * (v[k] - y[k - 1])
        out.append(tr.replace(data={**tr.data, "supply_voltage": y}))
    return out


#: BAM 1.0's XL330 search boxes (bam/dynamixel/actuator.py XL330Actuator, bam/model.py), in
#: actuatorlab's parameter names; the parameters BAM does not have keep actuatorlab's servo boxes
BAM_XL330_BOUNDS = {
    "kt": (0.1, 3.0), "R": (2.0, 5.0), "armature": (1e-4, 0.05),
    "friction_base": (0.0, 0.2), "friction_stribeck": (0.0, 0.2),
    "load_friction": (0.0, 0.5), "load_friction_motor": (0.0, 0.5), "load_friction_external": (0.0, 0.5),
    "load_friction_stribeck": (0.0, 1.0), "load_friction_motor_stribeck": (0.0, 1.0),
    "load_friction_external_stribeck": (0.0, 1.0),
    "load_friction_motor_quad": (0.0, 0.01), "load_friction_external_quad": (0.0, 0.01),
    "stribeck_velocity": (0.1, 3.0), "stribeck_alpha": (1.0, 10.0), "friction_viscous": (0.0, 1.0),
    "q_offset": (-0.1, 0.1),
}


def run(split: str, *, seed: int, budget: str, fold_starts, fold_evals, final_starts, extensions, group_by,
        fold_seeds=None, fold_score=None, fold_init=None, final_seeds=None, final_pick=None, popsize=None, final_evals=None, train_objective=None, select_rule=None,
        supply="logged", window_s=None, base_extension=None, bounds=None, calibration=None) -> dict:
    s = bench_split.make_split(bench_split.DEFAULT_DATA_DIR, None if split == "balanced" else split)
    raw = bench_split.DEFAULT_DATA_DIR / "raw"
    train, test = load_logs([raw / f for f in s["train"]]), load_logs([raw / f for f in s["heldout"]])
    if supply == "nominal":  # the setup's nominal supply (vin) instead of the logged input_volts, as BAM
        train, test = nominal_supply(train), nominal_supply(test)
    elif supply == "lowpass":  # the logged input_volts through a causal first-order low-pass
        train, test = lowpass_supply(train), lowpass_supply(test)
    elif supply != "logged":
        raise SystemExit(f"--supply must be logged, nominal or lowpass, got {supply!r}")
    if window_s:  # the training logs only; the held-out logs are replayed whole
        train = windows(train, float(window_s))
    kw = {k: v for k, v in dict(extensions=extensions and tuple(extensions), group_by=group_by and tuple(group_by),
                                fold_starts=fold_starts, fold_evals=fold_evals, final_starts=final_starts,
                                fold_seeds=fold_seeds, fold_score=fold_score, fold_init=fold_init,
                                final_seeds=final_seeds, final_pick=final_pick, popsize=popsize,
                                final_evals=final_evals, train_objective=train_objective,
                                select_rule=select_rule, calibration=calibration).items()
          if v is not None}  # the options given, as the JSON line records them
    recipe = Recipe(**{k: v for k, v in kw.items() if k in Recipe.__dataclass_fields__})
    options = FamilyOptions(seed=seed, budget=budget, **{k: v for k, v in kw.items()
                                                         if k in ("extensions", "group_by", "calibration")})
    if bounds == "bam":  # BAM 1.0's XL330 boxes for the parameters BAM has (this process only)
        from actuatorlab.models.params import BOUND_PROFILES
        BOUND_PROFILES["servo"].update(BAM_XL330_BOUNDS)
    elif bounds is not None:
        raise SystemExit(f"--bounds must be bam, got {bounds!r}")
    load0, c0, t0 = os.getloadavg()[0], os.times(), time.perf_counter()
    ladder = None
    if base_extension:  # every base of the ladder carries it (e.g. qoffset, as BAM fits q_offset)
        ladder = kw["ladder"] = tuple(f"{m}+{base_extension}" for m in ladder_for(train))
    sel = fit_family_recipe(train, ladder, options, recipe)
    wall, c1 = time.perf_counter() - t0, os.times()
    rows = {r["model"]: 1e3 * r["validation_mae"] for r in sel.table}
    mae, per = heldout_mae(sel.selected, sel.final.params, sel.final.dt, test)  # once, after the choice
    return {"split": split, "seed": seed, "budget": budget, **kw, "supply": supply, "window_s": window_s, "selected": sel.selected,
            "logo_score_mrad": rows[sel.selected], "logo_scores_mrad": rows,
            "train_mae_mrad": 1e3 * sel.final.train_mae, "heldout_mae_mrad": 1e3 * mae,
            "heldout_per_log_mrad": [1e3 * x for x in per], "fit_wall_s": wall,
            "fit_cpu_s": (c1.user - c0.user) + (c1.system - c0.system), "timing": sel.extras["timing"],
            "load_average": [load0, os.getloadavg()[0]], "starts": sel.extras["starts"],
            "params": {k: float(v) for k, v in sel.final.params.items()}, "bounds": bounds or "default",
            "base_extension": base_extension, "calibration_result": sel.extras.get("calibration")}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--split", default="balanced", help="balanced | trajectory=FAMILY | kp=GAIN (bench/split.py)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget", default="default")
    p.add_argument("--fold-starts", type=int, default=None)
    p.add_argument("--fold-evals", type=int, default=None)
    p.add_argument("--final-starts", type=int, default=None)
    p.add_argument("--fold-seeds", type=int, default=None, help="independent CMA-ES replicas of every fold")
    p.add_argument("--fold-score", default=None, help="mean | median over the replicas")
    p.add_argument("--fold-init", default=None, help="parents | all (warm start from the all-training fit)")
    p.add_argument("--final-seeds", type=int, default=None, help="independent all-logs refits")
    p.add_argument("--final-pick", default=None, help="best | medoid among the final refits")
    p.add_argument("--popsize", type=int, default=None, help="CMA-ES population of the fold searches")
    p.add_argument("--final-evals", type=int, default=None, help="CMA-ES evaluations per start of the final refit")
    p.add_argument("--train-objective", default=None, help="pooled | mean_std | worst (over condition groups)")
    p.add_argument("--select-rule", default=None, help="best | one_se (among the eligible models)")
    p.add_argument("--extensions", nargs="*", default=None)
    p.add_argument("--group-by", nargs="+", default=None)
    p.add_argument("--supply", default="logged",
                   help="logged (the input_volts channel, default) | nominal (the setup's vin, as BAM) | "
                        "lowpass (the logged channel through a causal 0.1 s low-pass)")
    p.add_argument("--window-s", type=float, default=None,
                   help="cut the training logs into windows of this length [s], each replayed from its measured start")
    p.add_argument("--base-extension", default=None,
                   help="an extension carried by every base of the ladder (e.g. qoffset: m1+qoffset ... g2+qoffset)")
    p.add_argument("--bounds", default=None, help="bam: BAM 1.0's XL330 parameter boxes where BAM has the parameter")
    p.add_argument("--calibration", default=None,
                   help="free_swing (the default: armature and q_offset from the torque-off runs) | none (before 2026-12-04)")
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args(argv)
    emit(run(a.split, seed=a.seed, budget=a.budget, fold_starts=a.fold_starts, fold_evals=a.fold_evals,
             final_starts=a.final_starts, extensions=a.extensions, group_by=a.group_by, fold_seeds=a.fold_seeds,
             fold_score=a.fold_score, fold_init=a.fold_init, final_seeds=a.final_seeds, final_pick=a.final_pick,
             popsize=a.popsize, final_evals=a.final_evals, train_objective=a.train_objective,
             select_rule=a.select_rule, supply=a.supply, window_s=a.window_s, base_extension=a.base_extension,
             bounds=a.bounds, calibration=a.calibration),
         a.out)
    return 0


if __name__ == "__main__":
    from actuatorlab.precision import physics_precision

    with physics_precision():
        sys.exit(main())

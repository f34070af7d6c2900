"""One-joint adaptation: a learned actuator trained at some gains / loads, adapted to the same servo
at another gain or load from a few of its logs (issue 42 item 5, "one joint").

    python bench/adapt_joint.py                                  # real XL330: train kp 100-400, adapt to kp 800
    python bench/adapt_joint.py --zoo xl330_like                 # zoo truth: train split, adapt to each held-out mass
    python bench/adapt_joint.py --steps 300 --lr 3e-3            # another fine-tuning budget (both kinds)

Data: the real XL330 logs (``--new kp=800``, bench/split.py's split by condition: the 8 logs at the
other gains train, the 3 at kp 800 are the new condition) or a zoo truth (``--zoo NAME``,
``bench/zoo.py``'s dataset at scale 0.3, seed 0: its train/ logs train, each held-out mass of
heldout/load is a new condition of 4 logs). On the training logs: the default analytic fit
(``actuatorlab fit``), the replacing MLP warm-started from it and the residual MLP over it
(``actuatorlab train``, as bench/learned_xl330.py). Then, within each new condition, leave one log
out: the models are adapted (``actuatorlab adapt``: :func:`actuatorlab.learned.adapt.adapt_joint`,
its defaults unless ``--steps`` / ``--lr``) on the other logs of that condition and scored on the
left-out one (closed-loop replay MAE from its first measured state, BAM's convention); next to them
the analytic fit as given and refitted on the same logs (CMA-ES from its values, the residual base
refit's budget). Table: the mean over the folds of each model unadapted and adapted, the change,
wall and CPU seconds per adaptation. One JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import split as bench_split  # noqa: E402
from common import emit  # noqa: E402
from learned_xl330 import heldout_mae  # noqa: E402


def replay_mae(model_json: Path, files: list[Path]) -> float:
    """Mean per-log closed-loop replay MAE [rad] of ``model_json`` on ``files`` (bench/learned_xl330.py's)."""
    return heldout_mae(model_json, files)["heldout_mae"]


def conditions(a) -> tuple[list[Path], dict[str, list[Path]], str]:
    """(training files, {new condition: its files}, data name)."""
    if a.zoo:
        import zoo

        ds = zoo.dataset(a.zoo, 0, 0.3)
        groups: dict[str, list[Path]] = {}
        for f in sorted((ds / "heldout" / "load").glob("*.json")):
            groups.setdefault(f.stem.rsplit("_", 1)[1], []).append(f)
        return sorted((ds / "train").glob("*.json")), groups, f"zoo {a.zoo}"
    train, new = bench_split.split_paths(a.data_dir, kind="raw", holdout=a.new)
    return train, {a.new: new}, "XL330"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=bench_split.DEFAULT_DATA_DIR)
    ap.add_argument("--new", default="kp=800", help="the real XL330's new condition (bench/split.py --holdout)")
    ap.add_argument("--zoo", default=None, help="a zoo truth instead of the real XL330 (new conditions: held-out masses)")
    ap.add_argument("--arch", default="mlp")
    ap.add_argument("--train-steps", default="1500,400", help="training steps of the replacing and the residual network")
    ap.add_argument("--steps", type=int, default=None, help="fine-tuning steps (default: adapt's)")
    ap.add_argument("--lr", type=float, default=None, help="fine-tuning learning rate (default: adapt's)")
    ap.add_argument("--refit-evals", type=int, default=None, help="residual base refit evaluations (default: adapt's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=BENCH / "out" / "adapt_joint")
    ap.add_argument("--json-out", type=Path, default=None)
    a = ap.parse_args(argv)
    from actuatorlab.precision import physics_precision

    with physics_precision():
        return run(a, *conditions(a))


def run(a, train: list[Path], groups: dict[str, list[Path]], name: str) -> int:
    """Train (or reuse), adapt within each new condition, print the table and the JSON line."""
    from actuatorlab.app.jobs import JointTrainOptions, run_fit, run_train
    from actuatorlab.identify.fit import fit_model
    from actuatorlab.identify.select import FamilyOptions
    from actuatorlab.learned.adapt import AdaptConfig, adapt_joint
    from actuatorlab.logs import load_logs
    from actuatorlab.models.modelfile import load_model, model_to_dict, params_from_model, save_model

    out = a.out / (a.zoo or "xl330") / f"s{a.seed}"
    ana = out / "analytic"
    if not (ana / "model.json").is_file():
        run_fit(train, ana, options=FamilyOptions(seed=a.seed))
    n_learned, n_residual = (int(x) for x in a.train_steps.split(","))
    runs = {}
    for kind, steps in (("learned", n_learned), ("residual", n_residual)):
        run = out / f"{kind}_{a.arch}"
        if not (run / "model.json").is_file():
            run_train(train, run, JointTrainOptions(arch=a.arch, steps=steps, seed=a.seed, teacher=ana / "model.json",
                                                    residual=ana / "model.json" if kind == "residual" else None),
                      progress=False)
        runs[kind] = run
    cfg = AdaptConfig(seed=a.seed, **{k: v for k, v in (("steps", a.steps), ("lr", a.lr), ("refit_evals", a.refit_evals))
                                      if v is not None})
    tag = f"st{a.steps}_lr{a.lr}_re{a.refit_evals}"
    base = load_model(ana / "model.json")
    refit_evals = cfg.resolved(one_joint=True).refit_evals
    rows: list[dict] = []
    for cond, files in groups.items():
        for k, test in enumerate(files):
            fit_files = [f for f in files if f != test]
            logs = load_logs(fit_files)
            row: dict = {"condition": cond, "test": test.stem, "adapt_logs": [f.stem for f in fit_files],
                         "analytic": replay_mae(ana / "model.json", [test])}
            f = fit_model(logs, base["model"], init=params_from_model(base), max_evals=int(refit_evals or 0),
                          n_starts=1, grad_steps=0, sigma0=0.1, seed=a.seed, dt=(base.get("fit") or {}).get("dt"))
            refit = out / "refits" / f"{cond}_{test.stem}.json"
            refit.parent.mkdir(parents=True, exist_ok=True)
            save_model(model_to_dict(f, setup=base.get("setup") or {}, data={"dt": f.dt}, metrics={}), refit)
            row["analytic_refit"] = replay_mae(refit, [test])
            for kind, run in runs.items():
                dest = out / f"adapted_{tag}" / f"{kind}_{cond}_{test.stem}"
                if not (dest / "model.json").is_file():
                    adapt_joint(run, logs, cfg, out=dest)
                d = load_model(dest / "model.json")
                tr = d["fit"]
                row[kind] = {"before": replay_mae(run / "model.json", [test]), "after": replay_mae(dest / "model.json", [test]),
                             "wall_s": tr["adaptation"]["wall_s"], "cpu_s": tr["adaptation"]["cpu_s"],
                             "best_step": tr.get("best_step"), "init_val_mae": tr.get("init_val_mae"),
                             "best_val_mae": tr.get("best_val_mae"), "kept": tr.get("kept")}
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)

    def mean(key, sub=None):
        return float(np.mean([r[key][sub] if sub else r[key] for r in rows]))

    summary = {"analytic": mean("analytic"), "analytic_refit": mean("analytic_refit")}
    print(f"\n{name}: adaptation to {', '.join(groups)} (leave one log out within each; {len(rows)} folds); "
          f"mean held-out replay MAE [mrad]")
    print(f"{'model':<22}{'unadapted':>10}{'adapted':>9}{'change':>9}{'wall s':>8}{'cpu s':>7}")
    print(f"{'analytic (refit)':<22}{1e3 * summary['analytic']:>10.2f}{1e3 * summary['analytic_refit']:>9.2f}"
          f"{100 * (summary['analytic_refit'] / summary['analytic'] - 1):>8.1f}%")
    for kind in runs:
        b, af = mean(kind, "before"), mean(kind, "after")
        summary[kind] = {"before": b, "after": af, "change": af / b - 1, "wall_s": mean(kind, "wall_s"),
                         "cpu_s": mean(kind, "cpu_s")}
        print(f"{kind + ' ' + a.arch:<22}{1e3 * b:>10.2f}{1e3 * af:>9.2f}{100 * (af / b - 1):>8.1f}%"
              f"{summary[kind]['wall_s']:>8.0f}{summary[kind]['cpu_s']:>7.0f}")
    emit({"bench": "adapt_joint", "data": name, "seed": a.seed, "arch": a.arch,
          "config": {"steps": a.steps, "lr": a.lr, "refit_evals": a.refit_evals}, "summary": summary, "rows": rows},
         a.json_out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

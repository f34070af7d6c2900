"""One-joint learned actuators on the real XL330 logs, next to the analytic fit on the same split.

One command (from the repo root)::

    python bench/learned_xl330.py                       # the default fit + MLP and Transformer, learned and residual
    python bench/learned_xl330.py --archs mlp=300,100                 # a smoke run
    python bench/learned_xl330.py --holdout trajectory=sin_time_square --seed 1  # another split, another seed
    python bench/learned_xl330.py --holdout sts3250=2024-10-26_12h23m27   # STS3250, that log held out
    python bench/learned_xl330.py --analytic g1 --analytic-budget quick --cold  # a named teacher; no warm start
    python bench/learned_xl330.py --archs mlp=1500,400 --seeds 0 1 2 3 4 --holdouts balanced \
        trajectory=sin_time_square sts3250          # issue 42 item 4: every run, then the ratios of the seed means

Split: ``bench/split.py`` (7 training logs, 4 held-out logs: one per trajectory family, each at a
different gain), raw logs of ``../shared/data/bam/xl330/raw``; ``--holdout sts3250=STEM``: the
3 STS3250 logs, that one held out (leave-one-log-out). Everything is fitted / trained on
the training logs only: the analytic model with ``actuatorlab fit`` (default: no ``--model``,
the default fit's selection, as bench/xl330.py; ``--analytic MODEL --analytic-budget BUDGET``:
``fit --model MODEL --budget BUDGET``); each learned model with ``actuatorlab train`` (which itself holds 2 of the 7 logs back
for validation and keeps the best EMA parameters by validation), warm-started from that analytic
model.json (its teacher; ``--cold``: no warm start, the networks start from random weights), the
residual ones over it. The held-out logs are used only for the reported score: the MAE [rad] of the
full closed-loop replay of each held-out log from its first measured state, averaged over the
logs (BAM's convention, as in bench/xl330.py). The verdict column says whether the learned
model is better or worse than the analytic one on those held-out conditions.

Training cost: wall time per 1,000 optimizer steps (after the first, compiling step) and the
whole training wall time, on this machine (two shared CPU cores unless stated).
The table is followed by one JSON line.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import split as bench_split  # noqa: E402
from common import emit  # noqa: E402

STS3250_DIR = bench_split.SHARED_DIR / "data" / "bam" / "sts3250" / "raw"


def heldout_mae(model_json, files) -> dict:
    import numpy as np

    from actuatorlab.app.jobs import run_evaluate

    s = run_evaluate(model_json, files)
    per_log = {r["log"]: r["position_mae"] for r in s["per_log"]}
    return {"heldout_mae": float(np.mean(list(per_log.values()))), "heldout_per_log": per_log,
            "heldout_onestep_mae": s["onestep_mae"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=bench_split.DEFAULT_DATA_DIR)
    ap.add_argument("--out", type=Path, default=BENCH / "out" / "learned_xl330")
    ap.add_argument("--analytic", default="default",
                    help="analytic model fitted on the training logs (teacher and residual base); "
                         "default: the default fit's selection (fit without --model)")
    ap.add_argument("--analytic-budget", default="default")
    ap.add_argument("--archs", nargs="+", default=["mlp=1500,400", "transformer=300,200"],
                    help="ARCH=LEARNED_STEPS,RESIDUAL_STEPS (a step count of 0 skips that model)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--holdout", default=None,
                    help="split by condition (bench/split.py): trajectory=FAMILY or kp=GAIN (default: balanced); "
                         "sts3250=STEM: the STS3250 logs, that one held out")
    ap.add_argument("--cold", action="store_true", help="no warm start (the networks start from random weights)")
    ap.add_argument("--lr", type=float, default=3e-3, help="peak learning rate of the training through the simulator")
    ap.add_argument("--validation", default="time", choices=("time", "logs"),
                    help="validation split of the training logs: the last 25 %% of each (time) or whole logs (logs)")
    ap.add_argument("--gate", default="groups", choices=("groups", "none"),
                    help="the residual's correction gate (train --gate): groups (default) or none (kept whole)")
    ap.add_argument("--distilled", action="store_true",
                    help="also the distilled replacing network alone (diagnostic: its held-out MAE vs the teacher's)")
    ap.add_argument("--json-out", type=Path, default=None)
    ap.add_argument("--seeds", nargs="+", type=int, default=None,
                    help="a sweep: these seeds (STS3250 folds: the first only) x --holdouts, one run each, then the "
                         "ratios of the seed means per split")
    ap.add_argument("--holdouts", nargs="+", default=None,
                    help="with --seeds: splits (balanced | trajectory=FAMILY | kp=GAIN | sts3250 = its 3 folds)")
    args = ap.parse_args(argv)
    if args.seeds is not None or args.holdouts is not None:
        return sweep(args, list(argv if argv is not None else sys.argv[1:]))

    from rich.console import Console
    from rich.table import Table

    from actuatorlab.app.jobs import JointTrainOptions, run_fit, run_train
    from actuatorlab.learned.joint_train import JOINT_DISTILL
    from actuatorlab.identify.select import FamilyOptions

    console = Console(stderr=True)
    if (args.holdout or "").startswith("sts3250="):
        logs = sorted(STS3250_DIR.glob("*.json"))
        stem = args.holdout.partition("=")[2]
        if stem not in [f.stem for f in logs]:
            ap.error(f"--holdout {args.holdout}: no such log in {STS3250_DIR} ({', '.join(f.stem for f in logs)})")
        train_files, test_files = [f for f in logs if f.stem != stem], [f for f in logs if f.stem == stem]
    else:
        train_files, test_files = bench_split.split_paths(args.data_dir, kind="raw", holdout=args.holdout)
    out = args.out
    rows = []

    t0, c0 = time.perf_counter(), time.process_time()
    ana_dir = out / f"analytic_{args.analytic}"
    d = run_fit(train_files, ana_dir, model=None if args.analytic == "default" else args.analytic,
                options=FamilyOptions(seed=args.seed, budget=args.analytic_budget))
    rows.append({"model": d["model"] if args.analytic == "default" else args.analytic, "kind": "analytic",
                 "steps": None, "fit_wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
                 "s_per_1k_steps": None, "validation_mae": None, "train_mae": d["fit"]["train_mae"],
                 **heldout_mae(ana_dir / "model.json", test_files)})
    console.print(f"analytic {rows[-1]['model']}: held-out {rows[-1]['heldout_mae'] * 1e3:.1f} mrad")
    analytic = rows[0]["heldout_mae"]

    for spec in args.archs:
        arch, _, counts = spec.partition("=")
        n_learned, n_residual = (int(x) for x in (counts or "1500,400").split(","))
        plan = [("learned", n_learned, args.lr), ("residual", n_residual, args.lr)]
        if args.distilled and not args.cold:  # the warm start alone: one step at a negligible learning rate
            plan.insert(0, ("distilled", 1, 1e-12))
        for label, steps, lr in plan:
            kind = "residual" if label == "residual" else "learned"
            if steps <= 0:
                continue
            run = out / f"{label}_{arch}"
            if (run / "checkpoint.ckpt").exists():
                import shutil

                shutil.rmtree(run)
            t0, c0 = time.perf_counter(), time.process_time()
            d = run_train(train_files, run, JointTrainOptions(
                arch=arch, steps=steps, seed=args.seed, residual=ana_dir / "model.json" if kind == "residual" else None,
                teacher=ana_dir / "model.json", distill=None if args.cold else JOINT_DISTILL, lr=lr, validation=args.validation,
                gate=args.gate), progress=True)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            f = d["fit"]
            row = {"model": d["model"] + (" distilled (step 0)" if label == "distilled" else ""), "kind": kind, "arch": arch, "steps": steps, "fit_wall_s": wall, "cpu_s": cpu,
                   "train_wall_s": f["wall_s"], "s_per_1k_steps": f["s_per_1k_steps"], "compile_s": f["compile_s"],
                   "best_step": f["best_step"], "validation_mae": f["validation_mae"],
                   "warm_start": {k: v for k, v in (f.get("warm_start") or {}).items() if k != "teacher"},
                   "correction_gate": (f.get("correction_gate") or {}).get("gate"),
                   "train_mae": d["metrics"]["train"]["position_mae"], **heldout_mae(run / "model.json", test_files)}
            row["vs_analytic"] = row["heldout_mae"] / analytic
            rows.append(row)
            console.print(f"{d['model']}: held-out {row['heldout_mae'] * 1e3:.1f} mrad "
                          f"({row['vs_analytic']:.2f}x the analytic {rows[0]['model']})")

    t = Table(title=f"One-joint learned actuators, split {args.holdout or 'balanced'} ({len(train_files)} training / "
                    f"{len(test_files)} held-out logs, seed {args.seed}); held-out = mean per-log full-replay MAE")
    for c in ("model", "kind", "steps", "wall s", "s / 1k steps", "validation MAE", "held-out MAE", "vs analytic",
              "held-out verdict"):
        t.add_column(c)
    for r in rows:
        verdict = "-" if r["kind"] == "analytic" else (
            "better" if r["heldout_mae"] < analytic else "WORSE than analytic")
        t.add_row(r["model"], r["kind"], "-" if r["steps"] is None else str(r["steps"]), f"{r['fit_wall_s']:.0f}",
                  "-" if r["s_per_1k_steps"] is None else f"{r['s_per_1k_steps']:.0f}",
                  "-" if r["validation_mae"] is None else f"{r['validation_mae'] * 1e3:.1f} mrad",
                  f"{r['heldout_mae'] * 1e3:.1f} mrad", "-" if r["kind"] == "analytic" else f"{r['vs_analytic']:.2f}x",
                  verdict)
    Console(width=max(Console().width, 150)).print(t)
    emit({"bench": "learned_xl330", "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
          "machine": f"{platform.machine()} {platform.processor() or ''}".strip(), "seed": args.seed, "cold": args.cold,
          "holdout": args.holdout or "balanced", "split": {"train": [p.name for p in train_files], "heldout": [p.name for p in test_files]},
          "analytic": {"model": rows[0]["model"], "budget": args.analytic_budget, "heldout_mae": analytic},
          "rows": rows}, args.json_out)
    return 0


def _without(argv: list[str], flags: tuple[str, ...]) -> list[str]:
    """``argv`` less the given flags and the values that follow each."""
    out, skip = [], False
    for a in argv:
        if a in flags:
            skip = True
            continue
        if skip and not a.startswith("--"):
            continue
        skip = False
        out.append(a)
    return out


def sweep(args, argv: list[str]) -> int:
    """One run of :func:`main` per (split, seed) (a process each), each result in OUT/SPLIT_sSEED/result.json (a run
    already there is read, not rerun), then per split the seed means and their ratios: the learned
    rows' held-out MAE over the analytic fit's (ratio of the means, and per seed)."""
    import json

    import numpy as np

    seeds = args.seeds or [args.seed]
    splits: list[str | None] = []
    for h in args.holdouts or ["balanced"]:
        if h == "sts3250":
            splits += [f"sts3250={f.stem}" for f in sorted(STS3250_DIR.glob("*.json"))]
        else:
            splits.append(None if h == "balanced" else h)
    base = _without(argv, ("--seeds", "--holdouts", "--seed", "--holdout", "--out", "--json-out"))
    table = {}
    for h in splits:
        runs = []
        for seed in (seeds[:1] if (h or "").startswith("sts3250=") else seeds):
            name = f"{(h or 'balanced').replace('=', '_')}_s{seed}"
            res = args.out / name / "result.json"
            if not res.exists():  # each run in its own process: one process would keep every run's compiled code
                import subprocess

                subprocess.run([sys.executable, __file__, *base, "--seed", str(seed), "--out", str(args.out / name),
                                "--json-out", str(res)] + ([] if h is None else ["--holdout", h]), check=True)
            runs.append(json.loads(res.read_text()))
        ana = [r["analytic"]["heldout_mae"] for r in runs]
        rows = {}
        for r in runs:
            for row in r["rows"][1:]:  # keyed by kind and network (a model's name holds its base's)
                key = f"{'distilled' if 'distilled' in row['model'] else row['kind']} {row['arch']}"
                rows.setdefault(key, []).append(row["heldout_mae"])
        table[h or "balanced"] = {
            "seeds": [r["seed"] for r in runs], "analytic_mean": float(np.mean(ana)),
            "models": {m: {"mean": float(np.mean(v)), "ratio_of_means": float(np.mean(v) / np.mean(ana)),
                           "per_seed": [float(x / a) for x, a in zip(v, ana)]} for m, v in rows.items()}}
    print("held-out mean per-log replay MAE [mrad], seed means; ratio of the means to the analytic fit (per seed)")
    for h, t in table.items():
        print(f"{h} (seeds {', '.join(map(str, t['seeds']))}): analytic {1e3 * t['analytic_mean']:.1f}")
        for m, v in t["models"].items():
            print(f"    {m:<40}{1e3 * v['mean']:7.1f}  {v['ratio_of_means']:.3f}x  ("
                  + " / ".join(f"{x:.2f}" for x in v["per_seed"]) + ")")
    emit({"bench": "learned_xl330", "sweep": table}, None if args.json_out is None else args.json_out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

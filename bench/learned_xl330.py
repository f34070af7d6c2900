"""One-joint learned actuators on the real XL330 logs, next to the analytic fit on the same split.

One command (from the repo root)::

    python bench/learned_xl330.py                       # g1 (quick) + MLP and Transformer, learned and residual
    python bench/learned_xl330.py --archs mlp=300,100                 # a smoke run
    python bench/learned_xl330.py --holdout trajectory=sin_time_square --cold   # another split, no warm start

Split: ``bench/split.py`` (7 training logs, 4 held-out logs: one per trajectory family, each at a
different gain), raw logs of ``../shared/data/bam/xl330/raw``. Everything is fitted / trained on
the 7 training logs only: the analytic model with ``actuatorlab fit --model MODEL --budget
BUDGET``; each learned model with ``actuatorlab train`` (which itself holds 2 of the 7 logs back
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
    ap.add_argument("--analytic", default="g1", help="analytic model fitted on the training logs (residual base)")
    ap.add_argument("--analytic-budget", default="quick")
    ap.add_argument("--archs", nargs="+", default=["mlp=1500,400", "transformer=300,200"],
                    help="ARCH=LEARNED_STEPS,RESIDUAL_STEPS (a step count of 0 skips that model)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--holdout", default=None,
                    help="split by condition (bench/split.py): trajectory=FAMILY or kp=GAIN (default: balanced)")
    ap.add_argument("--cold", action="store_true", help="no warm start (the networks start from random weights)")
    ap.add_argument("--json-out", type=Path, default=None)
    args = ap.parse_args(argv)

    from rich.console import Console
    from rich.table import Table

    from actuatorlab.app.jobs import JointTrainOptions, run_fit, run_train
    from actuatorlab.learned.distill import DistillConfig
    from actuatorlab.identify.select import FamilyOptions

    console = Console(stderr=True)
    train_files, test_files = bench_split.split_paths(args.data_dir, kind="raw", holdout=args.holdout)
    out = args.out
    rows = []

    t0 = time.perf_counter()
    ana_dir = out / f"analytic_{args.analytic}"
    d = run_fit(train_files, ana_dir, model=args.analytic, options=FamilyOptions(seed=args.seed, budget=args.analytic_budget))
    rows.append({"model": args.analytic, "kind": "analytic", "steps": None, "fit_wall_s": time.perf_counter() - t0,
                 "s_per_1k_steps": None, "validation_mae": None, "train_mae": d["fit"]["train_mae"],
                 **heldout_mae(ana_dir / "model.json", test_files)})
    console.print(f"analytic {args.analytic}: held-out {rows[-1]['heldout_mae'] * 1e3:.1f} mrad")
    analytic = rows[0]["heldout_mae"]

    for spec in args.archs:
        arch, _, counts = spec.partition("=")
        n_learned, n_residual = (int(x) for x in (counts or "1500,400").split(","))
        for kind, steps in (("learned", n_learned), ("residual", n_residual)):
            if steps <= 0:
                continue
            run = out / f"{kind}_{arch}"
            if (run / "checkpoint.ckpt").exists():
                import shutil

                shutil.rmtree(run)
            t0 = time.perf_counter()
            d = run_train(train_files, run, JointTrainOptions(
                arch=arch, steps=steps, seed=args.seed, residual=ana_dir / "model.json" if kind == "residual" else None,
                teacher=ana_dir / "model.json", distill=None if args.cold else DistillConfig()), progress=True)
            wall = time.perf_counter() - t0
            f = d["fit"]
            row = {"model": d["model"], "kind": kind, "arch": arch, "steps": steps, "fit_wall_s": wall,
                   "train_wall_s": f["wall_s"], "s_per_1k_steps": f["s_per_1k_steps"], "compile_s": f["compile_s"],
                   "best_step": f["best_step"], "validation_mae": f["validation_mae"],
                   "warm_start": {k: v for k, v in (f.get("warm_start") or {}).items() if k != "teacher"},
                   "train_mae": d["metrics"]["train"]["position_mae"], **heldout_mae(run / "model.json", test_files)}
            row["vs_analytic"] = row["heldout_mae"] / analytic
            rows.append(row)
            console.print(f"{d['model']}: held-out {row['heldout_mae'] * 1e3:.1f} mrad "
                          f"({row['vs_analytic']:.2f}x the analytic {args.analytic})")

    t = Table(title=f"One-joint learned actuators on the real XL330 split (7 training / 4 held-out logs, "
                    f"seed {args.seed}); held-out = mean per-log full-replay MAE")
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
          "analytic": {"model": args.analytic, "budget": args.analytic_budget, "heldout_mae": analytic},
          "rows": rows}, args.json_out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

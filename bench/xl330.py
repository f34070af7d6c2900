"""XL330 benchmark: actuatorlab vs BAM (better-actuator-models) vs MuJoCo sysid, one split, one run.

One command (from the repo root)::

    python bench/xl330.py                    # actuatorlab + both peers (creates the peers' venvs)
    python bench/xl330.py --skip-peers       # actuatorlab only
    python bench/xl330.py --peers-json bench/out/peers_500.json bench/out/peers_m1_2000.json

Both sides use the split of ``bench/split.py`` (7 training / 4 held-out real XL330 logs) and the
raw logs of ``../shared/data/bam/xl330/raw``; held-out logs are never used for fitting or model
selection. Held-out MAE is the mean over held-out logs of each log's position MAE [rad] of a full
closed-loop rollout from its first measured state (BAM's own convention). Fit wall time for
actuatorlab includes JIT compilation. The table gives ratios against BAM's best held-out model
measured in the same run; the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import split as bench_split  # noqa: E402
from common import emit  # noqa: E402


def ours(train_files, test_files, models, budget: str, seed: int) -> list[dict]:
    import numpy as np

    from actuatorlab.evaluate.replay import replay_batches
    from actuatorlab.identify.fit import fit_model
    from actuatorlab.identify.select import BUDGETS, fit_family
    from actuatorlab.logs import load_logs
    from actuatorlab.sim.rollout import make_batches

    train = load_logs(train_files)
    test = load_logs(test_files)
    evals, starts, grad = BUDGETS[budget]
    rows = []

    def score(model, params, dt):
        res = replay_batches(model, params, make_batches(test, dt))
        return float(np.mean([np.mean(np.abs(r.q_sim - r.q_meas)) for r in res]))

    for m in models:  # each model fitted on its own, from scratch: its wall time is all it needs
        t0 = time.perf_counter()
        r = fit_model(train, m, seed=seed, max_evals=evals, n_starts=starts, grad_steps=grad)
        wall = time.perf_counter() - t0
        rows.append({"peer": "actuatorlab", "model": m, "budget": budget, "fit_wall_s": wall,
                     "evaluations": r.evaluations, "train_mae": r.train_mae,
                     "heldout_mae": score(m, r.params, r.dt), "params": r.params})
    t0 = time.perf_counter()
    sel = fit_family(train, seed=seed, budget=budget)
    wall = time.perf_counter() - t0
    rows.append({"peer": "actuatorlab", "model": f"family->{sel.selected}", "budget": budget, "fit_wall_s": wall,
                 "evaluations": sum(f.evaluations for f in sel.fits.values()) + sel.final.evaluations,
                 "train_mae": sel.final.train_mae, "heldout_mae": score(sel.selected, sel.final.params, sel.final.dt),
                 "selection": sel.table, "params": sel.final.params})
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["m1", "m3", "m4", "m5", "m6"])
    p.add_argument("--budgets", nargs="+", default=["quick", "default"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--skip-peers", action="store_true")
    p.add_argument("--peers-json", type=Path, nargs="+", default=None,
                   help="reuse the final JSON line(s) of earlier bench/run_peers.py runs")
    p.add_argument("--bam-trials", type=int, default=500)
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args(argv)

    split = bench_split.make_split(bench_split.DEFAULT_DATA_DIR)
    raw = bench_split.DEFAULT_DATA_DIR / "raw"
    train = [raw / f for f in split["train"]]
    test = [raw / f for f in split["heldout"]]

    peers = []
    if a.peers_json:
        for f in a.peers_json:
            peers += json.loads(f.read_text().strip().splitlines()[-1])["results"]
    elif not a.skip_peers:
        out = BENCH / "out" / "peers_for_xl330.json"
        out.parent.mkdir(exist_ok=True)
        subprocess.run([sys.executable, str(BENCH / "run_peers.py"), "--bam-trials", str(a.bam_trials),
                        "--out", str(out)], check=True)
        peers = json.loads(out.read_text().strip().splitlines()[-1])["results"]

    rows = []
    for b in a.budgets:
        rows += ours(train, test, a.models, b, a.seed)
    rows += [{k: r.get(k) for k in ("peer", "model", "trials", "fit_wall_s", "train_mae", "heldout_mae")}
             for r in peers if not str(r.get("model", "")).endswith("bundled")]

    bam = [r for r in rows if r["peer"] == "bam"]
    bam_best = min(bam, key=lambda r: r["heldout_mae"]) if bam else None

    from rich.console import Console
    from rich.table import Table

    t = Table(title="XL330 held-out (4 logs never fitted on), MAE in mrad")
    for c in ("peer", "model", "budget/trials", "fit wall s", "train MAE", "held-out MAE",
              "MAE / BAM best", "speed x BAM best"):
        t.add_column(c)
    for r in rows:
        ratio = r["heldout_mae"] / bam_best["heldout_mae"] if bam_best else None
        speed = bam_best["fit_wall_s"] / r["fit_wall_s"] if bam_best and r["fit_wall_s"] else None
        r["mae_ratio_vs_bam_best"], r["speedup_vs_bam_best"] = ratio, speed
        t.add_row(r["peer"], r["model"], str(r.get("budget") or r.get("trials")), f"{r['fit_wall_s']:.1f}",
                  f"{1e3 * r['train_mae']:.1f}", f"{1e3 * r['heldout_mae']:.1f}",
                  "-" if ratio is None else f"{ratio:.2f}", "-" if speed is None else f"{speed:.1f}")
    Console().print(t)
    ours_rows = [r for r in rows if r["peer"] == "actuatorlab"]
    best = min(ours_rows, key=lambda r: r["heldout_mae"])
    equal_or_better = [r for r in ours_rows if bam_best and r["heldout_mae"] <= bam_best["heldout_mae"]]
    fastest_ok = min(equal_or_better, key=lambda r: r["fit_wall_s"]) if equal_or_better else None
    summary = {
        "bench": "xl330", "machine": {"cpus": __import__("os").cpu_count(), "platform": platform.platform()},
        "split": {"train": split["train"], "heldout": split["heldout"]},
        "ours_best": {"model": best["model"], "budget": best["budget"], "heldout_mae": best["heldout_mae"],
                      "fit_wall_s": best["fit_wall_s"]},
        "bam_best": None if not bam_best else {"model": bam_best["model"], "trials": bam_best.get("trials"),
                                               "heldout_mae": bam_best["heldout_mae"],
                                               "fit_wall_s": bam_best["fit_wall_s"]},
        "mae_ratio_best_vs_bam_best": best["heldout_mae"] / bam_best["heldout_mae"] if bam_best else None,
        "speedup_at_equal_or_better_error": (bam_best["fit_wall_s"] / fastest_ok["fit_wall_s"]) if fastest_ok else None,
        "fastest_equal_or_better": None if not fastest_ok else {"model": fastest_ok["model"],
                                                                "budget": fastest_ok["budget"],
                                                                "fit_wall_s": fastest_ok["fit_wall_s"]},
        "rows": [{k: v for k, v in r.items() if k not in ("params", "selection")} for r in rows],
    }
    emit(summary, a.out)
    return 0


if __name__ == "__main__":
    from actuatorlab.precision import physics_precision

    with physics_precision():  # float64 physics, chosen explicitly (importing actuatorlab does not)
        sys.exit(main())

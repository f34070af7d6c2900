"""Run both benchmark peers (BAM, MuJoCo sysid) on the bench split and tabulate them.

One command::

    python bench/run_peers.py                       # BAM m1 m4 m6 at 500 trials + sysid faithful
    python bench/run_peers.py --bam-models m1 --bam-trials 50 --skip-sysid   # quick check

It creates ``bench/.venv-bam`` and ``bench/.venv-sysid`` if they are missing
(``bench/peers/setup_venvs.py``), takes the split from ``bench/split.py``,
runs each peer in its own venv as a subprocess (one after the other, so their
timings do not share the CPU), prints a rich table, and ends with one JSON
line ``{"bench": "peers", ...}`` holding the split, the machine and every
peer's JSON row.  ``--out FILE`` also writes that JSON line to a file.

Rows: ``peer``, ``model``, ``trials`` (BAM: optuna trials; sysid: LM
iterations), ``fit_wall_s``, ``fit_cpu_s``, ``train_mae`` and ``heldout_mae``
[rad]: mean over logs of the per-log mean absolute position error of an
open-loop rollout from the first logged state, the firmware law simulated.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH / "peers"))

import setup_venvs  # noqa: E402
from common import emit  # noqa: E402
import split as bench_split  # noqa: E402


def run_peer(python: Path, script: Path, args: list[str], env: dict[str, str]) -> list[dict]:
    """Run one peer; its stderr streams through, its stdout JSON lines are returned."""
    cmd = [str(python), str(script), *args]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env, cwd=BENCH.parent)
    if proc.returncode != 0:
        raise RuntimeError(f"{script.name} exited with {proc.returncode}")
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if not rows:
        raise RuntimeError(f"{script.name} printed no JSON row")
    return rows


def print_table(rows: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Peers on the XL330 split (MAE in mrad)")
    for col, just in [("peer", "left"), ("model", "left"), ("trials", "right"),
                      ("fit wall (s)", "right"), ("fit CPU (s)", "right"),
                      ("train MAE", "right"), ("held-out MAE", "right")]:
        table.add_column(col, justify=just)
    for r in rows:
        table.add_row(r["peer"], r["model"], str(r["trials"]), f"{r['fit_wall_s']:.1f}",
                      f"{r.get('fit_cpu_s', float('nan')):.1f}", f"{r['train_mae'] * 1e3:.1f}",
                      f"{r['heldout_mae'] * 1e3:.1f}")
    Console(stderr=False).print(table)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", type=Path, default=bench_split.DEFAULT_DATA_DIR,
                   help="folder with raw/ and processed/ (default ../shared/data/bam/xl330)")
    p.add_argument("--holdout", default=None,
                   help="split by condition (bench/split.py): trajectory=FAMILY or kp=GAIN; default: the balanced split")
    p.add_argument("--bam-models", nargs="+", default=["m1", "m4", "m6"])
    p.add_argument("--bam-trials", type=int, default=500)
    p.add_argument("--bam-bundled", action="store_true",
                   help="also score BAM's shipped xl330 params (not held-out-clean)")
    p.add_argument("--sysid-max-iters", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--skip-bam", action="store_true")
    p.add_argument("--skip-sysid", action="store_true")
    p.add_argument("--out", type=Path, default=None, help="also write the final JSON line here")
    args = p.parse_args(argv)

    split = bench_split.make_split(args.data_dir, args.holdout)
    processed = Path(args.data_dir) / "processed"
    train = [str(processed / n) for n in split["train"]]
    test = [str(processed / n) for n in split["heldout"]]
    env = {**os.environ, "WANDB_MODE": "disabled", "PYTHONHASHSEED": "0"}

    rows: list[dict] = []
    t0 = time.perf_counter()
    if not args.skip_bam:
        py = setup_venvs.ensure("bam")
        rows += run_peer(py, BENCH / "peers" / "bam_peer.py",
                         ["--train", *train, "--test", *test, "--models", *args.bam_models,
                          "--trials", str(args.bam_trials), "--seed", str(args.seed),
                          *(["--bundled"] if args.bam_bundled else [])], env)
    if not args.skip_sysid:
        py = setup_venvs.ensure("sysid")
        rows += run_peer(py, BENCH / "peers" / "sysid_peer.py",
                         ["--train", *train, "--test", *test, "--max-iters",
                          str(args.sysid_max_iters), "--seed", str(args.seed)], env)
    print_table(rows)
    summary = {
        "bench": "peers",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "processor": platform.machine()},
        "total_wall_s": round(time.perf_counter() - t0, 1),
        "split": {k: split[k] for k in ("name", "rule", "data_dir", "train", "heldout")},
        "results": rows,
    }
    emit(summary, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

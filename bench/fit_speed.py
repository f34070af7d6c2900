"""Speed of the default one-joint fit: the selection's populations scored on one thread (baseline)
vs split over worker threads (``--workers``, default: the CPU cores), in the same run. A table,
then one JSON line.

    python bench/fit_speed.py [--data ../shared/data/bam/xl330/raw] [--repeats 1] [--workers N]

Each run is ``actuatorlab.app.jobs.run_fit`` on all logs of DATA with the default budget (what
``actuatorlab fit DATA`` does: leave-one-group-out selection, final refit, identifiability, report),
into a temporary folder. Runs alternate baseline / threaded ``--repeats`` times; the table gives
the median wall and CPU seconds (CPU: user + system of this process, all threads) and the
selection's and final refit's wall seconds. The threaded result must be the baseline's exactly:
the selected model, the selection table's held-out figures and the final parameters are compared,
and the bench exits 1 when they differ. Issue 7's target: ``actuatorlab fit`` on the 11 shared
XL330 logs in at most 30 s wall on a 2-core machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import emit  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "bam" / "xl330" / "raw"


def one_run(data: Path, workers: int | None) -> dict:
    from actuatorlab.app.jobs import run_fit
    from actuatorlab.identify.select import FamilyOptions

    with tempfile.TemporaryDirectory() as tmp:
        t0, c0 = time.perf_counter(), os.times()
        d = run_fit([data], Path(tmp) / "run", options=FamilyOptions(workers=workers))
        c1 = os.times()
        wall = time.perf_counter() - t0
    cpu = (c1.user - c0.user) + (c1.system - c0.system)
    sel = d["selection"]
    return {"wall_s": wall, "cpu_s": cpu, "selection_s": sel["timing"]["selection_s"],
            "final_fit_s": sel["timing"]["final_fit_s"], "workers": sel["timing"]["workers"],
            "selected": sel["selected"], "params": d["parameters"],
            "table": [(r["model"], r["validation_mae"], r["train_mae"]) for r in sel["table"]]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--workers", type=int, default=None, help="threads of the threaded runs (default: CPU cores)")
    ap.add_argument("--out", type=Path, default=None, help="also write the JSON line here")
    a = ap.parse_args(argv)
    if not a.data.exists():
        print(f"no data at {a.data}", file=sys.stderr)
        return 2
    runs: dict[str, list[dict]] = {"one thread": [], "threaded": []}
    for _ in range(a.repeats):
        runs["one thread"].append(one_run(a.data, 1))
        runs["threaded"].append(one_run(a.data, a.workers))
    base = runs["one thread"][0]
    same = all(r["selected"] == base["selected"] and r["table"] == base["table"] and r["params"] == base["params"]
               for rs in runs.values() for r in rs)
    med = {k: {c: statistics.median(r[c] for r in rs) for c in ("wall_s", "cpu_s", "selection_s", "final_fit_s")}
           for k, rs in runs.items()}
    print(f"default fit of {a.data} ({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}), median of {a.repeats}")
    print(f"{'scoring':>12} | {'workers':>7} | {'wall s':>7} | {'CPU s':>7} | {'selection s':>11} | "
          f"{'final fit s':>11} | {'wall x':>6}")
    for k, m in med.items():
        print(f"{k:>12} | {runs[k][0]['workers']:>7} | {m['wall_s']:7.1f} | {m['cpu_s']:7.1f} | "
              f"{m['selection_s']:11.1f} | {m['final_fit_s']:11.1f} | {med['one thread']['wall_s'] / m['wall_s']:6.2f}")
    print(f"selected {base['selected']}; results identical across runs: {same}")
    emit({"bench": "fit_speed", "data": str(a.data), "repeats": a.repeats, "cpus": os.cpu_count(),
          "selected": base["selected"], "identical": same,
          "workers": runs["threaded"][0]["workers"], **{f"{k.replace(' ', '_')}_{c}": v for k, m in med.items()
                                                       for c, v in m.items()},
          "speedup_wall": med["one thread"]["wall_s"] / med["threaded"]["wall_s"], "target_wall_s": 30.0},
         a.out)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

"""Operating envelope on the real XL330 logs: how much of each held-out log lies outside what the
model was fitted on, and whether its error comes from there.

Two experiments, each a fit (nested family, ``--budget``, seed 0) followed by ``evaluate``:

* ``split``: fit on the 7 training logs of ``bench/split.py``, evaluate its 4 held-out logs;
* ``stall``: fit on the same training logs minus the slow kp800 sweep (sin_sin kp800, in which
  the servo stalls at full PWM against gravity), evaluate that sweep.

Writes OUT/<experiment>/run (model.json, fit report) and OUT/<experiment>/evaluate.json +
evaluate.html (plotly.js beside it) and OUT/<experiment>/evaluate_standalone.html (inlined), and
prints one row per evaluated log. Takes about a minute per experiment with the quick budget on 2
cores.

    PYTHONPATH=src python bench/envelope.py --out /tmp/envelope --budget quick
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from split import DEFAULT_DATA_DIR, make_split  # noqa: E402

STALL_LOG = "2026-01-15_10h29m47.json"  # sin_sin, kp 800


def experiment(name: str, train: list[Path], test: list[Path], out: Path, budget: str) -> list[dict]:
    from actuatorlab.app.jobs import run_evaluate, run_fit
    from actuatorlab.identify.select import FamilyOptions

    t0 = time.perf_counter()
    d = run_fit(train, out / "run", options=FamilyOptions(budget=budget, seed=0))
    fit_s = time.perf_counter() - t0
    s = run_evaluate(out / "run" / "model.json", test, report=out / "evaluate.html")
    run_evaluate(out / "run" / "model.json", test, report=out / "evaluate_standalone.html", standalone=True)
    (out / "evaluate.json").write_text(json.dumps(s, indent=1, default=float) + "\n")
    rows = []
    for r in s["per_log"]:
        err = r["envelope"]["error"]
        rows.append({
            "experiment": name, "model": d["model"], "fit_s": round(fit_s, 1), "log": r["log"],
            "conditions": f"{r['conditions'].get('excitation')} {r['conditions'].get('gain')}",
            "mae_mrad": 1e3 * r["position_mae"], "outside": r["envelope_outside_fraction"],
            "by_dimension": r["envelope_outside_dimensions"],
            "error_from": {k: (round(v["sample_share"], 3), round(v["error_share"], 3),
                               round(1e3 * v["mae_outside"], 1), round(1e3 * v["mae_inside"], 1))
                           for k, v in err["by_dimension"].items() if v["concentrated"]},
        })
    for w in s["envelope_warnings"]:
        print(f"warning: {w}")
    sizes = {p.name: p.stat().st_size for p in out.iterdir() if p.is_file()}
    print(f"{name}: files {json.dumps(sizes)}")
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("bench/out/envelope"))
    p.add_argument("--budget", default="quick")
    p.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    p.add_argument("--only", choices=["split", "stall"], default=None)
    a = p.parse_args(argv)
    sp = make_split(a.data_dir)
    raw = a.data_dir / "raw"
    train = [raw / n for n in sp["train"]]
    held = [raw / n for n in sp["heldout"]]
    rows = []
    if a.only in (None, "split"):
        rows += experiment("split", train, held, a.out / "split", a.budget)
    if a.only in (None, "stall"):
        rows += experiment("stall", [f for f in train if f.name != STALL_LOG], [raw / STALL_LOG],
                           a.out / "stall", a.budget)
    print("| experiment | model | log | conditions | MAE [mrad] | outside | by dimension | error from "
          "(dimension: sample share, error share, MAE outside / elsewhere [mrad]) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        dims = ", ".join(f"{k} {100 * v:.1f} %" for k, v in sorted(r["by_dimension"].items(), key=lambda kv: -kv[1]))
        err = "; ".join(f"{k}: {100 * v[0]:.1f} % / {100 * v[1]:.0f} %, {v[2]} / {v[3]}" for k, v in r["error_from"].items())
        print(f"| {r['experiment']} | {r['model']} | {r['log']} | {r['conditions']} | {r['mae_mrad']:.1f} | "
              f"{100 * r['outside']:.1f} % | {dims or '-'} | {err or 'no'} |")
    print(json.dumps({"bench": "envelope", "budget": a.budget, "rows": rows}, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

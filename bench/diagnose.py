"""The fit's diagnosis (issue 43 item 3) on fitted runs: does the warning fire, and where does the error sit?

    python bench/diagnose.py --zoo ZOO [--names xl330_like ...] [--run RUN DATA ...] [--out FILE]

``--zoo ZOO``: a folder with one ``ZOO/<name>/`` dataset per zoo truth (``actuatorlab synth --suite
bench --actuator NAME --out ZOO/<name>``) and its fit ``ZOO/fit_<name>/model.json`` (``actuatorlab fit
ZOO/<name>/train --out ZOO/fit_<name>``). ``--run RUN DATA``: any other fit (RUN/model.json) and
the logs it was fitted on (real XL330 / STS3250 logs; a zoo ``DIR/train`` brings its
``DIR/dataset.json``). Nothing is refitted: the training logs are replayed with the fitted
parameters (:func:`actuatorlab.evaluate.replay.replay`) and :func:`actuatorlab.evaluate.diagnose.diagnose`
judges the residual. Only training logs are read.

For a zoo truth the floor the logs show is compared with the truth's: the same formula with the
truth's encoder step (``2 pi / encoder_counts``) and timestamp jitter from its ``dataset.json``
("truth"), and, when the synthesiser recorded it there, the truth replayed against its own
measurements on the training split ("replayed": mean |logged position - true angle|).
Prints one row per run, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from common import emit  # noqa: E402

from actuatorlab.app.data_files import load_data  # noqa: E402
from actuatorlab.evaluate.diagnose import diagnose  # noqa: E402
from actuatorlab.evaluate.replay import replay  # noqa: E402

ZOO_NAMES = ("xl330_like", "sts3250_like", "bldc_module", "high_gear", "harmonic_drive")


def _truth_floor(dataset: Path, per_log: list[dict], trajs) -> dict:
    """The floor with the truth's sensor parameters (step / 4 and sqrt(2/pi) jitter mean|dq|, root sum of squares)."""
    card = json.loads(dataset.read_text())
    sen = card["truth"]["sensors"]
    replayed = (card.get("sensor_floor") or {}).get("splits", {}).get("train")  # the synthesiser's, when it writes one
    step = 2 * math.pi / float(sen["encoder_counts"])
    total, n = 0.0, 0
    for tr in trajs:
        t, q = np.asarray(tr.time), np.asarray(tr["position"])
        speed = float(np.mean(np.abs(np.diff(q) / np.diff(t))))
        f = math.hypot(step / 4, math.sqrt(2 / math.pi) * float(sen["jitter"]) * speed)
        total, n = total + f * t.size, n + t.size
    return {"truth_step": step, "truth_jitter_s": float(sen["jitter"]), "truth_floor": total / n,
            "truth_replay_floor": replayed,
            "step_error": max(abs(p["quantum"] / step - 1) for p in per_log),
            "jitter_error_s": max(abs(p["jitter_s"] - float(sen["jitter"])) for p in per_log)}


def run_one(label: str, run: Path, data: Path, dataset: Path | None) -> dict:
    t0, c0 = time.perf_counter(), time.process_time()
    model = json.loads((run / "model.json").read_text())
    trajs = load_data([data])
    d = diagnose(trajs, replay(model, trajs), model["model"])
    row = {"run": label, "model": model["model"], "in_sample_mae": d["in_sample_mae"], "floor": d["floor"],
           "ratio": d["ratio"], "structured": d["structured"], "strongest": d["strongest"], "fired": d["fired"],
           "regimes": {r["regime"]: {"eta2": r["eta2"], "p": r["p_value"], "amplitude": r["amplitude"]}
                       for r in d["regimes"]},
           "message": d["message"], "wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0}
    if dataset is not None and dataset.is_file():
        row |= _truth_floor(dataset, d["per_log"], trajs)
    return row


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--zoo", type=Path, help="folder with <name>/ datasets and fit_<name>/ runs")
    p.add_argument("--names", nargs="*", default=list(ZOO_NAMES))
    p.add_argument("--run", nargs=2, action="append", default=[], metavar=("RUN", "DATA"),
                   help="a fitted run folder and the logs it was fitted on")
    p.add_argument("--out", type=Path, help="also write the JSON line here")
    a = p.parse_args(argv)
    rows = []
    if a.zoo is not None:
        for name in a.names:
            rows.append(run_one(name, a.zoo / f"fit_{name}", a.zoo / name / "train", a.zoo / name / "dataset.json"))
    for run, data in a.run:
        rows.append(run_one(Path(run).name, Path(run), Path(data), Path(data).parent / "dataset.json"))
    print(f"{'run':22s} {'model':26s} {'in-sample':>10s} {'floor':>8s} {'truth':>8s} {'replayed':>8s} {'ratio':>6s} "
          "fired  regimes   [mrad]")
    for r in rows:
        truth = f"{1e3 * r['truth_floor']:.3g}" if "truth_floor" in r else "-"
        rep = f"{1e3 * r['truth_replay_floor']:.3g}" if r.get("truth_replay_floor") else "-"
        print(f"{r['run']:22s} {r['model']:26s} {1e3 * r['in_sample_mae']:10.3g} {1e3 * r['floor']:8.3g} {truth:>8s} {rep:>8s} "
              f"{r['ratio']:6.1f} {str(r['fired']):6s} {','.join(r['structured']) or '-'} (strongest: {r['strongest']})")
    emit({"bench": "diagnose", "date": time.strftime("%Y-%m-%d"), "rows": rows}, a.out)


if __name__ == "__main__":
    main()

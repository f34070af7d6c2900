"""Legged transfer benchmark (issue 44), first section: identification of ANYmal C's drives from in-air logs.

One command (from the repo root)::

    python bench/legged_transfer.py                         # reduced: scale 0.3, seed 0, 100 CMA-ES evaluations per model
    python bench/legged_transfer.py --scale 1 --max-evals 300 --out bench/out/legged_transfer.json

In one run:

* the in-air dataset (``actuatorlab synth --robot anymal_c --suite legged``, :func:`actuatorlab.synth.run_legged`),
  cached in ``bench/out/legged/anymal_c_sSEED_xSCALE`` (git-ignored);
* the default ``fit DIR/train --robot anymal_c`` (:func:`actuatorlab.app.jobs.run_fit`, the path the CLI takes:
  base welded, each log's drive gains and foot loads, one parameter set per joint type, the nested ladder judged on a split of
  the training logs; timed wall and CPU);
* held-out MAE per joint type (mean over the four joints of the type of the 100-step window-rollout MAE,
  :func:`actuatorlab.identify.arm_fit.evaluate_logs`: each log replayed on the robot as it was recorded,
  base welded, its gains and foot loads) on heldout/excitation, load and gain for the identified model,
  the hand-written ``robots/actuators/anymal_c_sea.json`` (replayed, not refitted) and the robot config's own
  rigid m1 (the policy runs' "builtin-like" nominal);
* parameter recovery: every parameter the selected model shares with the truth
  (:func:`actuatorlab.synth.zoo_family.zoo_params`, output side), the fitted value per joint type against the
  mean of the four drawn units of that type, and the hand-written file's value against the same truth.

A table, then one JSON line (``--out FILE`` also writes it). Held-out logs are never used for fitting or model
selection. The machine may be loaded: wall and CPU time are both reported.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from common import emit  # noqa: E402

from actuatorlab.app.jobs import RobotFitOptions, run_fit  # noqa: E402
from actuatorlab.identify.arm_fit import evaluate_logs  # noqa: E402
from actuatorlab.logs.io import load_native  # noqa: E402
from actuatorlab.synth import run_legged  # noqa: E402
from actuatorlab.synth.legged import JOINT_TYPES  # noqa: E402
from actuatorlab.synth.legged_sim import GENERATOR_VERSION  # noqa: E402
from actuatorlab.synth.zoo import actuator_from_dict  # noqa: E402
from actuatorlab.synth.zoo_family import zoo_params  # noqa: E402

CACHE = BENCH / "out" / "legged"
HAND = BENCH.parent / "src" / "actuatorlab" / "robots" / "actuators" / "anymal_c_sea.json"
SPLITS = ("heldout/excitation", "heldout/load", "heldout/gain")
HORIZON = 100


def _dataset(seed: int, scale: float) -> Path:
    d = CACHE / f"anymal_c_s{seed}_x{scale:g}"
    card = d / "dataset.json"
    if not card.is_file() or json.loads(card.read_text())["generator_version"] != GENERATOR_VERSION:
        run_legged("anymal_c", d, seed, scale, overwrite=True)
    return d


def _logs(d: Path, split: str) -> list:
    return [load_native(p, strict=False) for p in sorted((d / split).glob("*.parquet"))]


def _per_type(ev: dict[str, Any]) -> dict[str, float]:
    """{joint type: mean of its joints' MAE at the longest horizon} [rad]."""
    h = str(ev["horizon"])
    return {jt: float(np.mean([v[h] for j, v in ev["per_joint"].items() if j.endswith(jt) and h in v]))
            for jt in JOINT_TYPES}


def _score(d: Path, params: dict | None, model: str | None) -> dict[str, dict[str, float]]:
    """{split: {joint type: MAE [rad], "all": pooled}} of one parameter set replayed on each held-out split."""
    out = {}
    for split in ("train",) + SPLITS:
        trajs = _logs(d, split)
        ev = evaluate_logs("anymal_c", params, trajs, horizons=(HORIZON,), model=model)
        out[split] = {**_per_type(ev), "all": float(ev["position_mae"])}
    return out


def _truth_by_type(card: dict[str, Any]) -> dict[str, dict[str, float]]:
    """{joint type: {parameter: mean over the type's four units}} of the truth under the models' names."""
    out: dict[str, dict[str, float]] = {}
    for jt in JOINT_TYPES:
        units = [zoo_params(actuator_from_dict(u)) for j, u in card["units"].items() if j.endswith(jt)]
        out[jt] = {k: float(np.mean([u[k][0] for u in units])) for k in units[0]}
    return out


def _recovery(fit: dict[str, Any], hand: dict[str, Any], truth: dict[str, dict[str, float]]) -> list[dict]:
    rows = []
    for k, per_set in fit["params"].items():
        for name, v in per_set.items():
            jt = name.rsplit("@", 1)[-1]
            if k not in truth.get(jt, {}):
                continue
            t = truth[jt][k]
            h = hand["params"].get(k)
            rows.append({"type": jt, "param": k, "truth": t, "fitted": float(v), "fit_rel_err": float(v / t - 1.0),
                         "hand": h, "hand_rel_err": None if h is None else float(h / t - 1.0)})
    for k, h in hand["params"].items():  # what the hand-written file assumes and the fit does not have
        if k not in fit["params"]:
            for jt in JOINT_TYPES:
                if k in truth[jt]:
                    t = truth[jt][k]
                    rows.append({"type": jt, "param": k, "truth": t, "fitted": None, "fit_rel_err": None,
                                 "hand": h, "hand_rel_err": float(h / t - 1.0)})
    return rows


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=float, default=0.3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-evals", type=int, default=100)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    t0, c0 = time.perf_counter(), time.process_time()
    d = _dataset(a.seed, a.scale)
    synth_s = (time.perf_counter() - t0, time.process_time() - c0)
    card = json.loads((d / "dataset.json").read_text())
    run = CACHE / f"fit_s{a.seed}_x{a.scale:g}_e{a.max_evals}"
    t1, c1 = time.perf_counter(), time.process_time()
    doc = run_fit([d / "train"], run, robot=RobotFitOptions("anymal_c", max_evals=a.max_evals))
    fit_s = (time.perf_counter() - t1, time.process_time() - c1)
    hand = json.loads(HAND.read_text())
    n_sets = len(JOINT_TYPES)
    scores = {"identified": _score(d, doc["params"], doc["model"]),
              "hand_written_sea": _score(d, {k: [v] * n_sets for k, v in hand["params"].items()}, hand["model"]),
              "config_m1": _score(d, None, None)}
    rec = _recovery(doc, hand, _truth_by_type(card))

    print(f"ANYmal C in air: scale {a.scale:g}, seed {a.seed}, {card['splits']}; selected {doc['model']} "
          f"(fit {fit_s[0]:.0f} s wall, {fit_s[1]:.0f} s CPU; synth {synth_s[0]:.0f} s wall)")
    sel = doc.get("selection") or {}
    for row in sel.get("table", []):
        print(f"  {row['model']:<12} train {1e3 * row['train_mae']:7.2f} mrad  validation "
              f"{1e3 * row['validation_mae']:7.2f} mrad  earns place {row['earns_place']}")
    print(f"{'held-out MAE [mrad], 100-step windows':<40}" + "".join(f"{s.split('/')[-1] + ' ' + jt:>15}"
                                                                   for s in SPLITS for jt in JOINT_TYPES))
    for who, sc in scores.items():
        print(f"{who:<40}" + "".join(f"{1e3 * sc[s][jt]:15.2f}" for s in SPLITS for jt in JOINT_TYPES))
    print("parameter recovery (truth: mean of the type's 4 units)")
    for r in rec:
        fit_txt = "-" if r["fitted"] is None else f"{r['fitted']:.4g} ({100 * r['fit_rel_err']:+.0f} %)"
        hand_txt = "-" if r["hand"] is None else f"{r['hand']:.4g} ({100 * r['hand_rel_err']:+.0f} %)"
        print(f"  {r['type']} {r['param']:<20} truth {r['truth']:.4g}  fitted {fit_txt}  hand-written {hand_txt}")
    summary = {"bench": "legged_transfer", "section": "identification_in_air", "robot": "anymal_c",
               "scale": a.scale, "seed": a.seed, "max_evals": a.max_evals, "splits": card["splits"],
               "selected": doc["model"], "selection": sel.get("table"), "heldout_mae_rad": scores,
               "parameter_recovery": rec, "fit_wall_s": fit_s[0], "fit_cpu_s": fit_s[1], "synth_wall_s": synth_s[0],
               "synth_cpu_s": synth_s[1], "date": dt.date.today().isoformat(),
               "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared)"}
    emit(summary, a.out)
    return summary


if __name__ == "__main__":
    main()

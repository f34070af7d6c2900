"""Legged transfer benchmark (issue 44, item 3): the identified fleet of ANYmal C's drives against the truth's.

Reads what the commands of docs/randomization.md ("From a legged robot's fleet") wrote and compares, per
fitted parameter, the fit per joint and the proposed spread with the virtual hardware's drawn units::

    python bench/legged_fleet.py --data bench/out/legged/anymal_c_s0_x0.3 \\
        --units bench/out/legged/fit_per_joint_g1_s0_x0.3_e300/arm_model.json \\
        --spec bench/out/legged/fleet_spec.json --types bench/out/legged/fit_s0_x0.3_e100/arm_model.json

* per joint: the fitted value against that joint's drawn unit (``dataset.json`` ``units``, the models'
  names by :func:`actuatorlab.synth.zoo_family.zoo_params`), relative error;
* per parameter: the spread the spec proposes (pooled within-type std, natural space: log for positive
  parameters, the parameter's unit otherwise) against the same statistic of the twelve drawn units; for a
  spec from a jackknifed fit (``fit`` job ``jackknife``) also the raw spread, the estimation error removed
  from it and the raw ratio (a parameter the spec dropped counts as proposed spread 0), and
  the rank correlation within each type of fitted vs drawn values (does the fit tell the units apart);
* with ``--types`` (the fit by joint type): held-out MAE per joint type of both fits on the held-out splits
  (100-step windows, :func:`actuatorlab.identify.arm_fit.evaluate_logs`), i.e. whether the data supports a
  set per unit.

A table, then one JSON line (``--out FILE`` also writes it). Nothing is fitted here.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from common import emit  # noqa: E402

from actuatorlab.identify.arm_fit import evaluate_logs  # noqa: E402
from actuatorlab.logs.io import load_native  # noqa: E402
from actuatorlab.models.params import PARAMS  # noqa: E402
from actuatorlab.synth.legged import JOINT_TYPES  # noqa: E402
from actuatorlab.synth.zoo import actuator_from_dict  # noqa: E402
from actuatorlab.synth.zoo_family import zoo_params  # noqa: E402


SPLITS = ("heldout/excitation", "heldout/load", "heldout/gain")


def _z(name: str, v: np.ndarray) -> np.ndarray:
    return np.log(v) if PARAMS[name].scale == "log" else v


def _pooled(name: str, values: dict[str, float]) -> float:
    """Pooled within-type sample std of ``values`` (joint -> value) in natural space."""
    ss, dof = 0.0, 0
    for t in JOINT_TYPES:
        z = _z(name, np.array([v for j, v in values.items() if j.endswith(t)]))
        ss, dof = ss + float(np.sum((z - z.mean()) ** 2)), dof + len(z) - 1
    return float(np.sqrt(ss / dof))


def _rank_corr(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1]) if np.ptp(ra) and np.ptp(rb) else float("nan")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--units", type=Path, required=True)
    ap.add_argument("--spec", type=Path, required=True)
    ap.add_argument("--types", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    card = json.loads((a.data / "dataset.json").read_text())
    truth = {j: {k: v[0] for k, v in zoo_params(actuator_from_dict(u)).items()} for j, u in card["units"].items()}
    fit = json.loads(a.units.read_text())
    spec = json.loads(a.spec.read_text())
    proposed = {e["parameter"]: e for e in spec["entries"] if e["kind"] == "unit"}
    dropped = {e["parameter"]: e for e in spec["source"].get("dropped") or []}  # spread below the estimation error
    rows = []
    for k, per in fit["params"].items():
        if k not in next(iter(truth.values())):
            continue
        joints = sorted(per)
        f = np.array([per[j] for j in joints])
        t = np.array([truth[j][k] for j in joints])
        corr = {ty: _rank_corr(f[[i for i, j in enumerate(joints) if j.endswith(ty)]],
                               t[[i for i, j in enumerate(joints) if j.endswith(ty)]]) for ty in JOINT_TYPES}
        rows.append({"param": k, "space": "log" if PARAMS[k].scale == "log" else PARAMS[k].unit,
                     "proposed_std": proposed[k]["std"] if k in proposed else (0.0 if k in dropped else None),
                     "raw_std": (proposed.get(k) or dropped.get(k) or {}).get("std_raw"),
                     "estimation_std": (proposed.get(k) or dropped.get(k) or {}).get("estimation_std"),
                     "truth_std": _pooled(k, {j: truth[j][k] for j in joints}),
                     "per_joint": {j: {"fitted": float(per[j]), "truth": float(truth[j][k]),
                                       "rel_err": float(per[j] / truth[j][k] - 1.0) if truth[j][k] else None}
                                   for j in joints},
                     "median_abs_rel_err": float(np.median(np.abs(f / t - 1.0))) if np.all(t) else None,
                     "rank_corr_within_type": corr})
    print(f"fleet of {len(truth)} drives: fit per joint ({fit['model']}) vs the drawn units; spec {a.spec.name}")
    print(f"{'parameter':<22}{'space':>10}{'raw std':>10}{'est. std':>10}{'proposed std':>14}{'truth std':>12}"
          f"{'raw ratio':>10}{'ratio':>8}{'median |rel err|':>18}" + "".join(f"{'rank corr ' + t:>15}" for t in JOINT_TYPES))

    def ratio(x: float | None, t: float) -> float:
        return x / t if x is not None and t else float("nan")

    nan = float("nan")
    for r in rows:
        r["raw_ratio"], r["ratio"] = ratio(r["raw_std"], r["truth_std"]), ratio(r["proposed_std"], r["truth_std"])
        err = "-" if r["median_abs_rel_err"] is None else f"{100 * r['median_abs_rel_err']:.0f} %"
        print(f"{r['param']:<22}{r['space']:>10}{r['raw_std'] if r['raw_std'] is not None else nan:>10.4g}"
              f"{r['estimation_std'] if r['estimation_std'] is not None else nan:>10.4g}"
              f"{r['proposed_std'] if r['proposed_std'] is not None else nan:>14.4g}{r['truth_std']:>12.4g}"
              f"{r['raw_ratio']:>10.2f}{r['ratio']:>8.2f}{err:>18}"
              + "".join(f"{r['rank_corr_within_type'][t]:>15.2f}" for t in JOINT_TYPES))
    heldout: dict[str, Any] = {}
    if a.types is not None:
        by_type = json.loads(a.types.read_text())
        print(f"{'held-out MAE [mrad], 100-step windows':<40}" + "".join(f"{s.split('/')[-1] + ' ' + t:>15}"
                                                                       for s in SPLITS for t in JOINT_TYPES))
        for who, d in (("per joint", fit), ("by joint type", by_type)):
            heldout[who] = {}
            for s in SPLITS:
                trajs = [load_native(p, strict=False) for p in sorted((a.data / s).glob("*.parquet"))]
                ev = evaluate_logs("anymal_c", d["params"], trajs, horizons=(100,), model=d["model"])
                heldout[who][s] = {t: float(np.mean([v["100"] for j, v in ev["per_joint"].items() if j.endswith(t)]))
                                   for t in JOINT_TYPES}
            print(f"{who:<40}" + "".join(f"{1e3 * heldout[who][s][t]:15.2f}" for s in SPLITS for t in JOINT_TYPES))
    summary = {"bench": "legged_transfer", "section": "fleet", "data": str(a.data), "units": str(a.units),
               "spec": str(a.spec), "model": fit["model"], "rows": rows, "heldout_mae_rad": heldout}
    emit(summary, a.out)
    return summary


if __name__ == "__main__":
    main()

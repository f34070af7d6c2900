"""Torque envelope at stall and at speed: does the supply sag (``+sag``) or the current limit
(``+climit``) earn its place on the real servo logs, and does it fix the stall?

One command (from the repo root)::

    python bench/torque_envelope.py                  # XL330 split + STS3250 leave-one-out + synthetic
    python bench/torque_envelope.py --skip-sts --skip-synthetic --all11

XL330: each model is fitted on the 7 training logs of ``bench/split.py`` (raw logs) and scored on its
4 held-out logs (mean of per-log closed-loop position MAE, BAM's convention). Each extension starts
from its parent's optimum (and, for ``+climit``, also from the parent with the limit at 1.8 A, the
documented XL330 Current Limit register of 1750 mA rounded up, because from the parent's
"no limit" the loss is flat: see docs/models.md). Stall episodes: samples where the real joint is at
rest (|dq| < 0.1 rad/s) with the PWM register at its limit (|duty| >= 0.99) for at least 0.1 s; the
overshoot is sign(q_real) (q_sim - q_real) averaged over the episode: > 0 where the model lifts the
pendulum further against gravity than the real servo (too much torque at stall).

STS3250: 3 shared logs, leave-one-out (fit on 2, score the third), the Feetech ladder (``+gain``).

Synthetic: tests/stall_logs.py (sagging supply, PWM limits 100 % / 60 %); the stall-angle error of
the previous default (g1+delay), of m1 and of m1+sag on the three logs not fitted.

Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent / "tests"))

import split as bench_split  # noqa: E402
from common import emit  # noqa: E402

XL330_MODELS = ("g1+delay", "g1+delay+climit", "g1+delay+sag", "g1+delay+climit+sag")
STS_MODELS = ("g1+gain+delay", "g1+gain+delay+sag")


def _fit(trajs, model, inits, evals, seed=0):
    from actuatorlab.identify.fit import fit_model
    return fit_model(trajs, model, seed=seed, max_evals=evals, n_starts=2, grad_steps=60, init=inits or None)


def _inits(model, fits):
    from actuatorlab.models.registry import contains
    inner = [fits[m].params for m in fits if contains(model, m)]
    if "climit" in model.split("+"):
        inner += [{**p, "current_limit": 1.8} for p in inner]
    return inner


def stall_episodes(trajs, results):
    """{log: [(t0, t1, real q, sim q)]} for the episodes defined in the module docstring."""
    out = {}
    for tr, lr in zip(trajs, results):
        if "pwm_duty" not in tr.data:
            continue
        d = np.interp(lr.t, tr.time - tr.time[0], tr["pwm_duty"])
        idx = np.where((np.abs(d) >= 0.99) & (np.abs(lr.dq_meas) < 0.1))[0]
        eps = []
        for s in np.split(idx, np.where(np.diff(idx) > 1)[0] + 1) if idx.size else []:
            if lr.t[s[-1]] - lr.t[s[0]] >= 0.1:
                eps.append((float(lr.t[s[0]]), float(lr.t[s[-1]]), float(lr.q_meas[s].mean()), float(lr.q_sim[s].mean())))
        if eps:
            out[lr.name] = eps
    return out


def xl330(evals: int, all11: bool, models=XL330_MODELS) -> dict:
    from actuatorlab.evaluate.replay import replay_batches
    from actuatorlab.logs import load_logs
    from actuatorlab.sim.rollout import make_batches

    raw = bench_split.DEFAULT_DATA_DIR / "raw"
    sp = bench_split.make_split()
    every = load_logs(sorted(raw.glob("*.json")))
    train = [t for t in every if t.name + ".json" in sp["train"]]
    rows, fits = [], {}
    for model in models:
        t0 = time.perf_counter()
        r = _fit(train, model, _inits(model, fits), evals)
        fits[model] = r
        res = replay_batches(model, r.params, make_batches(every, r.dt))
        mae = {lr.name: 1e3 * float(np.mean(np.abs(lr.q_sim - lr.q_meas))) for lr in res}
        held = [mae[n[:-5]] for n in sp["heldout"]]
        eps = stall_episodes(every, res)
        stall = [1e3 * np.sign(real) * (sim - real) for v in eps.values() for (_, _, real, sim) in v]
        rows.append({"model": model, "fit_s": time.perf_counter() - t0, "train_mae_pooled": 1e3 * r.train_mae,
                     "train_mae_per_log": float(np.mean([mae[n[:-5]] for n in sp["train"]])),
                     "heldout_mae": float(np.mean(held)), "heldout_per_log": held,
                     "stall_overshoot_mrad": stall, "stall_abs_mean_mrad": float(np.mean(np.abs(stall))),
                     "params": {k: r.params[k] for k in r.space.names}})
        print(f"XL330 {model:22s} fit {rows[-1]['fit_s']:5.1f}s  train {rows[-1]['train_mae_per_log']:5.1f}  "
              f"held-out {rows[-1]['heldout_mae']:5.1f} mrad ({', '.join(f'{h:.0f}' for h in held)})  "
              f"stall overshoot {', '.join(f'{s:+.0f}' for s in stall)} mrad", flush=True)
        print("      ", {k: round(v, 4) for k, v in rows[-1]["params"].items()}, flush=True)
    out = {"split": rows}
    if all11:
        all_rows, fits = [], {}
        for model in ("g1+delay", "g1+delay+sag"):
            r = _fit(every, model, _inits(model, fits), evals)
            fits[model] = r
            res = replay_batches(model, r.params, make_batches(every, r.dt))
            eps = stall_episodes(every, res)
            stall = [1e3 * np.sign(real) * (sim - real) for v in eps.values() for (_, _, real, sim) in v]
            all_rows.append({"model": model, "train_mae_pooled": 1e3 * r.train_mae, "stall_overshoot_mrad": stall,
                             "params": {k: r.params[k] for k in r.space.names}})
            print(f"XL330 all 11 {model:16s} train {1e3 * r.train_mae:5.1f} mrad  stall overshoot "
                  f"{', '.join(f'{s:+.0f}' for s in stall)} mrad", flush=True)
        out["all11"] = all_rows
    return out


def sts3250(evals: int) -> list[dict]:
    from actuatorlab.evaluate.replay import replay_batches
    from actuatorlab.logs import load_logs
    from actuatorlab.sim.rollout import make_batches

    logs = load_logs(sorted((bench_split.DEFAULT_DATA_DIR.parent / "sts3250" / "raw").glob("*.json")))
    rows = []
    for k, test in enumerate(logs):
        train = [t for j, t in enumerate(logs) if j != k]
        fits = {}
        for model in STS_MODELS:
            r = _fit(train, model, _inits(model, fits), evals)
            fits[model] = r
            (lr,) = replay_batches(model, r.params, make_batches([test], r.dt))
            rows.append({"heldout": test.name, "model": model, "train_mae": 1e3 * r.train_mae,
                         "heldout_mae": 1e3 * float(np.mean(np.abs(lr.q_sim - lr.q_meas))),
                         "source_resistance": r.params["source_resistance"]})
            print(f"STS3250 hold {test.name} {model:20s} train {rows[-1]['train_mae']:5.1f}  held-out "
                  f"{rows[-1]['heldout_mae']:5.1f} mrad  R_s {r.params['source_resistance']:.3f}", flush=True)
    return rows


def synthetic(evals: int) -> list[dict]:
    from actuatorlab.evaluate.replay import replay_batches
    from actuatorlab.identify.fit import fit_model
    from actuatorlab.models.params import neutral_params
    from actuatorlab.sim.rollout import make_batches
    from stall_logs import stall_logs, stall_window

    train_names = ("m70_v6", "m50_v84_d60", "m80_v74n", "chirp")
    logs = stall_logs()
    train = [t for t in logs if t.name in train_names]
    test = [t for t in logs if t.name not in train_names]
    rows = []
    for model in ("g1+delay", "m1", "m1+sag"):
        for seed in (0, 1):
            r = fit_model(train, model, seed=seed, max_evals=evals, n_starts=1, grad_steps=60)
            res = replay_batches(model, {**neutral_params(), **r.params}, make_batches(test, 0.005))
            err = {lr.name: float(np.mean(lr.q_sim[stall_window(lr.t)]) - np.mean(lr.q_meas[stall_window(lr.t)]))
                   for lr in res}
            rows.append({"model": model, "seed": seed, "train_mae": 1e3 * r.train_mae, "stall_err_rad": err})
            print(f"synthetic {model:10s} seed {seed}  train {1e3 * r.train_mae:6.2f} mrad  stall-angle errors "
                  f"{', '.join(f'{v:+.4f}' for v in err.values())} rad", flush=True)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--evals", type=int, default=4000, help="CMA-ES evaluations per start (real logs)")
    ap.add_argument("--skip-xl330", action="store_true")
    ap.add_argument("--models", nargs="+", default=list(XL330_MODELS),
                    help="XL330 models, in nesting order (e.g. g1+delay g1+delay+sag g1+delay+sag+stiction)")
    ap.add_argument("--skip-sts", action="store_true")
    ap.add_argument("--skip-synthetic", action="store_true")
    ap.add_argument("--all11", action="store_true", help="also fit on all 11 XL330 logs (stall errors only)")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    summary = {"bench": "torque_envelope"}
    if not a.skip_xl330:
        summary["xl330"] = xl330(a.evals, a.all11, tuple(a.models))
    if not a.skip_sts:
        summary["sts3250"] = sts3250(a.evals)
    if not a.skip_synthetic:
        summary["synthetic"] = synthetic(1500)
    emit(summary, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

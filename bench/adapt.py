"""Online adaptation of trained whole-robot learned actuators to another virtual unit: the adaptation table.

    python bench/adapt.py --runs RUN_TF RUN_RES --data D1 [--n 12] [--steps N] [--lr LR] [--out bench/out/adapt]

RUN_TF / RUN_RES: runs of ``actuatorlab train D0 --robot open_manipulator_x --arch transformer`` /
``--arch residual:transformer`` on one unit (``synth --suite neural_actuator --seed 0``); D1: a
dataset of another unit (``--seed 11``: another draw of the unit-to-unit variation). Each run is
adapted (:func:`actuatorlab.learned.adapt.adapt_arm`, the ``actuatorlab adapt`` command) on ``--n``
of D1's training logs, evenly spread by name; D1/test is never used for adapting or choosing.
Rows per run: the unadapted model, the adapted model, and next to them the run's analytic model
(its residual base or its teacher) as given and refitted (CMA-ES from its values, the residual base
refit of ``adapt``) on the same logs. Columns: pooled window-rollout MAE on D1/test at the longest
horizon (600 control steps), its change against the unadapted model, wall and CPU seconds. The
machine may be shared: CPU seconds are the comparable figure. One table, one JSON line.

``--gate`` (measured 2026-12-06, not adopted: bench/journal/adapt.md): a residual's correction,
learned on the first unit, scaled over its refitted base by the gate that earns its place on the
new unit's 12 adaptation logs (each log a group, :func:`actuatorlab.learned.gate.choose_gate`, the
one-joint residual's rule); the table's "gate" column and the JSON's ``gated`` give the gate and
the gated model's test MAE.

``--references RUN ...``: runs trained by ``actuatorlab train`` on D1's own training logs (all of
them, the default budget; a residual over ``fit D1/train --robot ...``): the "own unit" column gives
the test MAE of the reference of the same kind and architecture as each row's run, i.e. what
training on the new unit itself reaches, so that an adaptation's change can be read against what
is attainable on that unit (measured 2026-12-06, bench/journal/adapt.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import emit  # noqa: E402

HORIZONS = (100, 300, 600)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=Path, nargs="+", required=True)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--n", type=int, default=12)
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--out", type=Path, default=Path("bench/out/adapt"))
    ap.add_argument("--gate", action="store_true", help="also a residual's correction gated on the adaptation logs")
    ap.add_argument("--references", type=Path, nargs="*", default=[],
                    help="runs trained on DATA's own training logs: the 'own unit' column")
    a = ap.parse_args(argv)

    from actuatorlab.app.train_work import compilation_cache
    from actuatorlab.identify.arm_fit import fit_arm
    from actuatorlab.learned.adapt import AdaptConfig, adapt_arm, adaptation_logs
    from actuatorlab.learned.arm import evaluate_learned_arm, load_arm_model
    from actuatorlab.logs import load_logs
    from actuatorlab.precision import physics_precision
    from actuatorlab.sim.arm_data import evaluate_arm

    cfg = AdaptConfig(max_trajectories=a.n, **({} if a.steps is None else {"steps": a.steps}),
                      **({} if a.lr is None else {"lr": a.lr}))
    refit = cfg.resolved(one_joint=False)  # the refit budget adapt_arm uses (None: the robot default)
    a.out.mkdir(parents=True, exist_ok=True)
    res_path = a.out / "results.json"
    results = json.loads(res_path.read_text()) if res_path.exists() else {}
    new = load_logs([a.data / "train"])
    te = load_logs([a.data / "test"])
    tr, va = adaptation_logs(new, cfg)
    logs = tr + [t for t in va if t not in tr]
    with physics_precision(), compilation_cache():
        for run in a.runs:
            key = run.name
            if key in results:
                continue
            robot, m, d = load_arm_model(run / "arm_model.json")
            rec: dict = {"kind": d["kind"], "arch": d["arch"],
                         "before": evaluate_learned_arm(robot, m, te, HORIZONS)["position_mae"]}
            out = a.out / f"{key}_adapted"
            if not (out / "arm_model.json").exists():
                adapt_arm(run, new, cfg, out=out)
            r2, m2, d2 = load_arm_model(out / "arm_model.json")
            rec["after"] = evaluate_learned_arm(r2, m2, te, HORIZONS)["position_mae"]
            rec["adaptation"] = {k: d2["adaptation"][k] for k in ("n_trajectories", "logs", "wall_s", "cpu_s")}
            if a.gate and m2.residual:
                rec["gate"], rec["gated"] = gated_adaptation(r2, m2, logs, te)
            rec["fine_tune"] = {k: d2["training"].get(k) for k in ("steps", "best_step", "best_val_mae", "init_val_mae",
                                                                  "compile_s", "wall_s", "kept")}
            base = d.get("base") or {}
            rec["analytic_before"] = evaluate_arm(robot.name, base.get("params"), te, HORIZONS,
                                                  model=base.get("model"))["position_mae"]
            t0, c0 = time.perf_counter(), time.process_time()
            f = fit_arm(robot.name, logs, model=base.get("model"), init=[{k: v for k, v in m.base.items()}],
                        max_evals=refit.refit_evals, max_windows=refit.refit_windows, seed=cfg.seed)
            rec["analytic_refit"] = evaluate_arm(robot.name, f["params"], te, HORIZONS, model=f["model"])["position_mae"]
            rec["analytic_refit_s"] = [time.perf_counter() - t0, time.process_time() - c0]
            results[key] = rec
            res_path.write_text(json.dumps(results, indent=2, default=float) + "\n")
        own: dict = {}  # (kind, arch) -> (run, test MAE) of the runs trained on this unit
        for run in a.references:
            robot, m, d = load_arm_model(run / "arm_model.json")
            own[(d["kind"], d["arch"])] = (str(run), evaluate_learned_arm(robot, m, te, HORIZONS)["position_mae"])

    card = json.loads((a.data / "dataset.json").read_text())
    print(f"adaptation to the unit of {a.data.name} (synth seed {card.get('seed')}, scale {card.get('scale')}) on "
          f"{len(logs)} of its training logs; pooled rollout MAE [mrad] on its test split, 600 control steps")
    print(f"{'run':<16}{'kind':<10}{'unadapted':>11}{'adapted':>9}{'change':>9}{'wall s':>8}{'cpu s':>8}"
          f"{'analytic':>10}{'refit':>8}{'gate':>6}{'gated':>7}{'own unit':>10}")
    summary: dict = {"seed": card.get("seed"), "scale": card.get("scale"), "n_trajectories": len(logs), "runs": {}}
    for key, r in results.items():
        ch = r["after"] / r["before"] - 1.0
        ref = own.get((r["kind"], r.get("arch")))
        print(f"{key:<16}{r['kind']:<10}{1e3 * r['before']:>11.1f}{1e3 * r['after']:>9.1f}{100 * ch:>8.1f}%"
              f"{r['adaptation']['wall_s']:>8.0f}{r['adaptation']['cpu_s']:>8.0f}"
              f"{1e3 * r['analytic_before']:>10.1f}{1e3 * r['analytic_refit']:>8.1f}"
              + (f"{r['gate']['gate']:>6g}{1e3 * r['gated']:>7.1f}" if r.get("gate") else f"{'-':>6}{'-':>7}")
              + (f"{1e3 * ref[1]:>10.1f}" if ref else f"{'-':>10}"))
        summary["runs"][key] = {"kind": r["kind"], "before": r["before"], "after": r["after"], "change": ch,
                                "wall_s": r["adaptation"]["wall_s"], "cpu_s": r["adaptation"]["cpu_s"],
                                "analytic": r["analytic_before"], "analytic_refit": r["analytic_refit"],
                                "gate": (r.get("gate") or {}).get("gate"), "gated": r.get("gated"),
                                "own_unit": None if ref is None else {"run": ref[0], "test_mae": ref[1]}}
    emit(summary, a.out / "summary.json")
    return 0


def gated_adaptation(robot, model, logs, te) -> tuple[dict, float]:
    """(gate record, test MAE [rad]) of the adapted residual ``model`` with its correction scaled by
    the gate chosen on ``logs`` (each log a group; window rollouts at HORIZONS, pooled at the
    longest) against its refitted base alone."""
    import equinox as eqx
    import numpy as np

    from actuatorlab.learned.arm import evaluate_learned_arm
    from actuatorlab.learned.gate import GATES, choose_gate
    from actuatorlab.models.nets import scale_torque_head

    def at(g):
        return eqx.tree_at(lambda m: m.net, model, scale_torque_head(model.net, g))

    scores = np.array([[evaluate_learned_arm(robot, at(g), [t], HORIZONS)["position_mae"] for t in logs] for g in GATES])
    choice = choose_gate(scores, GATES, [t.name for t in logs])
    rec = {**choice.to_dict(), "rule": "the correction over the refitted base, on each adaptation log of the new unit; "
                                       "the nested rule against gate 0 (learned.gate)"}
    return rec, evaluate_learned_arm(robot, at(choice.gate), te, HORIZONS)["position_mae"]


if __name__ == "__main__":
    raise SystemExit(main())

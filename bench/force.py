"""Sensorless end-effector force on virtual hardware: the learned force head vs three classical baselines.

    python bench/force.py [--data DIR] [--scale 0.1] [--seed 0] [--out bench/out/force]
                          [--arch transformer] [--sizes JSON] [--steps 400] [--eval-every 25] [--batch B]
                          [--no-augment-yaw] [--no-augment-mirror] [--eval test|val] [--soft-gate]
                          [--force-prior M [--force-prior-labels]] [--force-frame base|yaw|joint]
                          [--residual-features tau_ext,f_lever]

DIR is a dataset of ``actuatorlab synth --robot open_manipulator_x --suite neural_actuator`` (written
there with ``--seed`` / ``--scale`` when it does not exist). The learned model's force, gate and
condition heads (and its trunk) are trained by :func:`actuatorlab.learned.heads.train_heads`
(teacher forcing on measured frames, no simulator) on DIR/train, validated on DIR/val; the
heads see every training sample turned about the arm's vertical joint 1 by a random angle, the force
label turned with it (:func:`actuatorlab.learned.head_data.yaw_augment`; ``--no-augment-yaw``: off), and
half of them first reflected in the arm's vertical mirror plane (:func:`actuatorlab.learned.head_data.mirror_augment`;
``--no-augment-mirror``: off). The
classical baselines (``id_linear``, ``id_friction``, ``momentum_observer``) are calibrated on the
free-motion logs of DIR/train. Every method runs causally, one frame at a time, on DIR/test and
DIR/heldout/* (payload 400 g and pushes along -y, conditions never seen in training); the learned
force is 0 on frames its gate calls free (``--soft-gate``: the force times the contact probability
everywhere, the figures before 2026-12-03); with
``--eval val`` on DIR/val only (for choosing training options; the test split stays unseen). Prints one
table, then one JSON line (:func:`actuatorlab.estimate.force_eval.evaluate_force`'s keys plus
``training`` and ``targets``); OUT/results.json and OUT/force.html (the report) are written too.
``--force-prior``, ``--force-frame`` and ``--residual-features`` run the recipes of
bench/force_recipes.py (measured, not adopted).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import emit  # noqa: E402

ROBOT = "open_manipulator_x"
#: default network (chosen on D/val, 2026-12-02, bench/README.md "Why pushes are missed, and the
#: schedule"): a small Transformer seeing 32 frames; 400 steps validated every 25 (--eval-every)
SIZES = {"d": 64, "n_layers": 2, "ff": 128, "head_width": 64, "history": 32}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=None, help="synth dataset (default: OUT/data, generated)")
    ap.add_argument("--scale", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("bench/out/force"))
    ap.add_argument("--arch", default="transformer")
    ap.add_argument("--sizes", default=json.dumps(SIZES), help="network sizes as JSON (default: the small "
                    "Transformer with 32 frames of history chosen on D/val, bench/README.md; '{}' for the arch's "
                    "defaults)")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--eval-every", type=int, default=25, help="validation (and checkpoint) every N steps, the "
                    "best kept (0: max(50, steps // 6), the schedule before 2026-12-02)")
    ap.add_argument("--noise", type=float, default=0.1, help="input-noise augmentation [training std]")
    ap.add_argument("--weight-decay", type=float, default=1e-4)
    ap.add_argument("--force-prior", default=None, choices=("id_linear", "id_friction", "momentum_observer"),
                    help="the force head corrects this classical estimate (calibrated on train/ free motion)")
    ap.add_argument("--force-prior-labels", action="store_true",
                    help="calibrate the force prior on every labelled train/ log (payloads, pushes), not free motion only")
    ap.add_argument("--augment-yaw", action=argparse.BooleanOptionalAction, default=True,
                    help="train the heads on samples rotated about the vertical joint 1, the force label rotated "
                         "with it (default since 2026-12-01, chosen on D/val: bench/README.md); --no-augment-yaw: off")
    ap.add_argument("--augment-mirror", action=argparse.BooleanOptionalAction, default=True,
                    help="also reflect half of the training samples in the arm's vertical mirror plane (joint 1 "
                         "and the force's y component change sign; learned.head_data.mirror_augment; default since "
                         "2026-12-02, chosen on D/val: bench/README.md); --no-augment-mirror: off")
    ap.add_argument("--force-frame", default="base", choices=("base", "yaw", "joint"),
                    help="the force head predicts in the base frame, in the frame turning with joint 1, or the "
                         "external joint torques mapped through the Jacobian (force_recipes.recipe_model)")
    ap.add_argument("--residual-input", default="id_friction",
                    choices=("id_friction", "id_linear", "momentum_observer", "none"),
                    help="one more per-channel network input: this classical method's estimated external joint "
                         "torque tau_ext, calibrated on train/ free motion (learned.heads.HeadsConfig "
                         "residual_input; default id_friction since 2026-12-03, rule R26 on D/val of two units: "
                         "bench/README.md); none: the network reads the logged signals only")
    ap.add_argument("--residual-features", default="tau_ext",
                    help="comma-separated inputs from --residual-input: tau_ext, f_lever (tau_ext over each joint's "
                         "lever arm to the end effector [N]; force_recipes.recipe_model)")
    ap.add_argument("--eval", default="test", choices=("test", "val"),
                    help="test: DIR/test + DIR/heldout (report once); val: DIR/val only (model selection)")
    ap.add_argument("--soft-gate", action="store_true",
                    help="learned force x contact probability on every frame, as before 2026-12-03 (default: 0 "
                         "where the gate says no contact)")
    a = ap.parse_args(argv)

    from actuatorlab.estimate.force_eval import ALL_METHODS, evaluate_force, load_tagged
    from actuatorlab.report.force import write_force_report
    from actuatorlab.learned.arm import load_arm_model
    from actuatorlab.learned.heads import HeadsConfig
    from force_recipes import train_heads_recipe
    from actuatorlab.logs import load_logs
    from actuatorlab.precision import physics_precision
    from actuatorlab.robots import load_robot
    from actuatorlab.synth import run_synth

    out = a.out
    out.mkdir(parents=True, exist_ok=True)
    data = a.data or out / "data"
    if not (data / "dataset.json").exists():
        run_synth(ROBOT, "neural_actuator", data, seed=a.seed, scale=a.scale)
    card = json.loads((data / "dataset.json").read_text())
    tr, va = load_logs([data / "train"]), load_logs([data / "val"])
    ev, splits = load_tagged([data / "test", data / "heldout"] if a.eval == "test" else [data / "val"])
    run = out / "run_heads"
    t0 = time.perf_counter()
    if not (run / "arm_model.json").exists():
        res_input = None if a.residual_input == "none" else a.residual_input
        cfg = HeadsConfig(arch=a.arch, sizes=json.loads(a.sizes), steps=a.steps, batch=a.batch, lr=a.lr,
                          eval_every=a.eval_every or max(50, a.steps // 6), noise=a.noise, weight_decay=a.weight_decay,
                          seed=a.seed, augment_yaw=a.augment_yaw, augment_mirror=a.augment_mirror,
                          residual_input=res_input)
        train_heads_recipe(ROBOT, tr, va, cfg, out=run, resume=(run / "checkpoint.ckpt").exists(),
                           force_prior=a.force_prior, prior_labels=a.force_prior_labels, force_frame=a.force_frame,
                           residual_features=("tau_ext",) if res_input is None else
                           tuple(f.strip() for f in a.residual_features.split(",") if f.strip()))
    train_wall = time.perf_counter() - t0
    with physics_precision():
        robot = load_robot(ROBOT)
        _, model, d = load_arm_model(run / "arm_model.json", ROBOT)
        res = evaluate_force(robot, ev, tr, model=model, methods=ALL_METHODS, splits=splits, keep_outputs=True,
                             soft_gate=a.soft_gate)
    write_force_report(out / "force.html", res, title=f"End-effector force, synth seed {card['seed']} "
                                                       f"scale {card['scale']}")
    res = {k: v for k, v in res.items() if not k.startswith("_")}
    classical = {m: res["force_mae"][m] for m in ALL_METHODS if m != "learned"}
    best = min(classical, key=classical.get)
    ratio = res["force_mae"]["learned"] / classical[best]
    cc = {m: res["force_mae_in_contact"][m] for m in ALL_METHODS if m != "learned"}
    best_c = min(cc, key=cc.get)
    ratio_c = res["force_mae_in_contact"]["learned"] / cc[best_c]
    res["training"] = {**d["training"], "arch": d["arch"], "sizes": d["sizes"], "params": d["params_count"],
                       "force_prior": (d.get("force_prior") or {}).get("method"),
                       "force_prior_labelled": ((d.get("force_prior") or {}).get("calibration") or {}).get("labelled"),
                       "augment_yaw": bool(d["training"].get("augment_yaw")),
                       "augment_mirror": bool(d["training"].get("augment_mirror")),
                       "residual_input": d["training"].get("residual_input"),
                       "residual_features": d["training"].get("residual_features"),
                       "wall_s_this_run": train_wall}
    res["data"] = {"seed": card["seed"], "scale": card["scale"], "train_logs": len(tr), "val_logs": len(va),
                   "evaluated": sorted({lg["split"] for lg in res["logs"]})}
    res["targets"] = {"best_classical": best, "learned_over_best_classical": ratio,
                      "mae_ratio_target": 0.25, "mae_ratio_met": ratio <= 0.25,
                      "fp_rate_target": 0.05, "fp_rate_met": res["false_positive_contact_rate"]["learned"] < 0.05,
                      "best_classical_in_contact": best_c, "learned_over_best_classical_in_contact": ratio_c,
                      "in_contact_ratio_met": ratio_c <= 0.25, "evaluated_on": a.eval}
    res["machine"] = {"load_avg": os.getloadavg(), "cpus": os.cpu_count()}
    (out / "results.json").write_text(json.dumps(res, indent=2, default=float) + "\n")

    pct = lambda x: "-" if x is None else f"{100 * x:5.1f} %"  # noqa: E731
    tasks = sorted({k for m in ALL_METHODS for k in res["force_mae_by_task"][m]})
    splits = sorted({k for m in ALL_METHODS for k in res["force_mae_by_split"][m]})
    print(f"force MAE [N] on {res['n_logs']} logs ({', '.join(res['data']['evaluated'])}); synth seed "
          f"{card['seed']} scale {card['scale']}; learned: {d['arch']} {d['params_count']} params, "
          f"{d['training']['steps']} steps, {d['training']['wall_s']:.0f} s, force prior "
          f"{(d.get('force_prior') or {}).get('method')}")
    head = f"{'method':<18} {'MAE':>6} {'contact':>7} {'contact acc':>11} {'FP rate':>8}  " + " ".join(f"{t[:10]:>10}" for t in tasks) \
        + "  " + " ".join(f"{s[-12:]:>12}" for s in splits)
    print(head)
    for m in ALL_METHODS:
        print(f"{m:<18} {res['force_mae'][m]:6.3f} {res['force_mae_in_contact'][m]:7.3f} {pct(res['gate_accuracy'][m]):>11} "
              f"{pct(res['false_positive_contact_rate'][m]):>8}  "
              + " ".join(f"{res['force_mae_by_task'][m].get(t, float('nan')):10.3f}" for t in tasks) + "  "
              + " ".join(f"{res['force_mae_by_split'][m].get(s, float('nan')):12.3f}" for s in splits))
    z = res["zero_estimate"]
    print(f"{'zero (reference)':<18} {z['force_mae']:6.3f} {z['force_mae_in_contact']:7.3f} {'-':>11} {'-':>8}  "
          + " ".join(f"{z['force_mae_by_task'].get(t, float('nan')):10.3f}" for t in tasks) + "  "
          + " ".join(f"{z['force_mae_by_split'].get(s, float('nan')):12.3f}" for s in splits))
    print(f"learned / best classical ({best}): {ratio:.3f} (target <= 0.25: {'met' if ratio <= 0.25 else 'NOT met'}); "
          f"learned FP rate {pct(res['false_positive_contact_rate']['learned'])} (target < 5 %: "
          f"{'met' if res['targets']['fp_rate_met'] else 'NOT met'})")
    print(f"in contact: learned / best classical ({best_c}): {ratio_c:.3f} (target <= 0.25: "
          f"{'met' if ratio_c <= 0.25 else 'NOT met'}); evaluated on {a.eval}")
    for w in res.get("gain_warnings", []):
        print(f"calibration: {w}")
    emit({k: res[k] for k in ("force_mae", "force_mae_in_contact", "force_mae_by_task", "force_mae_by_split", "gate_accuracy",
                              "false_positive_contact_rate", "zero_estimate", "contact_rule", "gain_warnings", "targets",
                              "training", "data", "machine")}, out / "summary.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

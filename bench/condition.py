"""Motor-condition detection on the virtual hardware: the learned condition head against a current
threshold, an RBF SVM and a random forest (issue 9, section 2). A table, then one JSON line.

    actuatorlab synth --robot open_manipulator_x --suite neural_actuator --out D --seed 0 --scale 0.1 \
        --restricted-pairs 60
    python bench/condition.py --data D [--arch window_stats] [--steps 800] [--lr 1e-3] [--history 63]
        [--sizes JSON] [--features ...] [--select auc|loss]
        [--seed 0] [--validate-only] [--no-calibration]
        [--second-unit D1] [--model RUN/arm_model.json] [--out bench/out/condition]

Training: D/train only (the learned head: teacher-forced supervised training of the condition
head, ``train_condition_head``; the baselines: per-channel classifiers on its 64-step windows).
Every choice is made on D/val: the training step kept (``--select``: highest frame AUC of the
restricted joint, or lowest loss), then the detector's calibration (``calibrate_condition``: the
causal smoothing of the per-frame scores, the window and per-log verdict thresholds). With
``--validate-only`` only D/val is scored (for comparing configurations; the test split is not
loaded). Otherwise D/test (held-out split: restricted and normal logs) and D/heldout/* (held-out
conditions, all normal: false-positive rate) are then evaluated once with what D/val chose. Without
``--model`` the learned model is a fresh network of ``--arch`` (normalizer from the training
frames) trained whole (scope "net"); with ``--model`` only its condition head is trained (scope
"head"). The random forest is also shown with its window scores smoothed over the same causal
horizon as the learned detector's, so the two are compared at equal look-back too.
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
from condition_recipes import motion_weighting, out_of_fold_frame_scores  # noqa: E402

os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", "/tmp/jaxcache")
from actuatorlab.estimate.condition_train import DetectorConfig  # noqa: E402

ROBOT = "open_manipulator_x"
#: default fresh model (chosen on D/val, see bench/README.md), the library's DetectorConfig, which
#: ``actuatorlab condition`` trains by default when the model file holds no calibrated detector:
#: ``window_stats``, per-joint statistics of a 64-frame window (levels, spreads, trends and the
#: cross-slopes such as current on position, a stiffness) and an MLP, on q, dq, err, current, PWM
#: and tau_ext (the id_friction inverse-dynamics residual, the model's residual_input calibrated on
#: D/train's free-motion logs; adopted 2026-12-03, bench/README.md) with the absolute position's
#: mean left out (absolute positions let a network recognise the restricted training motions)
DETECTOR = DetectorConfig()
ARCH = DETECTOR.arch
SIZES = {"window_stats": {}, "transformer": {"d": 64, "n_heads": 4, "n_layers": 2, "ff": 128, "head_width": 64}}
FEATURES = DETECTOR.features
#: training recipe: steps, learning rate, the step kept by validation (twin-pair batches, a twin
#: ranking term, gain jitter and input noise were tried and not adopted, bench/journal/condition.md;
#: removed 2026-12-04)
STEPS = DETECTOR.train.steps
LR = DETECTOR.train.lr
SELECT = DETECTOR.train.select
#: on-delays of the per-frame alarm [s] whose trade-off (false onsets vs first alarm) the bench prints
ALARM_HOLDS_S = (0.0, 0.5, 1.0, 2.0, 4.0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="synth folder (with --restricted-pairs)")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out" / "condition")
    ap.add_argument("--model", type=Path, default=None, help="start from this RUN/arm_model.json (head only)")
    ap.add_argument("--arch", default=ARCH)
    ap.add_argument("--steps", type=int, default=STEPS)
    ap.add_argument("--batch", type=int, default=DETECTOR.train.batch)
    ap.add_argument("--lr", type=float, default=LR)
    ap.add_argument("--history", type=int, default=DETECTOR.history, help="frames of history of a fresh model")
    ap.add_argument("--sizes", type=json.loads, default=None, help="network sizes of a fresh model, JSON "
                    "(default: a small Transformer for --arch transformer, the defaults otherwise)")
    ap.add_argument("--features", nargs="*", default=list(FEATURES), help="per-channel features of a fresh model "
                    "(none given: train --robot's default layout)")
    ap.add_argument("--scope", choices=("net", "head"), default=None,
                    help="train the whole network or the condition head only (default: net for a fresh model, head "
                         "with --model)")
    ap.add_argument("--eval-every", type=int, default=DETECTOR.train.eval_every, help="validation (D/val) every N steps; best kept")
    ap.add_argument("--select", choices=("loss", "auc"), default=SELECT,
                    help="training step kept: lowest D/val loss or highest D/val frame AUC of the restricted joint")
    ap.add_argument("--no-calibration", action="store_true", help="no smoothing, thresholds 0.5 (the earlier "
                    "detector); default: smoothing window and thresholds chosen on D/val")
    ap.add_argument("--min-recall", type=float, default=None, help="calibration operating point: the window "
                    "threshold with the fewest false alarms among those reaching this recall on D/val (default: "
                    "highest balanced accuracy)")
    ap.add_argument("--calibrate-oof", type=int, default=0, metavar="K", help="also calibrate on out-of-fold scores "
                    "of the training logs (K folds by twin pair, each trained like the model; K extra trainings)")
    ap.add_argument("--oof-smoothing", choices=("val", "pooled"), default="val", help="with --calibrate-oof: the "
                    "smoothing chosen on D/val (default) or on D/val + the out-of-fold scores")
    ap.add_argument("--validate-only", action="store_true", help="score D/val only (model selection; the "
                    "test split is not loaded)")
    ap.add_argument("--second-unit", type=Path, default=None, help="also evaluate the frozen, calibrated model "
                    "on this synth folder's test split and held-out conditions (another virtual unit, e.g. synth "
                    "--seed 1; nothing is chosen on it)")
    ap.add_argument("--motion-weighting", action="store_true", help="calibration: also try the motion-weighted "
                    "smoothing (frames where the joint moved count more; docs/condition.md), chosen by D/val AUC")
    ap.add_argument("--log-odds", dest="log_odds", action="store_true", default=True,
                    help="calibration: also try the smoothing as a mean of clipped log-odds (docs/condition.md), "
                    "chosen by D/val AUC (the default since 2026-12-03)")
    ap.add_argument("--no-log-odds", dest="log_odds", action="store_false",
                    help="calibration: the plain probability means only (the default before 2026-12-03)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="only the JSON line")
    a = ap.parse_args(argv)

    import numpy as np
    from actuatorlab.estimate.condition_windows import METHODS, condition_log
    from actuatorlab.estimate.condition_calibrate import SMOOTH_GRID_S, alarm_timing, calibrate_condition, hold_frames
    from actuatorlab.estimate.condition_train import (ConditionTrainConfig, learned_frame_scores_batched,
                                                      make_condition_model, train_condition_head)
    from actuatorlab.estimate.condition import public, run_condition
    from actuatorlab.report.condition import write_condition_report
    from actuatorlab.sim.force import ForcePrior
    from actuatorlab.learned.arm import add_residual_channels, load_arm_model, save_arm_model, with_residual_inputs
    from actuatorlab.models.nets import param_count
    from actuatorlab.logs import load_logs
    from actuatorlab.precision import physics_precision
    from actuatorlab.robots import load_robot

    t_all = time.perf_counter()
    card = json.loads((a.data / "dataset.json").read_text())
    f3 = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
    with physics_precision():
        if a.model is not None:
            robot, model, _ = load_arm_model(a.model, ROBOT)
            scope = "head"
        else:
            robot = load_robot(ROBOT)
            model = None
            scope = "net"
        scope = a.scope or scope
        tr_t = load_logs([a.data / "train"])
        va_t = load_logs([a.data / "val"])
        t0 = time.perf_counter()
        if model is None:
            sizes = SIZES.get(a.arch, {}) if a.sizes is None else a.sizes
            prior = None
            if "tau_ext" in (a.features or ()):  # calibrated on D/train; each training log's residual computed once
                prior = ForcePrior.fit(robot, "id_friction", tr_t)
                tr_t = add_residual_channels(robot, prior, tr_t)
            model = make_condition_model(robot, tr_t, arch=a.arch, seed=a.seed, history=a.history, sizes=sizes,
                                         per_channel=a.features or None, residual_input=prior)
        # the tau_ext input (the model's residual_input, id_friction calibrated on D/train's free-motion
        # logs) is computed once per log here, causally, one frame at a time
        tr_t, va_t = with_residual_inputs(robot, model, tr_t), with_residual_inputs(robot, model, va_t)
        tcfg = ConditionTrainConfig(steps=a.steps, batch=a.batch, lr=a.lr, scope=scope, eval_every=a.eval_every,
                                    select=a.select, seed=a.seed)
        model0 = model
        model, info = train_condition_head(robot, model, tr_t, tcfg, val_trajs=va_t)
        train_s = time.perf_counter() - t0
        oof, oof_s = None, 0.0
        if a.calibrate_oof:  # cross-fitted scores of the training logs join D/val for the calibration
            t1 = time.perf_counter()
            oof, _ = out_of_fold_frame_scores(robot, model0, tr_t, tcfg, folds=a.calibrate_oof, seed=a.seed,
                                              val_trajs=va_t)
            oof_s = time.perf_counter() - t1
        ch = model.layout.channels
        tr = [condition_log(robot, t, ch) for t in tr_t]
        va = [condition_log(robot, t, ch) for t in va_t]
        # --- validation: calibration (smoothing, thresholds) and the figures model selection reads ---
        va_fs = [learned_frame_scores_batched(robot, model, lg) for lg in va]
        cal = {} if a.no_calibration else calibrate_condition(
            va_fs, [lg.restricted for lg in va], robot.control_dt, min_recall=a.min_recall,
            log_odds=a.log_odds, weightings=motion_weighting([lg.q for lg in va]) if a.motion_weighting else None)
        if cal and oof:  # the smoothing stays D/val's; the thresholds are chosen on D/val + the out-of-fold scores
            grid = [cal["smooth_s"]] if a.oof_smoothing == "val" else SMOOTH_GRID_S
            cal = calibrate_condition(va_fs + oof, [lg.restricted for lg in va] + [lg.restricted for lg in tr],
                                      robot.control_dt, min_recall=a.min_recall, smooth_grid_s=grid,
                                      weightings=motion_weighting([lg.q for lg in va + tr])
                                      if a.motion_weighting and (a.oof_smoothing == "pooled" or "smooth_weight" in cal)
                                      else None,
                                      log_odds=a.log_odds and (a.oof_smoothing == "pooled" or "smooth_space" in cal))
        if cal:
            cal["source"] = f"D/val ({len(va)} logs)" + (
                f" + out-of-fold scores of D/train ({len(tr)} logs, {a.calibrate_oof} folds)" if oof else "")
            cal["channels_used"] = [ch[c] for c in cal["channels_used"]]
        restricted = [c for c in ch if any(lg.restricted[ch.index(c)] for lg in tr)]
        val = validation_figures(va, va_fs, cal, ch, restricted, tr, a.seed)
        cal_txt = ("no calibration (smoothing none, thresholds 0.5)" if not cal else
                   f"smoothing {cal['smooth_s']:g} s{' motion-weighted' if cal.get('smooth_weight') else ''}{' log-odds' if cal.get('smooth_space') else ''}, window threshold {cal['window_threshold']:.3f}, verdict "
                   f"threshold {cal['verdict_threshold']:.3f} (chosen on D/val)")
        if not a.json:
            print(f"validation (D/val, {len(va)} logs): learned "
                  + ", ".join(f"AUC {c} {f3(val['learned'][f'auc_{c}'])} (raw {f3(val['learned_raw'][f'auc_{c}'])})"
                              for c in restricted)
                  + f", pooled AUC {f3(val['learned']['auc'])}, recall {f3(val['learned']['recall'])}, precision "
                  f"{f3(val['learned']['precision'])}, per-log verdicts {val['learned']['log_right']} of {len(va)} "
                  f"right; random forest " + ", ".join(f"AUC {c} {f3(val['random_forest'][f'auc_{c}'])}"
                                                     for c in restricted)
                  + f"; {cal_txt}; best step {info['best_step']}, {train_s:.0f} s")
            if cal and cal["val"].get("window_recall_loo") is not None:
                print(f"calibration check (D/val, leave-one-log-out): window recall {cal['val']['window_recall']:.3f} "
                      f"in-sample, {cal['val']['window_recall_loo']:.3f} on a left-out log (precision "
                      f"{f3(cal['val']['window_precision_loo'])}, {cal['val']['loo_folds']} folds)")
        base = {"bench": "condition", "data": str(a.data), "seed": card["seed"], "scale": card["scale"],
                "restricted_pairs": card.get("restricted_pairs", 0), "arch": model.arch, "scope": scope,
                "steps": info["steps"], "best_step": info["best_step"], "select": a.select,
                "model_seed": a.seed, "history": model.layout.history, "sizes": dict(model.sizes),
                "features": list(model.layout.per_channel), "params": param_count(model.net),
                "batch": info["batch"], "lr": a.lr, "train_s": round(train_s, 1),
                "calibrate_oof": a.calibrate_oof, "oof_smoothing": a.oof_smoothing if a.calibrate_oof else None,
                "oof_s": round(oof_s, 1), "calibration": cal or None,
                "validation": val}
        if a.validate_only:
            emit({**base, "validate_only": True, "wall_s": round(time.perf_counter() - t_all, 1)},
                 a.out / "condition_val.json")
            return 0
        save_arm_model(a.out / "run", ROBOT, model, None, extra={"condition_head": {
            k: v for k, v in info.items() if k != "loss"}, **({"condition_calibration": cal} if cal else {})})
        # --- test split and held-out conditions: evaluated once, with what D/val chose ---
        te_t = with_residual_inputs(robot, model, load_logs([a.data / "test"]))
        ho_t = with_residual_inputs(robot, model, load_logs(sorted((a.data / "heldout").iterdir()))
                                    if (a.data / "heldout").is_dir() else [])
        te = [condition_log(robot, t, ch) for t in te_t]
        ho = [condition_log(robot, t, ch) for t in ho_t]
        t0 = time.perf_counter()
        res = run_condition(robot, te, model=model, train_logs=tr, seed=a.seed, calibration=cal or None)
        eval_s = time.perf_counter() - t0
        # the same frozen model without the calibration (no smoothing, thresholds 0.5): for reading only
        res_raw = run_condition(robot, te, model=model, seed=a.seed) if cal else None
        res_ho = (run_condition(robot, ho, model=model, train_logs=tr, seed=a.seed, calibration=cal or None)
                  if ho else None)
        rf_h = same_horizon_forest(tr, te, cal, model.layout.history, restricted, ch, a.seed)
        unit2 = None
        if a.second_unit is not None:
            unit2 = {}
            for split in ("test", "heldout"):
                d2 = a.second_unit / split
                paths = sorted(d2.iterdir()) if split == "heldout" and d2.is_dir() else [d2]
                logs2 = [condition_log(robot, t, ch) for t in with_residual_inputs(robot, model, load_logs(paths))]
                r2 = run_condition(robot, logs2, model=model, train_logs=tr, seed=a.seed, calibration=cal or None)
                unit2[split] = {m: {"accuracy": r2[m]["accuracy"], "precision": r2[m]["precision"],
                                    "recall": r2[m]["recall"], "auc": r2[m]["auc"],
                                    **{f"auc_{c}": r2[m]["by_channel"][c]["auc"] for c in restricted}}
                                for m in METHODS}
                unit2[split]["log_verdicts_right"] = int(sum(all(
                    (d["verdict"][c] == "restricted") == d["label"][c] for c in ch) for d in r2["logs"]))
                unit2[split]["n_logs"] = len(logs2)
    res["model"] = f"{model.arch} ({'condition head' if scope == 'head' else 'whole network'} trained on D/train)"
    write_condition_report(a.out / "condition.html", res, model_name=res["model"])
    rows = []
    for m in METHODS:
        r = res[m]
        row = {"method": m, "accuracy": r["accuracy"], "precision": r["precision"], "recall": r["recall"],
               "auc": r["auc"]}
        for c in restricted:
            row[f"auc_{c}"] = r["by_channel"][c]["auc"]
            row[f"recall_{c}"] = r["by_channel"][c]["recall"]
        row["false_positive_rate_heldout"] = None if res_ho is None else 1.0 - res_ho[m]["accuracy"]
        rows.append(row)
    if res_raw is not None:
        r = res_raw["learned"]
        rows.insert(1, {"method": "learned_uncalibrated", "accuracy": r["accuracy"], "precision": r["precision"],
                        "recall": r["recall"], "auc": r["auc"],
                        **{f"{k}_{c}": r["by_channel"][c][k] for c in restricted for k in ("auc", "recall")},
                        "false_positive_rate_heldout": None,
                        "log_verdicts_right": int(sum(all((d["verdict"][c] == "restricted") == d["label"][c]
                                                          for c in ch) for d in res_raw["logs"]))})
    if rf_h is not None:
        rows.append({"method": "random_forest_same_horizon", "accuracy": None, "precision": None, "recall": None,
                     "auc": rf_h["auc"], **{k: v for k, v in rf_h.items() if k != "auc"},
                     "false_positive_rate_heldout": None})
    # per-log verdicts of the learned head: a log is right when every channel's verdict matches its label
    right = [all((d["verdict"][c] == "restricted") == d["label"][c] for c in ch) for d in res["logs"]]
    verdict_acc = float(np.mean(right))
    ho_right = [all(v == "normal" for v in d["verdict"].values()) for d in (res_ho or {}).get("logs", [])]
    if not a.json:
        hdr = ["method", "accuracy", "precision", "recall", "AUC", *[f"{k} {c}" for c in restricted
                                                                    for k in ("AUC", "recall")], "FPR held-out"]
        print(f"condition detection, OpenManipulator-X virtual hardware (seed {card['seed']}, scale {card['scale']}, "
              f"{card.get('restricted_pairs', 0)} restricted/normal pairs); test split: {len(te)} logs, "
              f"{res['learned']['n_windows']} window x channel ({res['learned']['n_restricted']} restricted); "
              f"held-out conditions: {len(ho)} logs (all normal)")
        print(" | ".join(f"{h:>14}" for h in hdr))
        for r in rows:
            print(" | ".join([f"{r['method']:>14}"] + [f"{f3(v):>14}" for k, v in r.items()
                                                       if k not in ("method", "log_verdicts_right")]))
        print(f"learned head: {info['steps']} steps x {info['batch']} frames ({scope}, "
              f"history {model.layout.history}), best by validation {a.select} at step {info['best_step']}, "
              f"{train_s:.0f} s; {cal_txt}; evaluation (online, one frame at a time + baselines) {eval_s:.0f} s; "
              f"report {a.out / 'condition.html'}")
        print(f"learned per-log verdicts: {sum(right)} of {len(right)} test logs right "
              f"({sum(r for r, d in zip(right, res['logs']) if any(d['label'].values()))} of "
              f"{sum(any(d['label'].values()) for d in res['logs'])} restricted), held-out conditions "
              f"{sum(ho_right)} of {len(ho_right)} called normal")
        for nm, rr in (("test", res), ("held-out conditions", res_ho)):
            al = (rr or {}).get("learned", {}).get("alarms")
            if al:
                ra, na = al["restricted"], al["normal"]
                print(f"learned per-frame alarm, {nm}: {ra['detected']} of {ra['n']} restricted channels alarmed "
                      f"(first after {f3(ra['first_alarm_s']['median'])} s median, {f3(ra['first_alarm_s']['max'])} s "
                      f"max); normal channels: {na['with_alarm']} of {na['n']} ever alarmed, "
                      f"{f3(na['alarm_time_fraction'])} of their time, {f3(na['false_alarms_per_hour'])} onsets/h")
    if unit2 is not None and not a.json:
        for split, u in unit2.items():
            print(f"second unit ({a.second_unit}), {split}: " + "; ".join(
                f"{m} " + ", ".join(f"{k} {f3(u[m][k])}" for k in ("auc", *[f"auc_{c}" for c in restricted], "recall",
                                                                   "accuracy")) for m in METHODS)
                  + f"; learned per-log verdicts {u['log_verdicts_right']} of {u['n_logs']} right")
    # the alarm's on-delay traded against its first alarm (a setting of the monitor, not chosen here)
    holds = {}
    for nm, rr, lgs in (("test", res, te), ("heldout", res_ho, ho)):
        if rr and rr["learned"].get("alarms"):
            holds[nm] = {f"{h:g}": alarm_timing([d["frame_scores"] for d in rr["logs"]], [lg.restricted for lg in lgs],
                                                lgs[0].dt, rr["learned"]["alarms"]["threshold"],
                                                warmup_frames=model.layout.history + 1,
                                                hold_frames=hold_frames(h, lgs[0].dt))
                         for h in ALARM_HOLDS_S}
    if holds and not a.json:
        print("per-frame alarm vs on-delay (--alarm-hold): " + "; ".join(
            f"{h} s: onsets/h test {f3(holds['test'][h]['normal']['false_alarms_per_hour'])}"
            + (f", held-out {f3(holds['heldout'][h]['normal']['false_alarms_per_hour'])}" if "heldout" in holds else "")
            + f", first alarm max {f3(holds['test'][h]['restricted']['first_alarm_s']['max'])} s, "
              f"missed {holds['test'][h]['restricted']['missed']}" for h in holds["test"]))
    fams = sorted(res["learned"].get("by_excitation") or {})
    if fams and not a.json:
        print(f"by excitation family ({', '.join(res.get('restricted_channels', []))}; recall / AUC): " + "; ".join(
            f"{f} ({res['learned']['by_excitation'][f]['n_restricted']} restricted windows): "
            + ", ".join(f"{m} {f3(res[m]['by_excitation'][f]['recall'])} / {f3(res[m]['by_excitation'][f]['auc'])}"
                        for m in ("learned", "random_forest") if m in res)
            for f in fams))
    lr = res["learned"]
    summary = {
        **base, "eval_s": round(eval_s, 1), "wall_s": round(time.perf_counter() - t_all, 1),
        "n_test_logs": len(te), "n_heldout_logs": len(ho),
        "final_loss": float(np.mean(info["loss"][-20:])) if info["loss"] else None,
        **{r["method"]: {k: v for k, v in r.items() if k != "method"} for r in rows},
        "log_verdict_accuracy": verdict_acc, "log_verdicts_right": int(sum(right)),
        "heldout_logs_called_normal": int(sum(ho_right)),
        "target": {"auc_ge_0.95": bool(lr["auc"] is not None and lr["auc"] >= 0.95),
                   "recall_ge_0.9": bool(lr["recall"] >= 0.9),
                   **{f"auc_{c}_ge_0.95": bool((lr["by_channel"][c]["auc"] or 0) >= 0.95) for c in restricted},
                   **{f"recall_{c}_ge_0.9": bool((lr["by_channel"][c]["recall"] or 0) >= 0.9) for c in restricted},
                   **{f"auc_{c}_above_random_forest": bool((lr["by_channel"][c]["auc"] or 0)
                                                            > (res["random_forest"]["by_channel"][c]["auc"] or 0))
                      for c in restricted}},
        "by_excitation": {m: res[m].get("by_excitation") for m in METHODS if m in res},
        "alarms": {"test": lr.get("alarms"), "heldout": (res_ho or {}).get("learned", {}).get("alarms")},
        "alarm_holds": holds,
        "second_unit": None if unit2 is None else {"data": str(a.second_unit), **unit2},
        "logs": public(res)["logs"], "heldout_logs": public(res_ho)["logs"] if res_ho else [],
    }
    emit(summary, a.out / "condition.json")
    return 0


def same_horizon_forest(tr, te, cal, history, restricted, ch, seed) -> dict | None:
    """The random forest (fitted on D/train windows) with the learned detector's look-back: window
    w's score is the mean forest score of the 64-step windows lying within [start_w - n - H,
    end_w] (n: the smoothing in frames, H: the network's history), the span the smoothed learned
    window score depends on. None without smoothing."""
    import numpy as np
    from sklearn.metrics import roc_auc_score
    from actuatorlab.estimate.condition_windows import fit_baselines, log_windows, stack_windows

    if not cal or not cal.get("smooth_s"):
        return None
    n = max(1, int(round(cal["smooth_s"] / te[0].dt)))
    rf = fit_baselines(*stack_windows(tr)[:2], seed, methods=("random_forest",))["random_forest"]
    ys, ss = [], []
    for lg in te:
        X, y, st = log_windows(lg)
        s = rf.scores(X)
        ss.append(np.stack([s[(st >= b - n - history) & (st <= b)].mean(0) for b in st]) if len(st) else s)
        ys.append(y)
    y, s = np.concatenate(ys), np.concatenate(ss)
    out = {"auc": float(roc_auc_score(y.ravel(), s.ravel()))}
    for c in restricted:
        k = ch.index(c)
        out[f"auc_{c}"] = float(roc_auc_score(y[:, k], s[:, k])) if len(np.unique(y[:, k])) == 2 else None
        out[f"recall_{c}"] = float(((s[:, k] >= 0) & (y[:, k] == 1)).sum() / max((y[:, k] == 1).sum(), 1))
    return out


def validation_figures(va, va_fs, cal, ch, restricted, tr, seed) -> dict:
    """D/val figures of the learned detector (raw and as calibrated) and of the random forest
    (fitted on D/train): pooled and per restricted joint window AUC, recall, precision, per-log
    verdicts. The calibration was chosen on these same logs, so the calibrated figures are
    optimistic; the raw ones (no smoothing, thresholds 0.5) are not."""
    import numpy as np
    from sklearn.metrics import roc_auc_score
    from actuatorlab.estimate.condition_calibrate import calibrated_scores, learned_window_scores
    from actuatorlab.estimate.condition_windows import fit_baselines, stack_windows, window_starts

    out = {}
    y = np.concatenate([np.tile(lg.restricted.astype(int), (len(window_starts(len(f))), 1))
                        for lg, f in zip(va, va_fs)])
    for name, c in (("learned_raw", {}), ("learned", cal)):
        thr_w, thr_v = c.get("window_threshold", 0.5), c.get("verdict_threshold", 0.5)
        fs = [calibrated_scores(f, c, lg.dt, lg.q) for f, lg in zip(va_fs, va)]
        w = np.concatenate([learned_window_scores(f, window_starts(len(f))) for f in fs])
        p = w < thr_w
        r = {"auc": float(roc_auc_score(y.ravel(), -w.ravel())),
             "recall": float((p & (y == 1)).sum() / max((y == 1).sum(), 1)),
             "precision": float((p & (y == 1)).sum() / max(p.sum(), 1))}
        for cc in restricted:
            k = ch.index(cc)
            r[f"auc_{cc}"] = float(roc_auc_score(y[:, k], -w[:, k])) if len(np.unique(y[:, k])) == 2 else None
        n_v = max(1, int(round(c.get("verdict_s", 5.0) / va[0].dt))) if c else 500
        r["log_right"] = int(sum(all((f[-n_v:].mean(0)[k] < thr_v) == lg.restricted[k] for k in range(len(ch)))
                                 for f, lg in zip(fs, va)))
        r["log_scores"] = {lg.name: round(float(f[-n_v:].mean(0)[ch.index(restricted[0])]), 4)
                           for f, lg in zip(fs, va)} if restricted else {}
        out[name] = r
    Xt, yt, _ = stack_windows(tr)
    Xv, yv, _ = stack_windows(va)
    s = fit_baselines(Xt, yt, seed, methods=("random_forest",))["random_forest"].scores(Xv)
    out["random_forest"] = {"auc": float(roc_auc_score(yv.ravel(), s.ravel())),
                            **{f"auc_{cc}": float(roc_auc_score(yv[:, ch.index(cc)], s[:, ch.index(cc)]))
                               for cc in restricted if len(np.unique(yv[:, ch.index(cc)])) == 2}}
    return out


if __name__ == "__main__":
    sys.exit(main())

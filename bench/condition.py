"""Motor-condition detection on the virtual hardware: the learned condition head against a current
threshold, an RBF SVM and a random forest (issue 9, section 2). A table, then one JSON line.

    actuatorlab synth --robot open_manipulator_x --suite neural_actuator --out D --seed 0 --scale 0.1 \
        --restricted-pairs 24
    python bench/condition.py --data D [--steps 300] [--lr 3e-4] [--history 63] [--sizes JSON] [--features ...]
        [--model RUN/arm_model.json] [--out bench/out/condition]

Training: D/train only (the learned head: teacher-forced supervised training of the condition
head, ``train_condition_head``; the baselines: per-channel classifiers on its 64-step windows).
Evaluation: D/test (held-out split: restricted and normal logs), plus the false-positive rate on
D/heldout/* (held-out conditions, all normal). D/val selects the learned head's training step
(lowest validation loss, early stopping); the baselines have no step to select. Without ``--model`` the learned
model is a fresh network of ``--arch`` (normalizer from the training frames) trained whole
(scope "net") on the condition labels; with ``--model`` (a model trained through the simulator)
only its condition head is trained (scope "head").
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
#: default fresh model: the gated Transformer, smaller (2 blocks, d 64) with 63 frames of history (0.64 s),
#: without temperature and voltage (session fingerprints the network memorised) and without the absolute
#: positions q_target and q: the band's signature is in how current, PWM, velocity and tracking error relate,
#: while absolute positions let the network recognise the restricted training motions (chosen on D/val,
#: joint-3 AUC 0.881 vs 0.767 with positions; see bench/README.md)
SIZES = {"d": 64, "n_heads": 4, "n_layers": 2, "ff": 128, "head_width": 64}
FEATURES = ("dq", "err", "current", "pwm")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="synth folder (with --restricted-pairs)")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out" / "condition")
    ap.add_argument("--model", type=Path, default=None, help="start from this RUN/arm_model.json (head only)")
    ap.add_argument("--arch", default="transformer")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--history", type=int, default=63, help="frames of history of a fresh model")
    ap.add_argument("--sizes", type=json.loads, default=SIZES, help="network sizes of a fresh model, JSON "
                    "(default: a small Transformer; '{}': the architecture's defaults)")
    ap.add_argument("--features", nargs="*", default=list(FEATURES), help="per-channel features of a fresh model "
                    "(none given: train --robot's default layout)")
    ap.add_argument("--scope", choices=("net", "head"), default=None,
                    help="train the whole network or the condition head only (default: net for a fresh model, head "
                         "with --model)")
    ap.add_argument("--eval-every", type=int, default=25, help="validation (D/val) every N steps; best kept")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="only the JSON line")
    a = ap.parse_args(argv)
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", "/tmp/jaxcache")

    import numpy as np

    from actuatorlab.evaluate.condition import (METHODS, condition_log, make_condition_model, public,
                                                run_condition, train_condition_head, write_condition_report)
    from actuatorlab.learned.arm import load_arm_model, save_arm_model
    from actuatorlab.learned.nets import param_count
    from actuatorlab.logs import load_logs
    from actuatorlab.precision import physics_precision
    from actuatorlab.robots import load_robot

    t_all = time.perf_counter()
    card = json.loads((a.data / "dataset.json").read_text())
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
        te_t = load_logs([a.data / "test"])
        ho_t = load_logs(sorted((a.data / "heldout").iterdir())) if (a.data / "heldout").is_dir() else []
        t0 = time.perf_counter()
        if model is None:
            model = make_condition_model(robot, tr_t, arch=a.arch, seed=a.seed, history=a.history, sizes=a.sizes,
                                         per_channel=a.features or None)
        va_t = load_logs([a.data / "val"]) if (a.data / "val").is_dir() else None
        model, info = train_condition_head(robot, model, tr_t, steps=a.steps, batch=a.batch, lr=a.lr, seed=a.seed,
                                           scope=scope, val_trajs=va_t, eval_every=a.eval_every)
        train_s = time.perf_counter() - t0
        save_arm_model(a.out / "run", ROBOT, model, None, extra={"condition_head": {
            k: v for k, v in info.items() if k != "loss"}})
        ch = model.layout.channels
        tr = [condition_log(robot, t, ch) for t in tr_t]
        te = [condition_log(robot, t, ch) for t in te_t]
        ho = [condition_log(robot, t, ch) for t in ho_t]
        t0 = time.perf_counter()
        res = run_condition(robot, te, model=model, train_logs=tr, seed=a.seed)
        eval_s = time.perf_counter() - t0
        res_ho = run_condition(robot, ho, model=model, train_logs=tr, seed=a.seed) if ho else None
    res["model"] = f"{model.arch} ({'condition head' if scope == 'head' else 'whole network'} trained on D/train)"
    write_condition_report(a.out / "condition.html", res, model_name=res["model"])
    restricted = [c for c in ch if any(res[m]["by_channel"][c]["n_restricted"] for m in METHODS if m in res)]
    rows = []
    for m in METHODS:
        r = res[m]
        row = {"method": m, "accuracy": r["accuracy"], "precision": r["precision"], "recall": r["recall"],
               "auc": r["auc"]}
        for c in restricted:
            row[f"auc_{c}"] = r["by_channel"][c]["auc"]
        row["false_positive_rate_heldout"] = None if res_ho is None else 1.0 - res_ho[m]["accuracy"]
        rows.append(row)
    if not a.json:
        hdr = ["method", "accuracy", "precision", "recall", "AUC", *[f"AUC {c}" for c in restricted], "FPR held-out"]
        print(f"condition detection, OpenManipulator-X virtual hardware (seed {card['seed']}, scale {card['scale']}, "
              f"{card.get('restricted_pairs', 0)} restricted/normal pairs); test split: {len(te)} logs, "
              f"{res['learned']['n_windows']} window x channel ({res['learned']['n_restricted']} restricted); "
              f"held-out conditions: {len(ho)} logs (all normal)")
        print(" | ".join(f"{h:>14}" for h in hdr))
        f = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
        for r in rows:
            print(" | ".join([f"{r['method']:>14}"] + [f"{f(v):>14}" for k, v in r.items() if k != "method"]))
        print(f"learned head: {info['steps']} steps x {info['batch']} frames ({scope}, "
              f"history {model.layout.history}), "
              f"best by validation at step {info['best_step']}, {train_s:.0f} s; evaluation "
              f"(online, one frame at a time + baselines) {eval_s:.0f} s; report {a.out / 'condition.html'}")
    lr = res["learned"]
    # per-log verdicts of the learned head: a log is right when every channel's verdict matches its label
    verdict_acc = float(np.mean([all((d["verdict"][c] == "restricted") == d["label"][c] for c in ch)
                                 for d in res["logs"]]))
    if not a.json:
        print(f"learned per-log verdicts (last 5 s, score < 0.5): {verdict_acc:.3f} of {len(res['logs'])} "
              "test logs right")
    summary = {
        "bench": "condition", "data": str(a.data), "seed": card["seed"], "scale": card["scale"],
        "restricted_pairs": card.get("restricted_pairs", 0), "arch": model.arch, "scope": scope,
        "steps": info["steps"], "best_step": info["best_step"], "history": model.layout.history,
        "sizes": dict(model.sizes), "features": list(model.layout.per_channel),
        "params": param_count(model.net), "batch": info["batch"], "lr": a.lr, "train_s": round(train_s, 1),
        "eval_s": round(eval_s, 1), "wall_s": round(time.perf_counter() - t_all, 1),
        "n_test_logs": len(te), "n_heldout_logs": len(ho), "final_loss": float(np.mean(info["loss"][-20:])) if info["loss"] else None,
        **{r["method"]: {k: v for k, v in r.items() if k != "method"} for r in rows},
        "log_verdict_accuracy": verdict_acc,
        "target": {"auc_ge_0.95": bool(lr["auc"] is not None and lr["auc"] >= 0.95),
                   "recall_ge_0.9": bool(lr["recall"] >= 0.9),
                   **{f"auc_{c}_ge_0.95": bool((lr["by_channel"][c]["auc"] or 0) >= 0.95) for c in restricted}},
        "logs": public(res)["logs"],
    }
    emit(summary, a.out / "condition.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Learned whole-robot actuators vs the best nested analytic model on virtual hardware.

    python bench/learned_arm.py --data DIR [--out bench/out/learned_arm]
                                [--steps N] [--models analytic transformer residual mlp gru lstm cold]

DIR is a dataset of ``actuatorlab synth --robot open_manipulator_x --suite neural_actuator --seed 0
--scale S`` (train/ val/ test/ heldout/). For every model: rollout joint MAE per joint at 100 / 300 / 600 control steps
from measured states (windows restarted from the log, native path) on the test split and on the
held-out conditions (payload 400 g, push -y), training wall time per 1,000 steps and to the
reported checkpoint. The analytic model is the nested ladder fitted by ``fit --robot``
(:func:`actuatorlab.identify.arm_fit.select_arm`, CMA-ES, ``--analytic-evals`` per model);
learned models are trained through MJX by :func:`actuatorlab.learned.arm_train.train_arm` with the
default budget (``--steps`` overrides the steps), warm-started from the analytic model (the teacher;
``cold``: the replacing Transformer from random weights, no teacher). Each model's result is written to OUT/results.json
as soon as it is done (a model whose run folder already holds arm_model.json is loaded, not
retrained), then one table and one JSON line. The adaptation of these runs to another unit is
bench/adapt.py's.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import emit  # noqa: E402

ROBOT = "open_manipulator_x"
HORIZONS = (100, 300, 600)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=Path("bench/out/learned_arm"))
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--analytic-evals", type=int, default=40)
    ap.add_argument("--models", nargs="+", default=["analytic", "transformer", "residual", "mlp", "gru", "lstm"])
    a = ap.parse_args(argv)

    from actuatorlab.identify.arm_fit import select_arm
    from actuatorlab.sim.arm_data import evaluate_arm
    from actuatorlab.learned.arm import evaluate_learned_arm, load_arm_model
    from actuatorlab.learned.arm_train import ArmTrainConfig, train_arm
    from actuatorlab.learned.distill import DistillConfig
    from actuatorlab.logs import load_logs
    from actuatorlab.precision import physics_precision

    out = a.out
    out.mkdir(parents=True, exist_ok=True)
    res_path = out / "results.json"
    results = json.loads(res_path.read_text()) if res_path.exists() else {}
    tr = load_logs([a.data / "train"])
    va = load_logs([a.data / "val"])
    te = load_logs([a.data / "test"])
    ho = load_logs(sorted((a.data / "heldout").iterdir()))
    card = json.loads((a.data / "dataset.json").read_text())

    def save():
        res_path.write_text(json.dumps(results, indent=2, default=float) + "\n")

    def score_learned(run: Path) -> dict:
        r, m, d = load_arm_model(run / "arm_model.json")
        return {"test": evaluate_learned_arm(r, m, te, HORIZONS), "heldout": evaluate_learned_arm(r, m, ho, HORIZONS),
                "params": d["params_count"], "training": d["training"]}

    analytic_json = out / "analytic" / "arm_model.json"
    with physics_precision():
        for name in a.models:
            if name in results:
                continue
            t0 = time.perf_counter()
            if name == "analytic":
                sel = select_arm(ROBOT, tr, va, max_evals=a.analytic_evals, max_windows=16, seed=0)
                f = sel["final"]
                analytic_json.parent.mkdir(parents=True, exist_ok=True)
                analytic_json.write_text(json.dumps({"format": "actuatorlab-arm-model", "format_version": "1",
                                                     "robot": ROBOT, "model": f["model"], "params": f["params"],
                                                     "per_joint": False}, default=float))
                results[name] = {"model": f["model"], "test": evaluate_arm(ROBOT, f["params"], te, HORIZONS, model=f["model"]),
                                 "heldout": evaluate_arm(ROBOT, f["params"], ho, HORIZONS, model=f["model"]),
                                 "training": {"wall_s": time.perf_counter() - t0,
                                              "table": [{k: r[k] for k in ("model", "validation_mae", "earns_place")}
                                                        for r in sel["table"]]}}
            elif name in ("transformer", "mlp", "gru", "lstm", "residual", "cold"):
                run = out / name
                if not (run / "arm_model.json").exists():
                    if name == "residual" and not analytic_json.exists():
                        print("residual needs the analytic model first; skipped", file=sys.stderr)
                        continue
                    teacher = analytic_json if analytic_json.exists() else None
                    arch = "transformer" if name in ("residual", "cold") else name
                    train_arm(ROBOT, tr, va, ArmTrainConfig(arch=arch, residual=teacher if name == "residual" else None,
                                                            teacher=teacher, steps=a.steps, seed=0,
                                                            distill=None if name == "cold" else DistillConfig()),
                              out=run, resume=(run / "checkpoint.ckpt").exists(), progress=False)
                results[name] = score_learned(run)
            results[name]["bench_wall_s"] = time.perf_counter() - t0
            save()

    # ---- table
    rows = [n for n in ("analytic", "mlp", "gru", "lstm", "transformer", "residual", "cold") if n in results]
    print(f"OpenManipulator-X virtual hardware (synth neural_actuator, seed {card.get('seed')}, scale "
          f"{card.get('scale')}): rollout MAE [mrad] from measured states, native path")
    hdr = f"{'model':<12}{'split':<9}" + "".join(f"{j + '@' + str(h):>12}" for j in ("joint1", "joint2", "joint3", "joint4")
                                                 for h in HORIZONS) + f"{'s/1k steps':>12}{'train s':>9}"
    print(hdr)
    summary = {"seed": card.get("seed"), "scale": card.get("scale"), "models": {}}
    for n in rows:
        r = results[n]
        trn = r.get("training", {})
        for split in ("test", "heldout"):
            pj = r[split]["per_joint"]
            cells = "".join(f"{1e3 * pj.get(j, {}).get(str(h), float('nan')):>12.1f}"
                            for j in ("joint1", "joint2", "joint3", "joint4") for h in HORIZONS)
            print(f"{n:<12}{split:<9}{cells}{(trn.get('s_per_1k_steps') or float('nan')):>12.0f}"
                  f"{trn.get('wall_s', float('nan')):>9.0f}")
        summary["models"][n] = {"test_mae_600": r["test"]["per_joint"], "heldout": r["heldout"]["per_joint"],
                                "test_pooled": r["test"]["position_mae"], "heldout_pooled": r["heldout"]["position_mae"],
                                "horizon": r["test"]["horizon"], "params": r.get("params"),
                                "s_per_1k_steps": trn.get("s_per_1k_steps"), "train_wall_s": trn.get("wall_s"),
                                "best_step": trn.get("best_step"), "steps": trn.get("steps"),
                                "compile_s": trn.get("compile_s"), "warm_start": trn.get("warm_start")}
    an = results.get("analytic")
    if an is not None:  # time to quality: each learned model's pooled MAE over the analytic fit's
        for n in rows:
            if n != "analytic":
                m = summary["models"][n]
                m["ratio_test"] = m["test_pooled"] / an["test"]["position_mae"]
                m["ratio_heldout"] = m["heldout_pooled"] / an["heldout"]["position_mae"]
        for key, n in (("replacing_ratio", "transformer"), ("residual_ratio", "residual"), ("cold_ratio", "cold")):
            if n in summary["models"]:
                summary[key] = [summary["models"][n]["ratio_test"], summary["models"][n]["ratio_heldout"]]
    emit(summary, out / "summary.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Learned whole-robot actuators vs the best nested analytic model on virtual hardware.

    python bench/learned_arm.py --data DIR [--out bench/out/learned_arm]
                                [--steps N] [--models analytic transformer residual mlp gru lstm cold]
                                [--budget default|full] [--time-limit S] [--eval-every N] [--curve]

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

``--budget full`` trains at :data:`~actuatorlab.learned.arm_train.FULL_BUDGET` (the paper-sized
configuration, for a GPU); ``--time-limit S`` stops each learned model's BPTT phase after S seconds
(the schedule stays the one of its steps); ``--curve`` keeps the network at every validation and
scores it afterwards on test and held-out conditions at 600 steps: the time-to-quality curve (wall
seconds since the model's start, warm start and compilation included) and the wall time at which
the model first reaches 0.7x the analytic fit (``time_to_0.7x``). On a GPU the device's peak memory
is reported (``peak_bytes``).
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
    ap.add_argument("--budget", choices=("default", "full"), default="default")
    ap.add_argument("--time-limit", type=float, default=None, help="[s] per learned model's BPTT phase")
    ap.add_argument("--eval-every", type=int, default=None, help="validation period in steps (default: the budget's)")
    ap.add_argument("--curve", action="store_true", help="score every validated network on test / held-out")
    a = ap.parse_args(argv)

    from actuatorlab.identify.arm_fit import select_arm
    from actuatorlab.sim.arm_data import evaluate_arm
    from actuatorlab.learned.arm import evaluate_learned_arm, load_arm_model
    from actuatorlab.learned.arm_train import FULL_BUDGET, ArmTrainConfig, train_arm
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

    budget = dict(FULL_BUDGET) if a.budget == "full" else {}
    if a.time_limit is not None:
        budget["time_limit_s"] = a.time_limit
    if a.eval_every is not None:
        budget["eval_every"] = a.eval_every

    analytic_json = out / "analytic" / "arm_model.json"

    def curve(run: Path, snaps: list, an: dict | None) -> list[dict]:
        robot = load_arm_model(run / "arm_model.json")[0]
        rows = []
        for k, wall, val, m in snaps:
            row = {"step": k, "wall_s": wall, "val_mae": val,
                   "test_600": evaluate_learned_arm(robot, m, te, (600,))["position_mae"],
                   "heldout_600": evaluate_learned_arm(robot, m, ho, (600,))["position_mae"]}
            if an is not None:
                row["ratio_test"] = row["test_600"] / an["test"]["position_mae"]
                row["ratio_heldout"] = row["heldout_600"] / an["heldout"]["position_mae"]
            rows.append(row)
        return rows

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
                    snaps: list = []
                    train_arm(ROBOT, tr, va, ArmTrainConfig(arch=arch, residual=teacher if name == "residual" else None,
                                                            teacher=teacher, steps=a.steps, seed=0, budget=budget or None,
                                                            distill=None if name == "cold" else DistillConfig()),
                              out=run, resume=(run / "checkpoint.ckpt").exists(), progress=False,
                              on_validate=(lambda k, m, v, t0=t0, snaps=snaps: snaps.append(
                                  (k, time.perf_counter() - t0, v, m))) if a.curve else None)
                    results[name] = score_learned(run)
                    if snaps:
                        results[name]["curve"] = curve(run, snaps, results.get("analytic"))
                    results[name]["peak_bytes"] = peak_bytes()
                else:
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
                                "compile_s": trn.get("compile_s"), "warm_start": trn.get("warm_start"),
                                "stopped": trn.get("stopped"), "peak_bytes": r.get("peak_bytes")}
        if r.get("curve"):
            cv = r["curve"]
            summary["models"][n]["curve"] = [{k: c[k] for k in ("step", "wall_s", "test_600", "heldout_600")} for c in cv]
            for split in ("test", "heldout"):
                hit = [c["wall_s"] for c in cv if c.get(f"ratio_{split}", float("inf")) <= 0.7]
                summary["models"][n][f"time_to_0.7x_{split}"] = hit[0] if hit else None
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
    rep = summary["models"].get("transformer", {})
    summary["train_wall_s"], summary["compile_s"] = rep.get("train_wall_s"), rep.get("compile_s")
    curves = [n for n in rows if results[n].get("curve")]
    if curves:  # time to quality: 600-step pooled MAE of the network at each validation against wall seconds
        print("time to quality: 600-step pooled MAE [mrad] test / held-out (ratio to the analytic fit) at wall s "
              "since the model's start (warm start and compilation included)")
        if an is not None:
            print(f"{'analytic':<12}{an['training']['wall_s']:>8.0f} s  {1e3 * an['test']['position_mae']:6.1f} / "
                  f"{1e3 * an['heldout']['position_mae']:6.1f}")
        for n in curves:
            for c in results[n]["curve"]:
                ratio = (f"  ({c['ratio_test']:.2f}x / {c['ratio_heldout']:.2f}x)" if "ratio_test" in c else "")
                print(f"{n:<12}{c['wall_s']:>8.0f} s  {1e3 * c['test_600']:6.1f} / {1e3 * c['heldout_600']:6.1f}"
                      f"{ratio}  step {c['step']}")
    emit(summary, out / "summary.json")
    return 0


def peak_bytes() -> int | None:
    """Peak memory of the default JAX device [bytes] (None where the backend does not report it: CPU)."""
    import jax

    stats = jax.local_devices()[0].memory_stats() or {}
    return stats.get("peak_bytes_in_use")


if __name__ == "__main__":
    raise SystemExit(main())

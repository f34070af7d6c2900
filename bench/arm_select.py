"""Whole-robot nested model selection on the virtual hardware, judged on held-out conditions.

    python bench/arm_select.py [--scale 0.1] [--max-evals 150] [--max-windows 32] [--out bench/out/arm_select.json]

1. ``actuatorlab synth --suite neural_actuator`` (OpenManipulator-X; the ground truth is richer
   than every model: backlash, Stribeck, asymmetric efficiency, delay, heating, sensor noise).
2. :func:`actuatorlab.identify.arm_fit.select_arm` fits the nested ladder on DIR/train and judges
   it on DIR/val (300-step rollouts); the selected model is refitted on train + val.
3. Every model of the ladder (as fitted on train) and the config's nominal parameters are scored
   on DIR/test and on the held-out conditions DIR/heldout/<condition> (a payload and a push
   direction never seen in training) with 100/300/600-step rollouts from measured states.

Prints a table (MAE [mrad] by split, ratio against the nominal parameters measured in the same
run), then one JSON line.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import emit  # noqa: E402

from actuatorlab.identify.arm_fit import ARM_LADDER, select_arm
from actuatorlab.sim.arm_data import evaluate_arm
from actuatorlab.logs.io import load_native  # noqa: E402
from actuatorlab.synth import run_synth  # noqa: E402

ROBOT = "open_manipulator_x"


def _logs(folder: Path):
    return [load_native(p, strict=False) for p in sorted(folder.rglob("*.parquet"))]


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-evals", type=int, default=150)
    ap.add_argument("--max-windows", type=int, default=32)
    ap.add_argument("--data", type=Path, default=None, help="an existing synth dataset (default: generate one)")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)

    t0 = time.perf_counter()
    tmp = None
    if a.data is None:
        tmp = tempfile.TemporaryDirectory()
        a.data = Path(tmp.name) / "syn"
        run_synth(ROBOT, "neural_actuator", a.data, a.seed, scale=a.scale)
    t_synth = time.perf_counter() - t0
    splits = {"train": _logs(a.data / "train"), "val": _logs(a.data / "val"), "test": _logs(a.data / "test")}
    for d in sorted((a.data / "heldout").iterdir()):
        splits[f"heldout/{d.name}"] = _logs(d)

    t1 = time.perf_counter()
    res = select_arm(ROBOT, splits["train"], splits["val"], ARM_LADDER, max_evals=a.max_evals,
                     max_windows=a.max_windows, seed=a.seed,
                     progress=lambda m, i, n: print(f"[{i + 1}/{n + 1}] fitting {m}", file=sys.stderr, flush=True))
    t_fit = time.perf_counter() - t1

    scored = {"nominal": (None, None)}
    scored.update({m: (res["fits"][m]["params"], m) for m in ARM_LADDER})
    scored[f"{res['selected']} (train+val)"] = (res["final"]["params"], res["selected"])
    eval_splits = [s for s in splits if s not in ("train", "val")]
    table = {}
    for name, (params, model) in scored.items():
        table[name] = {}
        for s in eval_splits:
            ev = evaluate_arm(ROBOT, params, splits[s], horizons=(100, 300, 600), model=model)
            table[name][s] = {h: (sum(v[h] for v in ev["per_joint"].values() if h in v)
                                  / max(1, sum(1 for v in ev["per_joint"].values() if h in v)))
                              for h in ("100", "300", "600")}
    sel_rows = {r["model"]: r for r in res["table"]}

    print(f"\nselection on {len(splits['train'])} train / {len(splits['val'])} val logs "
          f"(fit {t_fit:.0f} s, synth {t_synth:.0f} s); held-out MAE [mrad], mean over joints, 300-step windows")
    cols = eval_splits
    print(f"{'model':<20}{'val (sel.)':>11}" + "".join(f"{c:>24}" for c in cols) + f"{'ratio vs nominal':>18}")
    base = table["nominal"]
    for name, row in table.items():
        v = sel_rows.get(name, {}).get("validation_mae")
        mark = "*" if name == res["selected"] else " "
        cells = "".join(f"{1e3 * row[c]['300']:>24.2f}" for c in cols)
        ratio = sum(row[c]["300"] for c in cols) / sum(base[c]["300"] for c in cols)
        print(f"{mark}{name:<19}{('-' if v is None else f'{1e3 * v:.2f}'):>11}{cells}{ratio:>18.2f}")
    summary = {"bench": "arm_select", "robot": ROBOT, "scale": a.scale, "seed": a.seed,
               "max_evals": a.max_evals, "max_windows": a.max_windows, "selected": res["selected"],
               "selection": res["table"], "heldout_mae_rad": table, "fit_s": t_fit, "synth_s": t_synth}
    emit(summary, a.out)
    if tmp is not None:
        tmp.cleanup()
    return summary


if __name__ == "__main__":
    from actuatorlab.precision import physics_precision

    with physics_precision():  # float64 physics, chosen explicitly (importing actuatorlab does not)
        main()

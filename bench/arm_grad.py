"""Whole-robot fit: CMA-ES through native MuJoCo vs Adam through MJX, on logs with a known truth.

One command (from the repo root)::

    python bench/arm_grad.py            # 6 + 3 logs of 4 s, curriculum 128/256/320 (19 min on 2 shared cores)
    python bench/arm_grad.py --quick    # 3 + 3 logs of 2 s, curriculum 32/64 (3-4 min)
    python bench/arm_grad.py --json     # the JSON line only

Data: OpenManipulator-X logs simulated by the native path with the ``m3`` actuator model on every
joint (:func:`actuatorlab.synth.model_truth.model_logs`: teleoperation, random steps and chirps,
positions quantised to the 4096-count encoder) with one shared truth that differs from the
config's nominal values: kt x 0.8, friction_base x 1.5, friction_viscous 0.2 N.m.s/rad (nominal
0), armature x 1.3. Training and held-out logs come from different seeds.

Both fitters start at the nominal values, search the same box (``ArmSpace``) for the same four
parameters (kt, friction_base, friction_viscous, armature; one shared set) and minimise the same
windowed mean squared position error:

* ``cma``: :func:`actuatorlab.identify.arm_fit.fit_arm`, windows of the last curriculum length, at
  its default budget (300 evaluations; 150 with ``--quick``) and at 4x that (``cma_long``);
* ``adam``: :func:`actuatorlab.identify.arm_grad.fit_arm_grad`, window-length curriculum.

Reported per fitter: train MAE (native path, windows of the last curriculum length, so the two
compare directly), held-out MAE (:func:`~actuatorlab.identify.arm_fit.evaluate_arm`, windows of
``--heldout-horizon`` steps, or the log length if shorter), relative parameter errors against
the truth, and wall time (for adam including tracing + XLA compile, also given apart). Set
``JAX_COMPILATION_CACHE_DIR`` to reuse compiled gradients across runs (then ``compile_s`` is mostly
tracing).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from common import emit  # noqa: E402

ROBOT = "open_manipulator_x"
NAMES = ("kt", "friction_base", "friction_viscous", "armature")
#: truth as factors of the nominal value (friction_viscous: absolute, its nominal is 0)
TRUTH = {"kt": 0.8, "friction_base": 1.5, "armature": 1.3}
VISCOUS = 0.2  # [N.m.s/rad]

SETTINGS = {
    "quick": dict(n_train=3, n_heldout=3, duration=2.0, curriculum=(32, 64), iters=(60, 30), batch=8,
                  lr=0.05, max_evals=(150, 600)),
    "full": dict(n_train=6, n_heldout=3, duration=4.0, curriculum=(128, 256, 320), iters=(60, 30, 20),
                 batch=16, lr=0.05, max_evals=(300, 1200)),
}


def make_data(cfg: dict, seed: int):
    """(robot, truth as name -> value, train logs, held-out logs)."""
    import numpy as np

    from actuatorlab.sim.arm_data import per_joint_robot
    from actuatorlab.robots import load_robot
    from actuatorlab.synth.model_truth import model_logs

    robot = load_robot(ROBOT)
    p = per_joint_robot(robot).nominal_params()
    for k, f in TRUTH.items():
        p[k] = p[k] * f
    p["friction_viscous"] = np.full_like(p["kt"], VISCOUS)
    truth = {k: float(p[k][0]) for k in NAMES}
    train = model_logs(robot, "m3", p, n_logs=cfg["n_train"], duration=cfg["duration"], seed=seed)
    held = model_logs(robot, "m3", p, n_logs=cfg["n_heldout"], duration=cfg["duration"], seed=seed + 1000)
    return robot, truth, train, held


def score(fit: dict, truth: dict, held, horizon: int) -> dict:
    from actuatorlab.sim.arm_data import evaluate_arm

    got = {k: next(iter(fit["params"][k].values())) for k in NAMES}
    ev = evaluate_arm(ROBOT, fit["params"], held, horizons=(horizon,))
    return {"train_mae": fit["train_mae"], "train_mae_nominal": fit["train_mae_nominal"],
            "heldout_mae": ev["position_mae"], "params": got,
            "rel_err": {k: got[k] / truth[k] - 1.0 for k in NAMES}, "wall_s": fit["wall_s"]}


def run(args) -> dict:
    import jax

    from actuatorlab.identify.arm_fit import fit_arm
    from actuatorlab.sim.arm_data import evaluate_arm
    from actuatorlab.identify.arm_grad import fit_arm_grad

    cfg = dict(SETTINGS["quick" if args.quick else "full"])
    robot, truth, train, held = make_data(cfg, args.seed)
    T = int(round(cfg["duration"] / robot.control_dt))
    hh = min(args.heldout_horizon, T)
    H = cfg["curriculum"][-1]
    res = {"bench": "arm_grad", "robot": ROBOT, "quick": bool(args.quick), "seed": args.seed,
           "truth": truth, "fitted": list(NAMES), "train_logs": len(train), "heldout_logs": len(held),
           "log_steps": T, "horizon": H, "heldout_horizon": hh, "cpu": platform.processor() or platform.machine(),
           "cores": os.cpu_count(), "jax": jax.__version__, "backend": jax.default_backend(),
           "compilation_cache": bool(jax.config.jax_compilation_cache_dir)}
    res["heldout_mae_nominal"] = evaluate_arm(ROBOT, None, held, horizons=(hh,))["position_mae"]

    for key, budget in zip(("cma", "cma_long"), cfg["max_evals"]):
        t0 = time.perf_counter()
        cma = fit_arm(ROBOT, train, params=NAMES, max_evals=budget, horizon=H, seed=args.seed)
        res[key] = dict(score(cma, truth, held, hh), evaluations=cma["evaluations"], max_evals=budget,
                        n_windows=cma["n_windows"], bench_wall_s=time.perf_counter() - t0)

    t0 = time.perf_counter()
    ad = fit_arm_grad(ROBOT, train, params=NAMES, curriculum=cfg["curriculum"], iters=cfg["iters"],
                      batch=cfg["batch"], lr=cfg["lr"], seed=args.seed)
    steps = sum(h["iters"] for h in ad["loss_history"])
    run_s = sum(h["wall_s"] - h["compile_s"] for h in ad["loss_history"])
    res["adam"] = dict(score(ad, truth, held, hh), evaluations=ad["evaluations"], mode=ad["mode"],
                       compile_s=ad["compile_s"], step_s=run_s / steps, skipped_steps=ad["skipped_steps"],
                       curriculum=list(cfg["curriculum"]), iters=list(cfg["iters"]), batch=cfg["batch"],
                       lr=cfg["lr"], selected=ad["selected"], n_windows=ad["n_windows"],
                       stages=[{k: h[k] for k in ("length", "iters", "n_windows", "native_mse", "compile_s", "wall_s")}
                               for h in ad["loss_history"]],
                       bench_wall_s=time.perf_counter() - t0)
    return res


def _table(res: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    tab = Table(title=f"{res['robot']}: {res['train_logs']} train / {res['heldout_logs']} held-out logs of "
                      f"{res['log_steps']} steps; train MAE on {res['horizon']}-step windows, held-out on "
                      f"{res['heldout_horizon']}-step windows [mrad]")
    for col in ("fitter", "train MAE", "held-out MAE", *(f"{k} err" for k in NAMES), "wall s", "compile s", "budget"):
        tab.add_column(col, justify="left" if col == "fitter" else "right")
    c, a = res["cma"], res["adam"]
    rows = [(f"CMA-ES / native (fit_arm), {int(r['max_evals'])} evals", r, f"{int(r['evaluations'])} evals", "-")
            for r in (res["cma"], res["cma_long"])]
    rows.append((f"Adam / MJX {a['mode']} (fit_arm_grad)", a,
                 f"{'+'.join(map(str, a['iters']))} steps x {a['batch']} win, L {'/'.join(map(str, a['curriculum']))}",
                 f"{a['compile_s']:.1f}"))
    tab.add_row("nominal", f"{c['train_mae_nominal'] * 1e3:.2f}", f"{res['heldout_mae_nominal'] * 1e3:.2f}",
                *(["-"] * len(NAMES)), "-", "-", "-")
    for name, r, budget, comp in rows:
        tab.add_row(name, f"{r['train_mae'] * 1e3:.3f}", f"{r['heldout_mae'] * 1e3:.3f}",
                    *(f"{r['rel_err'][k] * 100:+.1f}%" for k in NAMES), f"{r['wall_s']:.1f}", comp, budget)
    con = Console(width=200)
    con.print(tab)
    con.print(f"Adam: {a['step_s']:.3f} s per step after compile; stages "
                    + ", ".join(f"L={s['length']}: {s['wall_s']:.1f} s (compile {s['compile_s']:.1f} s)"
                                for s in a["stages"]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small data and budgets (a few minutes)")
    ap.add_argument("--json", action="store_true", help="print only the final JSON line")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--heldout-horizon", type=int, default=300, help="held-out window length [control steps]")
    ap.add_argument("--out", type=Path, help="also write the JSON line to this file")
    args = ap.parse_args(argv)
    res = run(args)
    if not args.json:
        _table(res)
    emit(res, args.out)
    return 0


if __name__ == "__main__":
    from actuatorlab.precision import physics_precision

    with physics_precision():  # float64 physics, chosen explicitly (importing actuatorlab does not)
        sys.exit(main())

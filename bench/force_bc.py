"""Force-aware behaviour cloning on the OpenManipulator-X: a small policy with and without the
ESTIMATED end-effector force, evaluated on held-out payloads (docs/force.md, "Force-aware behaviour cloning").

    python bench/force_bc.py [--estimator momentum_observer|id_linear|id_friction|learned]
                             [--model RUN/arm_model.json] [--no-pushes] [--head-steps 1000] [--head-envs 8]
                             [--demos 32] [--trials 24] [--seeds 0,1,2] [--steps 3000] [--out bench/out/force_bc]

``--estimator learned`` runs the learned force head x gate in the loop (``make_estimator("learned")``,
one frame per command tick). Its model is ``--model`` (e.g. heads trained by ``actuatorlab
train-heads`` on the synth suite), else heads trained here on force-labelled runs of the BC
environment at the TRAINING payloads plus random pushes (``--no-pushes``: payloads only;
`train_bc_heads` in bench/force_bc_lib.py), written to OUT/heads and reused when present.
Prints one table, then one JSON line (the keys of `run_experiment` in bench/force_bc_lib.py);
OUT/results.json holds the same line.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import emit  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--estimator", default="momentum_observer", help="id_linear | id_friction | momentum_observer | learned")
    ap.add_argument("--model", type=Path, default=None, help="learned: an arm_model.json with force / gate heads")
    ap.add_argument("--no-pushes", action="store_true", help="learned, heads trained here: payload runs only")
    ap.add_argument("--head-steps", type=int, default=1000, help="learned, heads trained here: Adam steps")
    ap.add_argument("--head-force-prior", default=None, choices=("id_linear", "id_friction", "momentum_observer"),
                    help="learned, heads trained here: the classical estimate the heads correct")
    ap.add_argument("--head-force-prior-labels", action="store_true",
                    help="learned, heads trained here: calibrate the prior on every labelled run (payloads, pushes)")
    ap.add_argument("--head-envs", type=int, default=8, help="learned, heads trained here: runs of 8 s per training payload")
    ap.add_argument("--demos", type=int, default=32, help="demonstration episodes per training payload")
    ap.add_argument("--trials", type=int, default=24, help="evaluation episodes per payload and seed")
    ap.add_argument("--seeds", default="0,1,2", help="policy training seeds")
    ap.add_argument("--steps", type=int, default=3000, help="Adam steps per policy")
    ap.add_argument("--gains", default="0.8,0.9,1.0,1.1,1.2,1.3", help="grid of the expert's gain c (chosen on the training payloads)")
    ap.add_argument("--out", type=Path, default=Path("bench/out/force_bc"))
    a = ap.parse_args(argv)

    from force_bc_lib import BCConfig, run_experiment, train_bc_heads

    cfg = replace(BCConfig(), estimator=a.estimator, steps=a.steps)
    seeds = tuple(int(s) for s in a.seeds.split(","))
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    model = info = None
    if a.estimator == "learned":
        from actuatorlab.learned.arm import load_arm_model

        path = a.model
        if path is None:
            path = a.out / "heads" / "arm_model.json"
            if not path.exists():
                t0 = time.perf_counter()
                train_bc_heads(path.parent, cfg, n_envs=a.head_envs, pushes=not a.no_pushes, train_steps=a.head_steps,
                               force_prior=a.head_force_prior, prior_labels=a.head_force_prior_labels)
                log(f"force heads trained on BC-environment runs in {time.perf_counter() - t0:.0f} s -> {path}")
        _, model, d = load_arm_model(path, "open_manipulator_x")
        tr = d.get("training", {})
        info = {"path": str(path), "arch": d.get("arch"), "sizes": d.get("sizes"), "params": d.get("params_count"),
                "trained_here": a.model is None, "pushes": None if a.model else not a.no_pushes,
                "runs_per_payload": None if a.model else a.head_envs,
                "train_logs": len(d.get("data", {}).get("train", [])), "val_logs": len(d.get("data", {}).get("val", [])),
                "best_val_force_mae": tr.get("best_val_force_mae"), "steps": tr.get("steps"),
                "best_step": tr.get("best_step"), "wall_s": tr.get("wall_s"),
                "force_prior": (d.get("force_prior") or {}).get("method"),
                "force_prior_labelled": ((d.get("force_prior") or {}).get("calibration") or {}).get("labelled")}
    gains = tuple(float(g) for g in a.gains.split(","))
    r = run_experiment(cfg, demos_per_mass=a.demos, trials_per_mass=a.trials, seeds=seeds, log=log, model=model,
                       model_info=info, gains=gains)
    rows = [("expert (knows m)", "expert"), ("no compensation", "no_compensation"),
            ("BC with f_hat", "bc_force"), ("BC without f_hat", "bc_no_force")]
    print(f"{'policy':<20} {'held-out success [95% CI]':<32} {'hold err mm':>11}   {'train-payload success':<22}")
    for label, k in rows:
        h, t = r[k]["heldout"], r[k]["train_payloads"]
        ci = f"{h['success']:.2f} [{h['ci95'][0]:.2f}, {h['ci95'][1]:.2f}] ({h['successes']}/{h['trials']})"
        print(f"{label:<20} {ci:<32} {h['hold_error_mm']:>11.1f}   {t['success']:.2f} ({t['successes']}/{t['trials']})")
    print(f"held-out masses {r['heldout_masses_kg']} kg ({r['heldout_kind']}); success = end effector within "
          f"{1000 * r['tol_m']:.0f} mm over the last {r['hold_steps']} steps; estimator {r['estimator']}; "
          f"force input helps (CIs disjoint): {r['force_helps']}")
    print("held-out success by mass: " + "; ".join(f"{k} {v}" for k, v in r["success_by_heldout_mass"].items())
          + f"; estimate f_z bias in the expert's held-out hold [N]: {r['expert_heldout_force_z_bias_n']}")
    r["machine"] = {"load_avg": os.getloadavg(), "cpus": os.cpu_count()}
    emit(r, a.out / "results.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Force-aware behaviour cloning on the OpenManipulator-X: a small policy with and without the
ESTIMATED end-effector force, evaluated on held-out payloads (docs/force.md, "Force-aware behaviour cloning").

    python bench/force_bc.py [--estimator momentum_observer] [--demos 32] [--trials 24] [--seeds 0,1,2]
                             [--steps 3000] [--out bench/out/force_bc]

Prints one table, then one JSON line (:func:`actuatorlab.examples.force_bc.run_experiment`'s keys);
OUT/results.json holds the same line.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import emit  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--estimator", default="momentum_observer", help="id_linear | id_friction | momentum_observer")
    ap.add_argument("--demos", type=int, default=32, help="demonstration episodes per training payload")
    ap.add_argument("--trials", type=int, default=24, help="evaluation episodes per payload and seed")
    ap.add_argument("--seeds", default="0,1,2", help="policy training seeds")
    ap.add_argument("--steps", type=int, default=3000, help="Adam steps per policy")
    ap.add_argument("--out", type=Path, default=Path("bench/out/force_bc"))
    a = ap.parse_args(argv)

    from actuatorlab.examples.force_bc import BCConfig, run_experiment

    cfg = replace(BCConfig(), estimator=a.estimator, steps=a.steps)
    seeds = tuple(int(s) for s in a.seeds.split(","))
    r = run_experiment(cfg, demos_per_mass=a.demos, trials_per_mass=a.trials, seeds=seeds,
                       log=lambda s: print(s, file=sys.stderr, flush=True))
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
    emit(r, a.out / "results.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

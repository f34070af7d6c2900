"""What each force estimator reads in the force-aware BC environment: f_hat_z over the privileged
expert's hold window, per payload 0-0.5 kg (docs/force.md, "The learned force head in the loop").

    python bench/force_bc_reading.py [NAME=RUN/arm_model.json ...]

The momentum observer (calibrated on free motion, as in bench/force_bc.py) plus one learned model
per NAME=PATH; 8 expert episodes per payload (seeds 9100 + i, none of the BC example's). Prints
one line per estimator, then one JSON line {estimator: {mass [kg]: mean f_hat_z [N]}}; the true
value is -m g0.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import emit  # noqa: E402

MASSES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)


def main(argv=None) -> int:
    import force_bc_lib as fb
    from actuatorlab.learned.arm import load_arm_model
    from actuatorlab.robots import load_robot

    args = sys.argv[1:] if argv is None else argv
    K = fb.servo_stiffness(load_robot(fb.ROBOT))
    out = {}
    for name, path in [("momentum_observer", None)] + [tuple(a.split("=", 1)) for a in args]:
        cfg = replace(fb.BCConfig(), estimator="learned" if path else name)
        model = load_arm_model(path, fb.ROBOT)[1] if path else None
        dyn, _, make = fb.calibrate_estimator(cfg, model=model)
        row = {}
        for i, m in enumerate(MASSES):
            r = fb.run_episodes(fb.expert_policy(dyn, K, m, 1.0), m, 8, 9100 + i, cfg, make, dyn)
            row[str(m)] = float(r["f_hat"][:, -cfg.hold_steps:, 2].mean())
        out[name] = row
        print(f"{name:<20} " + "  ".join(f"{m} kg: {v:6.2f} N" for m, v in row.items()), flush=True)
    print(f"{'true (-m g0)':<20} " + "  ".join(f"{m} kg: {-m * fb.G0:6.2f} N" for m in MASSES))
    emit(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

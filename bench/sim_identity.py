"""Figure identity of the simulator: every backend's arrays on a fixed scenario, saved to .npz, and
a comparison of two such files with ``np.array_equal`` (bit equality, NaN in the same places).

Run it once per source tree (``PYTHONPATH=<tree>/src``) and compare::

    python bench/sim_identity.py --out a.npz
    python bench/sim_identity.py --out b.npz
    python bench/sim_identity.py --compare a.npz b.npz

Scenario: the OpenManipulator-X (``load_robot("open_manipulator_x")``) with its nominal parameters
and a fixed random command sequence (seed 0), as is and with every joint switched to
``m3+backlash`` (compliant transmission) and ``m3+thermal`` (winding temperature), on a batch of two
arms: the native rollout (batched and single), the MJX rollout, the MJX gradient of a position loss
w.r.t. the parameters, and the one-joint scan (:func:`actuatorlab.sim.rollout.rollout_batch`) on
four bundled XL330 logs.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

ROOT = Path(__file__).resolve().parent.parent
LOGS = ["2026-01-15_10h28m17.json", "2026-01-15_10h28m42.json", "2026-01-15_10h29m29.json",
        "2026-01-15_10h30m10.json"]
#: BAM's fitted XL330 m5 (tests/test_bam_equivalence.py), servo side
XL330 = {"kt": 0.3553446781382935, "R": 3.3859130587896766, "armature": 0.001932174492890218,
         "q_offset": 0.02173272582252024, "friction_base": 0.0004907477943984234,
         "friction_stribeck": 0.002936842151316466, "load_friction_motor": 0.023824726294816786,
         "load_friction_external": 0.12338382854308734, "load_friction_motor_stribeck": 0.3056172895999881,
         "load_friction_external_stribeck": 0.0007467175295133087, "stribeck_velocity": 2.1934694645591226,
         "stribeck_alpha": 8.83097023041122, "friction_viscous": 0.007770809678902331, "current_limit": 1.75}


def _variant(robot, model, **nominal):
    groups = tuple(dataclasses.replace(g, model=model,
                                       nominal=tuple((k, float(nominal.get(k, v))) for k, v in g.nominal))
                   for g in robot.groups)
    return dataclasses.replace(robot, groups=groups)


def arm_arrays(T: int = 40) -> dict:
    import jax.numpy as jnp

    from actuatorlab.robots import load_robot
    from actuatorlab.sim.arm import initial_state, make_inputs, make_mjx_rollout, position_loss
    from actuatorlab.sim.arm_native import rollout_native

    omx = load_robot("open_manipulator_x")
    robots = {"rigid": omx, "backlash": _variant(omx, "m3+backlash", backlash=0.02, stiffness=50.0),
              "thermal": _variant(omx, "m3+thermal", thermal_capacitance=0.05)}
    rng = np.random.default_rng(0)
    q0 = np.array([0.0, -0.3, 0.4, 0.2, 0.005])
    scale = np.array([1, 1, 1, 1, 0.02])
    qt = q0 + np.cumsum(rng.normal(0.0, 0.05, (2, T, 5)), axis=1) * scale
    res = {}
    for name, r in robots.items():
        p = r.nominal_params()
        x = make_inputs(r, qt)
        s0 = [initial_state(r, q=qt[b, 0]) for b in range(2)]
        sb = type(s0[0])(*[np.stack(v) for v in zip(*s0)])
        fin, out = rollout_native(r, p, x, sb)
        for k, v in zip(out._fields, out):
            res[f"{name}/native/{k}"] = np.asarray(v)
        for k, v in zip(fin._fields, fin):
            res[f"{name}/native_final/{k}"] = np.asarray(v)
        x1 = type(x)(*[v[0] for v in x])
        _, out1 = rollout_native(r, p, x1, s0[0])
        res[f"{name}/native_single/q"] = np.asarray(out1.q)
        roll = make_mjx_rollout(r)
        fin_m, out_m = jax.jit(roll)(p, x1, s0[0])
        for k, v in zip(out_m._fields, out_m):
            res[f"{name}/mjx/{k}"] = np.asarray(v)
        res[f"{name}/mjx_final/qpos"] = np.asarray(fin_m.qpos)
        q_meas = jnp.asarray(qt[0])

        def loss(params):
            return position_loss(roll(params, x1, s0[0])[1], q_meas)

        val, g = jax.jit(jax.value_and_grad(loss))(p)
        res[f"{name}/grad/loss"] = np.asarray(val)
        for k, v in g.items():
            res[f"{name}/grad/{k}"] = np.asarray(v)
    return res


def joint_arrays() -> dict:
    import jax.numpy as jnp

    from actuatorlab.logs import load_logs
    from actuatorlab.models.actuator import StepConfig
    from actuatorlab.models.params import neutral_params
    from actuatorlab.sim.rollout import make_batches, rollout_batch

    logs = load_logs([ROOT / "tests" / "data" / "bam_xl330_processed" / n for n in LOGS])
    p = {k: jnp.asarray(v, dtype=jnp.float64) for k, v in {**neutral_params(), **XL330}.items()}
    res = {}
    for b, batch in enumerate(make_batches(logs, 0.005)):
        for comp in (False, True):
            pc = dict(p, backlash=jnp.asarray(0.01), stiffness=jnp.asarray(20.0)) if comp else p
            out = rollout_batch(StepConfig(law=batch.law, compliant=comp, substeps=2), pc, batch.arrays())
            for k, v in zip(out._fields, out):
                if v is not None:
                    res[f"joint/{b}/{comp}/{k}"] = np.asarray(v)
    return res


def compare(a: Path, b: Path) -> int:
    A, B = np.load(a), np.load(b)
    keys = sorted(set(A.files) | set(B.files))
    bad = [k for k in keys if k not in A.files or k not in B.files
           or not np.array_equal(A[k], B[k], equal_nan=True)]
    print(f"{len(keys)} arrays, {len(keys) - len(bad)} bit-identical, {len(bad)} differ")
    for k in bad[:30]:
        if k in A.files and k in B.files:
            print(f"  {k}: max |diff| {np.nanmax(np.abs(A[k] - B[k])):.3g}")
        else:
            print(f"  {k}: missing on one side")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="write the arrays of this source tree here (.npz)")
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"), help="compare two .npz files")
    ap.add_argument("--steps", type=int, default=40, help="control steps of the arm rollouts")
    args = ap.parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    if not args.out:
        ap.error("give --out or --compare")
    res = {**arm_arrays(args.steps), **joint_arrays()}
    np.savez(args.out, **res)
    print(f"{len(res)} arrays -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

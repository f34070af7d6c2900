"""Are pushes visible in the joints, and does a learned force model see them? One row per push log.

    python bench/force_pushes.py --data DIR [--model RUN/arm_model.json] [--splits train val test heldout]

DIR is a dataset of ``actuatorlab synth --robot open_manipulator_x --suite neural_actuator``: every
``push_<axis>_<k>`` log has a no-contact twin ``no_contact_<axis>_<k>`` with the same commands
(docs/synth.md). Over the push's contact frames, per joint:

* ``tau_ext`` = J_p(q)^T f, the external joint torque the labelled force makes [N.m] (the arm's
  rigid-body model, :class:`actuatorlab.sim.dynamics.ArmDynamics`);
* ``dI`` = mean(current - twin's current) [A] and ``derr`` = mean(tracking error - twin's) [mrad]:
  what the push changes in the logged signals; ``snr`` = max over joints of |dI| / std(twin's
  current over the same frames), i.e. how far the push moves the current beyond what the same
  commands give without it;
* ``kt dI / tau`` (synthetic data: the ground truth's kt): the share of the external torque that
  reaches the motor current; the rest is held by gear friction and the efficiency losses of a
  backdriven gear, which the current never shows.

With ``--model``: the model's gate (mean sigmoid in / out of contact) and force MAE in contact,
both teacher-forced on the logged frames exactly as in training
(:func:`actuatorlab.learned.head_data.head_data`; the causal per-frame estimator gives the same
numbers), next to the MAE of a constant zero estimate. Prints one table, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import emit  # noqa: E402

ROBOT = "open_manipulator_x"


def push_rows(data: Path, splits, model_path: Path | None = None) -> list[dict]:
    import numpy as np

    from actuatorlab.sim.dynamics import ArmDynamics
    from actuatorlab.logs.io import load_native
    from actuatorlab.robots import load_robot

    robot = load_robot(ROBOT)
    dyn = ArmDynamics(robot)
    J = dyn.joints
    card = json.loads((data / "dataset.json").read_text()) if (data / "dataset.json").exists() else {}
    truth = (card.get("ground_truth") or {}).get("joints") or {}
    kt = np.array([truth[j]["kt20"] for j in J]) if all(j in truth for j in J) else None
    model = None
    if model_path is not None:
        import jax
        import jax.numpy as jnp

        from actuatorlab.learned.arm import load_arm_model
        from actuatorlab.learned.head_data import head_data

        _, model, _ = load_arm_model(model_path, ROBOT)

        @jax.jit
        def heads(x):
            def one(w):
                h = model.heads(w)  # the model's force frame applied (yaw rotation, joint-torque map)
                return h.force_raw, h.gate_logit
            return jax.vmap(one)(x)
    rows = []
    for split in splits:
        for f in sorted((data / split).rglob("push_*.parquet")):
            twin_name = f.name.replace("push_", "no_contact_", 1)
            twins = list(data.rglob(twin_name))
            if not twins:
                continue
            p, t = load_native(f), load_native(twins[0])
            c = np.asarray(p["contact"], float) > 0.5
            if not c.any():
                continue
            q = np.stack([np.asarray(p[f"position/{j}"], float) for j in J], -1)
            F = np.stack([np.asarray(p[f"force_{a}"], float) for a in "xyz"], -1)
            idx = np.where(c)[0]
            tau = np.array([dyn.jacobian(q[k]).T @ F[k] for k in idx]).mean(0)

            def sig(tr, name):
                return np.stack([np.asarray(tr[f"{name}/{j}"], float) for j in J], -1)[idx]

            cur_p, cur_t = sig(p, "current"), sig(t, "current")
            err_p = sig(p, "position_target") - sig(p, "position")
            err_t = sig(t, "position_target") - sig(t, "position")
            dI = (cur_p - cur_t).mean(0)
            row = {"log": str(f.relative_to(data))[:-len(".parquet")], "split": split,
                   "force_n": float(np.linalg.norm(F[c], axis=1).mean()),
                   "tau_ext": tau.tolist(), "dI": dI.tolist(), "derr_mrad": (1e3 * (err_p - err_t).mean(0)).tolist(),
                   "snr": float(np.max(np.abs(dI) / np.maximum(cur_t.std(0), 1e-6)))}
            if kt is not None:
                j = int(np.argmax(np.abs(tau)))
                row["reach_share"] = float(-kt[j] * dI[j] / tau[j]) if abs(tau[j]) > 1e-9 else None
            if model is not None:
                d = head_data(robot, model, [p])
                fr, g = heads(jnp.asarray(d.x))
                gate = np.asarray(jax.nn.sigmoid(g))
                fh = gate[:, None] * np.asarray(fr)
                lab = np.asarray(d.force)
                row.update(gate_in=float(gate[c].mean()), gate_out=float(gate[~c].mean()) if (~c).any() else None,
                           mae_contact=float(np.abs(fh[c] - lab[c]).mean()), zero_mae_contact=float(np.abs(lab[c]).mean()))
            rows.append(row)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--model", type=Path, default=None, help="RUN/arm_model.json of a learned model with force heads")
    ap.add_argument("--splits", nargs="+", default=["train", "val", "test", "heldout"])
    a = ap.parse_args(argv)
    rows = push_rows(a.data, a.splits, a.model)
    f3 = lambda v: " ".join(f"{x:+.2f}" for x in v)  # noqa: E731
    print(f"{'push log':<30} {'|f| N':>6}  {'tau_ext N.m (j1..j4)':<24} {'dI A (push - twin)':<24} "
          f"{'derr mrad':<24} {'snr':>5} {'kt dI/tau':>9}" + ("  gate in/out  MAE contact (zero)" if a.model else ""))
    for r in rows:
        line = (f"{r['log']:<30} {r['force_n']:6.2f}  {f3(r['tau_ext']):<24} {f3(r['dI']):<24} "
                f"{' '.join(f'{x:+5.1f}' for x in r['derr_mrad']):<24} {r['snr']:5.1f} "
                f"{'-' if r.get('reach_share') is None else format(r['reach_share'], '9.2f'):>9}")
        if a.model:
            line += f"  {r['gate_in']:.2f} / {r['gate_out'] if r['gate_out'] is None else round(r['gate_out'], 2)}" \
                    f"  {r['mae_contact']:.3f} ({r['zero_mae_contact']:.3f})"
        print(line)
    emit({"bench": "force_pushes", "data": str(a.data), "model": None if a.model is None else str(a.model),
          "pushes": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The actuator gap in an environment: one open-loop command sequence, three actuators, one truth.

One command (from the repo root)::

    python bench/actuator_gap.py                  # table, then one JSON line
    python bench/actuator_gap.py --json --max-evals 300 --seconds 8

The same open-loop joint-target sequence is played, one target per command tick, through the
Gymnasium engine of :mod:`actuatorlab.envs` (``NativeBatch``, contract: absolute targets, no
scaling, no clipping but the joint ranges) with

* ``identified``: the actuator model fitted to virtual-hardware logs (``actuatorlab fit --robot``,
  m3 by default, CMA-ES on the training split of the synth ``smoke`` suite), loaded from its
  arm_model.json;
* ``config``: the robot config's nominal actuator (datasheet values);
* ``builtin``: MuJoCo's default actuators of the MJCF (position servos, the MJCF's damping,
  armature and friction);

and compared per joint (MAE [rad] over the sequence) with the ground truth:

* **open_manipulator_x**: the virtual hardware of :mod:`actuatorlab.synth` (same units as the
  dataset the model was fitted on: seed ``--seed``), driven by the same command sequence: a fresh
  teleoperation path (``synth.commands.teleop``, a seed the fit never saw), started from its first
  command;
* **anymal_c**: there is no virtual hardware for the quadruped. Its "virtual hardware" here is the
  config's actuator made series-elastic (``m1+compliance``, spring stiffness ``--anymal-stiffness``
  N.m/rad, an assumption, not a measured ANYdrive value) with per-joint unit-to-unit variation of
  kt and friction (``synth.model_truth.draw_param_sets``, +-25 %), standing on the ground with
  contacts; no identification is run for it (no logs exist), so its rows compare the config's
  rigid m1 and the MJCF's actuators with that truth only.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit  # noqa: E402

CONTRACT = dict(action_scale=1.0, action_offset="zero", action_clip=None)


def play(robot, model, q_cmd: np.ndarray, home=None) -> np.ndarray:
    """Joint positions (T, n) at the start of every command tick of ``q_cmd`` (T, n)."""
    import jax

    from actuatorlab.envs import TimingContract
    from actuatorlab.envs.gym_env import NativeBatch

    env = NativeBatch(robot, model, num_envs=1, contract=TimingContract(**CONTRACT), episode_length=10 ** 9,
                      home=q_cmd[0] if home is None else home)
    env.reset(np.asarray(jax.random.PRNGKey(0))[None])
    q = np.empty_like(q_cmd)
    for k, a in enumerate(q_cmd):
        q[k] = env.arm.qpos[0, env.qadr]
        env.step(a[None])
    return q


def omx(a) -> dict:
    from actuatorlab.app.jobs import RobotFitOptions, run_fit
    from actuatorlab.identify.select import FamilyOptions
    from actuatorlab.synth import Rates, RunConditions, draw_joint_truths, run_synth, simulate
    from actuatorlab.synth import commands as cmd
    from actuatorlab.synth.dataset import _rng
    from actuatorlab.synth.robot import build_scene, get_robot
    from actuatorlab.synth.truth import draw_supply

    robot = "open_manipulator_x"
    work = Path(a.work or tempfile.mkdtemp(prefix="actuator_gap_"))
    t0 = time.perf_counter()
    model_file = Path(a.model_file) if a.model_file else work / "fit" / "arm_model.json"
    if not model_file.is_file():
        data = work / "synth"
        if not (data / "dataset.json").is_file():
            run_synth(robot, "smoke", data, seed=a.seed, scale=1.0, overwrite=True)
        train = sorted(str(p) for p in (data / "train").glob("*.parquet"))
        run_fit(train, work / "fit", model=a.model, options=FamilyOptions(seed=0),
                robot=RobotFitOptions(robot, max_evals=a.max_evals))
    fit_s = time.perf_counter() - t0

    spec = get_robot(robot)
    rates = Rates()
    unit_rng = _rng(a.seed, 0)  # the units of the dataset (run_synth draws them first)
    truths = draw_joint_truths(unit_rng, spec.joints)
    supply = draw_supply(unit_rng)
    scene = build_scene(robot, truths, rates.physics_dt)
    T = int(round(a.seconds / rates.log_dt))
    q4 = cmd.teleop(np.random.default_rng([a.seed, 777]), T, rates.log_dt, amplitude=0.8)
    sim = simulate(scene, truths, supply, cmd.plan_of(q4),
                   RunConditions([800.0] * 4, ambient=25.0, temperature0=[30.0] * 4, rates=rates, preroll=0.5),
                   np.random.default_rng(1))
    truth = sim.q
    q_cmd = np.concatenate([q4, np.zeros((T, 1))], axis=1)  # the gripper holds 0
    home = np.concatenate([truth[0], [0.0]])
    rows = {}
    for name, model in (("identified", str(model_file)), ("config", None), ("builtin", "builtin")):
        q = play(robot, model, q_cmd, home)[:, :4]
        rows[name] = q
    out = {"robot": robot, "truth": "synth virtual hardware (seed %d units)" % a.seed, "joints": list(spec.joints),
           "model_file": str(model_file), "fit_s": fit_s, "T": T, "dt": rates.log_dt}
    return _table(out, truth, rows)


def anymal(a) -> dict:
    from actuatorlab.sim.arm_data import robot_with_model
    from actuatorlab.robots import load_robot
    from actuatorlab.synth.model_truth import draw_param_sets

    robot = load_robot("anymal_c")
    truth_model = "m1+compliance"
    p = draw_param_sets(robot, truth_model, seed=a.seed, set_values={"stiffness": a.anymal_stiffness},
                        names=("kt", "friction_base", "friction_viscous"))
    truth_file = {"model": truth_model, "params": {k: dict(zip(robot.joint_names, map(float, v))) for k, v in p.items()}}
    dt = robot.control_dt
    T = int(round(a.seconds / dt))
    t = np.arange(T) * dt
    from actuatorlab.robots.loader import home_qpos

    home = home_qpos(robot.model())[robot.qpos_adr]
    rng = np.random.default_rng([a.seed, 778])
    amp = np.tile([0.08, 0.25, 0.3], 4) * rng.uniform(0.6, 1.0, 12)
    f = rng.uniform(0.5, 2.0, 12)
    q_cmd = home + amp * np.sin(2 * np.pi * f * t[:, None]) * np.minimum(1.0, t[:, None] / 0.5)
    truth = play(robot_with_model(robot, truth_model), truth_file, q_cmd, home)
    rows = {"config": play(robot, None, q_cmd, home), "builtin": play(robot, "builtin", q_cmd, home)}
    out = {"robot": "anymal_c", "truth": f"config actuator made {truth_model} (stiffness {a.anymal_stiffness} "
           "N.m/rad, assumed) with +-25 % unit variation of kt and friction: NOT a measured truth; no "
           "identification run", "joints": list(robot.joint_names), "T": T, "dt": dt}
    return _table(out, truth, rows)


def _table(out: dict, truth: np.ndarray, rows: dict) -> dict:
    mae = {k: np.mean(np.abs(q - truth), axis=0) for k, q in rows.items()}
    out["per_joint_mae_rad"] = {k: dict(zip(out["joints"], map(float, v))) for k, v in mae.items()}
    out["mean_mae_rad"] = {k: float(v.mean()) for k, v in mae.items()}
    ref = "identified" if "identified" in rows else "config"
    out["difference_vs_builtin_rad"] = float(np.mean(np.abs(rows[ref] - rows["builtin"])))
    out["reference"] = ref
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robots", nargs="+", default=["open_manipulator_x", "anymal_c"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=6.0, help="length of the command sequence [s]")
    ap.add_argument("--model", default="m3", help="model family fitted on the OM-X virtual hardware")
    ap.add_argument("--max-evals", type=int, default=200)
    ap.add_argument("--model-file", default=None, help="use this OM-X arm_model.json instead of fitting")
    ap.add_argument("--work", default=None, help="folder for the synth data and the fit (default: a temp dir)")
    ap.add_argument("--anymal-stiffness", type=float, default=200.0)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    res = []
    for r in a.robots:
        res.append(omx(a) if r == "open_manipulator_x" else anymal(a))
    if not a.json:
        from rich.console import Console
        from rich.table import Table

        for r in res:
            t = Table(title=f"{r['robot']}: per-joint MAE [mrad] vs the truth")
            t.add_column("joint")
            acts = list(r["per_joint_mae_rad"])
            for k in acts:
                t.add_column(k, justify="right")
            for j in r["joints"] + ["mean"]:
                t.add_row(j, *[f"{1e3 * (r['mean_mae_rad'][k] if j == 'mean' else r['per_joint_mae_rad'][k][j]):.1f}"
                               for k in acts])
            Console().print(t)
            Console().print(f"  truth: {r['truth']}")
            Console().print(f"  {r['reference']} vs builtin (how differently they move): "
                            f"{1e3 * r['difference_vs_builtin_rad']:.1f} mrad")
    summary = {"bench": "actuator_gap", "results": res, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    emit(summary, a.out)
    return summary


if __name__ == "__main__":
    main()

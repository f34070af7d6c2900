"""Robot rollout throughput: MJX vs native MuJoCo with the same actuator model, vs MuJoCo's own.

One command (from the repo root)::

    python bench/sim.py            # rich table, then one JSON line
    python bench/sim.py --json     # the JSON line only

On the OpenManipulator-X (5 Dynamixel XM430 joints with the ``m3`` actuator model of
``robots/configs/open_manipulator_x.json``, 100 Hz commands, 5 physics steps of 2 ms each):

* ``mjx_steps_per_s``: ``jit(vmap(make_mjx_rollout))`` on a batch of ``--batch`` arms;
* ``native_steps_per_s``: :func:`~actuatorlab.sim.arm_native.rollout_native` on the same batch;
* ``builtin_steps_per_s``: the ceiling, plain MuJoCo with the MJCF's own position actuators
  (same model edits: contacts off, same timestep), ``mujoco.rollout`` single-threaded in C;
  ``builtin_loop_steps_per_s`` the same with a Python ``mj_step`` loop;
* ``grad_steps_per_s``: ``jit(vmap(value_and_grad))`` of a tracking loss w.r.t. the actuator
  parameters and the targets, on ``--grad-batch`` arms;
* ``compile_s``: lowering + XLA compile of the batched MJX rollout in a fresh process with an empty
  persistent compilation cache; ``compile_cached_s``: the same in a second fresh process reading
  that cache (a temp dir); ``grad_compile_s``: the gradient's compile in this process;
* ``peak_rss_mb``: ``resource.getrusage`` max RSS of this process (and of the probe processes).

On a one-joint bench robot (the fitted XL330 ``m1`` of ``tests/data/model_files_v1``, a pendulum,
5.3 ms commands, 6 physics steps, the firmware law every physics step), the same ``--batch`` and
``--steps``, through :func:`actuatorlab.sim.backends.rollout`:

* ``bench_scan_steps_per_s``: ``backend="scan"``, the one-joint closed-form scan (jit, vmap);
* ``bench_native_steps_per_s``: ``backend="native"``; ``bench_scan_vs_native_max_abs_q`` [rad]
  their largest position difference (rounding only: same equations, same timing).

Steps are physics steps of one arm (env-steps): batch x control steps x substeps. Timings are the
best of ``--repeats`` runs after compilation.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit  # noqa: E402

ROBOT = "open_manipulator_x"
#: the one-joint model whose bench robot the scan row runs on
BENCH_MODEL = Path(__file__).resolve().parent.parent / "tests" / "data" / "model_files_v1" / "xl330_m1_model.json"


def _scenario(robot, batch: int, steps: int, seed: int = 0):
    import numpy as np

    from actuatorlab.sim.arm import initial_state, make_inputs

    rng = np.random.default_rng(seed)
    t = np.arange(steps) * robot.control_dt
    q0 = np.array([0.0, -0.3, 0.4, 0.2, 0.005])
    qt, s0 = [], []
    for _ in range(batch):
        amp = rng.uniform(0.2, 0.5, 5) * np.array([1, 1, 1, 1, 0.02])
        start = q0 + rng.uniform(-0.2, 0.2, 5) * np.array([1, 1, 1, 1, 0.02])
        qt.append(start + np.outer(np.sin(2 * np.pi * rng.uniform(0.3, 1.5) * t), amp))
        s0.append(initial_state(robot, q=start))
    x = make_inputs(robot, np.stack(qt))
    state = type(s0[0])(*[np.stack(v) for v in zip(*s0)])
    return x, state


def _best(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _builtin_model(robot):
    """The robot's MJCF with its own actuators, edited like the robot's (contacts, timestep)."""
    import mujoco

    spec = mujoco.MjSpec.from_file(robot.mjcf_path)
    spec.option.timestep = robot.physics_dt
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_EULER
    if not robot.contacts:
        spec.option.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
        for g in spec.geoms:
            g.contype = g.conaffinity = 0
    return spec.compile()


def measure_builtin(robot, x, repeats: int) -> dict:
    import mujoco
    import numpy as np
    from mujoco import rollout

    m = _builtin_model(robot)
    B, T, n = x.q_target.shape
    nstep = T * robot.substeps
    ctrl = np.repeat(x.q_target, robot.substeps, axis=1)[:, :, : m.nu]  # position actuators take targets
    d = mujoco.MjData(m)
    size = mujoco.mj_stateSize(m, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    init = np.zeros((B, size))
    for b in range(B):
        mujoco.mj_resetData(m, d)
        mujoco.mj_getState(m, d, init[b], mujoco.mjtState.mjSTATE_FULLPHYSICS)
    with rollout.Rollout(nthread=0) as r:
        t_c = _best(lambda: r.rollout(m, d, init, ctrl), repeats)
    datas = [mujoco.MjData(m) for _ in range(B)]

    def loop():
        for b, dd in enumerate(datas):
            mujoco.mj_resetData(m, dd)
            for k in range(nstep):
                dd.ctrl[:] = ctrl[b, k]
                mujoco.mj_step(m, dd)

    t_loop = _best(loop, max(1, repeats - 1))
    return {"builtin_steps_per_s": B * nstep / t_c, "builtin_loop_steps_per_s": B * nstep / t_loop}


def measure_bench(batch: int, steps: int, repeats: int, seed: int = 0) -> dict:
    """Scan vs native MuJoCo on a one-joint bench robot (module docstring)."""
    import jax
    import numpy as np

    from actuatorlab.models.actuator_model import load
    from actuatorlab.robots import load_robot
    from actuatorlab.sim.arm import initial_state, make_inputs
    from actuatorlab.sim.backends import rollout

    robot = load_robot(load(BENCH_MODEL))
    rng = np.random.default_rng(seed)
    t = np.arange(steps) * robot.control_dt
    amp, freq = rng.uniform(0.3, 1.0, (batch, 1)), rng.uniform(0.3, 2.0, (batch, 1))
    x = make_inputs(robot, (amp * np.sin(2 * np.pi * freq * t))[..., None])
    s0 = initial_state(robot)
    s0 = type(s0)(*[np.stack([v] * batch) for v in s0])
    p = robot.nominal_params()

    def scan():
        return jax.block_until_ready(rollout(robot, p, x, s0, backend="scan"))

    scan()
    t_scan = _best(scan, repeats)
    t_nat = _best(lambda: rollout(robot, p, x, s0, backend="native"), max(1, repeats - 1))
    diff = np.abs(np.asarray(scan()[1].q) - rollout(robot, p, x, s0, backend="native")[1].q).max()
    n = batch * steps * robot.substeps
    return {"bench_robot": robot.name, "bench_substeps": robot.substeps, "bench_scan_steps_per_s": n / t_scan,
            "bench_native_steps_per_s": n / t_nat, "bench_scan_vs_native_max_abs_q": float(diff)}


def compile_probe(cache_dir: str, batch: int, steps: int) -> dict:
    """Lower + compile the batched MJX rollout in this (fresh) process with a persistent cache."""
    import jax

    from actuatorlab.robots import load_robot
    from actuatorlab.sim.arm import make_mjx_rollout

    jax.config.update("jax_compilation_cache_dir", cache_dir)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    robot = load_robot(ROBOT)
    x, s0 = _scenario(robot, batch, steps)
    p = robot.nominal_params()
    t0 = time.perf_counter()
    f = jax.jit(jax.vmap(make_mjx_rollout(robot), in_axes=(None, 0, 0)))
    f.lower(p, x, s0).compile()
    return {"compile_s": time.perf_counter() - t0,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _probe(cache_dir: str, args) -> dict:
    cmd = [sys.executable, __file__, "--probe", cache_dir, "--batch", str(args.batch), "--steps", str(args.steps)]
    env = dict(os.environ)
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(args) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np

    import actuatorlab  # noqa: F401
    from actuatorlab.robots import load_robot
    from actuatorlab.sim.arm import make_mjx_rollout, mjx_model
    from actuatorlab.sim.arm_native import native_model, rollout_native

    robot = load_robot(ROBOT)
    x, s0 = _scenario(robot, args.batch, args.steps)
    p = robot.nominal_params()
    B, T = args.batch, args.steps
    env_steps = B * T * robot.substeps
    res: dict = {"bench": "sim", "robot": ROBOT, "model": robot.groups[0].model, "batch": B,
                 "control_steps": T, "substeps": robot.substeps, "physics_dt": robot.physics_dt,
                 "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                 "jax": jax.__version__}

    # compile times in fresh processes: cold (empty cache), then cached
    with tempfile.TemporaryDirectory() as cache:
        cold, cached = _probe(cache, args), _probe(cache, args)
    res["compile_s"], res["compile_cached_s"] = cold["compile_s"], cached["compile_s"]
    res["probe_peak_rss_mb"] = max(cold["peak_rss_mb"], cached["peak_rss_mb"])

    # MJX forward
    mx = mjx_model(robot)
    roll = make_mjx_rollout(robot, mx=mx)
    f = jax.jit(jax.vmap(roll, in_axes=(None, 0, 0)))
    pj = {k: jnp.asarray(v) for k, v in p.items()}
    xj, sj = jax.tree.map(jnp.asarray, x), jax.tree.map(jnp.asarray, s0)
    jax.block_until_ready(f(pj, xj, sj))
    t = _best(lambda: jax.block_until_ready(f(pj, xj, sj)), args.repeats)
    res["mjx_steps_per_s"] = env_steps / t

    # native, same batch; and the agreement of the two on it
    mn = native_model(robot, p)
    t = _best(lambda: rollout_native(robot, p, x, s0, model=mn), max(1, args.repeats - 1))
    res["native_steps_per_s"] = env_steps / t
    _, out_n = rollout_native(robot, p, x, s0, model=mn)
    _, out_j = f(pj, xj, sj)
    res["mjx_vs_native_max_abs_q"] = float(np.abs(np.asarray(out_j.q) - out_n.q).max())

    res.update(measure_builtin(robot, x, args.repeats))
    res.update(measure_bench(B, T, args.repeats))

    # gradient
    Bg = args.grad_batch
    xg, sg = jax.tree.map(lambda v: jnp.asarray(v[:Bg]), x), jax.tree.map(lambda v: jnp.asarray(v[:Bg]), s0)

    base = jax.tree.map(lambda v: v[0], xg)  # enable and supply are the same for every arm

    def loss(params, qt, state):
        _, out = roll(params, base._replace(q_target=qt), state)
        return jnp.mean((out.q - qt) ** 2)

    g = jax.jit(jax.vmap(jax.value_and_grad(loss, argnums=(0, 1)), in_axes=(None, 0, 0)))
    t0 = time.perf_counter()
    jax.block_until_ready(g(pj, xg.q_target, sg))
    res["grad_compile_s"] = time.perf_counter() - t0
    t = _best(lambda: jax.block_until_ready(g(pj, xg.q_target, sg)), args.repeats)
    res["grad_batch"] = Bg
    res["grad_steps_per_s"] = Bg * T * robot.substeps / t
    res["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return res


def _table(res: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    tab = Table(title=f"{res['robot']} ({res['model']}), batch {res['batch']}, {res['control_steps']} control "
                      f"steps x {res['substeps']} physics steps of {res['physics_dt'] * 1e3:g} ms")
    tab.add_column("what")
    tab.add_column("value", justify="right")
    tab.add_column("unit")
    rows = [("MJX rollout (jit + vmap)", res["mjx_steps_per_s"], "steps/s"),
            ("native MuJoCo + NumPy actuator", res["native_steps_per_s"], "steps/s"),
            ("builtin MuJoCo actuators, mujoco.rollout", res["builtin_steps_per_s"], "steps/s"),
            ("builtin MuJoCo actuators, Python mj_step loop", res["builtin_loop_steps_per_s"], "steps/s"),
            (f"MJX value_and_grad (batch {res['grad_batch']})", res["grad_steps_per_s"], "steps/s"),
            ("compile, cold (fresh process)", res["compile_s"], "s"),
            ("compile, persistent cache (fresh process)", res["compile_cached_s"], "s"),
            ("gradient compile, cold", res["grad_compile_s"], "s"),
            ("MJX vs native, max |q| difference", res["mjx_vs_native_max_abs_q"], "rad"),
            (f"one-joint bench ({res['bench_substeps']} physics steps/control): scan backend",
             res["bench_scan_steps_per_s"], "steps/s"),
            ("one-joint bench: native backend", res["bench_native_steps_per_s"], "steps/s"),
            ("one-joint bench: scan vs native, max |q| difference", res["bench_scan_vs_native_max_abs_q"], "rad"),
            ("peak RSS (this process / compile probes)",
             f"{res['peak_rss_mb']:.0f} / {res['probe_peak_rss_mb']:.0f}", "MB")]
    for name, v, unit in rows:
        tab.add_row(name, v if isinstance(v, str) else (f"{v:.3g}" if abs(v) < 1e3 else f"{v:,.0f}"), unit)
    Console().print(tab)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print only the final JSON line")
    ap.add_argument("--batch", type=int, default=64, help="arms per batch (MJX, native, builtin)")
    ap.add_argument("--grad-batch", type=int, default=8, help="arms per batch for the gradient")
    ap.add_argument("--steps", type=int, default=100, help="control steps per rollout")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, help="also write the JSON line to this file")
    ap.add_argument("--probe", metavar="CACHE_DIR", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.probe:
        print(json.dumps(compile_probe(args.probe, args.batch, args.steps)))
        return 0
    res = run(args)
    if not args.json:
        _table(res)
    emit(res, args.out)
    return 0


if __name__ == "__main__":
    from actuatorlab.precision import physics_precision

    with physics_precision():  # float64 physics, chosen explicitly (importing actuatorlab does not)
        sys.exit(main())

"""Environment throughput with the actuator in the loop vs MuJoCo's built-in actuators.

One command (from the repo root)::

    python bench/envs.py                 # table, then one JSON line
    python bench/envs.py --json          # the JSON line only
    python bench/envs.py --batches 1 64 1024 --robot open_manipulator_x --steps 20

Rows: path (``mjx``: :class:`actuatorlab.envs.MjxEnv`, ``jit(vmap(step))`` called once per
policy step for ``--steps`` steps (batches above ``--chunk``, default 1,024: ``vmap_chunked``) (``--scan``: ``lax.scan`` over the steps in one jitted call),
float32 as a training program runs it; ``native``:
:class:`actuatorlab.envs.gym_env.NativeBatch`, the engine of the Gymnasium ``ActuatorVectorEnv``,
one batched native rollout per step) x actuator (``actuatorlab``: the robot config's model on
every joint, i.e. the actuator in the loop; ``builtin``: the MJCF's own position actuators) x
batch (parallel environments). The timing contract is the default one (one command tick per
policy step: 5 physics steps of 2 ms on the OpenManipulator-X).

Reported per row: ``env_steps_per_s`` (policy steps x environments / s), ``physics_steps_per_s``
(x substeps), ``compile_s`` (MJX: first call, lowering + XLA compile; read from the persistent
cache when ``JAX_COMPILATION_CACHE_DIR`` holds it) and the best of ``--repeats`` timed runs. The
machine load (``os.getloadavg``) before and after is part of the result: the numbers are only
comparable between runs on an equally loaded machine.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit  # noqa: E402


def _mjx_row(robot: str, model, batch: int, steps: int, repeats: int, scan: bool = False, chunk: int = 0) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np

    from actuatorlab.envs import MjxEnv, vmap_chunked

    env = MjxEnv(robot, model)
    vstep = vmap_chunked(env.step, chunk) if chunk else jax.vmap(env.step)
    if scan:  # every step in one jitted call
        @jax.jit
        def run(state, actions):
            return jax.lax.scan(lambda s, a: (vstep(s, a), s.reward), state, actions)
    else:  # one jitted call per policy step (what a host-side training loop does)
        jstep = jax.jit(vstep)

        def run(state, actions):
            for a in actions:
                state = jstep(state, a)
            return state, None

    s = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(0), batch))
    acts = jnp.asarray(np.random.default_rng(0).uniform(-0.3, 0.3, (steps, batch, env.n_joints)), env.dtype)
    t0 = time.perf_counter()
    out, _ = run(s, acts)
    jax.block_until_ready(out)
    compile_s = time.perf_counter() - t0
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        out, _ = run(s, acts)
        jax.block_until_ready(out)
        best = min(best, time.perf_counter() - t0)
    finite = bool(np.isfinite(np.asarray(out.arm.qpos)).all())
    return {"compile_s": compile_s, "wall_s": best, "finite": finite, "substeps": env.cfg.substeps * env.contract.decimation}


def _native_row(robot: str, model, batch: int, steps: int, repeats: int) -> dict:
    import jax
    import numpy as np

    from actuatorlab.envs.gym_env import NativeBatch

    env = NativeBatch(robot, model, num_envs=batch)
    keys = np.asarray(jax.random.split(jax.random.PRNGKey(0), batch))
    acts = np.random.default_rng(0).uniform(-0.3, 0.3, (steps, batch, env.n_joints))
    best = float("inf")
    for _ in range(repeats):
        env.reset(keys)
        t0 = time.perf_counter()
        for a in acts:
            env.step(a)
        best = min(best, time.perf_counter() - t0)
    return {"compile_s": 0.0, "wall_s": best, "finite": bool(np.isfinite(env.arm.qpos).all()),
            "substeps": env.cfg.substeps * env.contract.decimation}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robot", default="open_manipulator_x")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 64, 1024])
    ap.add_argument("--steps", type=int, default=20, help="policy steps per timed run")
    ap.add_argument("--native-steps", type=int, default=None, help="policy steps of the native rows (default --steps)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--paths", nargs="+", default=["mjx", "native"], choices=["mjx", "native"])
    ap.add_argument("--models", nargs="+", default=["actuatorlab", "builtin"])
    ap.add_argument("--scan", action="store_true", help="MJX: lax.scan over the steps in one jitted call")
    ap.add_argument("--chunk", type=int, default=1024, help="MJX: vmap at most this many environments at a time "
                    "(actuatorlab.envs.vmap_chunked; larger batches run as a lax.map over chunks); 0: plain vmap, "
                    "which hangs in jaxlib's batched Cholesky at 4,096 built-in OM-X environments on 2 cores")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    import jax

    load0 = os.getloadavg()
    rows = []
    for path in a.paths:
        for model in a.models:
            for b in a.batches:
                steps = a.steps if path == "mjx" else (a.native_steps or a.steps)
                m = None if model == "actuatorlab" else model
                r = (_mjx_row(a.robot, m, b, steps, a.repeats, a.scan, a.chunk) if path == "mjx"
                     else _native_row(a.robot, m, b, steps, a.repeats))
                n = steps * b
                row = {"path": path, "actuator": model, "batch": b, "steps": steps,
                       "env_steps_per_s": n / r["wall_s"], "physics_steps_per_s": n * r["substeps"] / r["wall_s"],
                       "compile_s": round(r["compile_s"], 2), "wall_s": r["wall_s"], "finite": r["finite"]}
                rows.append(row)
                if not a.json:
                    print(f"  {path:6s} {model:11s} batch {b:5d}: {row['env_steps_per_s']:12,.0f} env steps/s "
                          f"(compile {row['compile_s']:.1f} s)", flush=True)
    load1 = os.getloadavg()
    summary = {"bench": "envs", "robot": a.robot, "rows": rows, "mjx_loop": "scan" if a.scan else "python", "mjx_chunk": a.chunk, "device": jax.devices()[0].platform,
               "precision": "float32 (MJX); float64 (native)", "cpu_count": os.cpu_count(),
               "machine": platform.processor() or platform.machine(), "load_before": load0, "load_after": load1,
               "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    if not a.json:
        from rich.console import Console
        from rich.table import Table

        t = Table(title=f"environment steps/s, {a.robot} ({summary['device']}; load {load0[0]:.1f} -> {load1[0]:.1f})")
        for c in ("path", "actuator", "batch", "env steps/s", "physics steps/s", "compile s"):
            t.add_column(c, justify="right")
        for r in rows:
            t.add_row(r["path"], r["actuator"], str(r["batch"]), f"{r['env_steps_per_s']:,.0f}",
                      f"{r['physics_steps_per_s']:,.0f}", f"{r['compile_s']:.1f}")
        Console().print(t)
    emit(summary, a.out)
    return summary


if __name__ == "__main__":
    main()

"""The legged environment on MJX's Warp implementation (MuJoCo Warp) next to its JAX implementation: the
same trained policies, the same evaluation, the same figures; env steps/s of both (issue 44).

One command (from the repo root, with MuJoCo Warp installed: ``pip install 'actuatorlab[warp]'``)::

    python bench/legged_warp.py                               # table, then one JSON line
    python bench/legged_warp.py --runs RUN [RUN ...] --steps 500 --batches 12 64

Per policy run (default: the ``bench/legged_transfer.py`` cache's default-chain policy of seed 0,
``identified_fleet_msr_s0``, and the built-in servo arm ``builtin_s0``, which reaches Warp through
``mjx.step`` on ``ctrl`` instead of the actuator rollout): ``evaluate_policy`` in the policy's own
training environment (the 12 fixed commands, ``--steps`` policy steps, seed 0, alpha 1), built once
with ``impl="jax"`` and once with ``impl="warp"``; velocity and yaw-rate RMSE, falls and return of
each, their differences, and the evaluation's wall time (compilation included; Warp's contact buffer sized
for the batch, ``worlds``: the default 1024 costs 30-45 % of Warp's CPU speed at 12-64 environments); beside them, the JAX
environment at evaluation seed 1 (other start poses, other randomization draws), the scatter a figure has
from the draws alone, against which the Warp - JAX difference is read. Both are float32; the two implementations differ in their kernels
(summation order, the constraint solver's and the collision code's arithmetic), so the figures agree to
float32 rounding amplified by a closed-loop trot, not to the digit.

Speed rows: ``jit(vmap(env.step))`` of each run's environment scanned over ``--speed-steps`` policy
steps at each ``--batches`` batch (random actions, alpha traced), per implementation: the first call (compile; Warp's kernels
come from its own cache after the first run on a machine) and the best of ``--repeats`` timed calls.
On the CPU, Warp runs every physics step as two whole passes (``mjx.forward`` for the actuator's
inputs, then ``mjx.step`` with its effort: :class:`actuatorlab.sim.arm._WarpPhysics`) where the JAX
implementation splits one; the figure that matters for training, on a GPU, needs a lent one.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit  # noqa: E402

BENCH = Path(__file__).resolve().parent
POLICIES = BENCH / "out" / "legged" / "policies"
DEFAULT_RUNS = ("identified_fleet_msr_s0", "builtin_s0")
FIGURES = ("lin_vel_rmse", "yaw_rate_rmse", "fell", "return")


def _check_warp() -> None:
    from actuatorlab.sim import mjx_module

    if mjx_module.mjx_warp() is None:
        raise SystemExit("MuJoCo Warp is not installed (pip install 'actuatorlab[warp]'): nothing to compare")


def _env(run: Path, impl: str, worlds: int):
    """The run's own training environment on ``impl``, Warp's contact buffer sized for ``worlds``."""
    from actuatorlab.envs import make_policy_env
    from actuatorlab.policy.train import load_policy

    cfg = load_policy(run).config
    return make_policy_env(cfg["robot"], cfg["task"], **{**cfg.get("env_options", {}), "impl": impl, "worlds": worlds})


def _evaluate(run: Path, impl: str, steps: int, seed: int = 0) -> dict[str, Any]:
    from actuatorlab.policy.train import FIXED_COMMANDS, evaluate_policy

    env = _env(run, impl, len(FIXED_COMMANDS))
    t0 = time.perf_counter()
    res = evaluate_policy(run, env=env, steps=steps, commands="fixed", seed=seed)
    return {"impl": impl, "seed": seed, **{k: res[k] for k in FIGURES}, "wall_s": time.perf_counter() - t0,
            "env_steps": res["n_envs"] * steps}


def _speed(run: Path, impl: str, batch: int, steps: int, repeats: int) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp
    import numpy as np

    env = _env(run, impl, batch)
    vstep = jax.vmap(env.step, in_axes=(0, 0, None))

    @jax.jit
    def roll(state, actions, params):
        return jax.lax.scan(lambda s, a: (vstep(s, a, params), s.reward), state, actions)

    p = {**env.default_env_params(), "alpha": jnp.float32(1.0)}
    s = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(jax.random.split(jax.random.PRNGKey(0), batch), p)
    acts = jnp.asarray(np.random.default_rng(0).uniform(-0.3, 0.3, (steps, batch, env.action_size)), jnp.float32)
    t0 = time.perf_counter()
    jax.block_until_ready(roll(s, acts, p))
    first = time.perf_counter() - t0
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        out, _ = roll(s, acts, p)
        jax.block_until_ready(out)
        best = min(best, time.perf_counter() - t0)
    return {"impl": impl, "run": run.name, "batch": batch, "steps": steps, "first_s": first,
            "env_steps_per_s": batch * steps / best, "finite": bool(np.isfinite(np.asarray(out.obs)).all())}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", nargs="+", type=Path, default=[POLICIES / r for r in DEFAULT_RUNS])
    ap.add_argument("--steps", type=int, default=500, help="policy steps per evaluation episode")
    ap.add_argument("--batches", nargs="+", type=int, default=[12, 64])
    ap.add_argument("--speed-steps", type=int, default=10, help="0: no speed rows")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    _check_warp()
    import jax

    out: dict[str, Any] = {"bench": "legged_warp", "runs": [], "speed": []}
    with jax.enable_x64(False):
        print(f"{'run':<26} {'impl':<5} {'vel rmse':>9} {'yaw rmse':>9} {'fell':>6} {'return':>8} {'wall s':>7}")
        for run in a.runs:
            rows = [_evaluate(run, impl, a.steps) for impl in ("jax", "warp")] + [_evaluate(run, "jax", a.steps, 1)]
            for r, name in zip(rows, ("jax", "warp", "jax/1")):
                print(f"{run.name:<26} {name:<5} {r['lin_vel_rmse']:9.4f} {r['yaw_rate_rmse']:9.4f} "
                      f"{r['fell']:6.3f} {r['return']:8.3f} {r['wall_s']:7.1f}", flush=True)
            diff = {k: rows[1][k] - rows[0][k] for k in FIGURES}
            scatter = {k: rows[2][k] - rows[0][k] for k in FIGURES}
            for name, dd in (("warp-jax", diff), ("seed1-0", scatter)):
                print(f"{'':<18} {name:>13} {dd['lin_vel_rmse']:+9.4f} {dd['yaw_rate_rmse']:+9.4f} "
                      f"{dd['fell']:+6.3f} {dd['return']:+8.3f}")
            out["runs"].append({"run": str(run), "jax": rows[0], "warp": rows[1], "jax_seed1": rows[2],
                                "warp_minus_jax": diff, "seed1_minus_seed0": scatter})
        print(f"\n{'run':<26} {'impl':<5} {'batch':>6} {'env steps/s':>12} {'ratio':>6} {'first s':>8}")
        for run, batch in [(r, b) for r in a.runs for b in a.batches if a.speed_steps > 0]:
            rows = [_speed(run, impl, batch, a.speed_steps, a.repeats) for impl in ("jax", "warp")]
            for r in rows:
                ratio = r["env_steps_per_s"] / rows[0]["env_steps_per_s"]
                print(f"{r['run']:<26} {r['impl']:<5} {batch:6d} {r['env_steps_per_s']:12,.0f} {ratio:6.2f} "
                      f"{r['first_s']:8.1f}", flush=True)
            out["speed"].extend(rows)
    out.update(steps=a.steps, date=dt.date.today().isoformat(),
               machine=f"{platform.machine()}, {os.cpu_count()} cores", device=jax.default_backend())
    emit(out, a.out)
    return out


if __name__ == "__main__":
    main()

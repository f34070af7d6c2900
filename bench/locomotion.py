"""ANYmal C trot policy env (actuatorlab.envs.locomotion): env steps/s and compile time, and the
bias of the homotopy's derived constants.

One command (from the repo root)::

    python bench/locomotion.py                        # table, then one JSON line
    python bench/locomotion.py --batches 1 64 256 --actuators nominal sea builtin --physics-dt 0.002 0.004
    python bench/locomotion.py --only bias            # the derived-constant bias table alone
    python bench/locomotion.py --only stand           # what alpha does to standing and swinging legs

Throughput rows: actuator (``nominal``: the config's rigid m1 ANYdrive; ``sea``: the series-elastic
m1+compliance option; ``builtin``: MuJoCo's position servos) x physics step (0.002 s: the robot
config, 10 physics steps per 20 ms policy step; 0.004 s: the reduced setting, 5) x batch. The env
is float32 (x64 off, as a training program runs it); ``jit(vmap(step))`` is scanned over
``--steps`` policy steps in one call (``--loop python``: one jitted call per step), with alpha a
traced argument (0.5). ``compile_s`` is the first call (lowering + XLA compile; from the persistent
cache when ``JAX_COMPILATION_CACHE_DIR`` holds it). Best of ``--repeats`` timed runs. The machine
load before and after is part of the result. Each row runs in a subprocess with a time limit
(``--row-timeout``): XLA's CPU runtime intermittently hangs on the first execution of a large
batch here (docs/locomotion.md, "Cost"); such a row is reported as ``hung`` instead of stalling
the benchmark.

Bias rows (``--only bias`` or by default after the throughput): per alpha, (a) native MuJoCo with
the homotopy's fields and the MJX path's constants (invweights recomputed, the rest stale) vs the
same after ``mj_setConst``; (b) the same with every constant stale (why the invweights are
recomputed); (c) the MJX rollout at alpha vs native MuJoCo after ``mj_setConst`` (float32 vs
float64, 0.2 s). All from the standing pose under the MJCF's servos with a 0.5 m/s push.

Stand rows (``--only stand`` or by default at the end): per alpha, the trot env itself
(``--stand-actuator``, default ``sea``, ``--stand-physics-dt`` 4 ms, the homotopy floor
``--stand-eps`` / ``--stand-floor``) driven open-loop for 3 s from its reset (seed 0, command 0.5 m/s
forward): (a) zero action, i.e. the drives hold the standing posture: lowest trunk height, the
step it falls (termination; -1 = stands), the largest abduction (HAA) and knee (KFE) deviation
from the posture at the end; (b) a trot-like pattern (HFE 0.25 sin(2 pi 2 t + phi), KFE 0.35
max(0, sin(...)), diagonal pairs in phase): the fall step and the joint-velocity jitter (RMS of
dq minus its 3-sample moving mean [rad/s]), which shows an unresolved fast leg mode.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit  # noqa: E402


def _throughput(actuator: str, physics_dt: float, batch: int, steps: int, repeats: int, loop: str) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np

    from actuatorlab.envs import make_policy_env

    t_build = time.perf_counter()
    env = make_policy_env("anymal_c", "trot", actuator=actuator, physics_dt=physics_dt)
    build_s = time.perf_counter() - t_build
    p = {"alpha": jnp.float32(0.5)}
    vstep = jax.vmap(env.step, in_axes=(0, 0, None))
    if loop == "scan":
        @jax.jit
        def run(state, actions, params):
            return jax.lax.scan(lambda s, a: (vstep(s, a, params), s.reward), state, actions)
    else:
        jstep = jax.jit(vstep)

        def run(state, actions, params):
            for a in actions:
                state = jstep(state, a, params)
            return state, None

    s = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(jax.random.split(jax.random.PRNGKey(0), batch), p)
    acts = jnp.asarray(np.random.default_rng(0).uniform(-0.3, 0.3, (steps, batch, env.action_size)), jnp.float32)
    t0 = time.perf_counter()
    out, _ = run(s, acts, p)
    jax.block_until_ready(out)
    compile_s = time.perf_counter() - t0
    best = float("inf")
    for i in range(repeats):
        t0 = time.perf_counter()
        out, _ = run(s, acts, {"alpha": jnp.float32(0.25 * i)})  # alpha changes: no recompilation
        jax.block_until_ready(out)
        best = min(best, time.perf_counter() - t0)
    substeps = int(round(env.dt / physics_dt))
    recompiled = loop == "scan" and run._cache_size() != 1
    return {"actuator": actuator, "physics_dt": physics_dt, "batch": batch, "steps": steps,
            "env_steps_per_s": steps * batch / best, "physics_steps_per_s": steps * batch * substeps / best,
            "compile_s": round(compile_s, 2), "build_s": round(build_s, 2), "wall_s": best,
            "finite": bool(np.isfinite(np.asarray(out.obs)).all()), "recompiled": recompiled}


def _row_subprocess(actuator: str, physics_dt: float, batch: int, steps: int, repeats: int, loop: str,
                    timeout: float) -> dict:
    import subprocess

    cmd = [sys.executable, __file__, "--_row", actuator, str(physics_dt), str(batch), "--steps", str(steps),
           "--repeats", str(repeats), "--loop", loop]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"actuator": actuator, "physics_dt": physics_dt, "batch": batch, "steps": steps, "hung": True,
                "timeout_s": timeout}
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"row {actuator} {physics_dt} {batch} failed: {out.stderr[-2000:]}")
    return json.loads(lines[-1])


def _bias(alphas) -> list[dict]:
    import jax
    import jax.numpy as jnp
    import mujoco
    import numpy as np
    from mujoco import mjx

    from actuatorlab.envs.actuators import builtin_model
    from actuatorlab.robots import load_robot
    from actuatorlab.sim.homotopy import constant_bias, make_homotopy

    bm = builtin_model(load_robot("anymal_c"), for_mjx=True)
    h = make_homotopy(bm)
    mx = mjx.put_model(bm)
    d0 = mjx.make_data(mx).replace(qpos=jnp.asarray(h.nominal_qpos, jnp.float32),
                                   ctrl=jnp.asarray(bm.key_ctrl[0], jnp.float32))
    d0 = d0.replace(qvel=d0.qvel.at[0].set(0.5))
    T = 100

    @jax.jit
    def roll(upd):
        def body(d, _):
            d = mjx.step(mx.replace(**upd), d)
            return d, d.qpos
        return jax.lax.scan(body, d0, None, length=T)[1]

    updates = jax.jit(lambda a: h.model_updates(a, mx.dof_armature, mx))
    rows = []
    for a in alphas:
        b = constant_bias(bm, h, a, seconds=1.0)
        st = constant_bias(bm, h, a, seconds=1.0, constants="stale")
        q = np.asarray(roll(updates(jnp.float32(a))))
        mm = h.native_model(bm, a, constants="fresh")
        d = mujoco.MjData(mm)
        d.qpos[:], d.ctrl[:], d.qvel[0] = h.nominal_qpos, bm.key_ctrl[0], 0.5
        qs = []
        for _ in range(T):
            mujoco.mj_step(mm, d)
            qs.append(d.qpos.copy())
        qs = np.array(qs)
        rows.append({"alpha": a, "mjx_constants_trunk_m": b["trunk_pos_m"], "mjx_constants_joint_rad": b["joint_rad"],
                     "stale_constants_trunk_m": st["trunk_pos_m"], "stale_constants_joint_rad": st["joint_rad"],
                     "travel_m": b["trunk_travel_m"],
                     "mjx_vs_native_trunk_m": float(np.abs(q[:, :3] - qs[:, :3]).max()),
                     "mjx_vs_native_joint_rad": float(np.abs(q[:, 7:] - qs[:, 7:]).max())})
    return rows


def _stand(alphas, actuator: str, physics_dt: float, eps: float, floor: float, keep: dict | None = None,
           seconds: float = 3.0) -> list[dict]:
    import jax
    import jax.numpy as jnp
    import mujoco
    import numpy as np

    from actuatorlab.envs.locomotion import LocomotionEnv
    from homotopy_recipes import with_homotopy

    env = with_homotopy(LocomotionEnv("anymal_c", actuator, physics_dt=physics_dt, episode_length=500),
                        eps=eps, a_floor=floor, keep=keep)
    m = env.core.mj_model
    names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, int(m.dof_jntid[a])) or "" for a in env.core.dadr]
    T = int(round(seconds / env.dt))
    t = np.arange(T) * env.dt
    phase = {"LF": 0.0, "RH": 0.0, "RF": np.pi, "LH": np.pi}
    trot = np.zeros((T, env.n), np.float32)
    for j, n in enumerate(names):
        if n.endswith("HFE"):
            trot[:, j] = 0.25 * np.sin(2 * np.pi * 2.0 * t + phase[n[:2]])
        elif n.endswith("KFE"):
            trot[:, j] = 0.35 * np.maximum(0.0, np.sin(2 * np.pi * 2.0 * t + phase[n[:2]]))
    haa = np.array([n.endswith("HAA") for n in names])
    kfe = np.array([n.endswith("KFE") for n in names])
    qa, da, home = np.asarray(env.core.qadr), np.asarray(env.core.dadr), np.asarray(env.home_q)

    @jax.jit
    def run(alpha, actions):
        ep = {"alpha": alpha}
        s0 = env.reset(jax.random.PRNGKey(0), ep, command=jnp.array([0.5, 0.0, 0.0], jnp.float32))

        def body(s, a):
            s = env.step(s, a, ep)
            return s, (s.core.arm.qpos, s.core.arm.qvel, s.done)
        return jax.lax.scan(body, s0, actions)[1]

    def first(done):
        return int(np.argmax(done > 0)) if np.any(done > 0) else -1

    rows = []
    for al in alphas:
        qpos, _, done = jax.device_get(run(jnp.float32(al), jnp.zeros((T, env.n), jnp.float32)))
        dev = qpos[-1, qa] - home
        _, qvel, done_t = jax.device_get(run(jnp.float32(al), jnp.asarray(trot)))
        dq = qvel[:, da]
        jitter = float(np.sqrt(np.mean((dq[1:-1] - (dq[:-2] + dq[1:-1] + dq[2:]) / 3.0) ** 2)))
        rows.append({"alpha": float(al), "actuator": actuator, "physics_dt": physics_dt, "eps": eps, "floor": floor,
                     "keep": keep, "stand_min_height_m": float(qpos[:, 2].min()), "stand_fall_step": first(done),
                     "stand_haa_dev_rad": float(np.abs(dev[haa]).max()), "stand_kfe_dev_rad": float(np.abs(dev[kfe]).max()),
                     "trot_fall_step": first(done_t), "trot_dq_jitter": jitter, "policy_dt": env.dt, "steps": T})
    return rows


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 64, 256])
    ap.add_argument("--actuators", nargs="+", default=["nominal", "sea", "builtin"])
    ap.add_argument("--physics-dt", type=float, nargs="+", default=[0.002, 0.004])
    ap.add_argument("--steps", type=int, default=20, help="policy steps per timed run")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--loop", choices=["scan", "python"], default="scan")
    ap.add_argument("--alphas", type=float, nargs="+", default=[0.0, 0.25, 0.5, 0.75, 1.0])
    ap.add_argument("--only", choices=["throughput", "bias", "stand"], default=None)
    ap.add_argument("--stand-actuator", default="sea")
    ap.add_argument("--stand-physics-dt", type=float, default=0.004)
    ap.add_argument("--stand-eps", type=float, default=0.01, help="homotopy leg mass floor share")
    ap.add_argument("--stand-floor", type=float, default=0.01, help="homotopy leg armature floor [kg.m^2]")
    ap.add_argument("--stand-keep", type=json.loads, default=None,
                    help='homotopy: leg body -> own floor share, JSON, e.g. \'{"LF_SHANK": 1}\'')
    ap.add_argument("--row-timeout", type=float, default=300.0, help="seconds per throughput row (subprocess)")
    ap.add_argument("--_row", nargs=3, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    import jax

    jax.config.update("jax_enable_x64", False)  # a float32 training program (this script's own process)
    if a._row:
        r = _throughput(a._row[0], float(a._row[1]), int(a._row[2]), a.steps, a.repeats, a.loop)
        print(json.dumps(r, default=float), flush=True)
        return r
    load0 = os.getloadavg()
    rows, bias = [], []
    if a.only in (None, "throughput"):
        for act in a.actuators:
            for pdt in a.physics_dt:
                for b in a.batches:
                    r = _row_subprocess(act, pdt, b, a.steps, a.repeats, a.loop, a.row_timeout)
                    rows.append(r)
                    if not a.json:
                        print(f"  {act:8s} dt {pdt * 1e3:.0f} ms batch {b:4d}: " + (
                            "hung (killed)" if r.get("hung") else
                            f"{r['env_steps_per_s']:10,.0f} env steps/s (compile {r['compile_s']:.1f} s)"), flush=True)
    if a.only in (None, "bias"):
        bias = _bias(a.alphas)
    stand = []
    if a.only in (None, "stand"):
        stand = _stand(a.alphas, a.stand_actuator, a.stand_physics_dt, a.stand_eps, a.stand_floor, a.stand_keep)
    load1 = os.getloadavg()
    summary = {"bench": "locomotion", "robot": "anymal_c", "task": "trot", "rows": rows, "bias": bias, "stand": stand,
               "loop": a.loop, "device": jax.devices()[0].platform, "precision": "float32",
               "cpu_count": os.cpu_count(), "machine": platform.processor() or platform.machine(),
               "load_before": load0, "load_after": load1, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    if not a.json:
        from rich.console import Console
        from rich.table import Table

        if rows:
            t = Table(title=f"anymal_c trot env steps/s ({summary['device']}, float32, {a.loop}; "
                            f"load {load0[0]:.1f} -> {load1[0]:.1f})")
            for c in ("actuator", "physics dt", "batch", "env steps/s", "physics steps/s", "compile s"):
                t.add_column(c, justify="right")
            for r in rows:
                if r.get("hung"):
                    t.add_row(r["actuator"], f"{r['physics_dt'] * 1e3:.0f} ms", str(r["batch"]), "hung", "", "")
                    continue
                t.add_row(r["actuator"], f"{r['physics_dt'] * 1e3:.0f} ms", str(r["batch"]),
                          f"{r['env_steps_per_s']:,.0f}", f"{r['physics_steps_per_s']:,.0f}", f"{r['compile_s']:.1f}")
            Console().print(t)
        if bias:
            t = Table(title="derived-constant bias (max over the rollout)")
            for c in ("alpha", "MJX constants: trunk m / joint rad", "all stale: trunk m / joint rad",
                      "MJX f32 vs native setConst (0.2 s): trunk m / joint rad"):
                t.add_column(c, justify="right")
            for r in bias:
                t.add_row(f"{r['alpha']:.2f}", f"{r['mjx_constants_trunk_m']:.1e} / {r['mjx_constants_joint_rad']:.1e}",
                          f"{r['stale_constants_trunk_m']:.3f} / {r['stale_constants_joint_rad']:.3f}",
                          f"{r['mjx_vs_native_trunk_m']:.1e} / {r['mjx_vs_native_joint_rad']:.1e}")
            Console().print(t)
        if stand:
            r0 = stand[0]
            t = Table(title=f"open-loop 3 s from reset ({r0['actuator']}, {r0['physics_dt'] * 1e3:.0f} ms, "
                            f"eps {r0['eps']}, floor {r0['floor']} kg.m^2{', keep ' + str(r0['keep']) if r0['keep'] else ''}; fall step -1 = none)")
            for c in ("alpha", "zero action: lowest trunk m", "falls at step", "HAA / KFE deviation rad",
                      "trot pattern: falls at step", "dq jitter rad/s"):
                t.add_column(c, justify="right")
            for r in stand:
                t.add_row(f"{r['alpha']:.2f}", f"{r['stand_min_height_m']:.3f}", str(r["stand_fall_step"]),
                          f"{r['stand_haa_dev_rad']:.2f} / {r['stand_kfe_dev_rad']:.2f}", str(r["trot_fall_step"]),
                          f"{r['trot_dq_jitter']:.3f}")
            Console().print(t)
    emit(summary, a.out)
    return summary


if __name__ == "__main__":
    main()

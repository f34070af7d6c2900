"""Where the time of a whole-robot learned training step goes (MJX gradient through the rollout).

    python bench/learned_speed.py --data DIR [--variants f64_L320 f32_L320 ...] [--steps 3]
    python bench/learned_speed.py --data DIR --train 4 [--warm] [--budget '{"eval_every": 100}']

DIR: ``actuatorlab synth --robot open_manipulator_x --suite neural_actuator --seed 0 --scale 0.1``.
For each variant, in this one process: the training step of :func:`actuatorlab.learned.arm_train.train_arm`
(AdamW on the network's leaves, loss :func:`~actuatorlab.learned.arm.arm_loss`) is traced, lowered
and compiled through JAX's ahead-of-time API, then run ``--steps`` times; the JSON line per variant
holds trace_s, lower_s, compile_s (XLA), first_step_s and step_s (median of the later steps) and
the number of backend compilations (``jax.monitoring``). A variant name is
``{f64|f32}_L{window}[_B{batch}][_O0][_noexp]``: physics precision, window length in control steps
(the default budget pads every stage to 320), batch (default 2), XLA CPU options
``xla_backend_optimization_level=0`` (``_O0``) and ``xla_llvm_disable_expensive_passes`` (``_noexp``),
JAX's ``jax_exec_time_optimization_effort = -1`` during the compilation (``_E1``).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import equinox as eqx
import jax
import numpy as np
import optax

ROBOT = "open_manipulator_x"


def _events():
    ev: list[tuple[str, float]] = []
    jax.monitoring.register_event_duration_secs_listener(lambda name, s, **kw: ev.append((name, s)))
    return ev


def variant(name: str, data: Path, n_steps: int, ev) -> dict:
    from actuatorlab.learned.arm import (ArmLog, arm_log, arm_loss, learned_windows, make_learned_arm, _units,
                                         DEFAULT_FEATURES)
    from actuatorlab.logs import load_logs
    from actuatorlab.models.features import fit_normalizer
    from actuatorlab.robots.loader import load_robot
    from actuatorlab.sim.arm import ArmConfig, make_mjx_rollout
    from actuatorlab.sim.arm_learned import TELEMETRY, frames_of_log, trainable

    m = re.fullmatch(r"(f64|f32)_L(\d+)(?:_B(\d+))?(_O0)?(_noexp)?(_E1)?", name)
    if m is None:
        raise SystemExit(f"bad variant {name!r}")
    prec, L, B = m.group(1), int(m.group(2)), int(m.group(3) or 2)
    opts = {}
    if m.group(4):
        opts["xla_backend_optimization_level"] = 0
    if m.group(5):
        opts["xla_llvm_disable_expensive_passes"] = True
    x64 = prec == "f64"
    with jax.enable_x64(x64):
        robot = load_robot(ROBOT)
        trajs = load_logs([data / "train"])  # every log: enough windows for a batch of 32 at L = 320
        channels = tuple(j for j in robot.joint_names if trajs[0].has(f"position/{j}"))
        feats = tuple(f for f in DEFAULT_FEATURES if f not in TELEMETRY
                      or all(trajs[0].has(f"{TELEMETRY[f]}/{j}") for j in channels))
        logs: list[ArmLog] = [arm_log(robot, t, channels, feats) for t in trajs]
        tmp = make_learned_arm.__wrapped__(robot, "mlp", channels=channels, per_channel=feats,
                                           normalizer=None, effort_scale=1.0, width=4, depth=1, d=4, head_width=4)
        frames = np.concatenate([frames_of_log(tmp, lg.base.inputs.q_target, lg.base.q_meas, lg.base.dq_meas,
                                               lg.base.inputs.v_supply, lg.base.inputs.enable, lg.telemetry)
                                 for lg in logs])
        model = make_learned_arm.__wrapped__(robot, "transformer", channels=channels, per_channel=feats,
                                             normalizer=fit_normalizer(frames), effort_scale=1.0)
        cfg = ArmConfig.from_robot(robot)
        w = learned_windows(robot, logs, L, model, cfg)
        dt = np.float64 if x64 else np.float32
        w = jax.tree.map(lambda a: np.asarray(a, dt) if np.asarray(a).dtype.kind == "f" else np.asarray(a), w)
        batch = w.take(np.arange(B))
        units = _units(robot)
        roll = jax.vmap(make_mjx_rollout.__wrapped__(robot, cfg).with_heads, in_axes=(None, 0, 0, None))
        diff, static = eqx.partition(model, trainable(model))
        opt = optax.adamw(3e-4)
        ost = opt.init(diff)

        def step(diff, ost, batch):
            def f(d):
                return arm_loss(eqx.combine(d, static), batch, roll, units)[0]
            loss, g = jax.value_and_grad(f)(diff)
            up, ost = opt.update(g, ost, diff)
            return optax.apply_updates(diff, up), ost, loss

        jf = jax.jit(step)
        ev.clear()
        t0 = time.perf_counter()
        tr = jf.trace(diff, ost, batch)
        t1 = time.perf_counter()
        lo = tr.lower()
        t2 = time.perf_counter()
        old = jax.config.jax_exec_time_optimization_effort
        if m.group(6):
            jax.config.update("jax_exec_time_optimization_effort", -1.0)
        try:
            co = lo.compile(compiler_options=opts or None)
        finally:
            jax.config.update("jax_exec_time_optimization_effort", old)
        t3 = time.perf_counter()
        times = []
        for _ in range(n_steps):
            ts = time.perf_counter()
            diff, ost, loss = co(diff, ost, batch)
            jax.block_until_ready(loss)
            times.append(time.perf_counter() - ts)
        n_backend = sum(1 for k, _ in ev if k.endswith("backend_compile_duration"))
    return {"variant": name, "L": L, "B": B, "x64": x64, "compiler_options": opts, "trace_s": t1 - t0,
            "lower_s": t2 - t1, "compile_s": t3 - t2, "first_step_s": times[0],
            "step_s": float(np.median(times[1:])) if len(times) > 1 else times[0], "loss": float(loss),
            "backend_compilations_in_step": n_backend, "hlo_chars": len(lo.as_text())}


def train_run(data: Path, steps: int, ev, warm: bool, budget: dict) -> dict:
    """The real :func:`~actuatorlab.learned.arm_train.train_arm` (default budget, ``steps`` steps):
    its compile_s and s_per_1k_steps and every backend compilation over 1 s."""
    import tempfile

    from actuatorlab.learned.arm_train import ArmTrainConfig, train_arm
    from actuatorlab.learned.distill import DistillConfig
    from actuatorlab.logs import load_logs
    from actuatorlab.precision import physics_precision

    tr, va = load_logs([data / "train"]), load_logs([data / "val"])
    ev.clear()
    t0 = time.perf_counter()
    with physics_precision(), tempfile.TemporaryDirectory() as d:
        r = train_arm(ROBOT, tr, va, ArmTrainConfig(steps=steps, budget=budget,
                                                   distill=DistillConfig() if warm else None),
                      out=Path(d) / "run", progress=False)
    comp = [round(s, 1) for k, s in ev if k.endswith("backend_compile_duration") and s > 1.0]
    return {"mode": "train_arm", "warm": warm, "steps": steps, "budget": budget, "wall_s": time.perf_counter() - t0,
            "training": r["training"], "backend_compiles_over_1s": comp}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--variants", nargs="+", default=[])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--train", type=int, default=0, help="also run train_arm for this many steps (0: no)")
    ap.add_argument("--warm", action="store_true", help="with --train: the warm start (teacher fitted first)")
    ap.add_argument("--budget", default="{}", help="with --train: DEFAULT_BUDGET keys as JSON")
    a = ap.parse_args(argv)
    ev = _events()
    if a.train:
        print(json.dumps(train_run(a.data, a.train, ev, a.warm, json.loads(a.budget)), default=float), flush=True)
    for v in a.variants:
        r = variant(v, a.data, a.steps, ev)
        print(json.dumps(r), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

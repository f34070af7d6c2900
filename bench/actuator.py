"""Inference speed of the learned actuators on this machine: latency at batch 1, throughput at 32 and 1024.

One table, then one JSON line (``actuatorlab bench actuator [--json]``). Keys of the headline
(the default Transformer on its fastest engine here): ``params``, ``b1_mean_ms``, ``b1_p95_ms``,
``b32_samples_per_s``, ``b1024_samples_per_s``, plus ``engine``, the int8 error, the per-engine
and per-architecture rows and the machine check.

Engines: ``jax-f32`` (``jax.jit`` of the equinox network; batch 1 without vmap, batches with
``jax.vmap``) -- the **baseline** every ratio refers to, measured in the same run; ``ort-f32`` (the
exact ONNX export run by onnxruntime) and ``ort-int8`` (its dynamic int8 quantization, VNNI), when
the optional ``onnx`` / ``onnxruntime`` packages are installed (``pip install actuatorlab[onnx]``);
otherwise only the JAX rows are measured. The MLP / GRU / LSTM ablations run on ``jax-f32``.

Method: inputs are normalized float32 windows (history 8 + current frame) of the reference layout
(5 channels x 9 features + gripper = 46 features) or of ``--model FILE.eqx``. Batch 1: ``--calls``
single calls, each timed alone (including the Python dispatch a caller pays), mean and 95th
percentile; batches 32 / 1024: samples per second over a timed loop. Each measurement is repeated
``--repeats`` times and the **median** over repeats is reported (the cores are shared with other
jobs: the load average at start and end is in the JSON). The machine check is a float32
1024x1024 matmul through XLA [GFLOP/s]. The int8 error is measured against the float32 network on
4096 windows: max |difference| and RMS difference relative to each head's RMS; a trained model's
effect on the rollout MAE must be measured with that model (not done here).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REF = dict(n_features=46, n_channels=5, history=8)
TARGETS = {"b1_mean_ms": 0.25, "b32_samples_per_s": 11000.0}


def _load():
    return float(os.getloadavg()[0]) if hasattr(os, "getloadavg") else float("nan")


def matmul_gflops(repeats: int) -> float:
    import jax
    import jax.numpy as jnp

    a = jnp.ones((1024, 1024), jnp.float32)
    f = jax.jit(lambda a: a @ a)
    jax.block_until_ready(f(a))
    best = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(10):
            jax.block_until_ready(f(a))
        best.append(10 * 2 * 1024**3 / (time.perf_counter() - t) / 1e9)
    return statistics.median(best)


def measure(call_b1, call_batch, x1, x32, x1024, calls: int, repeats: int) -> dict:
    """Median over repeats of b1 mean / p95 [ms] and b32 / b1024 throughput [samples/s]."""
    for _ in range(20):
        call_b1(x1)
    call_batch(x32)
    call_batch(x1024)
    means, p95s, t32, t1024 = [], [], [], []
    n32 = max(10, calls // 4)
    n1024 = max(2, calls // 100)
    for _ in range(repeats):
        lat = np.empty(calls)
        for i in range(calls):
            t = time.perf_counter()
            call_b1(x1)
            lat[i] = time.perf_counter() - t
        means.append(1e3 * lat.mean())
        p95s.append(1e3 * float(np.percentile(lat, 95)))
        t = time.perf_counter()
        for _ in range(n32):
            call_batch(x32)
        t32.append(32 * n32 / (time.perf_counter() - t))
        t = time.perf_counter()
        for _ in range(n1024):
            call_batch(x1024)
        t1024.append(1024 * n1024 / (time.perf_counter() - t))
    med = statistics.median
    return {"b1_mean_ms": med(means), "b1_p95_ms": med(p95s), "b32_samples_per_s": med(t32),
            "b1024_samples_per_s": med(t1024), "b1_mean_ms_all": means, "b32_samples_per_s_all": t32}


def jax_engine(net):
    import equinox as eqx
    import jax

    one = eqx.filter_jit(net)
    many = eqx.filter_jit(jax.vmap(net))
    # filter_jit re-flattens the module on every call; closing over it once keeps only the array
    one_c = jax.jit(lambda x: one(x))
    many_c = jax.jit(lambda x: many(x))
    return (lambda x: jax.block_until_ready(one_c(x))), (lambda x: jax.block_until_ready(many_c(x)))


def run(args) -> dict:
    import jax
    import jax.numpy as jnp

    from actuatorlab.learned import ARCHS, load_learned, make_net, param_count
    from actuatorlab.learned.onnx_export import OnnxActuator, export_onnx, onnx_available, quantize_int8

    load0 = _load()
    if args.model:
        m = load_learned(args.model)
        nets = {m.arch: m.net}
        shape = dict(n_features=m.layout.n_features, n_channels=m.layout.n_channels, history=m.layout.history)
    else:
        shape = REF
        archs = ["transformer"] + ([] if args.transformer_only else [a for a in ARCHS if a != "transformer"])
        nets = {a: make_net(a, key=jax.random.PRNGKey(args.seed), **shape) for a in archs}
    T, F = shape["history"] + 1, shape["n_features"]
    rng = np.random.default_rng(args.seed)
    xs = {n: rng.normal(size=(n, T, F)).astype(np.float32) for n in (1, 32, 1024, 4096)}
    gflops = matmul_gflops(args.repeats)

    rows = []
    for arch, net in nets.items():
        b1, bb = jax_engine(net)
        r = measure(b1, bb, jnp.asarray(xs[1][0]), jnp.asarray(xs[32]), jnp.asarray(xs[1024]), args.calls, args.repeats)
        rows.append({"arch": arch, "engine": "jax-f32", "params": param_count(net), **r})

    errors = {}
    if "transformer" in nets and onnx_available() and not args.no_onnx:
        net = nets["transformer"]
        ref = jax.vmap(net)(jnp.asarray(xs[4096]))
        with tempfile.TemporaryDirectory() as tmp:
            f32 = export_onnx(net, Path(tmp) / "t.onnx")
            i8 = quantize_int8(f32, Path(tmp) / "t_int8.onnx")
            for engine, path in (("ort-f32", f32), ("ort-int8", i8)):
                s1 = OnnxActuator(path, threads=1)
                sN = OnnxActuator(path, threads=os.cpu_count() or 1)
                r = measure(s1, sN, xs[1], xs[32], xs[1024], args.calls, args.repeats)
                rows.append({"arch": "transformer", "engine": engine, "params": param_count(net), **r})
                out = sN(xs[4096])
                errors[engine] = {h: {"max_abs": float(np.max(np.abs(np.asarray(o) - np.asarray(rf)))),
                                      "rel_rms": float(np.sqrt(np.mean((np.asarray(o) - np.asarray(rf)) ** 2))
                                                       / max(np.sqrt(np.mean(np.asarray(rf) ** 2)), 1e-12))}
                                  for h, o, rf in zip(ref._fields, out, ref)}

    base = next(r for r in rows if r["engine"] == "jax-f32" and r["arch"] == next(iter(nets)))
    for r in rows:
        r["b1_speedup"] = base["b1_mean_ms"] / r["b1_mean_ms"]
        r["b32_ratio"] = r["b32_samples_per_s"] / base["b32_samples_per_s"]
        r["b1024_ratio"] = r["b1024_samples_per_s"] / base["b1024_samples_per_s"]
    main_arch = next(iter(nets))
    cands = [r for r in rows if r["arch"] == main_arch]
    # headline engine: the fastest at batch 32 among those measured (int8 only with its error reported)
    head = max(cands, key=lambda r: r["b32_samples_per_s"])
    b1_best = min(cands, key=lambda r: r["b1_mean_ms"])
    res = {"bench": "actuator", "arch": main_arch, "engine": head["engine"], "params": head["params"],
           "b1_mean_ms": head["b1_mean_ms"], "b1_p95_ms": head["b1_p95_ms"],
           "b32_samples_per_s": head["b32_samples_per_s"], "b1024_samples_per_s": head["b1024_samples_per_s"],
           "b1_best_engine": b1_best["engine"], "b1_best_mean_ms": b1_best["b1_mean_ms"],
           "baseline": {k: base[k] for k in ("engine", "b1_mean_ms", "b1_p95_ms", "b32_samples_per_s",
                                             "b1024_samples_per_s")},
           "targets": TARGETS, "meets": {"b1_mean_ms": head["b1_mean_ms"] <= TARGETS["b1_mean_ms"],
                                         "b32_samples_per_s": head["b32_samples_per_s"] >= TARGETS["b32_samples_per_s"]},
           "int8_error": errors.get("ort-int8"), "onnx_f32_error": errors.get("ort-f32"),
           "onnx": onnx_available() and not args.no_onnx,
           "rows": [{k: v for k, v in r.items() if not k.endswith("_all")} for r in rows],
           "raw": [{k: r[k] for k in ("arch", "engine", "b1_mean_ms_all", "b32_samples_per_s_all")} for r in rows],
           "machine": {"cores": os.cpu_count(), "jax": jax.__version__, "backend": jax.default_backend(),
                       "matmul_f32_gflops": gflops, "load_avg_start": load0, "load_avg_end": _load()},
           "method": {"repeats": args.repeats, "calls": args.calls, "statistic": "median over repeats",
                      "layout": shape, "model": str(args.model) if args.model else "random init, seed "
                      f"{args.seed}"}}
    return res


def _table(res: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"learned actuator inference ({res['machine']['cores']} cores, median of "
                    f"{res['method']['repeats']} repeats; load {res['machine']['load_avg_start']:.1f} -> "
                    f"{res['machine']['load_avg_end']:.1f}; matmul {res['machine']['matmul_f32_gflops']:.0f} GFLOP/s)")
    for c in ("arch", "engine", "params", "b1 mean ms", "b1 p95 ms", "b32 /s", "b1024 /s", "b1 x", "b32 x", "b1024 x"):
        t.add_column(c, justify="left" if c in ("arch", "engine") else "right")
    for r in res["rows"]:
        t.add_row(r["arch"], r["engine"], f"{r['params'] / 1e6:.2f} M", f"{r['b1_mean_ms']:.3f}",
                  f"{r['b1_p95_ms']:.3f}", f"{r['b32_samples_per_s']:,.0f}", f"{r['b1024_samples_per_s']:,.0f}",
                  f"{r['b1_speedup']:.2f}", f"{r['b32_ratio']:.2f}", f"{r['b1024_ratio']:.2f}")
    Console(width=150).print(t)
    print(f"ratios (x) vs the baseline {res['baseline']['engine']} {res['arch']} of this run (higher is better); "
          f"targets: b1 mean <= {TARGETS['b1_mean_ms']} ms, b32 >= {TARGETS['b32_samples_per_s']:,.0f}/s")
    if res["int8_error"]:
        e = res["int8_error"]
        print("int8 vs float32 network (4096 windows): " + ", ".join(
            f"{h} rel RMS {v['rel_rms']:.3%} (max {v['max_abs']:.2g})" for h, v in e.items()))
    elif not res["onnx"]:
        print("onnx / onnxruntime not installed: JAX rows only (pip install 'actuatorlab[onnx]')")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print only the final JSON line")
    ap.add_argument("--model", type=Path, help="a learned-model file (.eqx) instead of the random default Transformer")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--calls", type=int, default=400, help="batch-1 calls per repeat")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--transformer-only", action="store_true", help="skip the MLP / GRU / LSTM rows")
    ap.add_argument("--no-onnx", action="store_true", help="JAX rows only even when onnxruntime is installed")
    ap.add_argument("--out", type=Path, help="also write the JSON line to this file")
    args = ap.parse_args(argv)
    res = run(args)
    if not args.json:
        _table(res)
    line = json.dumps(res, default=float)
    print(line)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

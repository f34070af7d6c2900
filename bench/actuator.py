"""Inference speed of the learned actuators on this machine: latency at batch 1, throughput at 32 and 1024.

One table, then one JSON line (``python bench/actuator.py [--json]``). Keys of the headline
(the default Transformer on its fastest engine here): ``params``, ``b1_mean_ms``, ``b1_p95_ms``,
``b32_samples_per_s``, ``b1024_samples_per_s``, plus ``engine``, the int8 error, the per-engine
and per-architecture rows and the machine check.

Engines: ``jax-f32`` (``jax.jit`` of the equinox network; batch 1 without vmap, batches with
``jax.vmap``) -- the **baseline** every ratio refers to, measured in the same run; with the
optional ``onnx`` / ``onnxruntime`` packages (``pip install actuatorlab[onnx]``) the Transformer
also runs on onnxruntime: ``ort-f32`` (the exact float32 export with onnxruntime's fused
operators, ``export_onnx(fused=True)``), ``ort-int8`` (its dynamic int8 quantization, VNNI, with the input
projection and the heads kept float32: ``quantize_int8``'s default), ``ort-int8-all`` (every
weight product int8, ``float_ends=False``) and ``ort-int8-std`` (all-int8 of the elementary
opset-20 graph that ``actuatorlab export --onnx`` writes: the previous engine); otherwise only
the JAX rows are measured. The MLP / GRU / LSTM ablations run on ``jax-f32``.

Method: inputs are normalized float32 windows (history 8 + current frame) of the reference layout
(5 channels x 9 features + gripper = 46 features) or of ``--model FILE.eqx``. Batch 1: ``--calls``
single calls, each timed alone (including the Python dispatch a caller pays), mean and 95th
percentile; batches 32 / 1024: samples per second over a timed loop. Each measurement is repeated
``--repeats`` times and the **median** over repeats is reported (the cores are shared with other
jobs: the load average at start and end is in the JSON). Next to wall time, the process's CPU time
is reported (``b1_cpu_ms``, ``b32_samples_per_cpu_s``): it counts only this process's cycles, so it
moves less when other jobs compete for the cores. The machine check is a float32
1024x1024 matmul through XLA [GFLOP/s]; the CPU model and its int8 / bf16 extensions are in
``machine`` (figures from different hosts differ by up to 2x). The int8 error is measured against the float32 network on
4096 random windows, or on the logs' windows with ``--model M --data DIR`` (then also what the
heads decide: force MAE, contact and condition accuracy, and how many decisions int8 changes):
max |difference| and RMS difference relative to each head's RMS. The effect on a rollout MAE is
not measured here (onnxruntime does not run inside the simulator's rollout).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit  # noqa: E402

import numpy as np

REF = dict(n_features=46, n_channels=5, history=8)
TARGETS = {"b1_mean_ms": 0.25, "b32_samples_per_s": 11000.0}


def _load():
    return float(os.getloadavg()[0]) if hasattr(os, "getloadavg") else float("nan")


def cpu_info() -> dict:
    """CPU model and the instruction-set extensions that decide int8 / bf16 speed (Linux), so runs
    on different hosts are not compared as if they were one machine."""
    try:
        txt = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {"cpu": None, "cpu_isa": []}
    info = dict(line.split(":", 1) for line in txt.splitlines() if ":" in line)
    info = {k.strip(): v.strip() for k, v in info.items()}
    flags = set(info.get("flags", "").split())
    isa = [f for f in ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_int8", "amx_bf16")
           if f in flags]
    model = info.get("model name", "?")
    fam = info.get("cpu family")
    return {"cpu": f"{model} (family {fam}, model {info.get('model', '?')})" if fam else model, "cpu_isa": isa}


def _ort_version():
    try:
        import onnxruntime
    except ImportError:
        return None
    return onnxruntime.__version__


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


def measure_b1(call, x1, calls: int, repeats: int) -> dict:
    """Batch-1 latency: mean and 95th percentile [ms] of single timed calls, CPU ms per call;
    medians over repeats."""
    for _ in range(20):
        call(x1)
    means, p95s, cpu1 = [], [], []
    clock, cpu = time.perf_counter, time.process_time
    for _ in range(repeats):
        lat = np.empty(calls)
        c0 = cpu()
        for i in range(calls):
            t = clock()
            call(x1)
            lat[i] = clock() - t
        cpu1.append(1e3 * (cpu() - c0) / calls)
        means.append(1e3 * lat.mean())
        p95s.append(1e3 * float(np.percentile(lat, 95)))
    med = statistics.median
    return {"b1_mean_ms": med(means), "b1_p95_ms": med(p95s), "b1_cpu_ms": med(cpu1), "b1_mean_ms_all": means}


def measure_batch(call, x32, x1024, calls: int, repeats: int) -> dict:
    """Throughput [samples/s] at batch 32 and 1024 (timed loops), samples per CPU second at 32;
    medians over repeats."""
    call(x32)
    call(x1024)
    t32, t1024, cpu32 = [], [], []
    n32, n1024 = max(10, calls // 4), max(2, calls // 100)
    clock, cpu = time.perf_counter, time.process_time
    for _ in range(repeats):
        t, c0 = clock(), cpu()
        for _ in range(n32):
            call(x32)
        t32.append(32 * n32 / (clock() - t))
        cpu32.append(32 * n32 / (cpu() - c0))
        t = clock()
        for _ in range(n1024):
            call(x1024)
        t1024.append(1024 * n1024 / (clock() - t))
    med = statistics.median
    return {"b32_samples_per_s": med(t32), "b1024_samples_per_s": med(t1024),
            "b32_samples_per_cpu_s": med(cpu32), "b32_samples_per_s_all": t32}


def log_windows(model_path: Path, data: Path):
    """Normalized float32 windows (N, T, F) of every log under ``data`` for the whole-robot learned
    model ``model_path`` (its layout and normalizer), and their labels: measured force (N, 3) [N],
    force known (N,), contact (N,), condition label (N, C)."""
    from actuatorlab.learned.arm import load_arm_model
    from actuatorlab.learned.head_data import head_data
    from actuatorlab.logs import load_logs
    from actuatorlab.precision import physics_precision

    with physics_precision():
        robot, model, _ = load_arm_model(model_path.with_suffix(".json"))  # the arm_model.json next to the weights
        d = head_data(robot, model, load_logs([data]))
        x = np.asarray(model.normalizer.apply(d.x), np.float32)
    return x, {k: np.asarray(getattr(d, k)) for k in ("force", "force_w", "contact", "condition")}


def task_metrics(out, labels: dict, ref=None) -> dict:
    """What the heads are used for, on labelled windows: force MAE [N] (sigmoid(gate) x raw force
    vs measured, labelled samples, mean over axes), contact accuracy (gate > 0.5), condition
    accuracy (sigmoid(logit) > 0.5 vs the label); with ``ref`` (the float32 outputs) also the
    share of contact / condition decisions that differ from it."""
    torque, f_raw, gate, cond = (np.asarray(o, np.float64) for o in out)
    sig = lambda z: 1.0 / (1.0 + np.exp(-z))  # noqa: E731
    f_hat = sig(gate)[:, None] * f_raw
    w = labels["force_w"] > 0
    r = {"force_mae_n": float(np.mean(np.abs(f_hat - labels["force"])[w])) if w.any() else None,
         "contact_accuracy": float(np.mean((gate > 0) == (labels["contact"] > 0.5))),
         "condition_accuracy": float(np.mean((cond > 0) == (labels["condition"] > 0.5)))}
    if ref is not None:
        r["contact_decisions_changed"] = float(np.mean((gate > 0) != (np.asarray(ref[2]) > 0)))
        r["condition_decisions_changed"] = float(np.mean((cond > 0) != (np.asarray(ref[3]) > 0)))
        r["force_mean_abs_change_n"] = float(np.mean(np.abs(f_hat - sig(np.asarray(ref[2], np.float64))[:, None]
                                                            * np.asarray(ref[1], np.float64))))
    return r


def jax_engine(net):
    """(batch-1 call, batched call) of ``net`` under ``jax.jit``; the weights are closed over (frozen
    constants of the compiled function, as in deployment), so a call dispatches only the input."""
    import jax

    one = jax.jit(lambda x: net(x))
    many = jax.jit(lambda x: jax.vmap(net)(x))
    return (lambda x: jax.block_until_ready(one(x))), (lambda x: jax.block_until_ready(many(x)))


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
        # the window architectures (actuator_net / actuator_lstm take one joint's (err, dq) only)
        archs = ["transformer"] + ([] if args.transformer_only else [a for a in ("mlp", "gru", "lstm") if a in ARCHS])
        nets = {a: make_net(a, key=jax.random.PRNGKey(args.seed), **shape) for a in archs}
    T, F = shape["history"] + 1, shape["n_features"]
    rng = np.random.default_rng(args.seed)
    xs = {n: rng.normal(size=(n, T, F)).astype(np.float32) for n in (1, 32, 1024, 4096)}
    labels = None
    if args.data:  # the error windows: the logs' normalized windows instead of random ones
        xs[4096], labels = log_windows(args.model, args.data)
    gflops = matmul_gflops(args.repeats)

    rows = []
    for arch, net in nets.items():
        b1, bb = jax_engine(net)
        r = {**measure_b1(b1, jnp.asarray(xs[1][0]), args.calls, args.repeats),
             **measure_batch(bb, jnp.asarray(xs[32]), jnp.asarray(xs[1024]), args.calls, args.repeats)}
        rows.append({"arch": arch, "engine": "jax-f32", "params": param_count(net), "threads": "xla", **r})

    errors, tasks = {}, {}
    if "transformer" in nets and onnx_available() and not args.no_onnx:
        net = nets["transformer"]
        ref = jax.vmap(net)(jnp.asarray(xs[4096]))
        with tempfile.TemporaryDirectory() as tmp:
            std = export_onnx(net, Path(tmp) / "std.onnx")
            f32 = export_onnx(net, Path(tmp) / "t.onnx", fused=True)
            engines = {"ort-f32": f32, "ort-int8": quantize_int8(f32, Path(tmp) / "t_int8.onnx"),
                       "ort-int8-all": quantize_int8(f32, Path(tmp) / "t_int8a.onnx", float_ends=False),
                       "ort-int8-std": quantize_int8(std, Path(tmp) / "std_int8.onnx", float_ends=False)}
            for engine, path in engines.items():
                # batch 1 on one intra-op thread (a real-time loop); batches on 1 and on all cores
                s1 = OnnxActuator(path, threads=1)
                sN = OnnxActuator(path, threads=os.cpu_count() or 1)
                r1 = measure_b1(s1, xs[1], args.calls, args.repeats)
                for th, sess in ((1, s1), (os.cpu_count() or 1, sN)):
                    rb = measure_batch(sess, xs[32], xs[1024], args.calls, args.repeats)
                    rows.append({"arch": "transformer", "engine": engine, "params": param_count(net),
                                 "threads": f"1 / {th}", **r1, **rb})
                out = sN(xs[4096])
                errors[engine] = {h: {"max_abs": float(np.max(np.abs(np.asarray(o) - np.asarray(rf)))),
                                      "rel_rms": float(np.sqrt(np.mean((np.asarray(o) - np.asarray(rf)) ** 2))
                                                       / max(np.sqrt(np.mean(np.asarray(rf) ** 2)), 1e-12))}
                                  for h, o, rf in zip(ref._fields, out, ref)}
                if labels is not None:
                    tasks.setdefault("jax-f32", task_metrics(ref, labels))
                    tasks[engine] = task_metrics(out, labels, ref)

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
           "threads": head["threads"], "b1_cpu_ms": head["b1_cpu_ms"],
           "b32_samples_per_cpu_s": head["b32_samples_per_cpu_s"],
           "b1_best_engine": b1_best["engine"], "b1_best_mean_ms": b1_best["b1_mean_ms"],
           "baseline": {k: base[k] for k in ("engine", "b1_mean_ms", "b1_p95_ms", "b32_samples_per_s",
                                             "b1024_samples_per_s")},
           "targets": TARGETS, "meets": {"b1_mean_ms": bool(head["b1_mean_ms"] <= TARGETS["b1_mean_ms"]),
                                         "b32_samples_per_s": bool(head["b32_samples_per_s"] >= TARGETS["b32_samples_per_s"])},
           "int8_error": errors.get("ort-int8"), "onnx_f32_error": errors.get("ort-f32"),
           "int8_all_error": errors.get("ort-int8-all"), "int8_std_error": errors.get("ort-int8-std"),
           "onnx": onnx_available() and not args.no_onnx,
           "error_windows": (f"{len(xs[4096])} normalized windows of the logs in {args.data}" if args.data
                             else f"{len(xs[4096])} random normalized windows"),
           "task_metrics": tasks or None,
           "rows": [{k: v for k, v in r.items() if not k.endswith("_all")} for r in rows],
           "raw": [{k: r[k] for k in ("arch", "engine", "threads", "b1_mean_ms_all", "b32_samples_per_s_all")}
                   for r in rows],
           "machine": {"cores": os.cpu_count(), **cpu_info(), "jax": jax.__version__, "backend": jax.default_backend(),
                       "onnxruntime": _ort_version(),
                       "matmul_f32_gflops": gflops, "load_avg_start": load0, "load_avg_end": _load()},
           "method": {"repeats": args.repeats, "calls": args.calls, "statistic": "median over repeats",
                      "layout": shape, "model": str(args.model) if args.model else "random init, seed "
                      f"{args.seed}"}}
    return res


def _table(res: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    print(f"CPU: {res['machine']['cpu']}, {' '.join(res['machine']['cpu_isa'])}")
    t = Table(title=f"learned actuator inference ({res['machine']['cores']} cores, median of "
                    f"{res['method']['repeats']} repeats; load {res['machine']['load_avg_start']:.1f} -> "
                    f"{res['machine']['load_avg_end']:.1f}; matmul {res['machine']['matmul_f32_gflops']:.0f} GFLOP/s)")
    for c in ("arch", "engine", "threads b1 / batch", "params", "b1 mean ms", "b1 p95 ms", "b32 /s", "b1024 /s", "b1 x", "b32 x", "b1024 x",
              "b1 CPU ms", "b32 /CPU s"):
        t.add_column(c, justify="left" if c in ("arch", "engine") else "right")
    for r in res["rows"]:
        t.add_row(r["arch"], r["engine"], str(r["threads"]), f"{r['params'] / 1e6:.2f} M", f"{r['b1_mean_ms']:.3f}",
                  f"{r['b1_p95_ms']:.3f}", f"{r['b32_samples_per_s']:,.0f}", f"{r['b1024_samples_per_s']:,.0f}",
                  f"{r['b1_speedup']:.2f}", f"{r['b32_ratio']:.2f}", f"{r['b1024_ratio']:.2f}",
                  f"{r['b1_cpu_ms']:.3f}", f"{r['b32_samples_per_cpu_s']:,.0f}")
    Console(width=150).print(t)
    print("CPU columns: this process's CPU time (all its threads) per batch-1 call / samples per CPU second at "
          "batch 32 -- less sensitive to other jobs than wall time, not a substitute for it")
    print(f"ratios (x) vs the baseline {res['baseline']['engine']} {res['arch']} of this run (higher is better); "
          f"targets: b1 mean <= {TARGETS['b1_mean_ms']} ms, b32 >= {TARGETS['b32_samples_per_s']:,.0f}/s")
    for key, name in (("int8_error", "ort-int8"), ("int8_all_error", "ort-int8-all"),
                      ("int8_std_error", "ort-int8-std")):
        if res.get(key):
            print(f"{name} vs the float32 network ({res['error_windows']}): " + ", ".join(
                f"{h} rel RMS {v['rel_rms']:.3%} (max {v['max_abs']:.2g})" for h, v in res[key].items()))
    for engine, t in (res.get("task_metrics") or {}).items():
        print(f"{engine} on {res['error_windows']}: " + ", ".join(
            f"{k} {v:.4g}" for k, v in t.items() if v is not None))
    if not res["onnx"]:
        print("onnx / onnxruntime not installed: JAX rows only (pip install 'actuatorlab[onnx]')")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print only the final JSON line")
    ap.add_argument("--model", type=Path, help="a learned-model file (.eqx) instead of the random default Transformer")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--calls", type=int, default=400, help="batch-1 calls per repeat")
    ap.add_argument("--data", type=Path, help="with --model (a whole-robot arm_model.eqx, its .json next to "
                    "it): measure the int8 error on the normalized windows of the logs in this folder (e.g. "
                    "D/test) and report what the heads decide (force MAE, contact and condition accuracy) per engine")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--transformer-only", action="store_true", help="skip the MLP / GRU / LSTM rows")
    ap.add_argument("--no-onnx", action="store_true", help="JAX rows only even when onnxruntime is installed")
    ap.add_argument("--out", type=Path, help="also write the JSON line to this file")
    args = ap.parse_args(argv)
    if args.data and not args.model:
        ap.error("--data needs --model (the arm_model.eqx whose layout and normalizer build the windows)")
    res = run(args)
    if not args.json:
        _table(res)
    emit(res, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

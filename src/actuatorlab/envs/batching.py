"""Batched environment steps in chunks: ``vmap`` over at most ``chunk`` environments at a time.

Why (measured, docs/envs.md "Thousands of environments on a CPU"): on a 2-core CPU, jaxlib's
batched LAPACK Cholesky (``lapack_spotrf_ffi``, which every MJX step with a dense mass matrix calls:
``factor_m``, the Newton solver's Hessian, Euler's implicit damping) splits a large batch into
slices on XLA's intra-op thread pool and waits for them from inside that pool. With two workers
both waiting, nothing runs the slices: ``jit(vmap(env.step))`` of the OpenManipulator-X hangs at
4,096 environments (with MuJoCo's built-in actuators on every host tried, with an actuatorlab model
on some) and runs at 1,024. :func:`vmap_chunked` keeps every Cholesky batch at ``chunk`` by running
``vmap(fn)`` over consecutive chunks inside one ``lax.map`` (one compiled loop). The result is that
of ``vmap(fn)``: bit for bit on element-wise functions, to float rounding where XLA orders a
reduction differently for the smaller batch shape (an MJX step: within 1e-6, tested).

``jax.lax.map(..., batch_size=)`` does the same in principle, but (JAX 0.10) it fails on pytrees
with zero-size leaves, which MJX states have (e.g. an empty ``act`` array).
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp

#: environments per chunk: the largest batch measured to run on 2 cores (docs/envs.md)
DEFAULT_CHUNK = 1024


def vmap_chunked(fn: Callable[..., Any], chunk: int = DEFAULT_CHUNK) -> Callable[..., Any]:
    """``vmap(fn)`` over the leading axis of every argument, run ``chunk`` rows at a time.

    Every leaf of every argument must have the same leading (batch) size B. B <= chunk is plain
    ``vmap(fn)``. Otherwise the batch is padded to a multiple of ``chunk`` by repeating its last
    row (the padding rows are computed and dropped), reshaped to (B / chunk, chunk, ...), mapped
    with ``lax.map`` and reshaped back. Use it where you would write ``jax.vmap(env.step)``::

        step = jax.jit(vmap_chunked(env.step, 1024))
        state = step(state, actions)        # 4,096 environments, four chunks of 1,024
    """
    if int(chunk) < 1:
        raise ValueError(f"chunk must be at least 1, got {chunk}")
    chunk = int(chunk)
    vfn = jax.vmap(fn)

    def run(*args):
        sizes = {x.shape[0] for x in jax.tree.leaves(args) if hasattr(x, "shape") and x.ndim}
        if len(sizes) != 1:
            raise ValueError(f"vmap_chunked: every argument leaf needs the same leading batch size, got {sorted(sizes)}")
        B = sizes.pop()
        if B <= chunk:
            return vfn(*args)
        n = -(-B // chunk)
        pad = n * chunk - B

        def split(x):
            if pad:
                x = jnp.concatenate([x, jnp.repeat(x[-1:], pad, axis=0)], axis=0)
            return x.reshape((n, chunk) + x.shape[1:])

        out = jax.lax.map(lambda a: vfn(*a), jax.tree.map(split, args))
        return jax.tree.map(lambda y: y.reshape((n * chunk,) + y.shape[2:])[:B], out)

    return run

"""Precision is an explicit choice: the library's physics entry points compute in float64 even
when the process default is float32, and they do not switch mode inside someone else's trace."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from actuatorlab.identify.fit import ParamSpace, make_loss
from actuatorlab.models.params import neutral_params
from actuatorlab.models.registry import get_model
from actuatorlab.precision import BLAS_THREADS, fixed_blas_threads, physics, physics_precision, x64_enabled
from actuatorlab.sim.rollout import make_batches, rollout_batch

from synthetic import DT, TRUTH_M1, synthetic_log


@pytest.fixture(scope="module")
def log():
    return synthetic_log("chirp", TRUTH_M1, duration=0.5)


def test_physics_entry_points_are_float64_when_the_default_is_float32(log):
    spec = get_model("m1")
    with jax.enable_x64(False):
        assert not x64_enabled() and jnp.zeros(1).dtype == jnp.float32
        (b,) = make_batches([log], DT)
        p = {k: np.float64(v) for k, v in {**neutral_params(), **TRUTH_M1}.items()}
        out = rollout_batch(b.step_config(), p, b.arrays())
        assert out.q.dtype == jnp.float64
        space = ParamSpace.build(spec, [b], "servo")
        loss = make_loss(spec, space, [b])               # a maker: the returned loss is float64 too
        theta = space.to_theta(np.full(space.n, 0.5))
        assert np.asarray(loss(theta)).dtype == np.float64
        assert not x64_enabled()                          # the caller's mode is restored
    # same numbers as under the session's x64 mode
    out64 = rollout_batch(b.step_config(), p, b.arrays())
    np.testing.assert_array_equal(np.asarray(out.q), np.asarray(out64.q))


def test_wrapped_functions_do_not_switch_mode_inside_a_trace():
    @physics
    def f(x):
        return x + jnp.zeros((), float)  # float: JAX's default float dtype in the current mode

    with jax.enable_x64(False):
        assert f(np.float32(1.0)).dtype == jnp.float64     # direct call: physics precision
        assert jax.jit(f)(np.float32(1.0)).dtype == jnp.float32  # traced: the caller's precision
        with physics_precision():
            assert x64_enabled()
        assert not x64_enabled()



def test_work_handed_to_a_thread_runs_in_the_callers_precision():
    """A worker thread starts in the process default (x64 on in this test session, conftest);
    in_this_precision carries the precision of the thread that wrapped the function (float32
    here) into the thread that runs it."""
    from concurrent.futures import ThreadPoolExecutor

    import jax.numpy as jnp

    from actuatorlab.precision import in_this_precision, x64_enabled

    def dtype_there():
        return x64_enabled(), jnp.asarray(1.0).dtype

    with jax.enable_x64(False), ThreadPoolExecutor(1) as pool:
        plain = pool.submit(dtype_there).result()
        carried = pool.submit(in_this_precision(dtype_there)).result()
    assert plain == (True, jnp.float64)  # the worker's own default
    assert carried == (False, jnp.float32)


def _blas_threads() -> set[int]:
    return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}


def test_a_fit_runs_blas_on_its_fixed_thread_count_and_gives_the_setting_back(log, monkeypatch):
    """A threaded BLAS shares X^T W X among its threads, so its last bits depend on the thread count,
    which OpenBLAS takes from the machine's cores; a fit runs BLAS on BLAS_THREADS threads whatever
    the caller (here: one thread, as on a 1-core machine) had, and the caller's setting comes back."""
    import actuatorlab.identify.fit as F

    seen: list[set[int]] = []
    real = F.run_cma

    def spy(*args, **kwargs):
        seen.append(_blas_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(F, "run_cma", spy)
    outer = 1 if BLAS_THREADS > 1 else 2
    with threadpool_limits(limits=outer, user_api="blas"):
        F.fit_model([log], "m1", max_evals=64, n_starts=1, grad_steps=0)
        assert _blas_threads() == {outer}                 # restored on exit
    assert seen and all(s == {BLAS_THREADS} for s in seen)
    with fixed_blas_threads(3):
        assert _blas_threads() == {3}

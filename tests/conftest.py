"""Shared fixtures: the shared data folder (skip cleanly when absent) and small synthetic logs.

Precision: ``import actuatorlab`` leaves JAX's x64 mode alone (see :mod:`actuatorlab.precision`).
The physics tests build float64 arrays and call building blocks (steps, rollouts, constants)
directly, below the library's float64 entry points, so the session fixture :func:`physics_x64`
turns x64 on for the whole test session, explicitly and once (restored at the end). The
learned-model tests assert that networks stay float32 under it, and check the float32 / x64-off
paths themselves (``jax.enable_x64(False)``, a subprocess for the import check).

Compile time: most of the suite's wall time is XLA compiling MJX forward and backward passes on a
CPU, each run for a second or less. The suite therefore asks XLA for less optimization (backend
optimization level 1 and ``jax_exec_time_optimization_effort=-1``): measured on the OM-X MJX
value_and_grad of test_arm_sim.py, compile 87 s -> 60 s with the same results and no slower run.
Set here for the test processes only (``XLA_FLAGS`` is read when JAX creates its CPU client, after
this file is imported); library code never sets either.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

_TEST_XLA_FLAG = "--xla_backend_optimization_level=1"
if _TEST_XLA_FLAG.split("=")[0] not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_TEST_XLA_FLAG}".strip()

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"


@pytest.fixture(scope="session", autouse=True)
def physics_x64():
    """JAX in 64-bit for the session (the physics precision of actuatorlab), previous mode restored."""
    import jax

    old = bool(jax.config.jax_enable_x64)
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", old)


@pytest.fixture(scope="session", autouse=True)
def fast_compiles():
    """Less XLA optimization effort for the session (see the module docstring), restored at the end."""
    import jax

    old = jax.config.jax_exec_time_optimization_effort
    jax.config.update("jax_exec_time_optimization_effort", -1.0)
    yield
    jax.config.update("jax_exec_time_optimization_effort", old)


@pytest.fixture(scope="module", autouse=True)
def release_compiled_functions():
    """Drop JAX's compiled executables after each test module: kept for the whole session they
    grew the test process to about 14.6 GB (MJX rollouts and gradients of many robots and shapes)."""
    yield
    import gc

    import jax

    jax.clear_caches()
    gc.collect()


@pytest.fixture(scope="session")
def shared() -> Path:
    if not (SHARED / "data").is_dir():
        pytest.skip("../shared is not present")
    return SHARED


@pytest.fixture(scope="session")
def example_dir() -> Path:
    return ROOT / "src" / "actuatorlab" / "examples" / "bam_xl330"


@pytest.fixture(scope="session", autouse=True)
def jax_compile_cache():
    """JAX's persistent compilation cache for the whole test session, in the temporary folder
    (``actuatorlab-jax-cache/<xdist worker>``), the previous settings restored at the end. MJX
    rollouts take 20-70 s to compile on a CPU; :func:`release_compiled_functions` drops the
    in-memory executables after each module, so without it every module that runs the same
    robot compiles it again. One folder per xdist worker: JAX writes cache entries without a
    lock unless eviction is on, and a worker must never read another's half-written file.
    Library code never sets this."""
    import os
    import tempfile

    import jax
    from jax.experimental.compilation_cache import compilation_cache as cc

    folder = Path(tempfile.gettempdir()) / "actuatorlab-jax-cache" / os.environ.get("PYTEST_XDIST_WORKER", "main")
    old = (jax.config.jax_compilation_cache_dir, jax.config.jax_persistent_cache_min_compile_time_secs)
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
    cc.reset_cache()
    yield
    jax.config.update("jax_compilation_cache_dir", old[0])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", old[1])
    cc.reset_cache()

"""Numerical precision, chosen explicitly per computation (never by importing actuatorlab).

Two regimes live side by side:

* **physics** (float64): closed-loop rollouts integrate positions over tens of thousands of steps
  and fits compare them at the 1e-5 relative level (EMPS), where float32 rounding shows. Every
  public physics entry point of the library (``pipeline.run_*``, ``fit_model``, ``fit_family``,
  ``fit_arm``, ``fit_arm_grad``, ``select_arm``, ``evaluate_arm``, the replay functions, the
  one-joint and whole-robot rollout makers and the functions they return) runs under
  :func:`physics_precision`, i.e. ``jax.enable_x64(True)``; the CLI enters it once in ``main``.
* **learned networks** (float32): :mod:`actuatorlab.learned` creates every parameter as float32
  and casts its inputs to float32, so a forward pass is float32 whether or not x64 is on; a
  learned effort that drives a float64 rollout is cast at that boundary.

``import actuatorlab`` leaves ``jax.config.jax_enable_x64`` untouched.

Rules of use:

* ``jax.enable_x64`` is a thread-local context: a worker thread starts in the process default
  (``jax_enable_x64``, False unless the application sets it). Enter :func:`physics_precision`
  in the thread that runs the computation.
* JAX keys its jit caches on the x64 flag: the same jitted function called inside and outside
  the context compiles twice, once per precision.
* Choose the precision at the outermost, non-traced call. A wrapped function called with tracers
  (inside someone else's ``jit`` / ``grad`` / ``vmap``) does not switch mode mid-trace: the
  caller's precision applies. To trace physics in float64, enter :func:`physics_precision`
  around the outer ``jit`` call (and around building the jitted function's inputs).
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator, TypeVar, cast

import jax
from threadpoolctl import threadpool_limits

__all__ = ["physics_precision", "physics", "physics_fn", "x64_enabled", "in_this_precision", "BLAS_THREADS",
           "fixed_blas_threads", "on_fixed_blas_threads"]

F = TypeVar("F", bound=Callable[..., Any])


def x64_enabled() -> bool:
    """Whether JAX's 64-bit mode is on in this thread now."""
    # jax registers its flags as Config properties at run time; its Config class does not declare them
    return bool(jax.config.jax_enable_x64)  # type: ignore[attr-defined]


def in_this_precision(fn: F) -> F:
    """``fn`` that runs in the precision of the thread calling ``in_this_precision`` now, whichever
    thread later calls it: for work handed to a worker thread (JAX's x64 mode is per thread)."""
    x64 = x64_enabled()

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with jax.enable_x64(x64):
            return fn(*args, **kwargs)

    return cast(F, wrapped)


@contextlib.contextmanager
def physics_precision() -> Iterator[None]:
    """Context in which JAX computes in float64 (``jax.enable_x64(True)``); restores the previous
    mode on exit. Nesting is free."""
    if x64_enabled():
        yield
        return
    with jax.enable_x64(True):
        yield


def _traced(args, kwargs) -> bool:
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves((args, kwargs)))


class _Physics:
    """A callable that runs ``fn`` under :func:`physics_precision` unless x64 is already on or it
    is called with tracers. Other attributes are forwarded to ``fn`` (so a ``jax.jit`` function
    keeps ``.lower`` etc.); forwarded methods run under the same rule."""

    def __init__(self, fn: Callable):
        functools.update_wrapper(self, fn)
        self.__wrapped__ = fn

    def __call__(self, *args, **kwargs):
        if x64_enabled() or _traced(args, kwargs):
            return self.__wrapped__(*args, **kwargs)
        with jax.enable_x64(True):
            return self.__wrapped__(*args, **kwargs)

    def __getattr__(self, name: str):
        attr = getattr(self.__dict__.get("__wrapped__"), name)
        return _Physics(attr) if callable(attr) and not isinstance(attr, type) else attr

    def __repr__(self) -> str:
        return f"physics({self.__wrapped__!r})"


def physics(fn: F) -> F:
    """Decorator (module-level functions): run ``fn`` under :func:`physics_precision` (a no-op when
    x64 is already on or when called with tracers, see the module docstring)."""
    return cast(F, _Physics(fn))  # a callable with fn's signature and attributes


def physics_fn(fn: F) -> F:
    """Decorator for makers: run the maker under :func:`physics_precision` and wrap the callable it
    returns (or the callables of the tuple it returns) with :func:`physics` too, so a later direct
    call is float64 as well."""

    @functools.wraps(fn)
    def maker(*args, **kwargs):
        with physics_precision():
            out = fn(*args, **kwargs)
        if type(out) is tuple:
            return tuple(physics(o) if callable(o) else o for o in out)
        return physics(out) if callable(out) else out

    return cast(F, maker)  # same signature as fn; the callables it returns are wrapped


#: threads of the BLAS / LAPACK libraries inside a fit (:func:`fixed_blas_threads`)
BLAS_THREADS = 2


@contextlib.contextmanager
def fixed_blas_threads(threads: int | None = None) -> Iterator[None]:
    """Context in which the BLAS / LAPACK libraries loaded in the process (NumPy's, SciPy's) run on
    exactly ``threads`` threads (default :data:`BLAS_THREADS`) whatever the machine's cores
    (``threadpoolctl.threadpool_limits``; OpenBLAS grows its pool past the cores it started with);
    the previous setting comes back on exit. Process-wide while active (a BLAS library has one
    thread setting).

    Why the fits use it: a threaded BLAS shares a product's sums among its threads, so X^T W X and
    ``eigh`` differ in the last bits with the number of threads, which OpenBLAS sets from the cores
    the process may use. A fit's Levenberg-Marquardt steps (``J^T W J``) and CMA-ES updates carry
    those bits into its path, and through the selection's close calls into the selected model: the
    11 shared XL330 logs gave another selection table with one BLAS thread than with two (22 models
    instead of 28, 9 of the shared ones scored differently; docs/models.md, "The same numbers on any
    machine"). With the count fixed, a fit's numbers do not depend on the cores the process may use
    (measured: a 1-core container gives the 2-core table and parameters); a CPU for which OpenBLAS
    picks other kernels can still differ in the last bits.
    Two is the count every recorded figure was measured with (2-core machines), so none moves; one
    thread is 7-13 % less CPU on 2 cores (OpenBLAS's idle threads spin after each call) but is
    another set of last bits (the same journal entry: what that does to the benches' figures).
    """
    with threadpool_limits(limits=BLAS_THREADS if threads is None else int(threads), user_api="blas"):
        yield


def on_fixed_blas_threads(fn: F) -> F:
    """Decorator: run ``fn`` inside :func:`fixed_blas_threads` (the fits' entry points)."""

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with fixed_blas_threads():
            return fn(*args, **kwargs)

    return cast(F, wrapped)

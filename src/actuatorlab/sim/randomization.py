"""Randomization with meaning: a validated spec whose every entry says which uncertainty it models.

A spec (JSON, format ``"actuatorlab-randomization"`` version ``"1"``, docs/randomization.md) is a
list of entries, each of one *kind*:

=====================  ==========================  ==============================================
kind                   drawn                       applied
=====================  ==========================  ==============================================
``identified``         once per episode (shared    the fit's own uncertainty: ``z ~ N(0, Sigma)``
                       by every actuator unless    in the parameters' natural space (log for
                       ``per_actuator``)           positive parameters); ``p <- p exp(z)`` (log) or
                                                   ``p <- p + z`` (linear). Sigma keeps the fit's
                                                   correlations.
``unit``               per actuator, per episode   unit-to-unit variation of one parameter:
                                                   ``lognormal`` ``p exp(std N)``, ``add_normal``
                                                   ``p + std N``, ``add_uniform`` ``p + U(-w, w)``
                                                   (the notions of the virtual hardware,
                                                   :data:`actuatorlab.synth.truth.VARIATION`)
``calibration_offset`` per actuator, per episode   additive zero offset of a parameter (default
                                                   ``q_offset``, the encoder zero): ``add_normal``
                                                   or ``add_uniform``
``drift``              coefficient c per actuator  slow change within an episode, e.g. winding
                       per episode ~ N(mean, std)  resistance as the motor heats:
                                                   ``first_order``: ``g(t) = c (1 - exp(-t/tau))``,
                                                   ``linear``: ``g(t) = c t``; ``relative``:
                                                   ``p(t) = p (1 + g(t))``, ``absolute``:
                                                   ``p(t) = p + g(t)``
``noise``              per step                    on an observed signal: ``x + std N``, then
                                                   rounded to ``quantization`` (an encoder step)
=====================  ==========================  ==============================================

Per-episode entries are applied in the order identified -> unit -> calibration_offset, so that unit
variation scatters actuators around a type whose parameters are themselves uncertain.

Pure functions, jit- and vmap-able (the spec is a static, hashable value):
:func:`sample_episode` ``(spec, key, params) -> params``; :func:`sample_drift` and :func:`drifted`
``(spec, coefficients, params, t) -> params``; :func:`step_noise` ``(spec, key, obs) -> obs``.
NumPy twins (:func:`sample_episode_np`, :func:`step_noise_np`, ...) serve the native MuJoCo path.
``params`` is a dict ``{name: array}``; a leaf of shape ``(n_actuators,)`` gets one draw per
actuator, a scalar one draw. :class:`Randomizer` is the object the environments take
(``randomization=``). :func:`propose_spec` writes a spec from fitted model files
(``actuatorlab randomize``, :mod:`actuatorlab.sim.randomization_proposal`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from ..errors import ActuatorlabError
from ..models.params import PARAMS
from ..files import atomic_write, read_json

__all__ = ["SPEC_FORMAT", "SPEC_VERSION", "KINDS", "RandomizationError", "Entry", "RandomizationSpec",
           "load_spec", "parse_spec", "save_spec", "sample_episode", "sample_drift", "drifted", "step_noise",
           "sample_episode_np", "sample_drift_np", "drifted_np", "step_noise_np", "Randomizer", "posture_layout"]

SPEC_FORMAT = "actuatorlab-randomization"
SPEC_VERSION = "1"
KINDS = ("identified", "unit", "calibration_offset", "drift", "noise")
UNIT_DISTRIBUTIONS = ("lognormal", "add_normal", "add_uniform")
OFFSET_DISTRIBUTIONS = ("add_normal", "add_uniform")
DRIFT_SHAPES = ("first_order", "linear")
DRIFT_MODES = ("relative", "absolute")
SPACES = ("log", "linear")


class RandomizationError(ActuatorlabError):
    """A randomization spec is unusable: names the file, the entry and the problem."""


@dataclass(frozen=True)
class Entry:
    """One entry of a spec. Fields used depend on ``kind`` (docs/randomization.md); all numbers are
    in the parameter's unit (``models.params.PARAMS``) unless said otherwise.

    Attributes:
        name: unique label of the entry.
        kind: one of :data:`KINDS`.
        parameter: the parameter it changes (unit, calibration_offset, drift).
        distribution: unit: ``lognormal`` (``std`` in log space, [1]) | ``add_normal`` (``std``) |
            ``add_uniform`` (``half_width``); calibration_offset: ``add_normal`` | ``add_uniform``.
        std: standard deviation (log space [1] for lognormal; parameter unit otherwise; noise: the
            signal's unit; drift: of the coefficient c).
        half_width: [parameter unit] for ``add_uniform``.
        clip: (lower, upper) applied after the draw, or None.
        shape, mode, mean, time_constant: drift: ``first_order`` | ``linear``; ``relative`` |
            ``absolute``; mean of c ([1] relative, parameter unit absolute; per second for
            ``linear``); tau [s] for ``first_order``.
        signal, quantization: noise: observed signal name (e.g. ``position`` [rad]) and rounding
            step in its unit (0 = none).
        parameters, space, chol, bounds, per_actuator: identified: names, ``log`` | ``linear`` per
            name, lower Cholesky factor of Sigma (natural space), optional (lower, upper) per name
            applied after the draw (the fit's search bounds), one draw per actuator or shared.
        note: why the entry exists / where its numbers came from.
    """

    name: str
    kind: str
    parameter: str | None = None
    distribution: str | None = None
    std: float = 0.0
    half_width: float = 0.0
    clip: tuple[float, float] | None = None
    shape: str = "first_order"
    mode: str = "relative"
    mean: float = 0.0
    time_constant: float = 0.0
    signal: str | None = None
    quantization: float = 0.0
    parameters: tuple[str, ...] = ()
    space: tuple[str, ...] = ()
    chol: tuple[tuple[float, ...], ...] = ()
    bounds: tuple[tuple[float, float], ...] = ()
    per_actuator: bool = False
    note: str = ""


@dataclass(frozen=True)
class RandomizationSpec:
    """A validated spec: entries in file order plus the document it came from (``raw``, not hashed)."""

    entries: tuple[Entry, ...]
    source: str = "<spec>"
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def of_kind(self, kind: str) -> tuple[Entry, ...]:
        return tuple(e for e in self.entries if e.kind == kind)

    @property
    def has_drift(self) -> bool:
        return bool(self.of_kind("drift"))

    @property
    def parameters(self) -> set[str]:
        """Every parameter the per-episode and drift entries touch."""
        out = {e.parameter for e in self.entries if e.parameter}
        for e in self.of_kind("identified"):
            out.update(e.parameters)
        return out


# ------------------------------------------------------------------------------------------------
# validation
# ------------------------------------------------------------------------------------------------


def _num(where: str, d: Mapping, key: str, default: float | None = None, *, positive: bool = False,
         nonneg: bool = False) -> float:
    v = d.get(key, default)
    if v is None:
        raise RandomizationError(f"{where}: missing {key!r}")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise RandomizationError(f"{where}: {key!r} must be a finite number, got {v!r}")
    if positive and v <= 0:
        raise RandomizationError(f"{where}: {key!r} must be > 0, got {v!r}")
    if nonneg and v < 0:
        raise RandomizationError(f"{where}: {key!r} must be >= 0, got {v!r}")
    return float(v)


def _choice(where: str, d: Mapping, key: str, options: tuple[str, ...], default: str | None = None) -> str:
    v = d.get(key, default)
    if v not in options:
        raise RandomizationError(f"{where}: {key!r} is {v!r}; available: {', '.join(options)}")
    return v


def _param(where: str, d: Mapping, default: str | None = None) -> str:
    p = d.get("parameter", default)
    if p not in PARAMS:
        raise RandomizationError(f"{where}: unknown parameter {p!r}; available: {', '.join(PARAMS)}")
    return p


def _clip(where: str, d: Mapping) -> tuple[float, float] | None:
    c = d.get("clip")
    if c is None:
        return None
    if (not isinstance(c, (list, tuple)) or len(c) != 2
            or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in c) or not c[0] < c[1]):
        raise RandomizationError(f"{where}: 'clip' must be [lower, upper] with lower < upper, got {c!r}")
    return float(c[0]), float(c[1])


def _matrix(where: str, key: str, m: Any, n: int) -> np.ndarray:
    try:
        a = np.asarray(m, dtype=float)
    except (TypeError, ValueError):
        raise RandomizationError(f"{where}: {key!r} is not a numeric matrix") from None
    if a.shape != (n, n):
        raise RandomizationError(f"{where}: {key!r} must be {n} x {n} (one row per parameter), got shape {a.shape}")
    if not np.isfinite(a).all():
        raise RandomizationError(f"{where}: {key!r} contains NaN or inf")
    if not np.allclose(a, a.T, rtol=1e-8, atol=1e-12 * max(1.0, float(np.abs(a).max()))):
        raise RandomizationError(f"{where}: {key!r} is not symmetric")
    return (a + a.T) / 2


def covariance_cholesky(cov: np.ndarray, where: str = "covariance") -> np.ndarray:
    """Lower factor L with L L^T = cov for a positive semi-definite ``cov`` (a semi-definite matrix,
    e.g. a jackknife covariance from fewer resamples than parameters, is factored through its
    eigen-decomposition; negative eigenvalues beyond rounding are an error)."""
    cov = np.asarray(cov, float)
    if cov.size == 0:
        return cov.reshape(0, 0)
    w, V = np.linalg.eigh(cov)
    if w.min() < -1e-9 * max(1e-300, float(abs(w).max())):
        raise RandomizationError(f"{where}: not positive semi-definite (eigenvalue {w.min():.3g})")
    try:
        return np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:  # semi-definite: any square root works; make it lower triangular
        root = V * np.sqrt(np.clip(w, 0.0, None))  # root root^T = cov
        _, r = np.linalg.qr(root.T)  # root^T = q r -> cov = r^T r
        L = r.T
        return L * np.sign(np.where(np.diag(L) == 0, 1.0, np.diag(L)))


def _entry(i: int, d: Any, source: str) -> Entry:
    if not isinstance(d, Mapping):
        raise RandomizationError(f"{source}: entry {i} is not an object")
    name = d.get("name", f"#{i}")
    where = f"{source}: entry {i} ({name!r})"
    if not isinstance(name, str) or not name:
        raise RandomizationError(f"{source}: entry {i}: 'name' must be a non-empty string")
    kind = d.get("kind")
    if kind not in KINDS:
        raise RandomizationError(f"{where}: 'kind' is {kind!r}; every entry states its kind, one of: "
                                 f"{', '.join(KINDS)}")
    note = str(d.get("note", ""))
    if kind == "unit":
        p = _param(where, d)
        dist = _choice(where, d, "distribution", UNIT_DISTRIBUTIONS)
        if dist == "add_normal" and PARAMS[p].scale == "log" and d.get("clip") is None:
            raise RandomizationError(f"{where}: {p} must stay > 0: use 'lognormal' or give a 'clip'")
        std = _num(where, d, "std", 0.0, nonneg=True) if dist != "add_uniform" else 0.0
        hw = _num(where, d, "half_width", nonneg=True) if dist == "add_uniform" else 0.0
        return Entry(name, kind, parameter=p, distribution=dist, std=std, half_width=hw, clip=_clip(where, d),
                     note=note)
    if kind == "calibration_offset":
        p = _param(where, d, "q_offset")
        dist = _choice(where, d, "distribution", OFFSET_DISTRIBUTIONS, "add_normal")
        std = _num(where, d, "std", nonneg=True) if dist == "add_normal" else 0.0
        hw = _num(where, d, "half_width", nonneg=True) if dist == "add_uniform" else 0.0
        return Entry(name, kind, parameter=p, distribution=dist, std=std, half_width=hw, clip=_clip(where, d),
                     note=note)
    if kind == "drift":
        p = _param(where, d)
        shape = _choice(where, d, "shape", DRIFT_SHAPES, "first_order")
        mode = _choice(where, d, "mode", DRIFT_MODES, "relative")
        tau = _num(where, d, "time_constant", positive=True) if shape == "first_order" else 0.0
        return Entry(name, kind, parameter=p, shape=shape, mode=mode, mean=_num(where, d, "mean", 0.0),
                     std=_num(where, d, "std", 0.0, nonneg=True), time_constant=tau, clip=_clip(where, d),
                     note=note)
    if kind == "noise":
        sig = d.get("signal")
        if not isinstance(sig, str) or not sig:
            raise RandomizationError(f"{where}: noise needs a 'signal' (e.g. 'position')")
        return Entry(name, kind, signal=sig, std=_num(where, d, "std", nonneg=True),
                     quantization=_num(where, d, "quantization", 0.0, nonneg=True), note=note)
    # identified
    names = d.get("parameters")
    if not isinstance(names, (list, tuple)) or not names:
        raise RandomizationError(f"{where}: 'parameters' must be a non-empty list of parameter names")
    for n in names:
        if n not in PARAMS:
            raise RandomizationError(f"{where}: unknown parameter {n!r}; available: {', '.join(PARAMS)}")
    if len(set(names)) != len(names):
        raise RandomizationError(f"{where}: 'parameters' lists a name twice")
    k = len(names)
    space = d.get("space", ["log" if PARAMS[n].scale == "log" else "linear" for n in names])
    if not isinstance(space, (list, tuple)) or len(space) != k or any(s not in SPACES for s in space):
        raise RandomizationError(f"{where}: 'space' must list 'log' or 'linear' for each of the {k} parameters")
    if "covariance" in d:
        cov = _matrix(where, "covariance", d["covariance"], k)
    elif "stderr" in d:  # fallback: marginal standard errors (+ correlation when known)
        se = d["stderr"]
        if not isinstance(se, (list, tuple)) or len(se) != k:
            raise RandomizationError(f"{where}: 'stderr' must have one value per parameter ({k})")
        se = np.array([_num(where, {"stderr": s}, "stderr", nonneg=True) for s in se])
        corr = _matrix(where, "correlation", d["correlation"], k) if d.get("correlation") is not None else np.eye(k)
        if np.any(np.abs(np.diag(corr) - 1) > 1e-6) or np.any(np.abs(corr) > 1 + 1e-9):
            raise RandomizationError(f"{where}: 'correlation' must have a unit diagonal and entries in [-1, 1]")
        cov = corr * np.outer(se, se)
    else:
        raise RandomizationError(f"{where}: identified needs 'covariance' or 'stderr'")
    L = covariance_cholesky(cov, f"{where}: covariance")
    bounds = d.get("bounds")
    if bounds is not None:
        if not isinstance(bounds, (list, tuple)) or len(bounds) != k or any(x is None for x in bounds):
            raise RandomizationError(f"{where}: 'bounds' must have one [lower, upper] per parameter ({k})")
        bounds = tuple(_clip(f"{where}: bounds of {n}", {"clip": b}) for n, b in zip(names, bounds))
    return Entry(name, kind, parameters=tuple(names), space=tuple(space),
                 chol=tuple(tuple(float(x) for x in row) for row in L), bounds=bounds or (),
                 per_actuator=bool(d.get("per_actuator", False)), note=note)


def parse_spec(doc: Any, source: str = "<spec>") -> RandomizationSpec:
    """Validate a spec document (already parsed JSON); errors name ``source`` and the entry."""
    if not isinstance(doc, Mapping) or doc.get("format") != SPEC_FORMAT:
        raise RandomizationError(f"{source}: not a randomization spec (missing format {SPEC_FORMAT!r})")
    if doc.get("format_version") != SPEC_VERSION:
        raise RandomizationError(f"{source}: spec version {doc.get('format_version')!r} is not supported "
                                 f"(this version reads {SPEC_VERSION!r})")
    entries = doc.get("entries")
    if not isinstance(entries, list):
        raise RandomizationError(f"{source}: 'entries' must be a list")
    out = tuple(_entry(i, e, source) for i, e in enumerate(entries))
    seen: set[str] = set()
    for e in out:
        if e.name in seen:
            raise RandomizationError(f"{source}: entry name {e.name!r} is used twice")
        seen.add(e.name)
    return RandomizationSpec(out, source, dict(doc))


def load_spec(path: str | Path) -> RandomizationSpec:
    """Read and validate a spec file."""

    path = Path(path)
    return parse_spec(read_json(path, RandomizationError, "no such randomization spec"), str(path))


def save_spec(doc: Mapping, path: str | Path) -> Path:
    """Validate ``doc`` and write it atomically."""

    parse_spec(doc, str(path))
    return atomic_write(path, json.dumps(doc, indent=2) + "\n")


# ------------------------------------------------------------------------------------------------
# sampling (one implementation; ``xp`` and the draw function choose JAX or NumPy)
# ------------------------------------------------------------------------------------------------

Draw = Callable[[int, str, tuple], Any]  # (stream index, "normal" | "uniform", shape) -> array


def _check_params(spec: RandomizationSpec, params: Mapping) -> None:
    missing = sorted(spec.parameters - set(params))
    if missing:
        raise RandomizationError(f"{spec.source}: the parameters given lack {', '.join(missing)} "
                                 "(randomized by the spec)")


def _episode(spec: RandomizationSpec, params: Mapping, draw: Draw, xp) -> dict:
    _check_params(spec, params)
    p = dict(params)
    order = [e for k in ("identified", "unit", "calibration_offset") for e in spec.of_kind(k)]
    index = {e.name: i for i, e in enumerate(spec.entries)}
    for e in order:
        i = index[e.name]
        if e.kind == "identified":
            shapes = [xp.shape(p[n]) for n in e.parameters]
            full = tuple(np.broadcast_shapes(*shapes)) if e.per_actuator else ()
            eps = draw(i, "normal", full + (len(e.parameters),))
            z = eps @ xp.asarray(e.chol, dtype=eps.dtype).T  # (..., k) ~ N(0, L L^T)
            for j, n in enumerate(e.parameters):
                zj = z[..., j].astype(xp.asarray(p[n]).dtype)
                p[n] = p[n] * xp.exp(zj) if e.space[j] == "log" else p[n] + zj
                if e.bounds:
                    p[n] = xp.clip(p[n], e.bounds[j][0], e.bounds[j][1])
            continue
        v = p[e.parameter]
        shape = tuple(xp.shape(v))
        if e.distribution == "lognormal":
            v = v * xp.exp(e.std * draw(i, "normal", shape).astype(xp.asarray(v).dtype))
        elif e.distribution == "add_normal":
            v = v + e.std * draw(i, "normal", shape).astype(xp.asarray(v).dtype)
        else:  # add_uniform
            v = v + e.half_width * (2.0 * draw(i, "uniform", shape).astype(xp.asarray(v).dtype) - 1.0)
        if e.clip is not None:
            v = xp.clip(v, e.clip[0], e.clip[1])
        p[e.parameter] = v
    return p


def _drift_coefficients(spec: RandomizationSpec, params: Mapping, draw: Draw, xp) -> dict:
    index = {e.name: i for i, e in enumerate(spec.entries)}
    return {e.name: e.mean + e.std * draw(index[e.name], "normal", tuple(xp.shape(params[e.parameter])))
            for e in spec.of_kind("drift")}


def _drifted(spec: RandomizationSpec, coefs: Mapping, params: Mapping, t, xp) -> dict:
    p = dict(params)
    for e in spec.of_kind("drift"):
        c = xp.asarray(coefs[e.name]).astype(xp.asarray(p[e.parameter]).dtype)
        g = c * (1.0 - xp.exp(-t / e.time_constant)) if e.shape == "first_order" else c * t
        v = p[e.parameter] * (1.0 + g) if e.mode == "relative" else p[e.parameter] + g
        p[e.parameter] = xp.clip(v, e.clip[0], e.clip[1]) if e.clip is not None else v
    return p


def _noise(spec: RandomizationSpec, obs: Mapping, draw: Draw, xp) -> dict:
    out = dict(obs)
    for i, e in enumerate(spec.entries):
        if e.kind != "noise":
            continue
        if e.signal not in out:
            raise RandomizationError(f"{spec.source}: noise entry {e.name!r} needs signal {e.signal!r}; the "
                                     f"observation has {', '.join(sorted(out))}")
        x = out[e.signal]
        x = x + e.std * draw(i, "normal", tuple(xp.shape(x))).astype(xp.asarray(x).dtype)
        if e.quantization > 0:
            x = xp.round(x / e.quantization) * e.quantization
        out[e.signal] = x
    return out


def _jax_draw(key, dtype=None) -> Draw:
    import jax

    def draw(i: int, what: str, shape: tuple):
        k = jax.random.fold_in(key, i)
        return jax.random.normal(k, shape) if what == "normal" else jax.random.uniform(k, shape)

    return draw


def _np_draw(rng: np.random.Generator) -> Draw:
    def draw(i: int, what: str, shape: tuple):
        return rng.standard_normal(shape) if what == "normal" else rng.uniform(size=shape)

    return draw


def sample_episode(spec: RandomizationSpec, key, params: Mapping) -> dict:
    """Parameters of one episode: identified, unit and calibration_offset entries drawn from
    ``key`` (JAX PRNG key) and applied to ``params`` ``{name: array (n_actuators,) or ()}``.
    Entries draw from independent streams (``fold_in(key, entry index)``). jit/vmap-able."""
    import jax.numpy as jnp

    return _episode(spec, params, _jax_draw(key), jnp)


def sample_drift(spec: RandomizationSpec, key, params: Mapping) -> dict:
    """Per-episode drift coefficients ``{entry name: c (n_actuators,) or ()}`` (from the same episode
    key as :func:`sample_episode`; independent streams)."""
    import jax
    import jax.numpy as jnp

    return _drift_coefficients(spec, params, _jax_draw(jax.random.fold_in(key, 1_000_003)), jnp)


def drifted(spec: RandomizationSpec, coefficients: Mapping, params: Mapping, t) -> dict:
    """Parameters at time ``t`` [s] since the episode start (drift entries applied to the episode's
    ``params``); ``t = 0`` returns them unchanged."""
    import jax.numpy as jnp

    return _drifted(spec, coefficients, params, t, jnp)


def step_noise(spec: RandomizationSpec, key, obs: Mapping) -> dict:
    """Observation ``{signal: array}`` with the noise entries applied (one fresh draw per call)."""
    import jax.numpy as jnp

    return _noise(spec, obs, _jax_draw(key), jnp)


class _NP:
    """``xp`` facade for NumPy arrays with the ``astype`` the JAX path uses."""

    asarray = staticmethod(np.asarray)
    shape = staticmethod(np.shape)
    exp = staticmethod(np.exp)
    clip = staticmethod(np.clip)
    round = staticmethod(np.round)


def sample_episode_np(spec: RandomizationSpec, rng: np.random.Generator, params: Mapping) -> dict:
    """NumPy twin of :func:`sample_episode` (same distributions, NumPy's random stream)."""
    return _episode(spec, {k: np.asarray(v, float) for k, v in params.items()}, _np_draw(rng), _NP)


def sample_drift_np(spec: RandomizationSpec, rng: np.random.Generator, params: Mapping) -> dict:
    return _drift_coefficients(spec, params, _np_draw(rng), _NP)


def drifted_np(spec: RandomizationSpec, coefficients: Mapping, params: Mapping, t: float) -> dict:
    return _drifted(spec, coefficients, params, t, _NP)


def step_noise_np(spec: RandomizationSpec, rng: np.random.Generator, obs: Mapping) -> dict:
    return _noise(spec, {k: np.asarray(v, float) for k, v in obs.items()}, _np_draw(rng), _NP)


# ------------------------------------------------------------------------------------------------
# the object environments take
# ------------------------------------------------------------------------------------------------


class Randomizer:
    """A spec bound to the environment interface (``randomization=`` of :mod:`actuatorlab.envs`):

    * ``sample_episode(key, params) -> params`` at reset (identified, unit, calibration offset);
      ``params`` ``{name: (n_sets,)}``: one draw per parameter set (per joint for a per-joint
      model, e.g. ``identify.arm_fit.per_joint_robot``; one per actuator type otherwise);
    * ``drift(key, params, t) -> params`` for environments that step drift (``has_drift``):
      ``key`` the episode key given to ``sample_episode``, ``params`` its result, ``t`` [s] since
      reset;
    * ``step_noise(key, obs) -> obs`` on every observation. ``obs`` is a dict ``{signal: array}``
      or a flat vector with ``layout``: ``{signal: slice | [(slice, coefficient), ...]}``; the
      signal is read from the first slice (divided by its coefficient) and its noise is added to
      every listed slice times its coefficient (an observation may carry a signal several times:
      :func:`posture_layout`). Quantization applies to the value read from the first slice.

    JAX in, JAX out (NumPy inputs are accepted); pure, so a jitted ``reset`` / ``step`` can close
    over it.
    """

    def __init__(self, spec: RandomizationSpec | Mapping | str | Path, layout: Mapping[str, Any] | None = None):
        if isinstance(spec, (str, Path)):
            spec = load_spec(spec)
        elif not isinstance(spec, RandomizationSpec):
            spec = parse_spec(spec)
        self.spec = spec
        self.layout = {s: ([(v, 1.0)] if isinstance(v, slice) else [(sl, float(c)) for sl, c in v])
                       for s, v in (layout or {}).items()}

    @property
    def has_drift(self) -> bool:
        return self.spec.has_drift

    def sample_episode(self, key, params: Mapping) -> dict:
        return sample_episode(self.spec, key, params)

    def drift(self, key, params: Mapping, t) -> dict:
        return drifted(self.spec, sample_drift(self.spec, key, params), params, t)

    def step_noise(self, key, obs):
        if isinstance(obs, Mapping):
            return step_noise(self.spec, key, obs)
        import jax.numpy as jnp

        if not self.layout:
            raise RandomizationError(f"{self.spec.source}: a flat observation needs a layout {{signal: slice}}")
        obs = jnp.asarray(obs)
        clean = {s: obs[..., parts[0][0]] / parts[0][1] for s, parts in self.layout.items()}
        noisy = step_noise(self.spec, key, clean)
        for s, parts in self.layout.items():
            d = noisy[s] - clean[s]
            for sl, c in parts:
                obs = obs.at[..., sl].add(c * d)
        return obs

    def __repr__(self) -> str:
        kinds = ", ".join(f"{e.kind}:{e.name}" for e in self.spec.entries)
        return f"Randomizer({self.spec.source}: {kinds})"


def posture_layout(n_joints: int, dq_scale: float = 0.1) -> dict:
    """Layout of :class:`actuatorlab.envs.tasks.PostureTask`'s observation ``[q - home, dq_scale dq,
    goal - q, last action]``: ``position`` noise enters the first and (negated) the third block,
    ``velocity`` noise the second (scaled)."""
    n = int(n_joints)
    return {"position": [(slice(0, n), 1.0), (slice(2 * n, 3 * n), -1.0)],
            "velocity": [(slice(n, 2 * n), float(dq_scale))]}

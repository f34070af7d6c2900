"""The search space of a fit: free parameters, their boxes and the map to the unit box z in [0, 1]^n.

Log-scaled parameters (``PARAMS[name].scale == "log"``) map log-uniformly, the others linearly, so
every parameter has bounds and CMA-ES steps are scale-free. :data:`PARAM_ORDER` is the order of
the full parameter vector the population scorer (:mod:`actuatorlab.identify.search`) takes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import jax.numpy as jnp
import numpy as np
import optax

from ..errors import ActuatorlabError, UnknownNameError
from ..models.control import get_control_law
from ..models.params import PARAMS, bounds_for, neutral_params
from ..models.registry import ModelSpec
from ..sim.rollout import Batch

__all__ = ["unit_to_theta", "unit_to_z", "box_adam_step", "profile_for", "substeps_for", "ParamSpace", "effort_available", "PARAM_ORDER", "full_vectors"]


def profile_for(trajs_or_batches) -> str:
    """Bound profile: "drive" for prismatic / current-mode drives, "servo" otherwise."""
    for b in trajs_or_batches:
        plant = b.plant if isinstance(b, Batch) else ("carriage" if b.setup.joint_type == "prismatic" else "pendulum")
        if plant == "carriage":
            return "drive"
    return "servo"


def substeps_for(spec: ModelSpec) -> int:
    return 4 if spec.compliant else 1


def unit_to_theta(lower: np.ndarray, upper: np.ndarray, log: np.ndarray, z, xp=jnp):
    """The map of every search box from the unit box: z (..., n), clipped to [0, 1], to values
    between ``lower`` and ``upper`` (n,), log-uniformly where ``log`` (n,) is True::

        theta = exp(ln lower + z (ln upper - ln lower))   (log)
        theta = lower + z (upper - lower)                  (linear)

    ``xp``: jax.numpy (traceable, the default) or numpy (a whole population at once)."""
    z = xp.clip(z, 0.0, 1.0)
    lin = lower + z * (upper - lower)
    lo = xp.log(xp.where(log, lower, 1.0))
    hi = xp.log(xp.where(log, upper, 1.0))
    return xp.where(log, xp.exp(lo + z * (hi - lo)), lin)


def unit_to_z(lower: np.ndarray, upper: np.ndarray, log: np.ndarray, theta) -> np.ndarray:
    """Inverse of :func:`unit_to_theta`: values (..., n), clipped to the box, to z in [0, 1]."""
    theta = np.clip(np.asarray(theta, float), lower, upper)
    with np.errstate(divide="ignore", invalid="ignore"):
        zl = (np.log(theta) - np.log(np.where(log, lower, 1.0))) / (
            np.log(np.where(log, upper, 2.0)) - np.log(np.where(log, lower, 1.0)))
    zlin = (theta - lower) / (upper - lower)
    return np.clip(np.where(log, zl, zlin), 0.0, 1.0)


def box_adam_step(opt: optax.GradientTransformation, g, state, z):
    """One projected step of a gradient fit in the unit box: the optimiser's update of z from the
    gradient g, then z <- clip(z, 0, 1) (Adam, Kingma & Ba, arXiv:1412.6980). Returns (z, state)."""
    upd, state = opt.update(g, state, z)
    return jnp.clip(optax.apply_updates(z, upd), 0.0, 1.0), state


@dataclass(frozen=True)
class ParamSpace:
    """Free parameters, their bounds and the map between physical values and z in [0, 1]."""

    names: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray
    log: np.ndarray
    base: dict = field(default_factory=dict)  # values of the non-free parameters

    @staticmethod
    def build(spec: ModelSpec, batches: list[Batch], profile: str, fixed: dict | None = None,
              bounds: dict | None = None) -> "ParamSpace":
        """The search space of ``spec`` on ``batches``: the profile's boxes, except the parameters
        named in ``bounds`` (name -> (lower, upper), e.g. a calibration's narrowed boxes)."""
        drives = {get_control_law(b.law).drive for b in batches}
        plants = {b.plant for b in batches}
        names = [n for n in spec.free if any(n in spec.free_for(d) for d in drives)
                 and (n != "q_offset" or "pendulum" in plants)]  # a carriage has no gravity angle
        box = {n: tuple(map(float, (bounds or {}).get(n, bounds_for(n, profile)))) for n in names}
        for n in (bounds or {}):
            if n not in PARAMS:
                raise UnknownNameError("parameter", n, list(PARAMS))
        for n, (a, b) in box.items():
            if not a < b:
                raise ActuatorlabError(f"bounds of {n!r}: lower {a} must be below upper {b}")
        lo = np.array([box[n][0] for n in names])
        hi = np.array([box[n][1] for n in names])
        base = neutral_params()
        base.update(fixed or {})
        return ParamSpace(tuple(names), lo, hi, np.array([PARAMS[n].scale == "log" for n in names]), base)

    @property
    def n(self) -> int:
        return len(self.names)

    def to_theta(self, z, xp=jnp):
        """Values (..., n) from z (..., n) (:func:`unit_to_theta`); ``xp`` jax.numpy or numpy."""
        return unit_to_theta(self.lower, self.upper, self.log, z, xp)

    def to_z(self, theta) -> np.ndarray:
        """z in [0, 1]^n of the values ``theta`` (:func:`unit_to_z`)."""
        return unit_to_z(self.lower, self.upper, self.log, theta)

    def params(self, theta) -> dict:
        p = {k: jnp.asarray(v, dtype=jnp.float64) for k, v in self.base.items()}
        for i, n in enumerate(self.names):
            p[n] = theta[i]
        return p

    def theta_from(self, values: dict) -> np.ndarray:
        """Physical vector from a dict (missing names take the neutral value, clipped to bounds)."""
        return np.clip(np.array([float(values.get(n, self.base[n])) for n in self.names]), self.lower, self.upper)


def effort_available(batches: list[Batch]) -> bool:
    """True if every log of every batch has a measured controller output (e.g. EMPS ``vir``)."""
    return all(np.isfinite(b.effort_meas[b.mask]).all() for b in batches)



#: order of the full parameter vector used by :class:`PopulationScorer` (every name of PARAMS)
PARAM_ORDER: tuple[str, ...] = tuple(PARAMS)


def full_vectors(space: ParamSpace, theta: np.ndarray) -> np.ndarray:
    """Free parameter vectors (n, space.n) -> full vectors (n, len(PARAM_ORDER)) in PARAM_ORDER,
    the non-free entries at ``space.base``."""
    theta = np.atleast_2d(theta)
    out = np.tile(np.array([space.base[n] for n in PARAM_ORDER], float), (theta.shape[0], 1))
    for i, n in enumerate(space.names):
        out[:, PARAM_ORDER.index(n)] = theta[:, i]
    return out


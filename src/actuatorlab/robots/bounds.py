"""Search bounds of an actuator's parameters given by a robot config (``actuators.<name>.bounds``).

A config may give, per actuator type, the range a fit searches each parameter in (servo-side units,
the units of ``params``)::

    "bounds": {"armature": [0.005, 0.1], "stiffness": [50, 1000], "friction_viscous": [0, 2]}

A whole-robot fit (:class:`actuatorlab.identify.arm_space.ArmSpace`) then searches that parameter in
[lower, upper] (log-uniformly for a log-scale parameter of :data:`~actuatorlab.models.params.PARAMS`,
linearly otherwise) instead of the default box around the nominal value, and starts inside it. The
physics behind each range belongs in the config's ``sources``. Parameters without bounds keep the
default box; a config without ``bounds`` fits exactly as before.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..errors import ModelError
from ..models.params import PARAMS

__all__ = ["Bounds", "parse_bounds", "set_bounds", "start_inside"]

#: one actuator type's bounds: (name, lower, upper) per bounded parameter, in table order
Bounds = tuple[tuple[str, float, float], ...]


def parse_bounds(path: Path, where: str, d: Any) -> Bounds:
    """The validated ``bounds`` object at ``where`` of config ``path`` (None: no bounds). Raises
    :class:`ModelError` "<file>: <where>.bounds.<parameter>: <problem>" for an unknown parameter, a
    pair that is not two finite numbers, lower >= upper, or lower <= 0 for a log-scale parameter."""
    if d is None:
        return ()
    if not isinstance(d, dict):
        raise ModelError(f"{path}: {where}.bounds must be an object (parameter -> [lower, upper])")
    out = []
    for k, pair in d.items():
        at = f"{path}: {where}.bounds.{k}"
        if k not in PARAMS:
            raise ModelError(f"{at}: unknown parameter; known: {', '.join(PARAMS)}")
        if (not isinstance(pair, (list, tuple)) or len(pair) != 2
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in pair)):
            raise ModelError(f"{at}: must be [lower, upper], two finite numbers, got {pair!r}")
        lo, hi = float(pair[0]), float(pair[1])
        if not lo < hi:
            raise ModelError(f"{at}: lower {lo:g} must be < upper {hi:g}")
        if PARAMS[k].scale == "log" and lo <= 0:
            raise ModelError(f"{at}: lower {lo:g} must be > 0 ({k} is searched on a log scale)")
        out.append((k, lo, hi))
    return tuple(sorted(out, key=lambda t: list(PARAMS).index(t[0])))


def set_bounds(groups) -> tuple[dict[str, tuple[float, float]], ...]:
    """Per parameter set (a robot's ``groups``): {parameter: (lower, upper)} of its config bounds."""
    return tuple({k: (lo, hi) for k, lo, hi in g.bounds} for g in groups)


def start_inside(name: str, value: float, lower: float, upper: float) -> float:
    """A fit's start for ``name`` in [lower, upper]: ``value`` if inside, else the geometric mean of
    the bounds (log-scale parameter) or their middle (linear)."""
    if lower <= value <= upper:
        return float(value)
    return math.sqrt(lower * upper) if PARAMS[name].scale == "log" else 0.5 * (lower + upper)

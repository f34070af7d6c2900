"""Validation helpers of the robot config readers (:mod:`.loader`, :mod:`.mechanisms`): every
problem is a :class:`~actuatorlab.errors.ModelError` that names the config file and the field."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..errors import ModelError

__all__ = ["config_error", "number", "fields"]


def config_error(path: Path | str, problem: str) -> ModelError:
    """The error "<config file>: <problem>"."""
    return ModelError(f"{path}: {problem}")


def number(path: Path | str, where: str, x: Any, positive: bool = False) -> float:
    """``x`` as a float; a non-number, a non-finite value (or, with ``positive``, one <= 0) is an
    error naming the file and the field ``where``."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(float(x)):
        raise config_error(path, f"{where} must be a finite number, got {x!r}")
    if positive and float(x) <= 0:
        raise config_error(path, f"{where} must be > 0, got {x!r}")
    return float(x)


def fields(path: Path | str, where: str, d: Any, allowed: set[str], required: tuple[str, ...] = ()) -> dict:
    """``d`` if it is an object with every ``required`` field and no field outside ``allowed``."""
    if not isinstance(d, dict):
        raise config_error(path, f"{where} must be an object")
    for k in required:
        if k not in d:
            raise config_error(path, f"{where}: missing field {k!r}")
    if extra := sorted(set(d) - allowed):
        raise config_error(path, f"{where}: unknown field(s) {', '.join(map(repr, extra))}; "
                                 f"allowed: {', '.join(sorted(allowed))}")
    return d

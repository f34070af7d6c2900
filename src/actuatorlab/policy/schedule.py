"""Schedules of the homotopy parameter alpha over a training run (docs/policy.md).

A training run is cut into ``n`` *chunks* of equal size (a few PPO updates each; one point of the
learning curve per chunk). Before every chunk the run asks its schedule for alpha; after it, the
schedule sees the chunk's mean episode return (at the chunk's alpha) and decides the next alpha.
A change of alpha ends a *stage* (a checkpoint and a line of ``stages.json``). A schedule's state
is a JSON-serialisable dict, stored in every checkpoint, so a resumed run continues exactly.

Schedules (``make_schedule(name, **options)``; every run has the same budget of ``n`` chunks):

* ``scratch``: alpha = 1 throughout (the full model from scratch).
* ``direct``: alpha = 0 for the first ``pretrain`` fraction of the chunks, then alpha = 1 (direct
  transfer without the homotopy).
* ``homotopy``: fixed stages. alpha = 0 for the ``pretrain`` fraction, then ``stages`` equal steps
  of ``1 / stages`` spread evenly over the ``transition`` fraction, then alpha = 1 to the end.
* ``homotopy-adaptive``: alpha = 0 for the ``pretrain`` fraction, then steps of size ``delta``
  (initially ``delta0``). After a step the schedule waits ``settle`` chunks, then compares the mean
  return of the chunks since the step (at most ``window`` of them) with the return *before* the
  step (mean of the ``window`` chunks before it); it advances again when that return is within
  ``tol * |R_before|`` of R_before, else it holds alpha. Step-size rule: accepted at the first
  check (after exactly ``settle`` chunks) -> ``delta = min(2 delta, delta_max)``; accepted later ->
  ``delta = max(delta / 2, delta_min)``. A run reaches alpha = 1 at the latest at the ``deadline``
  fraction of the chunks, so that every schedule ends with training on the full model.

Re-estimating PPO's observation statistics at a change of alpha (``restat``, rule R30) was
measured and not adopted; it is a recipe of bench/homotopy_recipes.py now (docs/policy.md).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import ModelError, UnknownNameError

__all__ = ["Scratch", "Direct", "FixedHomotopy", "AdaptiveHomotopy", "Schedule", "SCHEDULES", "make_schedule"]


def _frac(name: str, v: float) -> float:
    v = float(v)
    if not 0.0 <= v <= 1.0:
        raise ModelError(f"schedule option {name} must be in [0, 1], got {v}")
    return v


@dataclass(frozen=True)
class Scratch:
    """alpha = 1 from the first update (the full model from scratch)."""

    name = "scratch"

    def initial(self, n: int) -> dict[str, Any]:
        return {"alpha": 1.0}

    def advance(self, state: dict[str, Any], chunk: int, n: int, ret: float | None) -> dict[str, Any]:
        return state

    def options(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Direct:
    """alpha = 0 for the first ``pretrain`` fraction of the chunks, then 1."""

    pretrain: float = 0.3
    name = "direct"

    def __post_init__(self):
        _frac("pretrain", self.pretrain)

    def initial(self, n: int) -> dict[str, Any]:
        return {"alpha": 0.0 if round(self.pretrain * n) > 0 else 1.0}

    def advance(self, state, chunk, n, ret):
        """``chunk``: number of chunks done so far (1-based)."""
        return {"alpha": 0.0 if chunk < round(self.pretrain * n) else 1.0}

    def options(self):
        return asdict(self)


@dataclass(frozen=True)
class FixedHomotopy:
    """Fixed stages: 0 for ``pretrain``, ``stages`` equal steps over ``transition``, then 1."""

    pretrain: float = 0.3
    transition: float = 0.4
    stages: int = 4
    name = "homotopy"

    def __post_init__(self):
        _frac("pretrain", self.pretrain), _frac("transition", self.transition)
        if self.pretrain + self.transition > 1.0 + 1e-9:
            raise ModelError(f"schedule homotopy: pretrain + transition = {self.pretrain + self.transition} > 1")
        if int(self.stages) < 1:
            raise ModelError(f"schedule homotopy: stages must be >= 1, got {self.stages}")

    def alpha_at(self, chunk: int, n: int) -> float:
        """alpha of chunk index ``chunk`` (0-based) of ``n``."""
        p0 = round(self.pretrain * n)
        if chunk < p0:
            return 0.0
        per = self.transition * n / self.stages
        j = min(int((chunk - p0) // per) + 1 if per > 0 else self.stages, self.stages)
        return j / self.stages

    def initial(self, n):
        return {"alpha": self.alpha_at(0, n)}

    def advance(self, state, chunk, n, ret):
        return {"alpha": self.alpha_at(chunk, n)}

    def options(self):
        return asdict(self)


@dataclass(frozen=True)
class AdaptiveHomotopy:
    """Advance alpha while the return stays within ``tol`` of its value before the step.
    ``pretrain`` 0.2 (the fixed schedules keep 0.3): chosen by a rule written before its runs on the
    ANYmal C trot at 256 environments, 3 seeds (bench/README.md, "Seventh run"): 2.40 M env steps
    to 90 % of scratch's final return against 2.44 M with 0.3; 0.1 stalls (one seed, 3.33 M). A tie:
    today's code gives 2.62 M for the same runs (float32 sums regrouped since; bench/README.md, M31)."""

    pretrain: float = 0.2
    deadline: float = 0.7
    tol: float = 0.1
    delta0: float = 0.25
    delta_min: float = 0.05
    delta_max: float = 0.5
    settle: int = 2
    window: int = 3
    name = "homotopy-adaptive"

    def __post_init__(self):
        for k in ("pretrain", "deadline", "delta0", "delta_min", "delta_max"):
            _frac(k, getattr(self, k))
        if self.deadline < self.pretrain:
            raise ModelError(f"schedule homotopy-adaptive: deadline {self.deadline} < pretrain {self.pretrain}")
        if not 0 < self.delta_min <= self.delta0 <= self.delta_max:
            raise ModelError("schedule homotopy-adaptive: need 0 < delta_min <= delta0 <= delta_max")
        if self.tol < 0 or self.settle < 1 or self.window < 1:
            raise ModelError("schedule homotopy-adaptive: need tol >= 0, settle >= 1, window >= 1")

    def initial(self, n):
        return {"alpha": 0.0 if round(self.pretrain * n) > 0 else self.delta0, "delta": self.delta0,
                "ref": None, "since": 0, "recent": []}

    def _step(self, s, delta):
        s["alpha"] = min(1.0, round(s["alpha"] + delta, 10))
        s["delta"], s["since"], s["recent"] = delta, 0, []
        return s

    def advance(self, state, chunk, n, ret):
        s = dict(state, recent=list(state["recent"]))
        if ret is not None and math.isfinite(ret):
            s["recent"] = (s["recent"] + [float(ret)])[-self.window:]
        if s["alpha"] >= 1.0:
            return s
        if chunk >= round(self.deadline * n):          # budget: the rest at the full model
            s["ref"] = _mean(s["recent"])
            return self._step(s, 1.0 - s["alpha"])
        if s["alpha"] == 0.0:                          # pretraining
            if chunk >= round(self.pretrain * n) and s["recent"]:
                s["ref"] = _mean(s["recent"])
                return self._step(s, s["delta"])
            return s
        s["since"] += 1
        if s["since"] < self.settle or not s["recent"] or s["ref"] is None:
            return s
        r = _mean(s["recent"][-min(self.window, s["since"]):])
        if r >= s["ref"] - self.tol * abs(s["ref"]):   # within tolerance: advance
            delta = min(2 * s["delta"], self.delta_max) if s["since"] == self.settle else max(s["delta"] / 2, self.delta_min)
            s["ref"] = r
            return self._step(s, delta)
        return s

    def options(self):
        return asdict(self)


def _mean(xs):
    return sum(xs) / len(xs) if xs else None


Schedule = Scratch | Direct | FixedHomotopy | AdaptiveHomotopy

SCHEDULES: dict[str, type[Schedule]] = {"homotopy": FixedHomotopy, "homotopy-adaptive": AdaptiveHomotopy,
                                        "scratch": Scratch, "direct": Direct}


def make_schedule(name: str, **options: Any) -> Schedule:
    """The schedule ``name`` with ``options`` (fields of its class); unknown names or options raise
    a one-line error listing what exists."""
    if name not in SCHEDULES:
        raise UnknownNameError("schedule", name, list(SCHEDULES))
    cls = SCHEDULES[name]
    bad = sorted(set(options) - set(cls.__dataclass_fields__))
    if bad:
        raise ModelError(f"schedule {name}: unknown option(s) {', '.join(bad)}; "
                         f"available: {', '.join(cls.__dataclass_fields__) or 'none'}")
    return cls(**options)

"""The nested-selection rule of every model selection, one joint or a whole robot.

A ladder of nested models is walked in order. Each model starts from the fits of the fitted
models it contains (:func:`contained`), so it is never worse than they are on its fit data. It is
scored on data it was not fitted on: per group (F,) of held-out conditions for one joint
(:func:`~actuatorlab.identify.select.fit_family`, leave-one-group-out folds), one validation set
(F = 1) for a robot (:func:`~actuatorlab.identify.arm_fit.select_arm`). :func:`judge` decides
whether it *earns its place*; the selection is the eligible model with the lowest mean score
(:func:`lowest`), refitted on all data by the caller's backend.

Rule. The *reference* of m is the eligible model it contains with the lowest mean score. m is
eligible when its scores are finite and

1. with a reference: ``1 - mean(score_m) / mean(score_ref) >= min_gain`` (:data:`MIN_GAIN` = 0.02)
   and m is better than the reference in more groups than it is worse (ties, within a relative
   1e-9, drop out; with one group this follows from the first condition);
2. without one: m is the first model of the ladder or contains no fitted model.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb
from typing import Iterable, Mapping

import numpy as np

from ..models.registry import contains

__all__ = ["MIN_GAIN", "MEAN", "center", "Verdict", "contained", "judge", "lowest"]

#: relative improvement of the mean held-out score a model needs over its reference
MIN_GAIN = 0.02

#: how a model's per-group scores combine: "arithmetic" or "geometric" mean
MEAN = "geometric"


def center(score) -> float:
    """A model's mean score over its groups (:data:`MEAN`)."""
    x = np.atleast_1d(np.asarray(score, float))
    if MEAN == "geometric":
        with np.errstate(divide="ignore"):
            return float(np.exp(np.mean(np.log(x))))
    return float(np.mean(x))


@dataclass(frozen=True)
class Verdict:
    """The rule's outcome for one model (module docstring)."""

    parent: str | None  #: the reference: the best eligible model it contains (None: none)
    gain: float | None  #: 1 - mean(score) / mean(reference's score)
    wins: int | None  #: groups where it is better than the reference
    losses: int | None  #: groups where it is worse
    sign_p: float | None  #: one-sided sign-test p-value of wins among wins + losses (reported only)
    paired_t: float | None  #: t statistic of the per-group log score ratios (reported only)
    earns_place: bool


def contained(m: str, fitted: Iterable[str]) -> list[str]:
    """The models of ``fitted`` that model m contains, in fitting order: m starts from their fits."""
    return [x for x in fitted if contains(m, x)]


def judge(score: np.ndarray, inner: list[str], scores: Mapping[str, np.ndarray], eligible: Mapping[str, bool],
          first: bool, min_gain: float = MIN_GAIN) -> Verdict:
    """The rule (module docstring) for a model with held-out ``score`` (F,) that contains the
    fitted models ``inner``; ``scores`` and ``eligible`` hold the models judged before it, ``first``
    says whether it is the first model of the ladder."""
    score = np.atleast_1d(np.asarray(score, float))
    finite = bool(np.all(np.isfinite(score)))
    ref = [x for x in inner if eligible.get(x)]
    parent = min(ref, key=lambda x: center(scores[x])) if ref else None
    if parent is None:
        return Verdict(None, None, None, None, None, None, finite and (first or not inner))
    pv = np.atleast_1d(np.asarray(scores[parent], float))
    gain = 1.0 - center(score) / center(pv)
    tie = np.isclose(score, pv, rtol=1e-9, atol=0.0)
    wins, losses = int(np.sum((score < pv) & ~tie)), int(np.sum((score > pv) & ~tie))
    return Verdict(parent, gain, wins, losses, _sign_p(wins, wins + losses), _paired_t(score / pv),
                   finite and gain >= min_gain and wins > losses)


def lowest(scores: Mapping[str, np.ndarray], eligible: Mapping[str, bool]) -> str:
    """The eligible model with the lowest mean score (the selection), first in order on ties."""
    return min((m for m in scores if eligible[m]), key=lambda m: center(scores[m]))


def _sign_p(wins: int, n: int) -> float:
    """One-sided sign-test p-value P(X >= wins), X ~ Binomial(n, 1/2)."""
    return float(sum(comb(n, k) for k in range(wins, n + 1)) / 2**n)


def _paired_t(ratios: np.ndarray) -> float | None:
    """t statistic of mean(log ratio) (child / reference) over groups; negative: child better."""
    with np.errstate(divide="ignore", invalid="ignore"):
        lr = np.log(np.asarray(ratios, float))
    if lr.size < 2 or not np.all(np.isfinite(lr)):
        return None
    sd = float(np.std(lr, ddof=1))
    return float(np.mean(lr) / (sd / np.sqrt(lr.size))) if sd > 0 else None

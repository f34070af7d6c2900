"""The fit's position error on quantised readings: the error outside each reading's quantisation cell.

An encoder of step s logs ``q_meas = q0 + s round((q - q0) / s)``: the joint is anywhere in the cell
``[q_meas - s/2, q_meas + s/2]``. The plain error ``e = q_sim - q_meas`` charges a model that follows
the joint exactly up to s/2 per sample, depending on where in its cell the joint happens to be; where
the joint rests or creeps, that error stays the same for many samples, and the MAE's optimum bends
the model towards the readings' lattice. Measured on the zoo's in-family truth (m2+delay, a
4096-count encoder, bench/journal/fit_rules.md, twenty-second session): the long-budget fit puts the
Stribeck exponent 26 % below the truth (1.10 against 1.5), every other parameter within 1 %; with
a 2^22-count encoder the same fit is within 0.3 %. The fit therefore minimises the error outside
the cell,

    c(e) = e - clip(e, -h, h),    h = CENSOR * s    (CENSOR = 1/2: the cell itself)

zero inside the cell, ``|e| - h`` outside it: Vapnik's epsilon-insensitive loss (*The Nature of
Statistical Learning Theory*, Springer 1995, ch. 6) with epsilon the reading's half-cell, which
is the set-membership view of a quantised measurement (Milanese & Vicino, Automatica 27(6), 1991:
every model inside every reading's cell is consistent with the data). Logs whose positions lie on
no lattice (s = 0: noise, a filter, interpolated readings) keep the plain error. Only the fit's
objective is censored: reported and held-out errors stay the plain MAE.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..sim.rollout import Batch

__all__ = ["CENSOR", "SELECTION_CENSOR", "FINAL_CENSOR", "half_cells", "censored"]

#: half-width of the censored band as a fraction of each log's lattice step (0: the plain error), in
#: every single-model fit (:func:`~actuatorlab.identify.fit.fit_model`, ``fit --model``)
CENSOR = 0.5

#: the same in the selection's walk (:mod:`actuatorlab.identify.select`: its fold searches and their
#: polish, the free-swing calibration): the plain error. The censored walk was measured on the zoo and
#: the real splits and not adopted (bench/journal/fit_rules.md, twenty-second session): with it the
#: walk's knife-edge choices between delay models flip (zoo sts3250_like +45 %, bldc_family +231 % over
#: seeds 0-2) while the real XL330 and STS3250 splits improve.
SELECTION_CENSOR = 0.0

#: the same in the selection's final refit of the selected model on all the logs (rule R52,
#: bench/journal/fit_rules.md): the model is chosen, only its parameters move, as in a single-model fit
FINAL_CENSOR = CENSOR


def half_cells(batches: Sequence[Batch], censor: float | None = None) -> list[np.ndarray]:
    """Per batch, (B, 1) [rad | m]: the half-width h of each log's censored band (``censor`` x its
    lattice step, :attr:`~actuatorlab.sim.rollout.Batch.q_step`; None: :data:`CENSOR`)."""
    f = CENSOR if censor is None else float(censor)
    return [np.zeros((b.size, 1)) if b.q_step is None else (f * np.asarray(b.q_step, float))[:, None]
            for b in batches]


def censored(e, h, xp=np):
    """The error outside the band [-h, h]: ``e - clip(e, -h, h)`` (same shape as ``e``; ``xp``:
    numpy or jax.numpy)."""
    return e - xp.clip(e, -h, h)

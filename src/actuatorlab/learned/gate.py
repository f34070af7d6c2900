"""The correction gate of a one-joint residual: how much of a learned correction earns its place
on conditions it was not trained on.

A residual adds a learned effort to a fitted analytic model, ``tau = tau_base + g tau_net``. Trained
on a few logs, the correction can help on the conditions it saw and hurt on others (on the real
XL330 logs split by condition: 0.61-1.41x the base's held-out error; bench/journal/learned_xl330.md).
The gate ``g`` in :data:`GATES` is chosen the way the fit chooses a model
(:mod:`actuatorlab.identify.nested`): the same training recipe is run again on every
leave-one-group-out subset of the training logs (groups: the ``excitation`` tag, else one log
each; :func:`~actuatorlab.identify.folds.condition_folds`), each fold's correction, scaled by each
``g``, is replayed closed loop on the held-out group, and a group's score is the mean over its logs
of the full-replay position MAE. A gate ``g > 0`` *earns its place* against ``g = 0`` (the base
itself) when its geometric mean score over the groups is at least
:data:`~actuatorlab.identify.nested.MIN_GAIN` (2 %) lower and it is better in more groups than it
is worse; the eligible gate with the lowest mean score is chosen, 0 when none earns it. The model
that is written is the one trained on every log with its torque head scaled by ``g``
(:func:`gated`), so it replays as it is without knowing about the gate.

What the folds do not redo: the base (the user's fitted model) is the same in every fold, so it has
seen the held-out group; the base then looks better there than on truly new conditions, which
makes the choice lean towards smaller gates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import equinox as eqx
import numpy as np

from ..errors import ModelError
from ..identify.nested import MIN_GAIN, Verdict, center, judge
from ..models.nets import scale_torque_head
from .joint import JointModel, log_set, rollout_logs

__all__ = ["GATES", "GateChoice", "gated", "per_log_mae", "gate_scores", "choose_gate"]

#: the gates a residual's correction is scaled by (0: the base alone, 1: the correction as trained)
GATES: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)


def gated(model: JointModel, gate: float) -> JointModel:
    """The residual ``model`` with its correction scaled by ``gate`` (its torque head's last layer,
    :func:`~actuatorlab.models.nets.scale_torque_head`); gate 0 replays exactly as its base."""
    if model.kind != "residual":
        raise ModelError(f"only a residual's correction has a gate; this model is {model.kind!r}")
    return eqx.tree_at(lambda m: m.net, model, scale_torque_head(model.net, gate))


def per_log_mae(model: JointModel, batches) -> np.ndarray:
    """(L,) full closed-loop replay MAE of the position [rad | m] of every log of ``batches`` (in
    batch order), each from its measured initial state."""
    out = []
    for b in batches:
        ls = log_set(model, b)
        e = np.abs(np.asarray(rollout_logs(model, ls).q) - np.asarray(ls.q_meas))
        mask = np.asarray(ls.mask)
        out += [float(e[i][mask[i]].mean()) for i in range(e.shape[0])]
    return np.asarray(out)


def gate_scores(model: JointModel, batches, gates: Sequence[float] = GATES) -> np.ndarray:
    """(G,) a group's score for every gate: the mean over the logs of ``batches`` of
    :func:`per_log_mae` with the correction scaled by that gate [rad | m]."""
    return np.array([float(np.mean(per_log_mae(gated(model, g), batches))) for g in gates])


@dataclass(frozen=True)
class GateChoice:
    """The outcome of :func:`choose_gate`: the chosen ``gate``, the ``gates`` tried, the held-out
    ``groups``, ``scores`` (G, F) [rad | m] and each gate's :class:`~actuatorlab.identify.nested.Verdict`
    against gate 0."""

    gate: float
    gates: tuple[float, ...]
    groups: tuple[str, ...]
    scores: np.ndarray
    verdicts: tuple[Verdict, ...]

    def to_dict(self, unit_scale: float = 1e3) -> dict:
        """JSON record (scores in mrad | mm with the default ``unit_scale``)."""
        return {"gate": self.gate, "groups": list(self.groups),
                "rule": f"leave-one-group-out refits of the same training; a gate earns its place against gate 0 "
                        f"(the base) when its geometric mean held-out replay MAE is >= {MIN_GAIN:.0%} lower and it "
                        "is better in more groups than it is worse; the eligible gate with the lowest mean is chosen",
                "gates": [{"gate": g, "mean": round(center(s) * unit_scale, 4),
                           "per_group": [round(float(x) * unit_scale, 4) for x in s],
                           "gain": None if v.gain is None else round(v.gain, 4), "wins": v.wins, "losses": v.losses,
                           "earns_place": v.earns_place} for g, s, v in zip(self.gates, self.scores, self.verdicts)]}


def choose_gate(scores: np.ndarray, gates: Sequence[float] = GATES, groups: Sequence[str] = ()) -> GateChoice:
    """The gate by the rule of the module docstring from ``scores`` (G, F): held-out score of
    gate ``gates[i]`` in group f. ``gates`` must contain 0 (the base). Ties go to the smaller gate."""
    gates = tuple(float(g) for g in gates)
    scores = np.asarray(scores, float)
    if 0.0 not in gates:
        raise ModelError(f"the gates {gates} do not contain 0 (the base alone)")
    if scores.ndim != 2 or scores.shape[0] != len(gates):
        raise ModelError(f"gate scores of shape {scores.shape} for {len(gates)} gates")
    base = scores[gates.index(0.0)]
    exact = not center(base) > 0.0  # the base replays the held-out logs exactly: nothing to correct
    verdicts = tuple(Verdict(None, None, None, None, None, None, True) if g == 0.0 else
                     Verdict("base", None, None, None, None, None, False) if exact else
                     judge(s, ["base"], {"base": base}, {"base": True}, first=False)
                     for g, s in zip(gates, scores))
    ok = [i for i, v in enumerate(verdicts) if v.earns_place]
    best = min(ok, key=lambda i: (center(scores[i]), gates[i]))
    return GateChoice(gates[best], gates, tuple(groups), scores, verdicts)

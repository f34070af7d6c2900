"""The profile's boxes against a fitted actuator: which parameters a fit leaves on an open edge of its
box, and how far the box then reaches (rule R49, bench/journal/fit_rules.md).

The bound profiles (:data:`~actuatorlab.models.params.BOUND_PROFILES`) are a guess at an actuator's scale (a
hobby servo's inertia, friction and motor constants). A fit that ends on the edge of such a box has been held
by the guess, not by the data: the zoo's harmonic drive (reflected inertia 0.15 kg.m^2) ends with its armature
on the servo box's top (0.05) and its friction levels on theirs. :func:`edge_boxes` names such parameters and
their widened boxes; :func:`~actuatorlab.identify.select.judge_widened` lets the selected model use them when
that earns its place on the held-out groups; a single model (``fit --model``) is fitted again in them from its
optimum (:func:`refit_widened`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from .fit import FitResult
from .space import ParamSpace

__all__ = ["WIDENABLE", "WIDEN_FACTOR", "EDGE_TOL", "edge_boxes", "box_record", "describe_widening", "refit_widened"]

#: parameters whose profile box is widened when the selected model's fold optima end on its edge
#: (:func:`~actuatorlab.identify.select.judge_widened`, rule R49): magnitudes whose range the profile can
#: only guess (inertia, friction levels, the Stribeck velocity, motor constants, the supply's resistance,
#: the series stiffness); not the shapes, efficiencies and fractions with a natural range (the Stribeck
#: exponent, gear-mesh losses, load coefficients), offsets, delays or gains
WIDENABLE = ("armature", "friction_base", "friction_viscous", "friction_stribeck", "stribeck_velocity", "kt", "R",
             "source_resistance", "stiffness")
#: the widened box reaches this many times further: upper x 10 (lower / 10 for a log-uniform lower edge;
#: a linear box's span x 10 from its lower edge)
WIDEN_FACTOR = 10.0
#: [1] a parameter within this fraction of its box (search coordinates) from an edge is on that edge
EDGE_TOL = 1e-3


def edge_boxes(space: ParamSpace, points: list[dict], skip: tuple[str, ...] = ()) -> dict[str, tuple[float, float]]:
    """The widened boxes (name -> (lower, upper)) of the :data:`WIDENABLE`
    parameters of ``space`` (less ``skip``) that any of ``points`` (parameter dicts) puts on an open edge of
    its box: within :data:`EDGE_TOL` of the upper edge, or of the lower edge
    of a log-uniform box (a linear box's lower edge, 0, switches the mechanism off and stays), widened
    :data:`WIDEN_FACTOR` times in that direction."""
    out: dict[str, tuple[float, float]] = {}
    for d in points:
        z = space.to_z(space.theta_from(d))
        for i, n in enumerate(space.names):
            if n not in WIDENABLE or n in skip:
                continue
            lo, hi = out.get(n, (float(space.lower[i]), float(space.upper[i])))
            if z[i] >= 1.0 - EDGE_TOL:
                hi = float(space.upper[i]) * WIDEN_FACTOR if space.log[i] else float(
                    space.lower[i] + WIDEN_FACTOR * (space.upper[i] - space.lower[i]))
            elif z[i] <= EDGE_TOL and space.log[i]:
                lo = float(space.lower[i]) / WIDEN_FACTOR
            if (lo, hi) != (float(space.lower[i]), float(space.upper[i])):
                out[n] = (lo, hi)
    return out


def box_record(space: ParamSpace, wide: dict[str, tuple[float, float]]) -> dict:
    """The boxes part of a widening record: ``boxes`` (the widened) and ``profile_boxes`` (``space``'s), name ->
    [lower, upper]."""
    return {"boxes": {n: list(b) for n, b in wide.items()},
            "profile_boxes": {n: [float(space.lower[space.names.index(n)]), float(space.upper[space.names.index(n)])]
                              for n in wide}}


def describe_widening(rec: dict) -> str:
    """One sentence on a widening record, shared by the CLI and the report: the selection's
    (:func:`~actuatorlab.identify.select.judge_widened`, model.json's ``selection.boxes_widened``) or a single
    model's (:func:`refit_widened`, ``fit.boxes_widened``)."""
    boxes = ", ".join(f"{n} [{a:.3g}, {b:.3g}] -> [{rec['boxes'][n][0]:.3g}, {rec['boxes'][n][1]:.3g}]"
                      for n, (a, b) in rec["profile_boxes"].items())
    if "widened_objective" in rec:
        judged = (f"fitted again in the widened boxes from there: objective {rec['widened_objective']:.4g} against "
                  f"{rec['narrow_objective']:.4g} on the same logs")
    else:
        judged = (f"polished in the widened boxes {1e3 * rec['widened_score']:.2f} mrad held out against "
                  f"{1e3 * rec['narrow_score']:.2f} (better in {rec['wins']} groups, worse in {rec['losses']})")
    return (f"{rec['model']} ended on the edge of the profile's box: {boxes}; {judged}: "
            + ("widened" if rec["kept"] else "kept as it was"))


def refit_widened(fit: FitResult, refit: Callable[[dict, dict], FitResult]) -> FitResult:
    """A single model's fit (``fit --model``; rule R49 without a selection to judge it): where ``fit`` ends on an
    open edge of a profile box (:func:`edge_boxes`), ``refit(bounds, init)`` fits the model again in the widened
    boxes from ``fit``'s parameters (scored first, so the result is never worse on the same logs) and the lower
    objective is kept; the returned result's ``widened`` records the boxes, both objectives and which was kept.
    Without an edge ``fit`` is returned as it is."""
    wide = edge_boxes(fit.space, [fit.params])
    if not wide:
        return fit
    again = refit(wide, fit.params)
    record = {"model": fit.model, **box_record(fit.space, wide), "narrow_objective": fit.objective, "widened_objective": again.objective,
              "kept": bool(again.objective < fit.objective), "wall_s": again.wall_s}
    best = again if record["kept"] else fit
    return replace(best, wall_s=fit.wall_s + again.wall_s, evaluations=fit.evaluations + again.evaluations,
                   widened=record)

"""Rule R49 (identify/select.py ``judge_widened``): a profile box that holds the selected model on its edge
is widened, the fold optima polished there and kept when that earns its place on the held-out groups."""

from __future__ import annotations

import numpy as np
import pytest

from actuatorlab.identify import select
from actuatorlab.identify.boxes import WIDEN_FACTOR, describe_widening, edge_boxes
from actuatorlab.identify.select import FamilyOptions, fit_family
from actuatorlab.identify.space import ParamSpace
from actuatorlab.models.params import neutral_params

from synthetic import TRUTH_M1, synthetic_set


def _space() -> ParamSpace:
    names = ("armature", "friction_base", "stribeck_velocity", "stribeck_alpha", "kt")
    return ParamSpace(names, np.array([1e-5, 0.0, 0.01, 1.0, 0.05]), np.array([0.05, 0.5, 2.0, 5.0, 5.0]),
                      np.array([True, False, True, False, True]), neutral_params())


def test_only_open_edges_of_magnitudes_are_widened():
    sp = _space()
    inside = {"armature": 0.002, "friction_base": 0.1, "stribeck_velocity": 0.2, "stribeck_alpha": 2.0, "kt": 0.5}
    assert edge_boxes(sp, [inside]) == {}
    # a linear box's lower edge (0: the mechanism off) and a shape parameter's edge stay
    assert edge_boxes(sp, [{**inside, "friction_base": 0.0, "stribeck_alpha": 5.0}]) == {}
    edges = [{**inside, "armature": 0.05, "stribeck_velocity": 0.01}, {**inside, "friction_base": 0.5}]
    wide = edge_boxes(sp, edges)
    assert wide == {"armature": (1e-5, 0.05 * WIDEN_FACTOR), "stribeck_velocity": (0.01 / WIDEN_FACTOR, 2.0),
                    "friction_base": (0.0, 0.5 * WIDEN_FACTOR)}
    assert edge_boxes(sp, edges, skip=("armature",)).keys() == {"stribeck_velocity", "friction_base"}


@pytest.fixture(scope="module")
def heavy():
    """A rotor 4x heavier than the servo profile's armature box admits (0.2 against 0.05 kg.m^2)."""
    truth = {**TRUTH_M1, "armature": 0.2}
    logs = synthetic_set([("c400", "chirp", 400.0), ("s400", "steps", 400.0), ("c800", "chirp", 800.0),
                          ("s800", "steps", 800.0)], truth, duration=3.0, model="m1")
    return fit_family(logs, ("m1",), FamilyOptions(extensions=(), budget="quick", seed=0, calibration="none",
                                                   group_by=("excitation",))), truth


def test_a_box_too_small_for_the_actuator_is_widened_and_the_truth_recovered(heavy):
    sel, truth = heavy
    rec = sel.extras["boxes_widened"]
    assert rec["kept"] and rec["profile_boxes"]["armature"] == [1e-5, 0.05] and rec["boxes"]["armature"][1] == 0.5
    assert rec["widened_score"] < 0.1 * rec["narrow_score"]  # the narrow box's optimum is far off on held-out groups
    assert sel.final.params["armature"] == pytest.approx(truth["armature"], rel=0.05)
    i = sel.final.space.names.index("armature")
    assert sel.final.space.upper[i] == pytest.approx(0.5)
    assert "armature [1e-05, 0.05] -> [1e-05, 0.5]" in describe_widening(rec) and describe_widening(rec).endswith("widened")


def test_without_the_rule_the_box_holds_the_armature(heavy, monkeypatch):
    """The same fit with the judgement switched off ends on the box's edge (what the rule is for)."""
    monkeypatch.setattr(select, "judge_widened", lambda fam, lad, selected: (fam, None))
    logs = synthetic_set([("c400", "chirp", 400.0), ("s400", "steps", 400.0), ("c800", "chirp", 800.0),
                          ("s800", "steps", 800.0)], heavy[1], duration=3.0, model="m1")
    sel = fit_family(logs, ("m1",), FamilyOptions(extensions=(), budget="quick", seed=0, calibration="none",
                                                  group_by=("excitation",)))
    assert sel.extras["boxes_widened"] is None and sel.final.params["armature"] == pytest.approx(0.05, rel=1e-3)


def test_a_single_model_fit_is_refitted_in_the_widened_box(heavy):
    """``fit --model`` (no selection to judge it): the same rotor, fitted as one model, ends on the armature
    box's top, is fitted again in the widened box from there and keeps the better in-sample objective."""
    from actuatorlab.app.jobs import fit_logs

    logs = synthetic_set([("c400", "chirp", 400.0), ("s400", "steps", 400.0)], heavy[1], duration=3.0, model="m1")
    fit, _, _ = fit_logs(logs, "m1", FamilyOptions(budget="quick", seed=0))
    rec = fit.widened
    assert rec is not None and rec["kept"] and rec["boxes"]["armature"] == [1e-5, 0.5]
    assert rec["widened_objective"] < 0.1 * rec["narrow_objective"]
    assert fit.params["armature"] == pytest.approx(heavy[1]["armature"], rel=0.05)
    assert "fitted again in the widened boxes" in describe_widening(rec)
    inside = synthetic_set([("c400", "chirp", 400.0)], TRUTH_M1, duration=1.5, model="m1")
    assert fit_logs(inside, "m1", FamilyOptions(budget="quick", seed=0))[0].widened is None

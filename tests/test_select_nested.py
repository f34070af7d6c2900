"""The nested-selection rule shared by the one-joint family selection (folds) and the whole-robot
ladder (one validation set): :mod:`actuatorlab.identify.nested`."""

from __future__ import annotations

import numpy as np

from actuatorlab.identify.nested import MIN_GAIN, center, contained, judge, lowest


def test_contained_lists_the_fitted_models_a_model_contains_in_fitting_order():
    assert contained("m4", ["m1", "m3", "m1+delay", "m2"]) == ["m1", "m3", "m2"]
    assert contained("m1", ["m2", "m3"]) == [] and contained("m3+delay", ["m1+delay", "m2"]) == ["m1+delay"]


def test_the_reference_is_the_best_eligible_contained_model_and_the_gain_is_relative_to_it():
    scores = {"m1": np.array([1.0, 1.0, 1.0]), "m2": np.array([0.9, 0.9, 0.9])}
    eligible = {"m1": True, "m2": True}
    v = judge(np.array([0.8, 0.85, 0.86]), ["m1", "m2"], scores, eligible, first=False)
    assert v.parent == "m2"
    assert v.gain == 1.0 - np.exp(np.mean(np.log([0.8, 0.85, 0.86]))) / 0.9
    assert (v.wins, v.losses) == (3, 0) and v.earns_place
    # an ineligible model is never a reference
    v = judge(np.array([0.99, 0.99, 0.99]), ["m1", "m2"], scores, {"m1": True, "m2": False}, first=False)
    assert v.parent == "m1" and v.gain is not None and v.gain < MIN_GAIN and not v.earns_place


def test_a_model_earns_its_place_only_by_the_mean_gain_and_more_wins_than_losses():
    scores, eligible = {"m1": np.array([1.0, 1.0, 1.0])}, {"m1": True}
    # 2 % better on average, but worse in two groups of three: the paired rule refuses it
    v = judge(np.array([0.5, 1.2, 1.24]), ["m1"], scores, eligible, first=False)
    assert v.gain >= MIN_GAIN and (v.wins, v.losses) == (1, 2) and not v.earns_place
    # better in every group but by less than MIN_GAIN: the mean rule refuses it
    assert not judge(np.array([0.99, 0.99, 0.99]), ["m1"], scores, eligible, first=False).earns_place
    # ties (within 1e-9) drop out of the count
    v = judge(np.array([1.0, 0.9, 0.9]), ["m1"], scores, eligible, first=False)
    assert (v.wins, v.losses) == (2, 0) and v.earns_place


def test_the_mean_over_groups_is_geometric_so_every_condition_counts_by_its_ratio():
    """Held-out groups differ in difficulty by 10x and more (one excitation family that the others
    do not cover): the arithmetic mean lets the hardest group alone decide, the geometric mean
    weighs each group's ratio to the reference the same (bench/journal/fit_rules.md, R45)."""
    assert center([1.0, 4.0]) == 2.0 and center([0.02]) == 0.02
    scores, eligible = {"m1+delay": np.array([110.0, 2.6, 4.4, 2.9])}, {"m1+delay": True}
    # the in-family zoo truth's member: at the floor on three groups, worse on the fourth
    v = judge(np.array([104.8 * 1.3, 0.39, 0.38, 0.35]), ["m1+delay"], scores, eligible, first=False)
    assert v.earns_place and v.gain > 0.75 and (v.wins, v.losses) == (3, 1)
    assert np.mean([104.8 * 1.3, 0.39, 0.38, 0.35]) > np.mean(scores["m1+delay"])  # what the arithmetic mean said


def test_one_validation_score_the_whole_robot_case():
    """F = 1 (select_arm): the gain decides; a model without an eligible contained model is
    eligible only as the first of the ladder or when it contains no fitted model."""
    scores = {"m1": np.array([0.010])}
    assert judge(np.array([0.009]), ["m1"], scores, {"m1": True}, first=False).earns_place
    assert not judge(np.array([0.0099]), ["m1"], scores, {"m1": True}, first=False).earns_place
    assert not judge(np.array([np.inf]), [], {}, {}, first=True).earns_place
    assert judge(np.array([0.02]), [], {}, {}, first=False).earns_place
    assert not judge(np.array([0.02]), ["m1"], scores, {"m1": False}, first=False).earns_place
    assert judge(np.array([0.02]), [], {}, {}, first=True).parent is None


def test_lowest_is_the_eligible_model_with_the_lowest_mean_score_first_on_ties():
    scores = {"m1": np.array([1.0]), "m2": np.array([0.5]), "m3": np.array([0.4]), "m4": np.array([0.5])}
    assert lowest(scores, {"m1": True, "m2": True, "m3": False, "m4": True}) == "m2"

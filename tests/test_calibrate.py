"""Free-swing calibration (identify/calibrate.py): the armature and the encoder offset from the
torque-off runs of synthetic pendulum logs with known ground truth, and how the family fit uses them."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from actuatorlab.errors import ActuatorlabError, UnknownNameError
from actuatorlab.identify.calibrate import (ARMATURE_BAND, OFFSET_BAND, describe, describe_judgement,
                                            free_swing_calibration, torque_off_runs)
from actuatorlab.identify.fit import ParamSpace, fit_model
from actuatorlab.identify import family, select
from actuatorlab.identify.select import FamilyOptions, fit_family
from actuatorlab.models.registry import get_model
from actuatorlab.sim.rollout import make_batches

from synthetic import TRUTH_M1, synthetic_set

#: ground truth: a free pendulum offset by 0.03 rad from the encoder zero, with Coulomb, viscous and
#: load-dependent friction (m3+qoffset)
TRUTH = {**TRUTH_M1, "friction_base": 0.01, "friction_viscous": 0.005, "load_friction": 0.05, "q_offset": 0.03}
MODEL = "m3+qoffset"
DURATION = 4.0  # the drop's torque-off run: 40-75 % of the log = 1.4 s


@pytest.fixture(scope="module")
def logs():
    return synthetic_set([("drop400", "drop", 400.0), ("drop800", "drop", 800.0), ("chirp400", "chirp", 400.0)],
                         TRUTH, duration=DURATION, model=MODEL)


@pytest.fixture(scope="module")
def calibration(logs):
    return free_swing_calibration(logs, seed=0)


def test_torque_off_runs_are_the_free_swings_only(logs):
    runs = torque_off_runs(logs)
    assert [r.name.split("#")[0] for r in runs] == ["drop400", "drop800"]  # the chirp never disables
    for r in runs:
        assert np.all(r["torque_enable"] == 0.0)
        assert r.duration == pytest.approx(0.35 * DURATION, abs=0.02)
        assert np.ptp(r["position"]) > 0.5  # it swings
    assert torque_off_runs(logs, min_s=2.0) == []


def test_a_joint_resting_with_the_torque_off_is_not_a_free_swing(logs):
    rest = logs[0].replace(data={**logs[0].data, "position": np.full(logs[0].n, 0.2)})
    assert torque_off_runs([rest]) == []
    assert free_swing_calibration([rest, logs[2]]) is None


def test_free_swing_recovers_the_armature_and_the_offset(calibration):
    assert calibration is not None
    assert calibration.armature == pytest.approx(TRUTH["armature"], rel=0.02)
    assert calibration.q_offset == pytest.approx(TRUTH["q_offset"], abs=0.002)
    lo, hi = calibration.bounds["armature"]
    assert lo == pytest.approx((1 - ARMATURE_BAND) * calibration.armature) and lo < TRUTH["armature"] < hi
    lo, hi = calibration.bounds["q_offset"]
    assert hi - lo == pytest.approx(2 * OFFSET_BAND) and lo < TRUTH["q_offset"] < hi
    assert calibration.mae < 0.002  # the free pendulum replays its own runs (encoder step 1.5 mrad)
    d = calibration.to_dict()
    assert d["method"] == "free_swing" and len(d["runs"]) == 2 and d["bounds"]["armature"] == list(calibration.bounds["armature"])


def test_without_the_offset_the_free_swing_is_centred_wrongly(logs, calibration):
    """The runs carry the offset: the same free pendulum with q_offset = 0 replays them worse."""
    runs = torque_off_runs(logs)
    off = fit_model(runs, "m3", seed=0, max_evals=600, n_starts=1, grad_steps=0)
    assert off.train_mae > 3.0 * calibration.mae


def test_logs_without_torque_off_runs_are_not_calibrated(logs):
    assert free_swing_calibration([logs[2]]) is None
    assert free_swing_calibration([]) is None


def test_family_fit_carries_the_calibrated_offset_and_boxes(logs, calibration):
    sel = fit_family(logs, ("m1",), FamilyOptions(extensions=(), budget="quick", seed=0, calibration="free_swing"))
    assert sel.selected == get_model("m1+qoffset").name
    cal = sel.extras["calibration"]
    assert cal["armature"] == pytest.approx(calibration.armature) and cal["q_offset"] == pytest.approx(calibration.q_offset)
    space = sel.final.space
    for name in ("armature", "q_offset"):
        i = space.names.index(name)
        assert (space.lower[i], space.upper[i]) == pytest.approx(calibration.bounds[name])
        assert space.lower[i] <= sel.final.params[name] <= space.upper[i]
    assert sel.extras["timing"]["calibration"] == "free_swing" and sel.extras["timing"]["calibration_s"] > 0
    plain = fit_family(logs, ("m1",), FamilyOptions(extensions=(), budget="quick", seed=0, calibration="none"))
    assert plain.selected == "m1" and plain.extras["calibration"] is None
    assert "q_offset" not in plain.final.space.names


def test_unknown_calibration_lists_the_choices(logs):
    with pytest.raises(UnknownNameError, match="free_swing"):
        fit_family(logs, ("m1",), FamilyOptions(calibration="pendulum"))


def test_bounds_override_is_checked(logs):
    batches = make_batches(logs[:1], None)
    spec = get_model("m1")
    space = ParamSpace.build(spec, batches, "servo", bounds={"armature": (0.001, 0.003)})
    i = space.names.index("armature")
    assert (space.lower[i], space.upper[i]) == (0.001, 0.003)
    with pytest.raises(UnknownNameError, match="armature"):
        ParamSpace.build(spec, batches, "servo", bounds={"armatur": (0.001, 0.003)})
    with pytest.raises(ActuatorlabError, match="lower"):
        ParamSpace.build(spec, batches, "servo", bounds={"armature": (0.003, 0.001)})


def test_judged_calibration_lifts_a_wrong_box_and_keeps_a_right_one(logs, calibration, monkeypatch):
    """``calibration="judged"`` (the default): the selected model's fold optima are polished again
    with the boxes lifted; a box that excludes the truth's armature is lifted, the right one kept."""
    J = TRUTH["armature"]
    wrong = replace(calibration, armature=0.7 * J, bounds={**calibration.bounds, "armature": (0.63 * J, 0.77 * J)})
    monkeypatch.setattr(family, "free_swing_calibration", lambda *a, **k: wrong)
    sel = fit_family(logs, ("m3",), FamilyOptions(extensions=(), budget="quick", seed=0))
    rec = sel.extras["calibration_judged"]
    assert sel.selected == MODEL and not rec["kept"] and rec["uncalibrated_score"] < 0.98 * rec["calibrated_score"]
    i = sel.final.space.names.index("armature")
    assert sel.extras["calibration"] is None and sel.final.space.upper[i] > 0.77 * J  # the profile's box
    assert sel.final.params["armature"] == pytest.approx(J, rel=0.05)  # out of the wrong box, at the truth
    monkeypatch.setattr(family, "free_swing_calibration", lambda *a, **k: calibration)
    sel = fit_family(logs, ("m3",), FamilyOptions(extensions=(), budget="quick", seed=0))
    assert sel.extras["calibration_judged"]["kept"] and sel.extras["calibration"] is not None


def test_a_free_swing_on_its_box_edge_has_measured_nothing(calibration):
    """A rotor inertia 10x below the servo profile's armature box (1e-5 kg.m^2): the free swing's armature
    presses on the box's lower edge and is flagged (rule R48), while its offset is still recovered; the
    right calibration is not flagged."""
    assert calibration.on_bound == () and calibration.to_dict()["on_bound"] == []
    light = synthetic_set([("drop400", "drop", 400.0), ("drop800", "drop", 800.0)], {**TRUTH, "armature": 1e-6},
                          duration=DURATION, model=MODEL)
    cal = free_swing_calibration(light, seed=0)
    assert cal is not None and cal.armature == pytest.approx(1e-5, rel=1e-3)
    assert cal.q_offset == pytest.approx(TRUTH["q_offset"], abs=0.002)
    assert cal.on_bound == ("armature",) and "ended on the edge" in describe(cal.to_dict())


def test_judged_selection_drops_boxes_on_the_edge_unfitted(logs, calibration, monkeypatch):
    """The right boxes, kept by the judged selection above, are dropped once the free swing says they
    ended on a bound: the lifted walk is taken and the calibrated one is never fitted."""
    monkeypatch.setattr(family, "free_swing_calibration", lambda *a, **k: replace(calibration, on_bound=("armature",)))
    fitted = []
    real = select.fit_on_folds
    monkeypatch.setattr(select, "fit_on_folds", lambda fam, *a, **k: fitted.append(fam.calibration) or real(fam, *a, **k))
    sel = fit_family(logs, ("m3",), FamilyOptions(extensions=(), budget="quick", seed=0))
    rec = sel.extras["calibration_judged"]
    assert rec["on_bound"] == ["armature"] and not rec["kept"] and not rec["first_kept"]
    assert sel.extras["calibration"] is None and fitted and all(c is None for c in fitted)
    assert "armature ended on the edge" in describe_judgement(rec)

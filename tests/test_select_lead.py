"""The default selection on a truth with a command delay (an m3+delay truth, one joint): the
default walk (whole servo ladder, every selection extension) ends on a model with ``+delay`` whose
fitted delay is the truth's. The walks measured on the zoo and not adopted (rule R42,
bench/family_recipes.py ``WALKS``, bench/journal/fit_rules.md) fit what they say."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from synthetic import TRUTH_M1, synthetic_set

from actuatorlab.identify import select
from actuatorlab.identify.search import PopulationScorer, objective_from_sums
from actuatorlab.identify.select import FamilyOptions, SelectionBudget, fit_family
from actuatorlab.identify.space import ParamSpace, full_vectors
from actuatorlab.models.registry import get_model
from actuatorlab.sim.rollout import make_batches

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from family_recipes import Recipe, fit_family_recipe, line_inits, physical_stds  # noqa: E402

SPECS = [("chirp400", "chirp", 400), ("sine800", "sine", 800), ("drop400", "drop", 400),
         ("steps800", "steps", 800), ("chirp800", "chirp", 800), ("drop800", "drop", 400)]
#: an m3 truth (load-dependent Coulomb friction) with a 12 ms command delay
TRUTH = {**TRUTH_M1, "load_friction": 0.15, "delay": 0.012}


@pytest.fixture(scope="module")
def m3_delay_logs():
    return synthetic_set(SPECS, TRUTH, duration=1.5, model="m3+delay")


def test_default_selection_picks_the_delay_of_the_truth(m3_delay_logs, monkeypatch):
    monkeypatch.setitem(select.SELECTION_BUDGETS, "test", SelectionBudget(150, 400, 10, 1))
    sel = fit_family(m3_delay_logs, options=FamilyOptions(budget="test"))
    assert "delay" in get_model(sel.selected).extensions, sel.selected
    assert sel.final.params["delay"] == pytest.approx(TRUTH["delay"], rel=0.25)
    row = {r["model"]: r for r in sel.table}[sel.selected]
    assert row["earns_place"] and row["gain_vs_parent"] > 0.2  # the delay is worth a fifth of the error


def test_the_walks_fit_what_they_say(m3_delay_logs, monkeypatch):
    monkeypatch.setitem(select.SELECTION_BUDGETS, "tiny", SelectionBudget(60, 60, 8, 1))
    opts = FamilyOptions(budget="tiny", extensions=("delay",), calibration="none")

    def table(walk):
        return {r["model"] for r in fit_family_recipe(m3_delay_logs, ("m1", "m3"), opts, Recipe(walk=walk)).table}

    library, carried, both = table("library"), table("carried"), table("both")
    assert {"m1", "m3"} <= library and ({"m1+delay", "m3+delay"} & library)  # delay on the best base only
    assert {"m1", "m1+delay", "m3+delay"} <= carried and "m3" not in carried  # m1+delay earned: m3 carries it
    assert {"m1", "m3", "m1+delay", "m3+delay"} <= both


def test_the_fold_step_recipes_step_in_physical_terms_and_line_search_the_new_parameter(m3_delay_logs):
    """``physical_stds``: kt (log box 0.05-5) steps 5 % = ln(1.05) / ln(100) of the box, the delay
    (0-50 ms) 1 ms; new parameters keep a full step. ``line_inits``: from the m3+delay truth with
    its load friction switched off, the line search on that new parameter alone moves it into its
    box, downhill, to the grid point nearest the truth (0.15 on a 0-1 box: 0.1 or 0.2)."""
    batches = make_batches(m3_delay_logs, None)
    spec = get_model("m3+delay")
    space = ParamSpace.build(spec, batches, "servo")
    new = np.array([n == "load_friction" for n in space.names])
    stds = np.where(new, 1.0, select.INHERITED_STEP)
    parent = {**space.base, **TRUTH, "load_friction": 0.0}
    st = physical_stds(space, stds, [parent], 0.25)
    ix = {n: j for j, n in enumerate(space.names)}
    assert st[ix["kt"]] == pytest.approx(np.log(1.05) / np.log(100.0) / 0.25, rel=1e-6)
    assert st[ix["delay"]] == pytest.approx(0.001 / 0.05 / 0.25, rel=1e-6)
    assert st[ix["load_friction"]] == 1.0 and np.all(st <= np.maximum(stds, 1.0))

    scorer = PopulationScorer(batches, spec, size=16)
    W = np.ones((1, len(scorer.n)))

    def objective(sums, n, w):
        return objective_from_sums(sums, n, w)

    (lined,) = line_inits(spec, space, scorer, W, [[parent]], new, objective)
    assert lined["load_friction"] == pytest.approx(0.1, abs=1e-6) or lined["load_friction"] == pytest.approx(0.2, abs=1e-6)
    f = [float(objective(scorer(full_vectors(space, space.theta_from(d)[None])), scorer.n, W[0])[0])
         for d in (parent, lined)]
    assert f[1] < 0.5 * f[0], f

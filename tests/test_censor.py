"""The fit's censored objective (identify/censor.py): on noise-free quantised logs the truth is a minimum
of the error outside the readings' quantisation cells (zero there), where the plain MAE prefers a point
with a biased friction law; the batches carry each log's encoder step; the scorer, the loss and the
polish compute the same objective."""

from __future__ import annotations

import numpy as np
import pytest

from synthetic import ENCODER_STEP, M2_DELAY_SPECS as SPECS, TRUTH_M2_DELAY as TRUTH, m2_delay_problem, synthetic_set

from actuatorlab.identify.censor import censored
from actuatorlab.identify.fit import make_loss
from actuatorlab.identify.polish import PolishSettings, ResidualJacobian, polish_folds
from actuatorlab.identify.search import FoldSearch, PopulationScorer, objective_from_sums
from actuatorlab.identify.space import full_vectors
from actuatorlab.models.registry import get_model
from actuatorlab.precision import physics_precision
from actuatorlab.sim.rollout import make_batches

LONG_POLISH = PolishSettings(max_iters=30, rtol=1e-6)


@pytest.fixture(scope="module")
def case():
    with physics_precision():
        logs, batches, spec, space = m2_delay_problem()
        yield dict(logs=logs, batches=batches, spec=spec, space=space, truth=space.theta_from(TRUTH))


def test_the_error_outside_the_band():
    e = np.array([-3.0, -1.0, -0.2, 0.0, 0.5, 1.0, 2.5])
    np.testing.assert_allclose(censored(e, 1.0), [-2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.5])
    np.testing.assert_array_equal(censored(e, 0.0), e)


def test_batches_carry_each_logs_encoder_step(case):
    (b,) = case["batches"]
    np.testing.assert_allclose(b.q_step, ENCODER_STEP, rtol=1e-9)
    with physics_precision():
        (raw,) = make_batches(synthetic_set(SPECS[:2], TRUTH, duration=1.0, model="m2+delay", quantise=False), None)
    np.testing.assert_array_equal(raw.q_step, 0.0)  # continuous positions: the plain error


def test_the_truth_is_a_minimum_of_the_censored_error_not_of_the_mae(case):
    spec, space, batches, truth = case["spec"], case["space"], case["batches"], case["truth"]
    with physics_precision():
        assert float(make_loss(spec, space, batches, "censored")(truth)) == 0.0  # every reading's cell holds the truth
        mae = make_loss(spec, space, batches, "mae")
        assert float(mae(truth)) == pytest.approx(ENCODER_STEP / 4, rel=0.25)  # the quantisation floor
        W = np.ones((1, len(case["logs"])))
        start = [FoldSearch(truth, np.inf, 0)]
        (plain,) = polish_folds(space, ResidualJacobian(batches, spec, censor=0.0), W, start, settings=LONG_POLISH)
        (cens,) = polish_folds(space, ResidualJacobian(batches, spec), W, start, settings=LONG_POLISH)
    got = dict(zip(space.names, plain.theta))
    # the plain MAE is lower away from the truth: the viscous friction moves by more than 5 %
    assert plain.objective < float(mae(truth))
    assert abs(got["friction_viscous"] / TRUTH["friction_viscous"] - 1) > 0.05, got
    np.testing.assert_array_equal(cens.theta, truth)  # the censored polish finds nothing lower


def test_the_scorer_the_loss_and_the_polish_agree(case):
    spec, space, batches, truth = case["spec"], case["space"], case["batches"], case["truth"]
    theta = truth * np.linspace(0.9, 1.1, truth.size)  # a point off the truth: errors outside the cells
    with physics_precision():
        scorer = PopulationScorer(batches, spec, size=4)
        sums = scorer(full_vectors(space, theta[None]))
        n = scorer.n
        cens = float(make_loss(spec, space, batches, "censored")(theta))
        mae = float(make_loss(spec, space, batches, "mae")(theta))
        assert 0.0 < cens < mae
        assert sums["cens_q"].sum() / n.sum() == pytest.approx(cens, rel=1e-9)
        assert sums["abs_q"].sum() / n.sum() == pytest.approx(mae, rel=1e-9)
        assert objective_from_sums(sums, n, np.ones(n.size))[0] == pytest.approx(cens, rel=1e-9)
        plain = PopulationScorer(batches, spec, size=4, censor=0.0)(full_vectors(space, theta[None]))
        np.testing.assert_allclose(plain["cens_q"], sums["abs_q"], rtol=1e-12)
        jac = ResidualJacobian(batches, spec)
        rq, _ = jac.residuals(full_vectors(space, theta[None])[0])
        np.testing.assert_allclose(jac.half[jac.valid], ENCODER_STEP / 2, rtol=1e-9)
        assert np.abs(censored(rq, jac.half))[jac.valid].mean() == pytest.approx(cens, rel=1e-9)


def test_a_single_model_fit_minimises_the_censored_error_and_the_selection_the_plain_one(case):
    """``fit_model`` (``fit --model``) scores the censored error and reports the plain MAE: from the
    truth its objective is 0 and its MAE the quantisation floor. The selection's walk keeps the plain
    error (``SELECTION_CENSOR`` = 0): its scorer's censored sums are its plain ones."""
    from actuatorlab.identify.censor import SELECTION_CENSOR
    from actuatorlab.identify.fit import fit_model
    from actuatorlab.identify.select import FamilyOptions, prepare

    with physics_precision():
        r = fit_model(case["batches"], "m2+delay", init=TRUTH, max_evals=32, n_starts=1, grad_steps=0, sigma0=1e-6)
    assert r.objective == 0.0
    assert r.train_mae == pytest.approx(ENCODER_STEP / 4, rel=0.25)
    assert SELECTION_CENSOR == 0.0
    fam = prepare(case["logs"], ("m1",), FamilyOptions(calibration="none"))
    spec = get_model("m2+delay")
    space = fam.space(spec)
    theta = space.theta_from(TRUTH) * 1.05
    sums = fam.scorer(spec)(full_vectors(space, theta[None]))
    np.testing.assert_array_equal(sums["cens_q"], sums["abs_q"])
    jac = fam.jacobian(spec)
    assert np.all(jac.half == 0.0)
    # the final refit's problem: the band of FINAL_CENSOR on the walk's compiled residuals
    final = fam.for_final().jacobian(spec)
    assert final._lin is jac._lin and final._res is jac._res
    assert np.all(final.half[final.valid] > 0.0) and np.all(jac.half == 0.0)
    p = full_vectors(space, theta[None])[0]
    np.testing.assert_array_equal(final.residuals(p)[0], jac.residuals(p)[0])


def test_the_selections_final_refit_minimises_the_censored_error(case, monkeypatch):
    """Rule R52: the walk compares models on the plain error, then the selected model's final refit on
    all the logs minimises the censored one (``FINAL_CENSOR``): its objective is below its plain MAE."""
    from actuatorlab.identify import select
    from actuatorlab.identify.censor import FINAL_CENSOR
    from actuatorlab.identify.select import FamilyOptions, SelectionBudget, fit_family

    monkeypatch.setitem(select.SELECTION_BUDGETS, "tiny", SelectionBudget(60, 200, 8, 1))
    sel = fit_family(case["logs"], ("m1", "m2"), FamilyOptions(budget="tiny", extensions=("delay",),
                                                                calibration="none"))
    assert FINAL_CENSOR == 0.5
    assert sel.final.objective < sel.final.train_mae
    row = {r["model"]: r for r in sel.table}[sel.selected]
    assert row["train_mae"] > 0.0  # the walk's rows: plain MAE

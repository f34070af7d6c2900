"""Levenberg-Marquardt polish (identify/polish.py): from the optimum of the model a member contains,
it reaches the member's truth where a short CMA-ES search does not, never returns a worse point, and
one compiled Jacobian serves every model of a structure."""

from __future__ import annotations

import numpy as np
import pytest

from synthetic import ENCODER_STEP, TRUTH_M2_DELAY as TRUTH, m2_delay_problem

from actuatorlab.identify.polish import PolishSettings, ResidualJacobian, polish_folds
from actuatorlab.identify.search import FoldSearch, PopulationScorer, SearchSettings, objective_from_sums, search_folds
from actuatorlab.identify.space import ParamSpace, full_vectors
from actuatorlab.models.registry import embed_params, get_model
from actuatorlab.precision import physics_precision

SHARED = ("armature", "friction_base", "delay")


@pytest.fixture(scope="module")
def case():
    with physics_precision():
        logs, batches, spec, space = m2_delay_problem()
        W = np.ones((1, len(logs)))
        scorer = PopulationScorer(batches, spec, size=16 * len(logs), dtype=np.float32)
        jac = ResidualJacobian(batches, spec)
        # the contained model's optimum: m1+delay, a short CMA-ES search
        parent = get_model("m1+delay")
        p_space = ParamSpace.build(parent, batches, "servo")
        (pr,) = search_folds(parent, p_space, PopulationScorer(batches, parent, size=16 * len(logs)), W, [[{}]],
                             SearchSettings(600, 16, 1, 0.25, 0))
        start = {**p_space.base, **dict(zip(p_space.names, map(float, pr.theta)))}
        # the member's own short CMA-ES search from there (what the fold searches get)
        (cr,) = search_folds(spec, space, scorer, W, [[start]], SearchSettings(300, 16, 1, 0.25, 1))
        (pol,) = polish_folds(space, jac, W, [cr])
    return dict(batches=batches, spec=spec, space=space, scorer=scorer, jac=jac, W=W, cma=cr, polished=pol)


def _mae(case, theta) -> float:
    sums = case["scorer"](full_vectors(case["space"], np.atleast_2d(theta)))
    return float(objective_from_sums(sums, case["scorer"].n, case["W"][0])[0])


def test_polish_reaches_the_member_that_cma_es_alone_does_not(case):
    cma, pol = _mae(case, case["cma"].theta), _mae(case, case["polished"].theta)
    assert pol < 0.5 * cma, (cma, pol)  # the short search stops far from the bottom of the basin
    assert pol < ENCODER_STEP  # within one encoder count: the quantisation floor
    assert case["polished"].objective == pytest.approx(pol, rel=1e-3)
    got = dict(zip(case["space"].names, case["polished"].theta))
    for k in SHARED:
        assert got[k] == pytest.approx(TRUTH[k], rel=0.05), k
    assert got["friction_stribeck"] == pytest.approx(TRUTH["friction_stribeck"], rel=0.2)
    # at one supply voltage the logs fix the torque per volt kt / R and the total damping
    # kt^2 / R + F_v, not kt, R and F_v apart (back-EMF braking and viscous friction are both ~ q')
    assert got["kt"] / got["R"] == pytest.approx(TRUTH["kt"] / TRUTH["R"], rel=0.05)
    damping = lambda p: p["kt"] ** 2 / p["R"] + p["friction_viscous"]  # noqa: E731
    assert damping(got) == pytest.approx(damping(TRUTH), rel=0.05)


def test_polish_never_returns_a_worse_point(case):
    space = case["space"]
    truth = space.theta_from(embed_params(TRUTH, "m2+delay"))
    start = FoldSearch(truth, _mae(case, truth), 0)
    with physics_precision():
        (out,) = polish_folds(space, case["jac"], case["W"], [start])
    assert out.objective <= start.objective * (1 + 1e-4)
    assert _mae(case, out.theta) <= start.objective * (1 + 1e-4)


def test_no_iterations_leave_the_search_as_it_was(case):
    res = [case["cma"]]
    assert polish_folds(case["space"], case["jac"], case["W"], res, settings=PolishSettings(0)) is res


def test_one_compiled_jacobian_per_padded_direction_count(case):
    """m1 (5 free) and m1+delay (6) pad to 8 directions, m2+delay (9) to 16: one structure's
    Jacobian is compiled once per padded count, whatever the model."""
    jac = case["jac"]
    before = jac._lin._cache_size()  # the fixture compiled m2+delay's 16
    with physics_precision():
        for m in ("m1+delay", "m1", "m2+delay"):
            spec = get_model(m)
            sp = ParamSpace.build(spec, case["batches"], "servo")
            th = sp.theta_from(embed_params(TRUTH, m))
            polish_folds(sp, jac, case["W"], [FoldSearch(th, 1.0, 0)], settings=PolishSettings(1))
    assert jac._lin._cache_size() == before + 1

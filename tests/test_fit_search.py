"""The CMA-ES starts of a single-model fit: a start that stalls hands its evaluations to a restart,
and the fit of a Stribeck + delay truth finds the delay at the quick budget."""

from __future__ import annotations

import numpy as np
import pytest

from synthetic import ENCODER_STEP, TRUTH_M1, synthetic_set

from actuatorlab.identify.fit import fit_model
from actuatorlab.identify.search import Stall, UnitBoxCMA, cma_stream, run_cma
from actuatorlab.identify.select import BUDGETS

SPECS = [("chirp400", "chirp", 400), ("sine800", "sine", 800), ("drop400", "drop", 400), ("steps800", "steps", 800)]
#: an m2+delay truth: m1's motor and friction, a Stribeck bump and a 10 ms command delay
TRUTH_M2_DELAY = {**TRUTH_M1, "friction_stribeck": 0.03, "stribeck_velocity": 0.1, "stribeck_alpha": 1.5,
                  "delay": 0.01}
NOISE_FLOOR = ENCODER_STEP / 4


@pytest.fixture(scope="module")
def m2_delay_logs():
    return synthetic_set(SPECS, TRUTH_M2_DELAY, duration=1.5, model="m2+delay")


def test_stall_is_judged_over_its_window_relative_or_absolute():
    s = Stall(generations=3, rel=0.01)
    assert not s([1.0, 1.0, 1.0])  # a window not yet full is never a stall
    assert s([1.0, 0.999, 0.995, 0.995])  # 0.5 % in 3 generations
    assert not s([1.0, 0.99, 0.98, 0.97])  # 3 %
    # a log objective (effort-weighted) is judged on its absolute change: -10.00 -> -10.005 is 0.5 %
    assert Stall(generations=3, log_objective=True)([-10.0, -10.002, -10.004, -10.005])
    assert not Stall(generations=3, log_objective=True)([-10.0, -10.01, -10.02, -10.05])


def test_run_cma_ends_a_stalled_search_and_only_that_one():
    """A search on a nearly flat objective (1 + 1e-4 |z - c|^2: never 1 % better) stops after the
    stall window; one on the sphere |z - c|^2 runs on to max_evals in the same lockstep loop."""
    c = np.array([0.3, 0.7, 0.2])
    es = [UnitBoxCMA(np.full(3, 0.5), 0.3, {"popsize": 6, "verbose": -9, **cma_stream(k + 1)}) for k in range(2)]

    def score(Zs):
        out = {}
        if Zs[0] is not None:
            out[0] = 1.0 + 1e-4 * np.sum((Zs[0] - c) ** 2, 1)
        if Zs[1] is not None:
            out[1] = np.sum((Zs[1] - c) ** 2, 1)
        return out

    used = run_cma(es, score, max_evals=120, stall=Stall(generations=5))
    assert used[0] == 6 * 6  # the window (5 generations) after the first one, then stalled
    assert used[1] == 120


def test_starts_share_the_pool_and_restart_after_a_stall(m2_delay_logs):
    evals, starts, _ = BUDGETS["quick"]
    r = fit_model(m2_delay_logs, "m2+delay", seed=0, max_evals=evals, n_starts=starts, grad_steps=0)
    used = [h["evals"] for h in r.history]
    assert sum(used) <= starts * evals + 16  # one population over at most
    assert all(u <= evals + 16 for u in used)
    # every start but the last ended at max_evals or stalled early, and a restart only follows
    # while a stall window is left in the pool
    assert len(used) >= starts or sum(used) > starts * evals - Stall().generations * 16
    assert r.evaluations == sum(used) + 1  # + the first point


@pytest.mark.parametrize("seed", [0, 1])
def test_m2_delay_fit_recovers_the_delay_at_the_quick_budget(m2_delay_logs, seed):
    """The in-family Stribeck + delay truth: the delay within 10 %, the motor within 10 %, the
    position error within 3x the encoder's quantisation floor (the issue's in-sample target)."""
    evals, starts, grad = BUDGETS["quick"]
    r = fit_model(m2_delay_logs, "m2+delay", seed=seed, max_evals=evals, n_starts=starts, grad_steps=grad)
    p = r.params
    assert p["delay"] == pytest.approx(TRUTH_M2_DELAY["delay"], rel=0.1)
    assert p["kt"] == pytest.approx(TRUTH_M2_DELAY["kt"], rel=0.1)
    assert p["R"] == pytest.approx(TRUTH_M2_DELAY["R"], rel=0.1)
    assert p["friction_viscous"] == pytest.approx(TRUTH_M2_DELAY["friction_viscous"], rel=0.1)
    assert r.train_mae < 3 * NOISE_FLOOR, r.train_mae


def test_without_a_stall_test_every_start_runs_its_share(m2_delay_logs):
    """``stall=None`` (the free-swing calibration's search): n_starts starts, each to max_evals
    (or pycma's own stop), never a restart in between."""
    r = fit_model(m2_delay_logs, "m2+delay", seed=0, max_evals=400, n_starts=3, grad_steps=0, stall=None)
    assert [h["start"] for h in r.history] == [0, 1, 2]
    assert all(h["evals"] <= 400 + 16 for h in r.history)
    with_stall = fit_model(m2_delay_logs, "m2+delay", seed=0, max_evals=400, n_starts=3, grad_steps=0,
                           stall=Stall(generations=5, rel=0.5))  # stalls: < 50 % better in 5 generations
    used = [h["evals"] for h in with_stall.history]
    assert len(used) > 3 and min(used) >= 6 * 16 and sum(used) <= 3 * 400 + 16

"""Gauss-Newton identifiability summary: closed-form covariance, collinearity flags, JSON output."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from actuatorlab.errors import ModelError
from actuatorlab.identify.identifiability import identifiability


def _linear_problem(seed: int = 0, n: int = 200):
    rng = np.random.default_rng(seed)
    # columns of very different scales: the column scaling must not change the covariance
    A = rng.normal(size=(n, 3)) * np.array([1.0, 1e3, 1e-2])
    A[:, 1] += 0.3 * A[:, 0] * 1e3  # some (not extreme) correlation
    theta_true = np.array([0.5, -2e-3, 40.0])
    y = A @ theta_true + 0.1 * rng.normal(size=n)
    theta_hat, *_ = np.linalg.lstsq(A, y, rcond=None)
    r = A @ theta_hat - y
    sigma2 = r @ r / (n - 3)
    cov = sigma2 * np.linalg.inv(A.T @ A)
    return A, y, theta_hat, cov


def _check_against_closed_form(out, theta_hat, cov, names):
    se = np.sqrt(np.diag(cov))
    got = np.array([out["stderr"][k] for k in names])
    np.testing.assert_allclose(got, se, rtol=1e-6)
    np.testing.assert_allclose([out["relative_stderr"][k] for k in names], se / np.abs(theta_hat), rtol=1e-6)
    np.testing.assert_allclose(np.array(out["correlation"]), cov / np.outer(se, se), rtol=1e-6, atol=1e-9)


def test_linear_least_squares_matches_closed_form_covariance():
    A, y, theta_hat, cov = _linear_problem()
    names = ["a", "b", "c"]
    out = identifiability(lambda t: jnp.asarray(A) @ t - jnp.asarray(y), theta_hat, names)
    _check_against_closed_form(out, theta_hat, cov, names)
    assert out["jacobian_method"] == "jacfwd"
    assert out["rank"] == 3 and out["n_residuals"] == 200 and out["dof"] == 197
    assert out["unidentifiable"] == []
    # scaled condition number: (s_max/s_min)^2 of A with unit-norm columns
    As = A / np.linalg.norm(A, axis=0)
    s = np.linalg.svd(As, compute_uv=False)
    assert out["condition_number"] == pytest.approx((s[0] / s[-1]) ** 2, rel=1e-9)
    assert "optimistic" in out["note"]
    json.dumps(out, allow_nan=False)  # strictly JSON-serializable


def test_finite_difference_fallback_when_jacobian_is_not_finite():
    A, y, theta_hat, cov = _linear_problem(seed=1)

    @jax.custom_jvp
    def poisoned(x):
        return x

    @poisoned.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        return x, t * jnp.nan  # forward-mode derivative is NaN, the function itself is fine

    names = ["a", "b", "c"]
    out = identifiability(lambda t: jnp.asarray(A) @ poisoned(t) - jnp.asarray(y), theta_hat, names)
    assert out["jacobian_method"] == "finite_differences"
    _check_against_closed_form(out, theta_hat, cov, names)


def test_perfectly_collinear_parameters_are_flagged_and_rank_deficient():
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=100), rng.normal(size=100)
    A = np.stack([a, a, b], axis=1)  # theta0 and theta1 enter only through their sum
    y = A @ np.array([1.0, 1.0, -0.5]) + 0.05 * rng.normal(size=100)
    theta_hat = np.array([0.7, 1.3, -0.5])
    out = identifiability(lambda t: jnp.asarray(A) @ t - jnp.asarray(y), theta_hat, ["k1", "k2", "c"])
    assert out["rank"] == 2
    assert out["condition_number"] is None
    assert sorted(out["unidentifiable"]) == ["k1", "k2"]
    pairs = {(p[0], p[1]): p[2] for p in out["flagged_pairs"]}
    assert set(pairs) == {("k1", "k2")}
    assert abs(pairs[("k1", "k2")]) == pytest.approx(1.0, abs=1e-9)
    json.dumps(out, allow_nan=False)


def test_near_collinear_pair_flagged_independent_parameter_not():
    rng = np.random.default_rng(3)
    t = np.linspace(0.0, 1.0, 300)
    a = np.sin(7 * t)
    A = np.stack([a, a + 1e-3 * rng.normal(size=t.size), np.cos(3 * t)], axis=1)
    y = A @ np.array([0.2, 0.3, 1.0]) + 0.01 * rng.normal(size=t.size)
    theta_hat, *_ = np.linalg.lstsq(A, y, rcond=None)
    out = identifiability(lambda x: jnp.asarray(A) @ x - jnp.asarray(y), theta_hat, ["p", "q", "r"])
    assert out["rank"] == 3
    assert out["condition_number"] > 1e5
    assert [f[:2] for f in out["flagged_pairs"]] == [["p", "q"]]
    assert out["flagged_pairs"][0][2] < -0.999  # compensating parameters: strongly negative
    corr = np.array(out["correlation"])
    assert abs(corr[0, 2]) < 0.95 and abs(corr[1, 2]) < 0.95
    # the pair is still flagged at a much stricter threshold
    assert identifiability(lambda x: jnp.asarray(A) @ x - jnp.asarray(y), theta_hat, ["p", "q", "r"],
                           threshold=0.9999)["flagged_pairs"][0][:2] == ["p", "q"]


def test_nonlinear_model_uses_the_jacobian_at_the_optimum():
    """Exponential decay y = a exp(-b t): compare with the analytic Jacobian."""
    rng = np.random.default_rng(4)
    t = np.linspace(0.0, 3.0, 120)
    a0, b0 = 2.0, 1.3
    y = a0 * np.exp(-b0 * t) + 0.02 * rng.normal(size=t.size)
    theta_hat = np.array([2.01, 1.29])  # any point: the formula is evaluated where it is given
    r = theta_hat[0] * np.exp(-theta_hat[1] * t) - y
    J = np.stack([np.exp(-theta_hat[1] * t), -theta_hat[0] * t * np.exp(-theta_hat[1] * t)], axis=1)
    cov = (r @ r / (t.size - 2)) * np.linalg.inv(J.T @ J)
    out = identifiability(lambda x: x[0] * jnp.exp(-x[1] * jnp.asarray(t)) - jnp.asarray(y), theta_hat, ["a", "b"])
    _check_against_closed_form(out, theta_hat, cov, ["a", "b"])


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ModelError, match="2 names for 3 parameters"):
        identifiability(lambda x: x, np.ones(3), ["a", "b"])
    with pytest.raises(ModelError, match="not finite"):
        identifiability(lambda x: x * jnp.nan, np.ones(2), ["a", "b"])


# ------------------------------------------------------------------------------------------------
# sensitivity: what the logs determine at all
# ------------------------------------------------------------------------------------------------


def _quantised_problem():
    """y = a sin(t) + b t + c tanh(t / 0.05) measured with a 1e-2 quantiser: the c term is below a count."""
    from actuatorlab.identify.identifiability import sensitivity

    t = np.linspace(0.0, 4.0, 2001)
    truth = np.array([1.0, 0.3, 2e-3])

    def model(th):
        return th[0] * jnp.sin(t) + th[1] * t + th[2] * jnp.tanh(t / 0.05)

    y = np.round(np.asarray(model(jnp.asarray(truth))) / 1e-2) * 1e-2

    def residuals(th):
        return model(jnp.asarray(th)) - y

    return sensitivity, residuals, truth


def test_sensitivity_flags_the_parameter_below_the_quantiser_and_keeps_the_others():
    sensitivity, residuals, theta = _quantised_problem()
    names = ["a", "b", "c"]
    out = sensitivity(residuals, theta, names)
    m0 = float(np.mean(np.abs(np.asarray(residuals(theta)))))
    assert out["mae"] == pytest.approx(m0, rel=1e-12) and out["step"] == 0.1 and out["min_change"] == 0.02
    for i, n in enumerate(names):  # the definition: MAE with theta_i alone at (1 -+ 10 %), relative to the optimum's
        for k, f in enumerate((0.9, 1.1)):
            th = theta.copy()
            th[i] *= f
            want = float(np.mean(np.abs(np.asarray(residuals(th))))) / m0 - 1.0
            assert out["change"][n][k] == pytest.approx(want, rel=1e-9, abs=1e-12)
    # a and b move the signal by 0.1-0.12 (ten counts): far above 2 %; c by 2e-4 (a fiftieth of a count)
    assert min(out["change"]["a"]) > 1.0 and min(out["change"]["b"]) > 1.0
    assert abs(out["change"]["c"][0]) < 0.02 and out["not_determined"] == ["c"] and out["improvable"] == []
    assert "10 %" in out["rule"] and "2 %" in out["rule"]
    json.dumps(out)
    # the threshold is an argument; below -min_change a move improves the fit: improvable, not undetermined
    tiny = sensitivity(residuals, theta, names, min_change=1e-9)
    low = {n: min(out["change"][n]) for n in names}
    assert tiny["not_determined"] == [n for n in names if -1e-9 <= low[n] < 1e-9]
    assert tiny["improvable"] == [n for n in names if low[n] < -1e-9]
    assert tiny["not_determined"] + tiny["improvable"] == ["c"]


def test_sensitivity_of_a_parameter_at_zero_and_of_a_replay_that_blows_up():
    from actuatorlab.identify.identifiability import sensitivity

    t = np.linspace(0.0, 1.0, 101)
    y = np.sin(t)

    def residuals(th):  # th[1] = 0 moves nothing; th[0] * 1.1 makes the residual infinite
        return jnp.where(th[0] > 1.05, jnp.inf, th[0] * jnp.sin(t)) + th[1] * t - y + 1e-3

    out = sensitivity(residuals, np.array([1.0, 0.0]), ["a", "zero"])
    assert out["change"]["zero"] is None and "zero" not in out["not_determined"]
    assert out["change"]["a"][1] is None and out["change"]["a"][0] > 0.02  # an infinite MAE is a large change
    assert out["not_determined"] == []
    with pytest.raises(ModelError, match="2 names for 1 parameters"):
        sensitivity(residuals, np.array([1.0]), ["a", "b"])
    with pytest.raises(ModelError, match="step"):
        sensitivity(residuals, np.array([1.0, 0.0]), ["a", "zero"], step=1.5)

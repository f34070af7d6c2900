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

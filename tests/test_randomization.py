"""Randomization spec: sampled statistics match the spec, per-episode draws stay fixed within an
episode, drift evolves as stated, proposals follow the identification, bad specs name file + entry."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from actuatorlab.app.cli import main
from actuatorlab.sim.randomization import (SPEC_FORMAT, Randomizer, RandomizationError, load_spec, parse_spec,
                                           sample_drift, drifted, sample_episode, sample_episode_np, step_noise,
                                           step_noise_np)
from actuatorlab.sim.randomization_proposal import propose_spec

N = 20000  # episodes drawn for the statistics: standard error of a std ~ 0.5 %, of a correlation ~ 0.005

COV = np.array([[0.010, 0.008, 0.0],     # log kt, log R: correlated 0.8 (as kt and R trade off in a fit)
                [0.008, 0.010, 0.0],
                [0.0, 0.0, 4e-6]])       # friction_base [N.m]: linear space
P0 = {"kt": 0.5, "R": 4.0, "friction_base": 0.05, "armature": 1e-3, "q_offset": 0.0, "delay": 0.004}


def doc(*entries) -> dict:
    return {"format": SPEC_FORMAT, "format_version": "1", "entries": list(entries)}


FULL = doc(
    {"name": "fit", "kind": "identified", "parameters": ["kt", "R", "friction_base"], "covariance": COV.tolist()},
    {"name": "arm_unit", "kind": "unit", "parameter": "armature", "distribution": "lognormal", "std": 0.08},
    {"name": "delay_unit", "kind": "unit", "parameter": "delay", "distribution": "add_uniform", "half_width": 0.0015},
    {"name": "zero", "kind": "calibration_offset", "std": 0.003},
    {"name": "heating", "kind": "drift", "parameter": "R", "shape": "first_order", "mode": "relative",
     "mean": 0.08, "std": 0.02, "time_constant": 120.0},
    {"name": "encoder", "kind": "noise", "signal": "position", "std": 0.002},
    {"name": "tach", "kind": "noise", "signal": "velocity", "std": 0.05, "quantization": 0.024})


def params(n: int = 2) -> dict:
    return {k: jnp.full((n,), v) for k, v in P0.items()}


@pytest.fixture(scope="module")
def draws():
    spec = parse_spec(FULL, "full.json")
    keys = jax.random.split(jax.random.PRNGKey(7), N)
    p = params(2)
    ep = jax.jit(jax.vmap(lambda k: sample_episode(spec, k, p)))(keys)
    coef = jax.jit(jax.vmap(lambda k: sample_drift(spec, k, p)))(keys)
    return spec, {k: np.asarray(v) for k, v in ep.items()}, {k: np.asarray(v) for k, v in coef.items()}


def test_identified_draws_have_the_specified_covariance_in_natural_space(draws):
    _, ep, _ = draws
    z = np.stack([np.log(ep["kt"][:, 0] / 0.5), np.log(ep["R"][:, 0] / 4.0), ep["friction_base"][:, 0] - 0.05], 1)
    assert np.abs(z.mean(0)).max() < 3 * np.sqrt(COV.diagonal().max() / N)
    np.testing.assert_allclose(z.std(0), np.sqrt(COV.diagonal()), rtol=0.03)
    assert np.corrcoef(z.T)[0, 1] == pytest.approx(0.8, abs=0.015)
    assert abs(np.corrcoef(z.T)[0, 2]) < 0.03
    # identified uncertainty is the type's: shared by every actuator of the episode
    np.testing.assert_array_equal(ep["kt"][:, 0], ep["kt"][:, 1])


def test_unit_and_calibration_entries_are_independent_per_actuator(draws):
    _, ep, _ = draws
    la = np.log(ep["armature"] / 1e-3)
    np.testing.assert_allclose(la.std(0), 0.08, rtol=0.03)
    assert abs(np.corrcoef(la.T)[0, 1]) < 0.03  # actuator 0 and 1 drawn independently
    d = ep["delay"] - 0.004
    assert d.min() >= -0.0015 and d.max() <= 0.0015
    np.testing.assert_allclose(d.std(0), 0.0015 / np.sqrt(3), rtol=0.03)
    np.testing.assert_allclose(ep["q_offset"].std(0), 0.003, rtol=0.03)
    assert abs(np.corrcoef(ep["q_offset"].T)[0, 1]) < 0.03
    # parameters the spec does not name are untouched
    raw = sample_episode(parse_spec(FULL), jax.random.PRNGKey(0), {**params(2), "stiffness": jnp.full(2, 50.0)})
    np.testing.assert_array_equal(raw["stiffness"], 50.0)


def test_drift_evolves_as_stated(draws):
    spec, ep, coef = draws
    c = coef["heating"]
    assert c.mean() == pytest.approx(0.08, abs=3 * 0.02 / np.sqrt(N)) and c.std() == pytest.approx(0.02, rel=0.03)
    key = jax.random.PRNGKey(3)
    p = sample_episode(spec, key, params(2))
    cf = sample_drift(spec, key, p)
    for t in (0.0, 60.0, 120.0, 1e4):
        pt = drifted(spec, cf, p, t)
        np.testing.assert_allclose(pt["R"], p["R"] * (1 + cf["heating"] * (1 - np.exp(-t / 120.0))), rtol=1e-12)
        np.testing.assert_array_equal(pt["kt"], p["kt"])  # only the drifting parameter moves
    lin = parse_spec(doc({"name": "creep", "kind": "drift", "parameter": "friction_base", "shape": "linear",
                          "mode": "absolute", "mean": 1e-4, "std": 0.0}))
    pl = drifted(lin, sample_drift(lin, key, params(1)), params(1), 30.0)
    np.testing.assert_allclose(pl["friction_base"], 0.05 + 30 * 1e-4)


def test_noise_statistics_and_quantization():
    spec = parse_spec(FULL)
    keys = jax.random.split(jax.random.PRNGKey(1), N)
    obs = {"position": jnp.full(3, 0.3), "velocity": jnp.zeros(3)}
    o = jax.vmap(lambda k: step_noise(spec, k, obs))(keys)
    pos, vel = np.asarray(o["position"]), np.asarray(o["velocity"])
    np.testing.assert_allclose((pos - 0.3).std(), 0.002, rtol=0.03)
    q = vel / 0.024
    np.testing.assert_allclose(q, np.round(q), atol=1e-9)  # on the quantization grid
    assert np.sqrt(np.mean(vel ** 2)) == pytest.approx(np.sqrt(0.05 ** 2 + 0.024 ** 2 / 12), rel=0.05)


def test_per_episode_entries_stay_fixed_within_an_episode_and_change_at_reset():
    """A toy environment with the Randomizer interface: reset samples, every step applies drift and
    noise; the per-episode parameters seen by every step are those of the reset."""
    r = Randomizer(FULL)
    p0 = params(2)

    @jax.jit
    def reset(key):
        return {"key": key, "params": r.sample_episode(key, p0), "t": jnp.zeros(())}

    @jax.jit
    def step(state, key):
        p = r.drift(state["key"], state["params"], state["t"])
        obs = r.step_noise(key, {"position": p["q_offset"], "velocity": jnp.zeros(2)})
        return {**state, "t": state["t"] + 0.02}, (p, obs["position"])

    s = reset(jax.random.PRNGKey(11))
    seen = []
    for i in range(5):
        s, (p, pos) = step(s, jax.random.PRNGKey(100 + i))
        seen.append((p, pos))
    for p, _ in seen:
        for name in ("kt", "armature", "delay", "q_offset", "friction_base"):
            np.testing.assert_array_equal(p[name], seen[0][0][name])
    assert len({float(pos[0]) for _, pos in seen}) == 5  # fresh noise every step
    assert float(seen[-1][0]["R"][0]) != float(seen[0][0]["R"][0])  # R drifts
    s2 = reset(jax.random.PRNGKey(12))
    assert not np.allclose(s2["params"]["armature"], s["params"]["armature"])
    np.testing.assert_array_equal(reset(jax.random.PRNGKey(11))["params"]["armature"], s["params"]["armature"])


def test_flat_observation_layout_and_float32_program():
    r = Randomizer(FULL, layout={"position": slice(0, 2), "velocity": [(slice(2, 4), 1.0)]})
    with jax.enable_x64(False):
        obs = jnp.zeros(4, jnp.float32)
        o = r.step_noise(jax.random.PRNGKey(0), obs)
        p = r.sample_episode(jax.random.PRNGKey(0), {k: jnp.full((2,), v, jnp.float32) for k, v in P0.items()})
        assert o.dtype == jnp.float32 and all(v.dtype == jnp.float32 for v in p.values())
    assert np.all(np.asarray(o[:2]) != 0)


def test_numpy_twin_matches_the_statistics():
    spec = parse_spec(FULL)
    rng = np.random.default_rng(0)
    eps = [sample_episode_np(spec, rng, {k: np.full(1, v) for k, v in P0.items()}) for _ in range(4000)]
    z = np.array([[np.log(e["kt"][0] / 0.5), np.log(e["R"][0] / 4.0)] for e in eps])
    np.testing.assert_allclose(z.std(0), 0.1, rtol=0.06)
    assert np.corrcoef(z.T)[0, 1] == pytest.approx(0.8, abs=0.03)
    o = step_noise_np(spec, rng, {"position": np.zeros(4000), "velocity": np.zeros(4000)})
    assert o["position"].std() == pytest.approx(0.002, rel=0.06)


def test_marginal_stderr_fallback_and_semidefinite_covariance():
    s = parse_spec(doc({"name": "m", "kind": "identified", "parameters": ["kt", "R"], "stderr": [0.1, 0.2]}))
    L = np.array(s.entries[0].chol)
    np.testing.assert_allclose(L @ L.T, np.diag([0.01, 0.04]))
    # rank-1 (two jackknife refits for two parameters): still a valid factor
    v = np.array([0.1, -0.05])
    s = parse_spec(doc({"name": "j", "kind": "identified", "parameters": ["kt", "R"], "covariance": np.outer(v, v).tolist()}))
    L = np.array(s.entries[0].chol)
    np.testing.assert_allclose(L @ L.T, np.outer(v, v), atol=1e-15)


BAD = [
    ({"name": "a", "parameter": "kt", "std": 0.1}, "'kind' is None"),
    ({"name": "a", "kind": "wobble"}, "'kind' is 'wobble'"),
    ({"name": "a", "kind": "unit", "parameter": "kt_typo", "distribution": "lognormal", "std": 0.1}, "unknown parameter 'kt_typo'"),
    ({"name": "a", "kind": "unit", "parameter": "kt", "distribution": "add_normal", "std": 0.1}, "must stay > 0"),
    ({"name": "a", "kind": "unit", "parameter": "kt", "distribution": "lognormal", "std": -1}, "'std' must be >= 0"),
    ({"name": "a", "kind": "drift", "parameter": "R", "mean": 0.1}, "missing 'time_constant'"),
    ({"name": "a", "kind": "noise", "std": 0.1}, "needs a 'signal'"),
    ({"name": "a", "kind": "identified", "parameters": ["kt", "R"], "covariance": [[1, 2], [2, 1]]}, "not positive semi-definite"),
    ({"name": "a", "kind": "identified", "parameters": ["kt", "R"], "covariance": [[1, 0.1], [0, 1]]}, "not symmetric"),
    ({"name": "a", "kind": "identified", "parameters": ["kt", "R"], "covariance": [[1.0]]}, "must be 2 x 2"),
]


@pytest.mark.parametrize("entry,words", BAD)
def test_bad_entry_is_one_line_naming_file_and_entry(tmp_path, capsys, entry, words):
    f = tmp_path / "spec.json"
    f.write_text(json.dumps(doc({"name": "ok", "kind": "noise", "signal": "position", "std": 0.1}, entry)))
    with pytest.raises(RandomizationError) as e:
        load_spec(f)
    assert str(e.value).startswith(f"{f}: entry 1 ('a')") and words in str(e.value), str(e.value)
    capsys.readouterr()
    assert main(["randomize", str(f), "--check"]) == 2
    err = capsys.readouterr().err
    assert "entry 1" in err and "Traceback" not in err


def test_bad_documents(tmp_path):
    f = tmp_path / "s.json"
    for text, words in [("{", "not valid JSON"), ('{"format": "x"}', "not a randomization spec"),
                        (json.dumps({**doc(), "format_version": "9"}), "version '9'"),
                        (json.dumps(doc(*[{"name": "n", "kind": "noise", "signal": "q", "std": 1}] * 2)), "used twice")]:
        f.write_text(text)
        with pytest.raises(RandomizationError, match=words):
            load_spec(f)
    with pytest.raises(RandomizationError, match="lack delay"):  # the parameters given must cover the spec
        sample_episode(parse_spec(FULL), jax.random.PRNGKey(0), {k: v for k, v in params(1).items() if k != "delay"})


# ---------------------------------------------------------------------------------------------
# proposals from model files
# ---------------------------------------------------------------------------------------------


def model_file(values: dict, estimates: dict | None = None, ident: dict | None = None) -> dict:
    d = {"format": "actuatorlab-model", "format_version": "1", "model": "m1", "actuator": "xl330",
         "setup": {}, "fit": {"dt": 0.005},
         "parameters": {n: {"value": v, "free": True, "lower": 0.0 if n == "friction_base" else 1e-4, "upper": 10.0}
                        for n, v in values.items()}}
    if estimates is not None:
        d["uncertainty"] = {"method": "delete-one-log jackknife", "estimates": estimates}
    d["identifiability"] = ident
    return d


def test_proposal_uses_the_jackknife_covariance_in_log_space(tmp_path, capsys):
    rng = np.random.default_rng(0)
    G = 6
    z = rng.multivariate_normal([np.log(0.4), np.log(3.5)], [[0.01, 0.006], [0.006, 0.01]], size=G)
    fb = 0.03 + 0.002 * rng.standard_normal(G)
    d = model_file({"kt": 0.4, "R": 3.5, "friction_base": 0.03},
                   {"kt": np.exp(z[:, 0]).tolist(), "R": np.exp(z[:, 1]).tolist(), "friction_base": fb.tolist()})
    f = tmp_path / "model.json"
    f.write_text(json.dumps(d))
    assert main(["randomize", str(f), "--out", str(tmp_path / "spec.json")]) == 0
    spec = load_spec(tmp_path / "spec.json")
    (e,) = spec.of_kind("identified")
    assert e.parameters == ("kt", "R", "friction_base") and e.space == ("log", "log", "linear")
    Z = np.column_stack([z, fb])
    dev = Z - Z.mean(0)
    expect = (G - 1) / G * dev.T @ dev  # delete-one jackknife covariance
    L = np.array(e.chol)
    np.testing.assert_allclose(L @ L.T, expect, rtol=1e-10, atol=1e-15)
    raw = json.loads((tmp_path / "spec.json").read_text())
    assert raw["entries"][0]["uncertainty_source"] == "jackknife"


def test_proposal_falls_back_to_jacobian_and_takes_the_spread_across_units():
    ident = {"names": ["kt", "R"], "stderr": {"kt": 0.04, "R": 0.7}, "correlation": [[1.0, 0.5], [0.5, 1.0]]}
    units = [model_file({"kt": kt, "R": R, "q_offset": q}, ident=ident)
             for kt, R, q in [(0.40, 3.5, 0.010), (0.44, 3.3, -0.004), (0.38, 3.9, 0.002)]]
    for u in units:
        u["parameters"]["q_offset"].update(lower=-0.1, upper=0.1)
    d = propose_spec(units, ["a", "b", "c"])
    spec = parse_spec(d)
    (e,) = spec.of_kind("identified")
    L = np.array(e.chol)
    # delta method per unit (log-space std = se / value), averaged over the units
    covs = [np.array([[1, 0.5], [0.5, 1]]) * np.outer([0.04 / kt, 0.7 / R], [0.04 / kt, 0.7 / R])
            for kt, R in [(0.40, 3.5), (0.44, 3.3), (0.38, 3.9)]]
    np.testing.assert_allclose(L @ L.T, np.mean(covs, axis=0), rtol=1e-10)
    by = {x.name: x for x in spec.entries}
    assert by["kt_unit"].kind == "unit" and by["kt_unit"].distribution == "lognormal"
    assert by["kt_unit"].std == pytest.approx(np.std(np.log([0.40, 0.44, 0.38]), ddof=1))
    assert by["calibration"].kind == "calibration_offset" and by["calibration"].parameter == "q_offset"
    assert by["calibration"].std == pytest.approx(np.std([0.010, -0.004, 0.002], ddof=1))
    assert d["entries"][0]["uncertainty_source"] == "jacobian"


# ---------------------------------------------------------------------------------------------
# wired into the environments (actuatorlab.envs, native MuJoCo engine)
# ---------------------------------------------------------------------------------------------


def test_environment_applies_the_spec_per_episode():
    """OpenManipulator-X with one parameter set per joint: at reset every joint gets its own unit
    draw, fixed for the episode (the physics uses it: the same actions move the arm differently),
    re-drawn at the next reset; observation noise enters every step."""
    from actuatorlab.envs import TimingContract
    from actuatorlab.envs.gym_env import NativeBatch
    from actuatorlab.sim.arm_data import per_joint_robot
    from actuatorlab.robots import load_robot
    from actuatorlab.sim.randomization import posture_layout

    robot = per_joint_robot(load_robot("open_manipulator_x"))
    spec = doc({"name": "kt_unit", "kind": "unit", "parameter": "kt", "distribution": "lognormal", "std": 0.3},
               {"name": "friction_unit", "kind": "unit", "parameter": "friction_base", "distribution": "add_uniform",
                "half_width": 0.02, "clip": [0.0, 1.0]},
               {"name": "encoder", "kind": "noise", "signal": "position", "std": 0.01})
    n = len(robot.joint_names)
    c = TimingContract(decimation=5, action_scale=0.5)
    env = NativeBatch(robot, None, num_envs=1, contract=c, randomization=Randomizer(spec, posture_layout(n)))
    plain = NativeBatch(robot, None, num_envs=1, contract=c)
    key = np.asarray(jax.random.PRNGKey(5))[None]
    obs, obs_plain = env.reset(key), plain.reset(key)
    kt0 = env.params["kt"][0].copy()
    assert kt0.shape == (n,) and len(np.unique(kt0)) == n  # one draw per joint
    np.testing.assert_array_equal(plain.params["kt"][0], plain.params["kt"][0][0])
    e = obs - obs_plain  # noise on the position block, mirrored (negated) in goal - q
    assert np.abs(e[0, :n]).max() > 0 and np.allclose(e[0, 2 * n:3 * n], -e[0, :n])
    np.testing.assert_array_equal(e[0, n:2 * n], 0.0)
    a = np.array([[1.0, 1.0, -1.0, 1.0, 0.0]])
    for _ in range(3):
        o, *_ = env.step(a)
        o_plain, *_ = plain.step(a)
        np.testing.assert_array_equal(env.params["kt"][0], kt0)  # fixed within the episode
    assert np.abs(env.arm.qpos - plain.arm.qpos).max() > 1e-4  # the physics uses the drawn units
    env.reset(np.asarray(jax.random.PRNGKey(6))[None])
    assert not np.allclose(env.params["kt"][0], kt0)  # re-drawn at reset
    env.reset(key)
    np.testing.assert_array_equal(env.params["kt"][0], kt0)  # same key, same units


def test_degenerate_jackknife_falls_back_to_the_jacobian_and_draws_stay_in_bounds():
    """Refits that never left the all-data optimum (all but one) give a rank-1 spread: the proposal
    uses the Jacobian covariance instead, says so, and clips draws to the fit bounds."""
    ident = {"names": ["kt", "friction_base"], "stderr": {"kt": 0.04, "friction_base": 0.05},
             "correlation": [[1.0, 0.0], [0.0, 1.0]]}
    d = model_file({"kt": 0.4, "friction_base": 0.03},
                   {"kt": [0.4] * 5 + [0.45], "friction_base": [0.03] * 5 + [0.02]}, ident=ident)
    doc_ = propose_spec([d], ["m.json"])
    e = doc_["entries"][0]
    assert e["uncertainty_source"] == "jacobian" and "5 of 6 jackknife refits did not move" in e["note"]
    assert e["bounds"] == [[1e-4, 10.0], [0.0, 10.0]]
    spec = parse_spec(doc_)
    keys = jax.random.split(jax.random.PRNGKey(0), 2000)
    fb = jax.vmap(lambda k: sample_episode(spec, k, {"kt": jnp.array(0.4), "friction_base": jnp.array(0.03)}))(keys)
    fb = np.asarray(fb["friction_base"])
    assert fb.min() == 0.0 and (fb == 0.0).mean() == pytest.approx(0.27, abs=0.04)  # P(N(0.03, 0.05) < 0) = 0.27

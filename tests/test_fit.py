"""Identification on synthetic logs with known ground truth: parameter recovery, nested models never
fit worse than the models they contain, validation-based selection, determinism."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from synthetic import ENCODER_STEP, TRUTH_M1, synthetic_set

from actuatorlab.identify import select
from actuatorlab.identify.fit import ParamSpace, fit_model, make_loss, profile_for
from actuatorlab.identify.space import PARAM_ORDER
from actuatorlab.identify.search import PopulationScorer, SearchSettings, search_folds
from actuatorlab.identify.select import FamilyOptions, fit_family, split_validation
from actuatorlab.models.registry import embed_params, get_model
from actuatorlab.sim.rollout import make_batches

#: four excitations (chirp, sine, torque-disabled drop, steps) at two firmware gains
SPECS = [("chirp400", "chirp", 400), ("sine800", "sine", 800), ("drop400", "drop", 400), ("steps800", "steps", 800)]
TRUTH_LOAD = {**TRUTH_M1, "load_friction": 0.2}
#: mean |quantisation error| of a uniform quantiser: step / 4
NOISE_FLOOR = ENCODER_STEP / 4


@pytest.fixture(scope="module")
def m1_logs():
    return synthetic_set(SPECS, TRUTH_M1, duration=1.5)


@pytest.fixture(scope="module")
def load_logs():
    return synthetic_set(SPECS, TRUTH_LOAD, duration=1.5, model="m3")


@pytest.fixture(scope="module")
def m1_fit(m1_logs):
    return fit_model(m1_logs, "m1", seed=0, max_evals=600, n_starts=1, grad_steps=60)


def test_m1_parameters_are_recovered(m1_fit):
    p = m1_fit.params
    for name, truth in TRUTH_M1.items():
        assert p[name] == pytest.approx(truth, rel=0.03), name
    assert p["kt"] / p["R"] == pytest.approx(TRUTH_M1["kt"] / TRUTH_M1["R"], rel=0.01)
    # mechanisms m1 does not have stay neutral
    assert p["load_friction"] == 0.0 and p["delay"] == 0.0 and p["backlash"] == 0.0
    # the fit reaches the encoder quantisation floor (the model class contains the truth)
    assert m1_fit.train_mae < 2 * NOISE_FLOOR
    assert m1_fit.space.names == get_model("m1").free and m1_fit.dt == 0.005 and m1_fit.profile == "servo"


def test_gradient_refinement_improves_on_cma(m1_fit):
    (h,) = m1_fit.history
    assert h["evals"] <= 600 + 16
    assert m1_fit.train_mae <= h["best_f"]
    assert m1_fit.train_mae < 0.9 * h["best_f"], (m1_fit.train_mae, h["best_f"])


def test_train_mae_is_the_pooled_replay_error_at_the_returned_parameters(m1_fit, m1_logs):
    batches = make_batches(m1_logs, m1_fit.dt)
    loss = make_loss(m1_fit.spec, m1_fit.space, batches, "mae")
    assert float(loss(m1_fit.theta)) == pytest.approx(m1_fit.train_mae, rel=1e-9)
    truth = m1_fit.space.theta_from(TRUTH_M1)
    assert float(loss(truth)) == pytest.approx(NOISE_FLOOR, rel=0.1)


def test_fits_are_deterministic_for_a_fixed_seed(m1_logs):
    kw = dict(max_evals=96, n_starts=2, grad_steps=0)
    a = fit_model(m1_logs, "m1", seed=7, **kw)
    b = fit_model(m1_logs, "m1", seed=7, **kw)
    c = fit_model(m1_logs, "m1", seed=8, **kw)
    np.testing.assert_array_equal(a.theta, b.theta)
    assert a.train_mae == b.train_mae and a.evaluations == b.evaluations and a.history == b.history
    assert not np.array_equal(a.theta, c.theta)


def test_searches_leave_numpys_global_generator_alone(m1_logs):
    """pycma's ``seed`` option reseeds np.random and samples from it; the fits give it a private
    stream instead (cma_stream): the caller's global state is untouched and does not leak in."""
    kw = dict(max_evals=96, n_starts=2, grad_steps=0)
    np.random.seed(12345)
    before = np.random.get_state()
    a = fit_model(m1_logs, "m1", seed=7, **kw)
    after = np.random.get_state()
    assert before[0] == after[0] and np.array_equal(before[1], after[1]) and before[2:] == after[2:]
    np.random.seed(999)  # another global state: same fit
    b = fit_model(m1_logs, "m1", seed=7, **kw)
    np.testing.assert_array_equal(a.theta, b.theta)
    # the lockstep fold searches too
    batches = make_batches(m1_logs)
    space = ParamSpace.build(get_model("m1"), batches, profile_for(batches))
    scorer = PopulationScorer(batches, get_model("m1"), size=40)
    np.random.seed(12345)
    res = search_folds(get_model("m1"), space, scorer, np.ones((2, scorer.n.size)), [[], []],
                       SearchSettings(40, popsize=8, n_starts=2, seed=3))
    after = np.random.get_state()
    assert np.array_equal(before[1], after[1]) and before[2:] == after[2:]
    np.random.seed(1)
    again = search_folds(get_model("m1"), space, scorer, np.ones((2, scorer.n.size)), [[], []],
                         SearchSettings(40, popsize=8, n_starts=2, seed=3))
    assert [r.objective for r in res] == [r.objective for r in again]


@pytest.mark.parametrize("case", range(4))
def test_unit_box_cma_follows_pycmas_bounded_search_bit_for_bit(case):
    """The population-wise box transform must give the very candidates, path and stop of pycma's
    own BoundTransform (starts on the bounds, optima outside the box, per-coordinate stds)."""
    import cma

    from actuatorlab.identify.search import UnitBoxCMA, cma_stream

    rng = np.random.default_rng(case)
    n = 5 + case
    c = rng.uniform(-0.3, 1.3, n)                       # optimum partly outside the box
    z0 = rng.uniform(0.0, 1.0, n)
    z0[:2] = (0.0, 1.0)                                # starts on both bounds
    opts = {"popsize": 12 + 4 * case, "maxfevals": 6000, "verbose": -9, "verb_log": 0, "tolfun": 1e-9,
            "tolx": 1e-7, **({"CMA_stds": list(rng.uniform(0.2, 1.0, n))} if case % 2 else {})}
    ref = cma.CMAEvolutionStrategy(list(z0), 0.3, {"bounds": [0.0, 1.0], **opts, **cma_stream(case + 1)})
    box = UnitBoxCMA(z0, 0.3, {**opts, **cma_stream(case + 1)})

    def f(Z):
        return np.sum((Z - c) ** 2, 1) + 0.2 * np.abs(Z - c).sum(1)

    gens, outside = 0, 0
    while not ref.stop():
        Zr = np.array(ref.ask())
        G, Z = box.ask()
        np.testing.assert_array_equal(Z, Zr)
        outside += int(np.any((G < 0) | (G > 1)))
        ref.tell(list(Zr), list(f(Zr)))
        box.tell(G, f(Z))
        gens += 1
    assert box.stop() == ref.stop() and box.result.fbest == ref.result.fbest
    assert gens > 20 and outside > 0                   # the transform's outer pieces were used
    assert np.all((box.transform(rng.normal(0.5, 3.0, (200, n))) >= 0)
                  & (box.transform(rng.normal(0.5, 3.0, (200, n))) <= 1))


def test_scorer_threads_give_the_one_call_sums_in_the_callers_precision(m1_logs):
    """A population cut into slices on worker threads sums to exactly what one call gives, and the
    workers compute in the calling thread's precision (JAX's x64 mode is per thread: a float32
    worker would differ from the float64 call at ~1e-7)."""
    from actuatorlab.identify.space import full_vectors
    from actuatorlab.precision import physics_precision

    batches = make_batches(m1_logs)
    spec = get_model("m1")
    space = ParamSpace.build(spec, batches, profile_for(batches))
    P = full_vectors(space, space.to_theta(np.random.default_rng(0).uniform(0.2, 0.8, (13, space.n)), np))
    with physics_precision():
        one = PopulationScorer(batches, spec, size=16, dtype=np.float64, workers=1)
        three = PopulationScorer(batches, spec, size=16, dtype=np.float64, workers=3)
        assert one.has_pairs and three.workers == 3
        a, b = one(P), three(P)
    assert a["abs_q"].shape == (13, len(m1_logs)) and np.all(a["abs_q"] > 0)
    for key in ("abs_q", "sq_q", "sq_u"):
        np.testing.assert_allclose(b[key], a[key], rtol=1e-13, atol=0.0, err_msg=key)
    # a single-model fit scores its populations the same way: the same path (float64 losses of a
    # candidate may differ in the last digit between compiled batch sizes, not its ranking here)
    kw = dict(max_evals=96, n_starts=2, grad_steps=0, popsize=8)
    f1, f3 = (fit_model(m1_logs, "m1", seed=7, workers=w, **kw) for w in (1, 3))
    np.testing.assert_array_equal(f1.theta, f3.theta)
    assert f1.train_mae == pytest.approx(f3.train_mae, rel=1e-12) and f1.evaluations == f3.evaluations
    # scorers share one pool: another fit's scorer adds no threads
    with physics_precision():
        c = PopulationScorer(batches, spec, size=16, dtype=np.float64, workers=3)(P)
    np.testing.assert_array_equal(c["abs_q"], b["abs_q"])
    assert sum(t.name.startswith("actuatorlab-scorer3") for t in threading.enumerate()) <= 3


# ------------------------------------------------------------------------------------------------
# nested models
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def nested(load_logs):
    """The ladder fitted on load-friction data, each model started from the ones it contains."""
    batches = make_batches(load_logs)
    kw = dict(n_starts=1, grad_steps=0)
    fits = {"m1": fit_model(batches, "m1", seed=0, max_evals=400, **kw)}
    fits["m2"] = fit_model(batches, "m2", seed=1, max_evals=32, init=fits["m1"].params, **kw)
    fits["m3"] = fit_model(batches, "m3", seed=2, max_evals=1000, init=fits["m1"].params, **kw)
    fits["m4"] = fit_model(batches, "m4", seed=3, max_evals=32, init=[fits["m2"].params, fits["m3"].params], **kw)
    fits["m5"] = fit_model(batches, "m5", seed=4, max_evals=32, init=fits["m4"].params, **kw)
    return batches, fits


def test_load_friction_model_finds_what_m1_cannot(nested):
    _, fits = nested
    assert fits["m1"].train_mae > 10 * NOISE_FLOOR
    assert fits["m3"].train_mae < 0.2 * fits["m1"].train_mae
    assert fits["m3"].params["load_friction"] == pytest.approx(0.2, rel=0.1)


@pytest.mark.parametrize("child,parents", [("m2", ["m1"]), ("m3", ["m1"]), ("m4", ["m2", "m3"]), ("m5", ["m4"])])
def test_richer_model_never_fits_worse_than_what_it_contains(nested, child, parents):
    batches, fits = nested
    for parent in parents:
        assert fits[child].train_mae <= fits[parent].train_mae * (1 + 1e-12), (child, parent)
        # the parent's optimum written in the child's parameters replays identically
        spec = get_model(child)
        space = ParamSpace.build(spec, batches, "servo")
        theta = space.theta_from(embed_params(fits[parent].params, child))
        assert float(make_loss(spec, space, batches)(theta)) == pytest.approx(fits[parent].train_mae, rel=1e-12)


def test_directional_model_keeps_the_load_friction_it_started_from(nested):
    _, fits = nested
    p5 = fits["m5"].params
    mu = fits["m4"].params["load_friction"]
    assert mu > 0.1 and p5["load_friction"] == 0.0
    assert p5["load_friction_motor"] == pytest.approx(mu, rel=0.2)
    assert p5["load_friction_external"] == pytest.approx(mu, rel=0.2)


# ------------------------------------------------------------------------------------------------
# selection on validation data
# ------------------------------------------------------------------------------------------------


@pytest.fixture()
def test_budget(monkeypatch):
    # (evaluations per fold search, final refit evaluations, population size, bases that get extensions)
    monkeypatch.setitem(select.SELECTION_BUDGETS, "test", select.SelectionBudget(1000, 3000, 10, 1))
    return "test"


def test_validation_split_holds_out_one_excitation(m1_logs):
    fit, val = split_validation(m1_logs)
    assert [t.name for t in val] == ["sine800"]
    assert sorted(t.name for t in fit) == ["chirp400", "drop400", "steps800"]


def test_selection_adds_load_friction_only_when_the_data_has_it(load_logs, m1_logs, test_budget):
    # four logs, four excitations: four leave-one-group-out folds, each judged on a log it never saw
    with_load = fit_family(load_logs, ("m1", "m3"), FamilyOptions(budget=test_budget, extensions=()))
    assert with_load.scheme == "logo" and len(with_load.groups) == 4
    assert with_load.selected == "m3" and "load_friction" in get_model(with_load.selected).free
    row = {r["model"]: r for r in with_load.table}
    assert row["m3"]["earns_place"] and row["m3"]["parent"] == "m1" and row["m3"]["gain_vs_parent"] > 0.5
    assert row["m3"]["wins"] >= 3 and row["m3"]["losses"] == 0
    assert set(row["m3"]["per_group"]) == {"excitation=chirp", "excitation=sine", "excitation=drop",
                                           "excitation=steps"}
    assert with_load.final.model == "m3"
    assert with_load.final.params["load_friction"] == pytest.approx(0.2, rel=0.05)

    without = fit_family(m1_logs, ("m1", "m3"), FamilyOptions(budget=test_budget, extensions=()))
    assert without.selected == "m1" and "load_friction" not in get_model(without.selected).free
    row = {r["model"]: r for r in without.table}
    assert not row["m3"]["earns_place"] and row["m3"]["gain_vs_parent"] < 0.02
    # held-out excitations the other logs cover are predicted to the encoder floor; the free swing
    # of the held-out drop log (torque off) is the one condition the other three do not pin down
    near_floor = [g for g, v in row["m1"]["per_group"].items() if v < 1.5 * NOISE_FLOOR]
    assert sorted(near_floor) == ["excitation=chirp", "excitation=sine", "excitation=steps"]
    assert without.final.model == "m1"
    for name, truth in TRUTH_M1.items():
        assert without.final.params[name] == pytest.approx(truth, rel=0.03), name


def test_run_cma_lockstep_searches_are_the_searches_run_one_by_one():
    """The one CMA-ES driver: searches in lockstep (own streams) end where each alone ends, and
    a live search is asked only while it is under max_evals."""
    from actuatorlab.identify.search import BestSoFar, UnitBoxCMA, cma_stream, run_cma

    c = np.array([0.3, 0.7, 0.2])

    def make(k):
        return UnitBoxCMA(np.full(3, 0.5), 0.3, {"popsize": 6, "verbose": -9, **cma_stream(k + 1)})

    def f(Z):
        return np.sum((Z - c) ** 2, 1)

    alone = []
    for k in range(2):
        best = BestSoFar()

        def score(Zs, best=best):
            best.update(f(Zs[0]), Zs[0])
            return {0: f(Zs[0])}
        used = run_cma([make(k)], score, max_evals=60)
        assert used[0] == 60
        alone.append((best.f, best.x))
    bests = [BestSoFar(), BestSoFar()]

    def both(Zs):
        out = {}
        for i, Z in enumerate(Zs):
            if Z is not None:
                out[i] = f(Z)
                bests[i].update(out[i], Z)
        return out
    assert list(run_cma([make(0), make(1)], both, max_evals=60)) == [60, 60]
    for (fa, xa), b in zip(alone, bests):
        assert b.f == fa and np.array_equal(b.x, xa)


def test_unit_box_cma_pad_1d_is_pycmas_padded_bounded_search():
    """A one-dimensional whole-robot search runs as pycma's bounded 2-D search with an ignored
    second coordinate at 0.5 (the stream it always drew); the candidates are the first coordinate."""
    import cma

    from actuatorlab.identify.search import UnitBoxCMA, cma_stream

    opts = {"verbose": -9, "tolfun": 1e-12, "tolx": 1e-6, "maxfevals": 120}
    ref = cma.CMAEvolutionStrategy(np.r_[0.4, 0.5], 0.3, {"bounds": [0.0, 1.0], **opts, **cma_stream(7)})
    box = UnitBoxCMA(np.array([0.4]), 0.3, {**opts, **cma_stream(7)}, pad_1d=True)
    while not ref.stop():
        Zr = np.array(ref.ask())
        G, Z = box.ask()
        assert Z.shape == (len(Zr), 1)
        np.testing.assert_array_equal(Z[:, 0], Zr[:, 0])
        fs = list((Zr[:, 0] - 0.8) ** 2)
        ref.tell(list(Zr), fs)
        box.tell(G, fs)
    assert box.stop()


def test_the_fit_command_caches_its_compiled_programs_and_restores_jax(m1_logs, tmp_path, monkeypatch):
    """``actuatorlab fit`` (run_fit_job) runs inside the persistent compilation cache at
    $XDG_CACHE_HOME/actuatorlab/jax (the scorer and the polish's Jacobian compile for longer than
    FIT_CACHE_MIN_COMPILE_S): the folder holds programs afterwards, and JAX's cache settings are the
    caller's again (here: none; the test session's own cache folder is lifted for the test)."""
    import jax
    from jax.experimental.compilation_cache import compilation_cache as cc

    from actuatorlab.app.identify_jobs import FitJob, run_fit_job
    from actuatorlab.logs import save_trajectory

    for t in m1_logs:
        save_trajectory(t, tmp_path / "logs" / f"{t.name}.parquet")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    old = (jax.config.jax_compilation_cache_dir, jax.config.jax_persistent_cache_min_compile_time_secs)
    jax.config.update("jax_compilation_cache_dir", None)
    cc.reset_cache()
    try:
        run_fit_job(FitJob(data=(tmp_path / "logs",), out=tmp_path / "run", model="m1",
                           options=FamilyOptions(budget="quick")))
        assert jax.config.jax_compilation_cache_dir is None
        assert jax.config.jax_persistent_cache_min_compile_time_secs == old[1]
    finally:
        jax.config.update("jax_compilation_cache_dir", old[0])
        jax.config.update("jax_persistent_cache_min_compile_time_secs", old[1])
        cc.reset_cache()
    assert (tmp_path / "run" / "model.json").is_file()
    assert list((tmp_path / "xdg" / "actuatorlab" / "jax").glob("jit_*")), "no compiled program was cached"


@pytest.mark.parametrize("gain, lower, moved", [(0.0, 0.01, True), (0.02, 0.01, False), (0.02, 0.05, True)])
def test_a_restart_replaces_the_first_starts_point_only_by_the_restart_gain(m1_logs, gain, lower, moved):
    """Rule R53's mechanism (``SearchSettings.restart_gain``): on two basins, a narrow well at a
    (value 1, where the first start begins and, with a tiny step, stays) and a broad bowl at b
    ``lower`` below it, the restart's wide perturbation finds b; its point is returned only when it
    is at least ``gain`` lower (1 % lower: kept with no margin, refused with 2 %; 5 % lower: kept)."""
    batches = make_batches(m1_logs)
    spec = get_model("m1")
    space = ParamSpace.build(spec, batches, profile_for(batches))
    a, b = np.full(space.n, 0.3), np.full(space.n, 0.7)
    cols = [PARAM_ORDER.index(n) for n in space.names]

    class TwoBasins:
        has_pairs, n = False, np.ones(1)

        def __call__(self, P):
            z = space.to_z(P[:, cols])
            f = np.minimum(1.0 + 50 * np.sum((z - a) ** 2, 1), 1.0 - lower + 0.5 * np.sum((z - b) ** 2, 1))
            return {"cens_q": f[:, None]}

    start = {n: float(v) for n, v in zip(space.names, space.to_theta(a[None], np)[0])}
    (r,) = search_folds(spec, space, TwoBasins(), np.ones((1, 1)), [[start]],
                        SearchSettings(400, popsize=8, n_starts=2, sigma0=0.25, seed=1, stds=np.full(space.n, 0.01),
                                       restart_gain=gain))
    first, second = r.history
    assert first["best_f"] == pytest.approx(1.0, abs=1e-3)  # the first start stayed in the well
    assert second["best_f"] == pytest.approx(1.0 - lower, abs=1e-3)  # the restart found the bowl
    assert second["kept"] is moved and first["kept"]
    z = space.to_z(r.theta[None])[0]
    assert np.allclose(z, b if moved else a, atol=0.02), z
    assert r.objective == pytest.approx(1.0 - lower if moved else 1.0, abs=1e-3)

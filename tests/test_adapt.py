"""Online adaptation (``actuatorlab adapt``): a residual model adapts to a unit with a known change.

The old unit is the OpenManipulator-X with its nominal actuator parameters; the residual model's
base is that nominal model (its zeroed torque head: exactly the base). The new unit has twice the
Coulomb friction and 1.5x the armature of the old one (a known change in the synthetic truth).
Adapting on four chirp logs of the new unit must cut the rollout error on two other logs of it by
more than half; nothing is written over the run, and a failed adaptation leaves nothing behind.
By default a residual's adaptation is that base refit alone; the network fine-tuning through MJX
(a replacing model's default, ``AdaptConfig.steps``) compiles the training step (minutes on a
loaded CPU): it is measured in bench/adapt.py, not here. A replacing model fine-tuned with
``train_arm(init=)`` keeps its own analytic base (the training through MJX stubbed out).
"""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

import actuatorlab.learned.adapt as adapt_mod
import actuatorlab.learned.arm_train as arm_train
from actuatorlab.errors import ActuatorlabError, ModelError
from actuatorlab.learned.adapt import AdaptConfig, adapt_arm, adaptation_logs
from actuatorlab.learned.arm_train import ArmTrainConfig, train_arm
from actuatorlab.learned.arm import arm_log, evaluate_learned_arm, load_arm_model, make_learned_arm, save_arm_model
from actuatorlab.models.features import Normalizer, fit_normalizer
from actuatorlab.precision import physics_precision
from actuatorlab.robots import load_robot
from actuatorlab.sim.arm_learned import frames_of_log

from test_learned_distill import FEATS, ROBOT, chirp_logs


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    with physics_precision():
        robot = load_robot(ROBOT)
        old = robot.nominal_params()
        new = {k: np.array(v, float) for k, v in old.items()}
        new["friction_base"] = new["friction_base"] * 2.0
        new["armature"] = new["armature"] * 1.5
        adapt_logs = chirp_logs(robot, new, T=150, n_logs=4, seed=3)
        test_logs = chirp_logs(robot, new, T=150, n_logs=2, seed=9)
        ch = tuple(j for j in robot.joint_names if j.startswith("joint"))
        F = len(ch) * len(FEATS)
        tmp = make_learned_arm(robot, "mlp", channels=ch, per_channel=FEATS, normalizer=Normalizer(np.zeros(F), np.ones(F)),
                               effort_scale=1.0, history=2, width=4, depth=1, d=4, head_width=4)
        fr = np.concatenate([frames_of_log(tmp, lg.base.inputs.q_target, lg.base.q_meas, lg.base.dq_meas,
                                           lg.base.inputs.v_supply, lg.base.inputs.enable, lg.telemetry)
                             for lg in (arm_log(robot, t, ch, FEATS) for t in adapt_logs)])
        model = make_learned_arm(robot, "mlp", channels=ch, per_channel=FEATS, normalizer=fit_normalizer(fr),
                                 effort_scale=0.1, base=old, residual=True, history=2, key=jax.random.PRNGKey(0),
                                 width=8, depth=1, d=8, head_width=8)
        run = tmp_path_factory.mktemp("adapt") / "run"
        run.mkdir()
        save_arm_model(run, ROBOT, model, {"model": None, "params": {
            k: {g.name: float(x) for g, x in zip(robot.groups, np.atleast_1d(v))} for k, v in old.items()}})
    return dict(robot=robot, run=run, adapt_logs=adapt_logs, test_logs=test_logs)


def _snapshot(folder):
    return {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in folder.iterdir()}


def test_adaptation_lowers_the_error_on_a_unit_with_a_known_change(case, tmp_path):
    run, before_files = case["run"], _snapshot(case["run"])
    out = tmp_path / "run2"
    cfg = AdaptConfig(refit_evals=24, refit_windows=8)  # default steps: a residual's base refit alone
    with physics_precision():
        r0, m0, _ = load_arm_model(run / "arm_model.json")
        before = evaluate_learned_arm(r0, m0, case["test_logs"], (100,))["position_mae"]
        d = adapt_arm(run, case["adapt_logs"], cfg, out=out)
        r1, m1, _ = load_arm_model(out / "arm_model.json")
        after = evaluate_learned_arm(r1, m1, case["test_logs"], (100,))["position_mae"]
    assert before > 2e-3, before  # the change is visible: the old unit's model is off on the new one
    assert after < 0.5 * before, (before, after)
    print(f"rollout MAE on the new unit: {1e3 * before:.2f} -> {1e3 * after:.2f} mrad")
    # the base was refitted; the residual network is the one the run trained (no fine-tuning by default)
    assert d["adaptation"]["base_refit"]["evaluations"] >= 24 and d["training"] == {"steps": 0}
    assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(m1.net), jax.tree.leaves(m0.net)))
    assert any(not np.allclose(m1.base[k], m0.base[k]) for k in ("kt", "friction_base", "friction_viscous", "armature"))
    a = d["adaptation"]
    assert a["n_trajectories"] == 4 and not set(a["logs"]) & {t.name for t in case["test_logs"]}
    assert _snapshot(run) == before_files  # RUN only read
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run2"]  # no temporary folder left


def test_out_equal_to_run_or_existing_is_refused(case, tmp_path):
    from actuatorlab.app.cli import main

    run, before_files = case["run"], _snapshot(case["run"])
    (tmp_path / "taken").mkdir()
    for out, what in ((run, "is (inside) the run being adapted"), (run / "new", "is (inside) the run being adapted"),
                      (tmp_path / "taken", "already exists")):
        with pytest.raises(ActuatorlabError) as e:
            adapt_arm(run / "arm_model.json", case["adapt_logs"], AdaptConfig(steps=0), out=out)
        assert "\n" not in str(e.value) and what in str(e.value)
    assert main(["adapt", str(run), str(tmp_path), "--out", str(run)]) != 0
    assert _snapshot(run) == before_files


def test_a_failed_adaptation_leaves_nothing_behind(case, tmp_path, monkeypatch):
    def broken(*a, **k):
        raise RuntimeError("refit failed")

    monkeypatch.setattr(adapt_mod, "fit_arm", broken)
    run, before_files = case["run"], _snapshot(case["run"])
    out = tmp_path / "made" / "run2"
    with physics_precision(), pytest.raises(RuntimeError):
        adapt_arm(run, case["adapt_logs"], AdaptConfig(steps=0), out=out)
    assert list(tmp_path.iterdir()) == []  # neither OUT, nor its temporary sibling, nor the folder made for it
    assert _snapshot(run) == before_files


def test_adaptation_logs_are_at_most_n_spread_and_split():
    class T:
        def __init__(self, name):
            self.name = name

    logs = [T(f"log_{i:02d}") for i in range(30)]
    tr, va = adaptation_logs(logs, AdaptConfig(max_trajectories=12, n_val=2))
    assert len(tr) + len(va) == 12 and len(va) == 2 and not set(map(id, tr)) & set(map(id, va))
    names = sorted(t.name for t in tr + va)
    assert names[0] == "log_00" and names[-1] == "log_29"  # spread over all of them, not the first 12
    few, same = adaptation_logs(logs[:3], AdaptConfig())
    assert few == same and len(few) == 3
    with pytest.raises(Exception, match="no logs"):
        adaptation_logs([], AdaptConfig())
    json.dumps(AdaptConfig().__dict__)


def test_a_replacing_model_fine_tuned_keeps_its_own_base(case, tmp_path, monkeypatch):
    """train_arm(init=) of a replacing model saves (and trains with) the model's own analytic base,
    the model of the joints that are not channels (the gripper), given as its teacher; not the
    robot's nominal one. Without it, a base that is not the nominal one is refused. The training
    through MJX is stubbed: it is the base around it that is checked."""
    robot = case["robot"]
    own = {k: np.array(v, float) for k, v in robot.nominal_params().items()}
    own["friction_base"] = own["friction_base"] * 3.0
    own["kt"] = own["kt"] * 0.8
    desc = {"model": None, "params": {k: {g.name: float(x) for g, x in zip(robot.groups, v)} for k, v in own.items()}}
    m0 = load_arm_model(case["run"] / "arm_model.json")[1]
    init = make_learned_arm(robot, "mlp", channels=m0.layout.channels, per_channel=FEATS, normalizer=m0.normalizer,
                            effort_scale=1.0, base=own, residual=False, history=2, key=jax.random.PRNGKey(1),
                            width=8, depth=1, d=8, head_width=8)
    seen = []

    def no_mjx(out, model, problem, tcfg, cur, **k):  # the fine-tuning returns the model it was given
        seen.append(model)
        return type("R", (), dict(best=model, steps=tcfg.steps, best_step=0, best_val=1.0, s_per_1k_steps=0.0,
                                  compile_s=0.0, warm_start=None, stopped=None))()

    monkeypatch.setattr(arm_train, "learn", no_mjx)
    budget = dict(batch=1, curriculum=(8,), stage_fraction=(1.0,), max_val_windows=1, one_shape=False)
    logs = case["adapt_logs"]
    with physics_precision():
        d = train_arm(ROBOT, logs[:2], logs[2:], ArmTrainConfig(teacher=desc, steps=1, budget=budget),
                      out=tmp_path / "tuned", init=init, progress=False)
        _, m1, _ = load_arm_model(tmp_path / "tuned" / "arm_model.json")
        assert d["base"] == desc and seen[0].base is not None
        gripper = next(j.group for j in robot.joints if j.name not in init.layout.channels)
        for k in own:  # trained with and saved with its own base, the gripper's group included
            np.testing.assert_allclose(np.asarray(seen[0].base[k]), own[k])
            np.testing.assert_allclose(np.asarray(m1.base[k]), own[k])
        assert not np.isclose(m1.base["friction_base"][gripper], robot.nominal_params()["friction_base"][gripper])
        with pytest.raises(ModelError) as e:
            train_arm(ROBOT, logs[:2], logs[2:], ArmTrainConfig(steps=1, budget=budget), out=tmp_path / "lost",
                      init=init, progress=False)
    assert "teacher" in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "lost").exists() and len(seen) == 1

"""One-joint learned and residual actuators in the one-joint replay: a tiny model fits tiny
synthetic logs through the simulator, gradients reach every trained parameter, the rollout is
causal, ``evaluate`` treats a learned model.json like an analytic one, corrupt weights are a
one-line error."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from synthetic import analytic_model, DT, TRUTH_M1, synthetic_set

from actuatorlab.errors import ModelError
from actuatorlab.models.modelfile import save_model
from actuatorlab.learned.joint import log_set, rollout_logs, trainable, window_loss, windows
from actuatorlab.learned.joint_train import WindowSampling, build_joint_model, train_joint
from actuatorlab.learned.trainer import TrainConfig
from actuatorlab.logs import save_trajectory
from actuatorlab.sim.rollout import make_batches

TINY = {"mlp": dict(width=16, depth=1, d=8, head_width=8),
        "transformer": dict(d=8, n_heads=2, n_layers=1, ff=16, head_width=8)}
# the analytic model the residual corrects: the ground truth with a 30 % weaker motor and no friction
WRONG = {**TRUTH_M1, "kt": 0.7 * TRUTH_M1["kt"], "friction_base": 0.0, "delay": 0.01}



@pytest.fixture(scope="module")
def logs():
    return synthetic_set([("chirp", "chirp", 400), ("sine", "sine", 800)], TRUTH_M1, duration=0.8,
                         quantise=False, amplitude=0.6)


@pytest.fixture(scope="module")
def batch(logs):
    (b,) = make_batches(logs, DT)
    return b


def _model(kind, arch, batch, seed=0):
    return build_joint_model(kind, arch, [batch], base=analytic_model(WRONG, "m1+delay"), history=3, sizes=TINY[arch], seed=seed)


def test_residual_fits_tiny_logs_through_the_simulator(tmp_path, batch):
    m = _model("residual", "mlp", batch)
    ls = log_set(m, batch)
    mae0 = float(jnp.mean(jnp.abs(rollout_logs(m, ls).q - ls.q_meas)))
    cfg = TrainConfig(steps=100, lr=2e-2, warmup=5, checkpoint_every=100, ema_decay=0.9)
    best, res = train_joint(tmp_path / "run", [batch], None, m, cfg,
                            sampling=WindowSampling(n_windows=8, curriculum=((0.0, 32),)), progress=False)
    mae1 = float(jnp.mean(jnp.abs(rollout_logs(best, ls).q - ls.q_meas)))
    assert mae1 < 0.3 * mae0, (mae0, mae1)  # measured: 26.0 -> 2.6 mrad
    # the frozen parts did not move: normalizer and the analytic parameters
    assert np.array_equal(np.asarray(best.norm.mean), np.asarray(m.norm.mean))
    assert float(best.params["kt"]) == float(m.params["kt"])


def test_a_new_residual_is_its_analytic_base(batch):
    """The residual's torque head starts at zero: its replay is the base's, to the last bit."""
    from actuatorlab.evaluate.replay import replay_batches

    m = _model("residual", "mlp", batch)
    ls = log_set(m, batch)
    (ref,) = replay_batches("m1+delay", {k: float(v) for k, v in m.params.items()}, [batch])[:1]
    q = np.asarray(rollout_logs(m, ls).q)[0]
    n = int(np.asarray(ls.mask)[0].sum())
    assert np.array_equal(q[:n], ref.q_sim[:n])


@pytest.mark.parametrize("kind,arch", [("learned", "transformer"), ("residual", "mlp")])
def test_gradients_reach_every_trained_parameter(batch, kind, arch):
    m = _model(kind, arch, batch)
    if kind == "residual":  # its zeroed torque head passes gradient to itself alone at the start: as after a step
        last = m.net.heads.torque.layers[-1]
        m = eqx.tree_at(lambda n: n.net.heads.torque.layers[-1].weight, m,
                        0.1 * jax.random.normal(jax.random.PRNGKey(1), last.weight.shape, last.weight.dtype))
    ls = log_set(m, batch)
    w = windows(m, ls, np.array([0, 1, 1]), np.array([0, 20, 60]), 24)
    diff, static = eqx.partition(m, trainable(m))
    g = eqx.filter_grad(lambda d: window_loss(eqx.combine(d, static), w)[0])(diff)
    leaves = jax.tree_util.tree_leaves_with_path(g)
    assert len(leaves) > 4
    for path, x in leaves:
        x = np.asarray(x)
        assert np.all(np.isfinite(x)), path
        assert np.any(x != 0.0), f"no gradient reaches {jax.tree_util.keystr(path)}"
    assert x.dtype == np.float32  # the network trains in float32


@pytest.mark.parametrize("kind", ["learned", "residual"])
def test_rollout_is_causal(batch, kind):
    m = _model(kind, "mlp", batch, seed=3)
    ls = log_set(m, batch)
    q = np.asarray(rollout_logs(m, ls).q[0])
    j = 60
    for field in ("q_target", "v_supply", "enable"):
        arr = np.array(getattr(batch, field))
        arr[0, j:] += 0.5
        b2 = type(batch)(**{**batch.__dict__, field: arr})
        q2 = np.asarray(rollout_logs(m, log_set(m, b2)).q[0])
        # q[k] is the state at the start of step k: it only sees samples before k
        assert np.array_equal(q[: j + 1], q2[: j + 1]), field
        assert not np.allclose(q[j + 2:], q2[j + 2:]), f"perturbing {field} changed nothing: test cannot fail"


def test_evaluate_learned_like_analytic_and_corrupt_weights(tmp_path, logs):
    from actuatorlab.app.jobs import JointTrainOptions, run_evaluate, run_train

    paths = [save_trajectory(t, tmp_path / "logs" / f"{t.name}.parquet") for t in logs]
    base = save_model(analytic_model(WRONG, "m1+delay"), tmp_path / "base" / "model.json")
    d = run_train(paths, tmp_path / "run", JointTrainOptions(arch="mlp", residual=base, steps=4, n_windows=2, history=2,
                                                             sizes=TINY["mlp"], curriculum=((0.0, 16),), gate="none"),
                  progress=False)
    assert d["kind"] == "residual" and (tmp_path / "run" / "weights.eqx").is_file()
    s_learned = run_evaluate(tmp_path / "run" / "model.json", paths)
    s_analytic = run_evaluate(base, paths)
    assert set(s_learned) == set(s_analytic)
    assert set(s_learned["per_log"][0]) == set(s_analytic["per_log"][0])
    assert s_learned["model"] == "residual:mlp(m1+delay)" and np.isfinite(s_learned["position_mae"])
    w = tmp_path / "run" / "weights.eqx"
    raw = bytearray(w.read_bytes())
    raw[-3] ^= 0xFF
    w.write_bytes(bytes(raw))
    with pytest.raises(ModelError) as e:
        run_evaluate(tmp_path / "run" / "model.json", paths)
    assert "\n" not in str(e.value) and str(w) in str(e.value)
    w.unlink()
    with pytest.raises(ModelError, match="weights file 'weights.eqx' not found"):
        run_evaluate(tmp_path / "run" / "model.json", paths)


def test_cli_train_then_evaluate_and_resume(tmp_path, logs, capsys):
    from actuatorlab.app.cli import main

    paths = [str(save_trajectory(t, tmp_path / "logs" / f"{t.name}.parquet")) for t in logs]
    run = str(tmp_path / "run")
    assert main(["train", *paths, "--arch", "mlp", "--steps", "2", "--out", run, "--seed", "1"]) == 0
    assert "wrote" in capsys.readouterr().out
    # a finished run is not overwritten by accident; --resume continues it (nothing left to do)
    assert main(["train", *paths, "--arch", "mlp", "--steps", "2", "--out", run, "--seed", "1"]) == 2
    err = capsys.readouterr().err
    assert "already holds a checkpoint" in err and len(err.strip().splitlines()) <= 2
    assert main(["train", *paths, "--arch", "mlp", "--steps", "2", "--out", run, "--seed", "1", "--resume"]) == 0
    capsys.readouterr()
    assert main(["evaluate", f"{run}/model.json", *paths, "--json"]) == 0
    import json

    s = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert s["model"] == "learned:mlp" and s["n_logs"] == 2
    assert main(["train", *paths, "--arch", "resnet", "--out", str(tmp_path / "r2")]) == 2
    assert "available: actuator_lstm, actuator_net, gru, lstm, mlp, transformer" in capsys.readouterr().err

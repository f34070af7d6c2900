"""The generic trainer: a toy problem converges, resume reproduces the loss curve bit for bit, a
corrupt checkpoint is a one-line error, the run folder is complete."""

from __future__ import annotations

import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from actuatorlab.errors import ModelError
from actuatorlab.learned.trainer import BEST_NAME, CHECKPOINT_NAME, TrainConfig, load_checkpoint, train

W_TRUE = np.array([[1.5, -0.5], [0.25, 2.0], [-1.0, 0.75]], np.float32)  # (3, 2)


def _params():
    # an MLP with a static activation (not trained) and float32 weights
    return eqx.nn.MLP(3, 2, 16, 1, activation=jax.nn.tanh, key=jax.random.PRNGKey(0))


def _batch_fn(step):
    key = jax.random.fold_in(jax.random.PRNGKey(1), step)
    x = jax.random.normal(key, (32, 3), jnp.float32)
    return x, x @ W_TRUE


def _loss(model, batch):
    x, y = batch
    pred = jax.vmap(model)(x)
    return jnp.mean((pred - y) ** 2), {"max_err": jnp.max(jnp.abs(pred - y))}


def _val(model):
    x, y = _batch_fn(10_000)
    return float(jnp.mean((jax.vmap(model)(x) - y) ** 2))


CFG = TrainConfig(steps=24, lr=3e-2, warmup=4, checkpoint_every=8, eval_every=6, ema_decay=0.9)


def _losses(run_dir):
    return [r["loss"] for r in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines()) if "loss" in r]


def test_loss_decreases_and_run_folder(tmp_path):
    cfg = TrainConfig(steps=150, lr=3e-2, warmup=10, checkpoint_every=50, eval_every=50, ema_decay=0.9)
    r = train(tmp_path / "run", _params(), _loss, _batch_fn, cfg, val_fn=_val, progress=False, meta={"what": "toy"})
    losses = _losses(tmp_path / "run")
    assert len(losses) == 150
    assert np.mean(losses[-10:]) < 0.05 * np.mean(losses[:5])
    assert r.best_val is not None and r.best_val < 0.05 * _val(_params())
    conf = json.loads((tmp_path / "run" / "config.json").read_text())
    assert conf["train"]["steps"] == 150 and conf["meta"] == {"what": "toy"} and conf["git_revision"]
    assert (tmp_path / "run" / CHECKPOINT_NAME).is_file() and (tmp_path / "run" / BEST_NAME).is_file()
    best, head = load_checkpoint(tmp_path / "run" / BEST_NAME, eqx.filter(_params(), eqx.is_inexact_array))
    assert head["step"] == r.best_step and head["val"] == pytest.approx(r.best_val)
    # static leaves (the activation) are untouched, only arrays are trained
    assert r.params.activation is jax.nn.tanh and r.s_per_1k_steps > 0


def test_resume_reproduces_loss_curve_bit_for_bit(tmp_path):
    full = train(tmp_path / "full", _params(), _loss, _batch_fn, CFG, val_fn=_val, progress=False)

    def crashing(step):
        if step == 13:  # interrupted after the checkpoint at step 8, mid-way to the next one
            raise KeyboardInterrupt
        return _batch_fn(step)

    with pytest.raises(KeyboardInterrupt):
        train(tmp_path / "cut", _params(), _loss, crashing, CFG, val_fn=_val, progress=False)
    with pytest.raises(ModelError, match="already holds a checkpoint"):
        train(tmp_path / "cut", _params(), _loss, _batch_fn, CFG, progress=False)
    with pytest.raises(ModelError, match="lr: 0.03 -> 0.01"):
        train(tmp_path / "cut", _params(), _loss, _batch_fn, TrainConfig(**{**CFG.to_dict(), "lr": 1e-2}),
              resume=True, progress=False)
    res = train(tmp_path / "cut", _params(), _loss, _batch_fn, CFG, val_fn=_val, resume=True, progress=False)
    a, b = _losses(tmp_path / "full"), _losses(tmp_path / "cut")
    assert len(a) == len(b) == CFG.steps
    assert a == b  # exact float equality, step by step
    for x, y in zip(jax.tree.leaves(eqx.filter(full.params, eqx.is_array)),
                    jax.tree.leaves(eqx.filter(res.params, eqx.is_array))):
        assert np.array_equal(np.asarray(x), np.asarray(y))
    assert res.best_step == full.best_step and res.best_val == full.best_val


def test_corrupt_checkpoint_is_one_line_error(tmp_path):
    run = tmp_path / "run"
    train(run, _params(), _loss, _batch_fn, TrainConfig(steps=4, warmup=1, checkpoint_every=2), progress=False)
    path = run / CHECKPOINT_NAME
    raw = bytearray(path.read_bytes())
    raw[-5] ^= 0xFF  # one flipped byte in the weights
    path.write_bytes(bytes(raw))
    with pytest.raises(ModelError) as e:
        train(run, _params(), _loss, _batch_fn, TrainConfig(steps=4, warmup=1, checkpoint_every=2),
              resume=True, progress=False)
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg and "corrupt" in msg
    path.write_bytes(bytes(raw[: len(raw) // 2]))  # truncated
    with pytest.raises(ModelError, match="truncated"):
        load_checkpoint(path, eqx.filter(_params(), eqx.is_inexact_array))
    path.write_bytes(b"garbage")
    with pytest.raises(ModelError, match="not an actuatorlab checkpoint"):
        load_checkpoint(path, eqx.filter(_params(), eqx.is_inexact_array))


def test_nan_loss_stops_with_clear_error(tmp_path):
    def bad_loss(model, batch):
        return _loss(model, batch)[0] * jnp.nan

    with pytest.raises(ModelError, match="loss became nan at step 1"):
        train(tmp_path / "run", _params(), bad_loss, _batch_fn, TrainConfig(steps=3, warmup=1), progress=False)


def test_in_memory_run_constant_rate_no_average_equals_a_hand_written_loop(tmp_path):
    """run_dir=None, schedule "constant", decay "all", ema_decay 0, eval_at_start: no files, the
    raw parameters validated at step 0 and every eval_every steps, the best kept; the parameters
    are those of a hand-written optax loop (clip, AdamW at a constant rate on every leaf)."""
    import optax

    cfg = TrainConfig(steps=12, lr=1e-2, weight_decay=1e-3, clip_norm=1.0, ema_decay=0.0, schedule="constant",
                      decay="all", eval_every=5, eval_at_start=True)
    seen = []
    r = train(None, _params(), _loss, _batch_fn, cfg, val_fn=_val,
              progress=lambda k, n, loss: seen.append((k, n, loss)))
    assert list(tmp_path.iterdir()) == [] and r.run_dir is None
    vals = [(m["step"], m["val"]) for m in r.metrics if "val" in m]
    assert [s for s, _ in vals] == [0, 5, 10, 12] and seen[-1][:2] == (12, 12) and len(seen) == 12
    assert r.best_step == min(vals, key=lambda sv: sv[1])[0] and r.best_val == min(v for _, v in vals)
    # the same steps by hand
    diff, static = eqx.partition(_params(), eqx.is_inexact_array)
    opt = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-2, weight_decay=1e-3))
    state = opt.init(diff)
    for k in range(12):
        g = eqx.filter_grad(lambda d: _loss(eqx.combine(d, static), _batch_fn(k))[0])(diff)
        upd, state = opt.update(g, state, diff)
        diff = eqx.apply_updates(diff, upd)
    for a, b in zip(jax.tree.leaves(eqx.filter(r.params, eqx.is_inexact_array)), jax.tree.leaves(diff)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    assert all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(jax.tree.leaves(r.params),
                                                                           jax.tree.leaves(r.ema)))


def test_frozen_arrays_are_inputs_of_the_compiled_step_not_constants():
    """A frozen (not trained) array is an argument of the compiled training step: two runs whose
    frozen arrays differ (a residual's refitted analytic base) lower to the same program, so the
    second finds the first's compilation in the persistent cache. Constants folded into the program
    would make the two texts differ."""
    from actuatorlab.learned.trainer import _make_step, make_optimizer

    def model(base):
        return {"w": jnp.ones((3, 2), jnp.float32), "base": jnp.asarray(base, jnp.float32)}

    def loss(p, batch):
        x, y = batch
        return jnp.mean((x @ p["w"] + p["base"] - y) ** 2)

    opt, _ = make_optimizer(CFG)
    step = _make_step(loss, opt, 0.9)
    texts = []
    for base in ([0.25, -1.0], [3.0, 7.5]):
        diff, static = eqx.partition(model(base), {"w": True, "base": False})
        texts.append(step.lower(diff, diff, opt.init(diff), _batch_fn(0), jnp.asarray(0, jnp.int32), static).as_text())
    assert texts[0] == texts[1]


def test_time_limit_stops_validates_checkpoints_and_the_resumed_run_reproduces_the_full_one(tmp_path):
    """A run out of time stops after its step, validates it (on_validate sees the validated
    parameters), checkpoints it, and says so; resumed without the limit, it gives the loss curve
    of a run never stopped, bit for bit (the schedule stayed the one of ``steps``)."""
    full = train(tmp_path / "full", _params(), _loss, _batch_fn, CFG, val_fn=_val, progress=False)
    seen: list = []
    cut = TrainConfig(**{**CFG.to_dict(), "time_limit_s": 1e-9})
    r = train(tmp_path / "cut", _params(), _loss, _batch_fn, cut, val_fn=_val, progress=False,
              on_validate=lambda k, m, v: seen.append((k, v, _val(m))))
    assert r.stopped == "time_limit" and r.steps == 1 and r.best_step == 1
    assert len(seen) == 1 and seen[0][0] == 1 and seen[0][1] == pytest.approx(seen[0][2])
    _, head = load_checkpoint(tmp_path / "cut" / CHECKPOINT_NAME, eqx.filter(_params(), eqx.is_inexact_array))
    assert head["step"] == 1
    res = train(tmp_path / "cut", _params(), _loss, _batch_fn, CFG, val_fn=_val, resume=True, progress=False)
    assert res.stopped is None and res.steps == CFG.steps
    assert _losses(tmp_path / "cut") == _losses(tmp_path / "full")
    assert full.stopped is None and full.steps == CFG.steps
    with pytest.raises(ModelError, match="time_limit_s"):
        TrainConfig(time_limit_s=0.0)

"""Learned actuator networks (equinox): a gated Transformer and its MLP / GRU / LSTM ablations.

Every network maps ONE normalized window ``x`` float32 ``(history + 1, n_features)`` (oldest frame
first, last row = current frame; see :mod:`actuatorlab.models.features`) to :class:`Heads`:

* ``torque`` ``(C,)``: a normalized effort surrogate per actuator channel; the rollout maps it to
  [N.m] (or [N]) with the channel's effort scale and clips it to the channel's effort bounds;
* ``force_raw`` ``(3,)``: raw end-effector force [N]; the predicted force is
  ``force = sigmoid(gate_logit) * force_raw`` (:func:`contact_force`);
* ``gate_logit`` ``()``: contact gate logit (contact iff ``|f| > 0.01 N`` in training);
* ``condition_logit`` ``(C,)``: per-channel condition score logit, ``score = sigmoid(logit)``.

Batch with ``jax.vmap`` outside. All parameters are created float32 and inputs are cast to
float32, so the forward pass stays float32 whether or not JAX's x64 mode is on.

Architectures (``ARCHS``; build with :func:`make_net`):

``transformer``  after Dou et al., "NeuralActuator" (RSS 2026): input projection + learned
    positional embedding, ``n_layers`` pre-norm encoder blocks
    ``h = h + Wo(sigmoid(Wg LN(h)) * MHA(LN(h)))``, ``h = h + FF(LN(h))`` with
    ``FF = W2 GELU(W1 .)``; final LayerNorm, mean pooling over the frames, four SiLU MLP heads.
    The gate is query-dependent and elementwise on the attention output before the output
    projection (the "G1" position of Qiu et al., "Gated Attention for Large Language Models",
    2025). Defaults d=192, 4 heads, 4 blocks, FF 384: 1.50 M parameters for a 5-channel x
    9-feature + 1 global layout (the paper reports 1.44 M; its head widths are not published).
``mlp``  the actuator-net family of Hwangbo et al., "Learning agile and dynamic motor skills for
    legged robots" (Science Robotics 2019): an MLP on the flattened window
    ``h = MLP(flatten(x))`` (they used 3 x 32 softsign units on a 3-frame history of one joint; here
    widened to match the Transformer's parameter count), then the same heads.
``gru`` / ``lstm``  a recurrent encoder (Cho et al. 2014 / Hochreiter & Schmidhuber 1997, as in
    ``equinox.nn.GRUCell`` / ``LSTMCell``) scanned over the frames oldest first after an input
    projection; the last hidden state of the last layer feeds the same heads.
    Causal by construction: the output at the current frame depends on past frames only.
``window_stats``  a condition detector (docs/condition.md): per channel, summary statistics of
    each input over the window (level, spread, trend, range, change) and the least-squares slope
    of every input on every other (current on position: a stiffness; on velocity: a damping),
    asinh-compressed, then a SiLU MLP and the same heads (:class:`WindowStats`). Per-channel
    inputs only; not an actuator ablation.

Parameter counts are matched within 25 % of the Transformer for the default sizes
(see ``tests/test_learned_models.py`` and ``bench/actuator.py``).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Literal, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..errors import ModelError, UnknownNameError

__all__ = ["Heads", "ArchSpec", "ARCHS", "make_net", "list_archs", "param_count", "contact_force",
           "condition_score", "GatedTransformer", "WindowMLP", "RecurrentNet", "OutputHeads",
           "ActuatorNet", "ActuatorLSTM", "WindowStats", "FORCE_OUT_ARCHS", "zero_torque_head", "scale_torque_head"]

F32 = jnp.float32


class Heads(NamedTuple):
    """Outputs of a learned actuator for one window (see module docstring)."""

    torque: jax.Array           # (C,) normalized effort surrogate [-]
    force_raw: jax.Array        # (3,) raw end-effector force [N]
    gate_logit: jax.Array       # () contact gate logit [-]
    condition_logit: jax.Array  # (C,) per-channel condition logit [-]


def contact_force(h: Heads) -> jax.Array:
    """Predicted end-effector force ``sigmoid(gate_logit) * force_raw`` [N], shape (..., 3)."""
    return jax.nn.sigmoid(h.gate_logit)[..., None] * h.force_raw


def condition_score(h: Heads) -> jax.Array:
    """Per-channel condition score in [0, 1], shape (..., C)."""
    return jax.nn.sigmoid(h.condition_logit)


def _linear(i: int, o: int | Literal["scalar"], key, use_bias: bool = True) -> eqx.nn.Linear:
    return eqx.nn.Linear(i, o, use_bias=use_bias, key=key, dtype=F32)


def _tokens(layer, x):
    """Apply a per-token layer to (T, d) tokens (vmapped: one matmul after XLA)."""
    return jax.vmap(layer)(x)


class OutputHeads(eqx.Module):
    """The four SiLU MLP heads (one hidden layer of ``width``) on a pooled embedding ``z`` (d,).
    ``force_out``: width of the force head: 3 (a force in the base or yaw frame) or the number of
    channels (external joint torques, mapped to a force by the model:
    :class:`~actuatorlab.learned.force_frame.JointForceMap`)."""

    torque: eqx.nn.MLP
    force: eqx.nn.MLP
    gate: eqx.nn.MLP
    condition: eqx.nn.MLP

    def __init__(self, d: int, n_channels: int, width: int, *, key, force_out: int = 3):
        k = jax.random.split(key, 4)
        mk = lambda out, kk: eqx.nn.MLP(d, out, width, depth=1, activation=jax.nn.silu, key=kk, dtype=F32)
        self.torque = mk(n_channels, k[0])
        self.force = mk(int(force_out), k[1])
        self.gate = mk("scalar", k[2])
        self.condition = mk(n_channels, k[3])

    def __call__(self, z: jax.Array) -> Heads:
        return Heads(self.torque(z), self.force(z), self.gate(z), self.condition(z))


class GatedAttention(eqx.Module):
    """Multi-head self-attention with a query-dependent elementwise sigmoid gate on tokens x (T, d):
    ``out = Wo( sigmoid(Wg x + bg) * concat_h softmax(q_h k_h^T / sqrt(d_h)) v_h )``.
    ``Wq, Wk, Wv, Wg`` are the four row blocks of one (4d, d) matrix (one matrix product)."""

    qkvg: eqx.nn.Linear  # d -> 4d: query, key, value, gate
    out: eqx.nn.Linear   # d -> d
    n_heads: int = eqx.field(static=True)

    def __init__(self, d: int, n_heads: int, *, key):
        if d % n_heads:
            raise ValueError(f"d={d} is not a multiple of n_heads={n_heads}")
        k = jax.random.split(key, 2)
        self.qkvg, self.out = _linear(d, 4 * d, k[0]), _linear(d, d, k[1])
        self.n_heads = n_heads

    def __call__(self, x: jax.Array) -> jax.Array:
        T, d = x.shape
        hd = d // self.n_heads
        q, k, v, g = jnp.split(_tokens(self.qkvg, x), 4, axis=-1)
        q, k, v = (a.reshape(T, self.n_heads, hd) for a in (q, k, v))
        att = jax.nn.softmax(jnp.einsum("qhd,khd->hqk", q, k) / math.sqrt(hd), axis=-1)
        y = jnp.einsum("hqk,khd->qhd", att, v).reshape(T, d)
        return _tokens(self.out, jax.nn.sigmoid(g) * y)


class EncoderBlock(eqx.Module):
    """Pre-norm encoder block: ``h += GatedAttention(LN(h))``; ``h += W2 GELU(W1 LN(h))``."""

    ln1: eqx.nn.LayerNorm
    attn: GatedAttention
    ln2: eqx.nn.LayerNorm
    ff1: eqx.nn.Linear
    ff2: eqx.nn.Linear

    def __init__(self, d: int, n_heads: int, ff: int, *, key):
        k = jax.random.split(key, 3)
        self.ln1, self.ln2 = eqx.nn.LayerNorm(d, dtype=F32), eqx.nn.LayerNorm(d, dtype=F32)
        self.attn = GatedAttention(d, n_heads, key=k[0])
        self.ff1, self.ff2 = _linear(d, ff, k[1]), _linear(ff, d, k[2])

    def __call__(self, h: jax.Array) -> jax.Array:
        h = h + self.attn(_tokens(self.ln1, h))
        return h + _tokens(self.ff2, jax.nn.gelu(_tokens(self.ff1, _tokens(self.ln2, h))))


class GatedTransformer(eqx.Module):
    """NeuralActuator-style Transformer (Dou et al., RSS 2026); see the module docstring.

    ``h0 = W_in x + P`` (P: learned positional embedding (T, d)); ``n_layers`` x
    :class:`EncoderBlock`; ``z = mean_t LN(h)``; heads on ``z``."""

    inp: eqx.nn.Linear
    pos: jax.Array  # (history + 1, d) learned positional embedding
    blocks: tuple[EncoderBlock, ...]
    ln_f: eqx.nn.LayerNorm
    heads: OutputHeads

    def __init__(self, *, n_features: int, n_channels: int, history: int, key, d: int = 192,
                 n_heads: int = 4, n_layers: int = 4, ff: int = 384, head_width: int = 192, force_out: int = 3):
        k = jax.random.split(key, n_layers + 3)
        self.inp = _linear(n_features, d, k[0])
        self.pos = 0.02 * jax.random.normal(k[1], (history + 1, d), F32)
        self.blocks = tuple(EncoderBlock(d, n_heads, ff, key=k[3 + i]) for i in range(n_layers))
        self.ln_f = eqx.nn.LayerNorm(d, dtype=F32)
        self.heads = OutputHeads(d, n_channels, head_width, key=k[2], force_out=force_out)

    def __call__(self, x: jax.Array) -> Heads:
        h = _tokens(self.inp, jnp.asarray(x, F32)) + self.pos
        for blk in self.blocks:
            h = blk(h)
        return self.heads(jnp.mean(_tokens(self.ln_f, h), axis=0))


class WindowMLP(eqx.Module):
    """Actuator-net MLP (Hwangbo et al. 2019) on the flattened window:
    ``z = SiLU-MLP(flatten(x))`` (``depth`` hidden layers of ``width``, output ``d``), heads on z."""

    trunk: eqx.nn.MLP
    heads: OutputHeads

    def __init__(self, *, n_features: int, n_channels: int, history: int, key, width: int = 512,
                 depth: int = 4, d: int = 384, head_width: int = 256, force_out: int = 3):
        k = jax.random.split(key, 2)
        self.trunk = eqx.nn.MLP((history + 1) * n_features, d, width, depth, activation=jax.nn.silu,
                                final_activation=jax.nn.silu, key=k[0], dtype=F32)
        self.heads = OutputHeads(d, n_channels, head_width, key=k[1], force_out=force_out)

    def __call__(self, x: jax.Array) -> Heads:
        return self.heads(self.trunk(jnp.asarray(x, F32).reshape(-1)))


class RecurrentNet(eqx.Module):
    """GRU or LSTM encoder scanned over the frames (oldest first) after an input projection
    ``u_t = W_in x_t``; ``n_layers`` stacked cells; heads on the last layer's final hidden state."""

    inp: eqx.nn.Linear
    cells: tuple[Any, ...]
    heads: OutputHeads
    cell: str = eqx.field(static=True)

    def __init__(self, *, n_features: int, n_channels: int, history: int, key, cell: str = "gru",
                 hidden: int = 384, n_layers: int = 2, head_width: int = 256, force_out: int = 3):
        k = jax.random.split(key, n_layers + 2)
        Cell = {"gru": eqx.nn.GRUCell, "lstm": eqx.nn.LSTMCell}[cell]
        self.cell = cell
        self.inp = _linear(n_features, hidden, k[0])
        self.cells = tuple(Cell(hidden, hidden, key=k[2 + i], dtype=F32) for i in range(n_layers))
        self.heads = OutputHeads(hidden, n_channels, head_width, key=k[1], force_out=force_out)

    def __call__(self, x: jax.Array) -> Heads:
        u = _tokens(self.inp, jnp.asarray(x, F32))        # (T, hidden)
        hid = self.cells[0].hidden_size
        zero = jnp.zeros((hid,), F32)
        for cell in self.cells:
            if self.cell == "lstm":
                def step(carry, ut, cell=cell):
                    carry = cell(ut, carry)
                    return carry, carry[0]
                _, u = jax.lax.scan(step, (zero, zero), u)
            else:
                def step(carry, ut, cell=cell):
                    carry = cell(ut, carry)
                    return carry, carry
                _, u = jax.lax.scan(step, zero, u)
        return self.heads(u[-1])


class ActuatorNet(eqx.Module):
    """The actuator net of Hwangbo et al. (Science Robotics 2019) in the input layout Isaac Lab's
    ``ActuatorNetMLP`` and mjlab's ``LearnedMlpActuator`` feed it: one joint, frames of exactly
    two features ``(err, dq)`` (position error q* - q and velocity, normalized), sampled at the
    history indices ``input_idx = (0, stride, 2 stride, ..., history)`` (0 = current frame)::

        v = [err_{idx_0}, ..., err_{idx_K-1}, dq_{idx_0}, ..., dq_{idx_K-1}]   ("pos_vel" order)
        torque = W_L softsign(... softsign(W_1 v + b_1) ...) + b_L               (1,)

    (softsign as in Hwangbo et al.). The other heads are zeros. ``history`` must be a multiple of
    ``stride``; :mod:`actuatorlab.export.torch_export` writes it as a TorchScript file."""

    mlp: eqx.nn.MLP
    input_idx: tuple[int, ...] = eqx.field(static=True)

    def __init__(self, *, n_features: int, n_channels: int, history: int, key, width: int = 32,
                 depth: int = 3, stride: int = 1):
        if n_features != 2 or n_channels != 1:
            raise ModelError(f"actuator_net takes one joint's 2 features (err, dq), got {n_channels} "
                             f"channel(s) of {n_features} features: it is a one-joint architecture")
        if stride < 1 or history % stride:
            raise ModelError(f"actuator_net: history {history} is not a multiple of stride {stride}")
        self.input_idx = tuple(range(0, history + 1, stride))
        self.mlp = eqx.nn.MLP(2 * len(self.input_idx), 1, width, depth, activation=jax.nn.soft_sign,
                              key=key, dtype=F32)

    def __call__(self, x: jax.Array) -> Heads:
        x = jnp.asarray(x, F32)
        rows = jnp.asarray([x.shape[0] - 1 - i for i in self.input_idx])
        v = jnp.concatenate([x[rows, 0], x[rows, 1]])
        z = jnp.zeros((1,), F32)
        return Heads(self.mlp(v), jnp.zeros((3,), F32), jnp.zeros((), F32), z)


class ActuatorLSTM(eqx.Module):
    """The recurrent actuator net of Isaac Lab's ``ActuatorNetLSTM`` (after Rudin et al., "Learning
    to walk in minutes using massively parallel deep reinforcement learning", CoRL 2021): one joint,
    one frame ``(err, dq)`` (normalized) per physics step, an ``n_layers`` LSTM whose state is
    **carried from step to step** (zero at the start of a rollout, as Isaac Lab resets it), and a
    linear head::

        (h, c)_k = LSTM((err_k, dq_k), (h, c)_k-1),   torque_k = W h_k + b

    :meth:`step` is the stateful form the one-joint rollout uses (:func:`actuatorlab.learned.joint.
    simulate`); ``__call__`` runs the window's frames from a zero state (the window has one frame:
    ``history`` must be 0). Exported by :mod:`actuatorlab.export.torch_export`."""

    cells: tuple[Any, ...]
    head: eqx.nn.Linear

    def __init__(self, *, n_features: int, n_channels: int, history: int, key, hidden: int = 16,
                 n_layers: int = 2):
        if n_features != 2 or n_channels != 1:
            raise ModelError(f"actuator_lstm takes one joint's 2 features (err, dq), got {n_channels} "
                             f"channel(s) of {n_features} features: it is a one-joint architecture")
        if history != 0:
            raise ModelError(f"actuator_lstm carries its state between steps: history must be 0, got {history}")
        k = jax.random.split(key, n_layers + 1)
        self.cells = tuple(eqx.nn.LSTMCell(2 if i == 0 else hidden, hidden, key=k[i], dtype=F32)
                           for i in range(n_layers))
        self.head = _linear(hidden, 1, k[-1])

    def init_state(self) -> jax.Array:
        """Zero state (n_layers, 2, hidden): h and c of every layer."""
        return jnp.zeros((len(self.cells), 2, self.cells[0].hidden_size), F32)

    def step(self, state: jax.Array, frame: jax.Array) -> tuple[jax.Array, jax.Array]:
        """One physics step: (state, normalized frame (2,)) -> (state, torque (1,))."""
        u = jnp.asarray(frame, F32)
        new = []
        for i, cell in enumerate(self.cells):
            h, c = cell(u, (state[i, 0], state[i, 1]))
            new.append(jnp.stack([h, c]))
            u = h
        return jnp.stack(new), self.head(u)

    def __call__(self, x: jax.Array) -> Heads:
        def body(st, f):
            st, tau = self.step(st, f)
            return st, tau

        _, taus = jax.lax.scan(body, self.init_state(), jnp.asarray(x, F32))
        return Heads(taus[-1], jnp.zeros((3,), F32), jnp.zeros((), F32), jnp.zeros((1,), F32))


class WindowStats(eqx.Module):
    """Per-channel window statistics, then an MLP: a learned detector on the physics quantities a
    window of servo telemetry exposes (the learned counterpart of hand-crafted window features).

    With the normalized window reshaped to ``x[t, c, f]`` (T = history + 1 frames, C channels, F
    per-channel inputs; channel-major frames, no global features), per channel c and input f::

        mean_f   = mean_t x            (left out, i.e. 0, where bit f of ``drop_mean`` is set)
        std_f    = sqrt(var_t x + 1e-6)
        trend_f  = LS slope of x on t/T
        range_f  = max_t x - min_t x
        delta_f  = x[T-1] - x[0]
        slope_ab = cov_t(x_a, x_b) / (var_t x_b + 1e-3)     for every ordered pair a != b

    so ``slope(current, q)`` is a stiffness, ``slope(current, dq)`` a damping and
    ``slope(current, err)`` a compliance of the loaded joint; every statistic but the mean is
    unchanged by an offset of its input, so ``drop_mean`` bit f set makes the net blind to input
    f's absolute level (e.g. the absolute position, which identifies trajectories rather than a
    joint's condition). ``z = SiLU-MLP(asinh(stats))`` (``depth`` hidden layers of ``width``,
    output ``d``), heads on z. C (5F + F(F - 1)) statistics.

    ``members = M > 1`` makes it a deep ensemble (Lakshminarayanan, Pritzel & Blundell, NeurIPS
    2017): M trunks and head sets with independent initialisations on the same statistics, each
    trained on its own loss (:meth:`member_heads` gives their outputs stacked, (M, ...)); the
    output is the members' mean, for the condition the logit of the mean probability::

        condition_logit = logit( (1/M) sum_m sigmoid(condition_logit_m) )

    (torque, force and gate: the plain mean). ``members = 1`` is the single network above."""

    trunk: eqx.nn.MLP
    heads: OutputHeads
    n_channels: int = eqx.field(static=True)
    drop_mean: int = eqx.field(static=True)
    members: int = eqx.field(static=True)

    def __init__(self, *, n_features: int, n_channels: int, history: int, key, width: int = 128,
                 depth: int = 2, d: int = 64, head_width: int = 64, drop_mean: int = 0, members: int = 1,
                 force_out: int = 3):
        if n_channels < 1 or n_features % n_channels:
            raise ModelError(f"window_stats needs per-channel inputs only: {n_features} features do not split "
                             f"into {n_channels} channels")
        if history < 1:
            raise ModelError(f"window_stats needs a history of at least 1 frame, got {history}")
        if members < 1:
            raise ModelError(f"window_stats needs at least 1 member, got members={members}")
        F = n_features // n_channels

        def build(kk):
            k = jax.random.split(kk, 2)
            trunk = eqx.nn.MLP(n_channels * (5 * F + F * (F - 1)), d, width, depth, activation=jax.nn.silu,
                               final_activation=jax.nn.silu, key=k[0], dtype=F32)
            return trunk, OutputHeads(d, n_channels, head_width, key=k[1], force_out=force_out)

        if members == 1:  # the single network (the layout of files written before ensembles existed)
            self.trunk, self.heads = build(key)
        else:  # stacked members: every array gets a leading (M,) axis
            self.trunk, self.heads = eqx.filter_vmap(build)(jax.random.split(key, members))
        self.n_channels = int(n_channels)
        self.drop_mean = int(drop_mean)
        self.members = int(members)

    def stats(self, x: jax.Array) -> jax.Array:
        """The C (5F + F(F - 1)) statistics of one window (T, C F), before asinh."""
        T = x.shape[0]
        x = jnp.asarray(x, F32).reshape(T, self.n_channels, -1)
        F = x.shape[-1]
        mean = x.mean(0)
        xc = x - mean
        var = (xc * xc).mean(0)
        tc = jnp.arange(T, dtype=F32) / T
        tc = tc - tc.mean()
        trend = jnp.einsum("t,tcf->cf", tc, xc) / T / jnp.mean(tc * tc)
        keep = np.asarray([0.0 if (self.drop_mean >> f) & 1 else 1.0 for f in range(F)], np.float32)
        cov = jnp.einsum("tca,tcb->cab", xc, xc) / T
        ia, ib = np.nonzero(~np.eye(F, dtype=bool))
        slope = (cov / (var[:, None, :] + 1e-3))[:, ia, ib]
        return jnp.concatenate([mean * keep, jnp.sqrt(var + 1e-6), trend, x.max(0) - x.min(0), x[-1] - x[0], slope],
                               axis=-1).reshape(-1)

    def member_heads(self, x: jax.Array) -> Heads:
        """Every member's outputs for one window, stacked: fields (M, ...) (M = 1 without an ensemble)."""
        s = jnp.arcsinh(self.stats(x))
        if self.members == 1:
            return jax.tree.map(lambda a: a[None], self.heads(self.trunk(s)))
        return eqx.filter_vmap(lambda t, h: h(t(s)))(self.trunk, self.heads)

    def __call__(self, x: jax.Array) -> Heads:
        if self.members == 1:
            return self.heads(self.trunk(jnp.arcsinh(self.stats(x))))
        h = self.member_heads(x)
        # logit of the mean probability, computed stably: logsumexp of log sigmoid minus log M, etc.
        M = jnp.log(float(self.members))
        log_p = jax.nn.logsumexp(jax.nn.log_sigmoid(h.condition_logit), axis=0) - M
        log_q = jax.nn.logsumexp(jax.nn.log_sigmoid(-h.condition_logit), axis=0) - M
        return Heads(h.torque.mean(0), h.force_raw.mean(0), h.gate_logit.mean(0), log_p - log_q)


class ArchSpec(NamedTuple):
    """A registered architecture: constructor, default sizes and a one-line description."""

    build: Callable[..., eqx.Module]
    sizes: dict[str, int]
    description: str


ARCHS: dict[str, ArchSpec] = {
    "transformer": ArchSpec(GatedTransformer,
                            dict(d=192, n_heads=4, n_layers=4, ff=384, head_width=192),
                            "gated pre-norm Transformer over the window (Dou et al. 2026)"),
    "mlp": ArchSpec(WindowMLP, dict(width=512, depth=4, d=384, head_width=256),
                    "MLP on the flattened window (Hwangbo et al. 2019 actuator net)"),
    "gru": ArchSpec(lambda **kw: RecurrentNet(cell="gru", **kw), dict(hidden=320, n_layers=2, head_width=256),
                    "2-layer GRU over the window"),
    "lstm": ArchSpec(lambda **kw: RecurrentNet(cell="lstm", **kw), dict(hidden=272, n_layers=2, head_width=256),
                     "2-layer LSTM over the window"),
    "actuator_net": ArchSpec(ActuatorNet, dict(width=32, depth=3, stride=1),
                             "one-joint softsign MLP on (err, dq) histories: the Isaac Lab / mjlab layout"),
    "actuator_lstm": ArchSpec(ActuatorLSTM, dict(hidden=16, n_layers=2),
                              "one-joint LSTM on (err, dq) with state carried between steps: Isaac Lab's layout"),
    "window_stats": ArchSpec(WindowStats, dict(width=128, depth=2, d=64, head_width=64, drop_mean=0, members=1),
                             "per-channel window statistics (levels, spreads, trends, cross-slopes) + MLP: a "
                             "condition detector"),
}


def list_archs() -> list[str]:
    return sorted(ARCHS)


#: architectures with :class:`OutputHeads`, whose force-head width is the optional size
#: ``force_out`` (default 3; absent from the size dict unless given, so older files read unchanged)
FORCE_OUT_ARCHS: tuple[str, ...] = ("transformer", "mlp", "gru", "lstm", "window_stats")


def arch_sizes(arch: str, **sizes: int) -> dict[str, int]:
    """The full size dict of ``arch`` (defaults overridden by ``sizes``); unknown keys raise.
    ``force_out`` (the force head's width, :class:`OutputHeads`) is accepted for
    :data:`FORCE_OUT_ARCHS` and kept only when given."""
    if arch not in ARCHS:
        raise UnknownNameError("architecture", arch, list(ARCHS))
    spec = ARCHS[arch]
    known = set(spec.sizes) | ({"force_out"} if arch in FORCE_OUT_ARCHS else set())
    bad = sorted(set(sizes) - known)
    if bad:
        raise UnknownNameError(f"size option of {arch!r}", bad[0], sorted(known))
    if "force_out" in sizes and int(sizes["force_out"]) < 1:
        raise ModelError(f"{arch}: force_out must be at least 1, got {sizes['force_out']}")
    return {**spec.sizes, **{k: int(v) for k, v in sizes.items()}}


def make_net(arch: str, *, n_features: int, n_channels: int, history: int, key, **sizes: int) -> eqx.Module:
    """Build the network ``arch`` (one of :data:`ARCHS`) for windows ``(history + 1, n_features)``
    and ``n_channels`` torque outputs; ``sizes`` override the architecture's default sizes."""
    full = arch_sizes(arch, **sizes)
    return ARCHS[arch].build(n_features=int(n_features), n_channels=int(n_channels), history=int(history),
                             key=key, **full)


def param_count(net: eqx.Module) -> int:
    """Number of trainable scalars (floating-point array leaves; works on ``eqx.filter_eval_shape``
    skeletons too)."""
    def trainable(a):
        return hasattr(a, "shape") and hasattr(a, "dtype") and jnp.issubdtype(a.dtype, jnp.inexact)
    return int(sum(math.prod(a.shape) for a in jax.tree_util.tree_leaves(net) if trainable(a)))


def _map_torque_head(net, fn):
    """``net`` with ``fn(weight, bias)`` in place of its torque head's last linear layer; None for a
    network without an :class:`OutputHeads` torque head."""
    last = getattr(getattr(getattr(net, "heads", None), "torque", None), "layers", None)
    if last is None:
        return None
    lin = last[-1]
    return eqx.tree_at(lambda n: (n.heads.torque.layers[-1].weight, n.heads.torque.layers[-1].bias), net,
                       fn(lin.weight, lin.bias))


def zero_torque_head(net):
    """``net`` with the last layer of its torque head zeroed, so that its torque output is 0 for
    every input: a residual network then starts as the analytic model it corrects, exactly. A
    network without an :class:`OutputHeads` torque head (``actuator_net``, ``actuator_lstm``) is
    returned unchanged."""
    out = _map_torque_head(net, lambda w, b: (jnp.zeros_like(w), jnp.zeros_like(b)))
    return net if out is None else out


def scale_torque_head(net, gate: float):
    """``net`` with the last layer of its torque head (weights and bias) multiplied by ``gate``: its
    torque output is ``gate`` times the original for every input (the head's last layer is linear),
    the other heads unchanged. For a residual that is the correction scaled by ``gate``
    (:mod:`actuatorlab.learned.gate`); gate 0 is :func:`zero_torque_head`. A network without an
    :class:`OutputHeads` torque head is refused (its output is not one linear layer)."""
    out = _map_torque_head(net, lambda w, b: (w * jnp.asarray(gate, w.dtype), b * jnp.asarray(gate, w.dtype)))
    if out is None:
        raise ModelError(f"{type(net).__name__} has no linear torque head to scale")
    return out

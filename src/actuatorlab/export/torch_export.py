"""TorchScript and ONNX files of learned one-joint actuators, and the actuator-net files Isaac Lab
and mjlab load (optional extra ``export``: ``pip install 'actuatorlab[export]'`` for torch).

Two TorchScript layouts:

* **window** (``--torchscript``; any of the ``mlp``, ``transformer``, ``actuator_net`` networks):
  ``effort = module(window)`` with ``window`` (N, history + 1, n_features) float32 *raw* frames
  (oldest first, last row = the current frame, features in the order of the model's layout) and
  ``effort`` (N, 1) [N.m | N]. The module holds the normalizer and the effort scale and bound of
  :func:`actuatorlab.learned.joint.effort`::

      effort = clip(effort_scale * net((window - mean) / std).torque, -effort_bound, effort_bound)

* **actuator net** (``--isaaclab`` / ``--mjlab`` of an ``actuator_net`` model): the input Isaac
  Lab's ``ActuatorNetMLP`` and mjlab's ``LearnedMlpActuator`` build, ``module(v)`` with
  ``v = [e_{i0} s_p, ..., e_{iK-1} s_p, dq_{i0} s_v, ..., dq_{iK-1} s_v]`` (N, 2K) ("pos_vel"),
  ``e = q* - q`` and ``i_k`` the history indices (0 = current physics step), output (N, 1)
  multiplied by ``torque_scale`` by the framework. Here ``s_p = 1/std_e``, ``s_v = 1/std_dq``
  (the normalizer's scales), ``torque_scale = effort_scale``; the normalizer's means are folded
  into the first layer's bias (``W (x s - m s) + b = W (x s) + (b - W (m s))``) and the output is
  clipped to ``+-effort_bound / effort_scale`` inside the module, so the framework's product equals
  :func:`actuatorlab.learned.joint.effort` exactly in exact arithmetic.

* **actuator LSTM** (``--isaaclab`` of an ``actuator_lstm`` model): Isaac Lab's
  ``ActuatorNetLSTM`` layout, ``.lstm`` (``torch.nn.LSTM``, batch_first) and a linear head,
  ``(x (N, 1, 2) raw (q* - q, dq), (h, c)) -> (effort (N, 1), (h, c))``, normalizer folded into
  the first layer's input weights, effort scale and bound inside.

Every file carries its metadata (rate, history indices and their times, sign convention, scales,
units, layout) in TorchScript ``_extra_files["actuatorlab.json"]`` or ONNX ``metadata_props``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelError
from ..models.nets import ActuatorLSTM, ActuatorNet, GatedTransformer, WindowMLP
from .sim_cfg import atomic_write, common_metadata
from ..models.features import PER_CHANNEL_FEATURES

__all__ = ["torch_available", "window_module", "actuator_net_module", "actuator_lstm_module", "save_torchscript", "load_metadata",
           "EXTRA_FILE", "learned_metadata"]

EXTRA_FILE = "actuatorlab.json"


def torch_available() -> bool:
    """Whether the optional ``torch`` package is importable."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _torch():
    try:
        import torch
    except ImportError:
        raise ModelError("TorchScript export needs the optional package torch: install the extra 'export' "
                         "(pip install 'actuatorlab[export]')") from None
    return torch


def _a(x) -> np.ndarray:
    return np.array(x, np.float32)  # a writable copy (torch.from_numpy shares memory)


def _linears(torch, layers) -> "Any":
    mods = []
    for layer in layers:
        lin = torch.nn.Linear(layer.in_features, layer.out_features, bias=layer.bias is not None)
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(_a(layer.weight)))
            if layer.bias is not None:
                lin.bias.copy_(torch.from_numpy(_a(layer.bias)))
        mods.append(lin)
    return torch.nn.ModuleList(mods)


def _modules():
    """The torch.nn.Module classes (defined lazily: torch is optional): the networks' layers
    (:func:`_net_modules`) and the wrappers that put normalizer, scale and bound around them
    (:func:`_wrapper_modules`)."""
    torch = _torch()
    return {**_net_modules(torch), **_wrapper_modules(torch)}


def _net_modules(torch):
    """Mlp, Transformer, WindowMlp, Selected: the equinox networks' layers in torch."""
    nn, F = torch.nn, torch.nn.functional

    class Mlp(nn.Module):
        """equinox.nn.MLP: linear layers with ``act`` between them (and after the last if ``final``)."""

        def __init__(self, layers, act: str, final: bool):
            super().__init__()
            self.layers = _linears(torch, layers)
            self.softsign = act == "softsign"
            self.final = final

        def _act(self, x):
            return F.softsign(x) if self.softsign else F.silu(x)

        def forward(self, x):
            n = len(self.layers)
            for i, layer in enumerate(self.layers):
                x = layer(x)
                if i < n - 1 or self.final:
                    x = self._act(x)
            return x

    class LayerNorm(nn.Module):
        def __init__(self, ln):
            super().__init__()
            self.ln = nn.LayerNorm(ln.shape, eps=float(ln.eps))
            with torch.no_grad():
                self.ln.weight.copy_(torch.from_numpy(_a(ln.weight)))
                self.ln.bias.copy_(torch.from_numpy(_a(ln.bias)))

        def forward(self, x):
            return self.ln(x)

    class Block(nn.Module):
        def __init__(self, blk):
            super().__init__()
            self.ln1, self.ln2 = LayerNorm(blk.ln1), LayerNorm(blk.ln2)
            self.qkvg, self.out = _linears(torch, [blk.attn.qkvg, blk.attn.out])
            self.ff1, self.ff2 = _linears(torch, [blk.ff1, blk.ff2])
            self.n_heads = int(blk.attn.n_heads)

        def forward(self, h):
            N, T, d = h.shape
            hd = d // self.n_heads
            q, k, v, g = self.qkvg(self.ln1(h)).chunk(4, dim=-1)
            q = q.reshape(N, T, self.n_heads, hd).transpose(1, 2)
            k = k.reshape(N, T, self.n_heads, hd).transpose(1, 2)
            v = v.reshape(N, T, self.n_heads, hd).transpose(1, 2)
            att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(hd), dim=-1)
            y = (att @ v).transpose(1, 2).reshape(N, T, d)
            h = h + self.out(torch.sigmoid(g) * y)
            return h + self.ff2(F.gelu(self.ff1(self.ln2(h)), approximate="tanh"))

    class Transformer(nn.Module):
        def __init__(self, net):
            super().__init__()
            (self.inp,) = _linears(torch, [net.inp])
            self.register_buffer("pos", torch.from_numpy(_a(net.pos)))
            self.blocks = nn.ModuleList([Block(b) for b in net.blocks])
            self.ln_f = LayerNorm(net.ln_f)
            self.head = Mlp(net.heads.torque.layers, "silu", False)

        def forward(self, x):
            h = self.inp(x) + self.pos
            for blk in self.blocks:
                h = blk(h)
            return self.head(self.ln_f(h).mean(dim=1))

    class WindowMlp(nn.Module):
        def __init__(self, net):
            super().__init__()
            self.trunk = Mlp(net.trunk.layers, "silu", True)
            self.head = Mlp(net.heads.torque.layers, "silu", False)

        def forward(self, x):
            return self.head(self.trunk(x.reshape(x.shape[0], -1)))

    class Selected(nn.Module):
        """actuator_net on a window: pick the frames of ``input_idx``, (err..., dq...) order."""

        def __init__(self, net, n_frames: int):
            super().__init__()
            self.register_buffer("rows", torch.tensor([n_frames - 1 - i for i in net.input_idx], dtype=torch.long))
            self.mlp = Mlp(net.mlp.layers, "softsign", False)

        def forward(self, x):
            s = x.index_select(1, self.rows)
            return self.mlp(torch.cat([s[:, :, 0], s[:, :, 1]], dim=1))

    return dict(Mlp=Mlp, Transformer=Transformer, WindowMlp=WindowMlp, Selected=Selected)


def _wrapper_modules(torch):
    """WindowActuator, ActuatorNetMlp, ActuatorNetLstm: the exported modules' outer layers."""
    nn = torch.nn

    class WindowActuator(nn.Module):
        """Raw window (N, T, F) -> effort (N, 1) [N.m | N] (normalizer, scale and bound inside)."""

        def __init__(self, net, mean, std, scale: float, bound: float):
            super().__init__()
            self.net = net
            self.register_buffer("mean", torch.from_numpy(_a(mean)))
            self.register_buffer("std", torch.from_numpy(_a(std)))
            self.scale, self.bound = float(scale), float(bound)

        def forward(self, window):
            y = self.net((window - self.mean) / self.std)
            return torch.clamp(self.scale * y, -self.bound, self.bound)

    class ActuatorNetMlp(nn.Module):
        """Isaac Lab / mjlab actuator-net input (N, 2K) -> (N, 1), clipped to +-limit."""

        def __init__(self, mlp, limit: float):
            super().__init__()
            self.mlp = mlp
            self.limit = float(limit)

        def forward(self, x):
            return torch.clamp(self.mlp(x), -self.limit, self.limit)

    class ActuatorNetLstm(nn.Module):
        """Isaac Lab ActuatorNetLSTM layout: ``.lstm`` (batch_first) + a linear head;
        (x (N, 1, 2) raw (q* - q, dq), (h, c)) -> (effort (N, 1), (h, c))."""

        def __init__(self, lstm, linear, scale: float, bound: float):
            super().__init__()
            self.lstm = lstm
            self.linear = linear
            self.scale, self.bound = float(scale), float(bound)

        def forward(self, x, hc: tuple[Any, Any]):  # (h, c) torch tensors; traced, not scripted
            y, (h, c) = self.lstm(x, hc)
            tau = torch.clamp(self.scale * self.linear(y[:, -1]), -self.bound, self.bound)
            return tau, (h, c)

    return dict(WindowActuator=WindowActuator, ActuatorNetMlp=ActuatorNetMlp, ActuatorNetLstm=ActuatorNetLstm)


def actuator_lstm_module(model):
    """The Isaac Lab ``ActuatorNetLSTM`` module of an ``actuator_lstm`` JointModel: the normalizer is
    folded into the first layer's input weights (``W (x - m) / s = (W / s) x - W m / s``), the
    output is ``clip(effort_scale * head(h), +-effort_bound)`` [N.m]."""

    if not isinstance(model.net, ActuatorLSTM):
        raise ModelError(f"Isaac Lab's ActuatorNetLSTM needs an actuator_lstm model, not {type(model.net).__name__}")
    torch = _torch()
    M = _modules()
    cells = model.net.cells
    hidden = cells[0].hidden_size
    lstm = torch.nn.LSTM(2, hidden, num_layers=len(cells), batch_first=True)
    mean = np.asarray(model.norm.mean, np.float64)
    std = np.asarray(model.norm.std, np.float64)
    with torch.no_grad():
        for i, cell in enumerate(cells):
            W = np.asarray(cell.weight_ih, np.float64)
            b = np.asarray(cell.bias, np.float64)
            if i == 0:
                b = b - W @ (mean / std)
                W = W / std[None, :]
            getattr(lstm, f"weight_ih_l{i}").copy_(torch.from_numpy(W.astype(np.float32)))
            getattr(lstm, f"weight_hh_l{i}").copy_(torch.from_numpy(_a(cell.weight_hh)))
            getattr(lstm, f"bias_ih_l{i}").copy_(torch.from_numpy(b.astype(np.float32)))
            getattr(lstm, f"bias_hh_l{i}").zero_()
    (linear,) = _linears(torch, [model.net.head])
    mod = M["ActuatorNetLstm"](lstm, linear, model.effort_scale, model.effort_bound)
    return mod.eval().requires_grad_(False), len(cells), hidden


def window_module(model):
    """The raw-window torch module of a :class:`~actuatorlab.learned.joint.JointModel` (see above)."""

    M = _modules()
    net = model.net
    if isinstance(net, GatedTransformer):
        core = M["Transformer"](net)
    elif isinstance(net, WindowMLP):
        core = M["WindowMlp"](net)
    elif isinstance(net, ActuatorNet):
        core = M["Selected"](net, model.layout.n_frames)
    else:
        raise ModelError(f"TorchScript export supports the transformer, mlp and actuator_net architectures, "
                         f"not {type(net).__name__} (GRU / LSTM windows are not exported)")
    mod = M["WindowActuator"](core, model.norm.mean, model.norm.std, model.effort_scale, model.effort_bound)
    return mod.eval().requires_grad_(False)


def actuator_net_module(model):
    """(module, pos_scale, vel_scale, torque_scale, input_idx) in the Isaac Lab / mjlab layout for an
    ``actuator_net`` JointModel (see the module docstring for the folding of the normalizer)."""

    if not isinstance(model.net, ActuatorNet) or tuple(model.layout.per_channel) != ("err", "dq"):
        raise ModelError("Isaac Lab / mjlab actuator nets read only the position error q* - q and the velocity "
                         "at given history indices; this model reads "
                         f"{list(model.layout.per_channel)} with a {type(model.net).__name__}: train one with "
                         "`actuatorlab train --arch actuator_net` (inputs err, dq)")
    torch = _torch()
    M = _modules()
    mean, std = _a(model.norm.mean).astype(np.float64), _a(model.norm.std).astype(np.float64)
    idx = model.net.input_idx
    K = len(idx)
    s = np.concatenate([np.full(K, 1.0 / std[0]), np.full(K, 1.0 / std[1])])  # per-input scale
    m = np.concatenate([np.full(K, mean[0]), np.full(K, mean[1])])
    mlp = M["Mlp"](model.net.mlp.layers, "softsign", False)
    with torch.no_grad():
        first = mlp.layers[0]
        W = first.weight.double().numpy()
        b = first.bias.double().numpy() - W @ (m * s)
        first.bias.copy_(torch.from_numpy(b.astype(np.float32)))
    mod = M["ActuatorNetMlp"](mlp, model.effort_bound / model.effort_scale).eval().requires_grad_(False)
    return mod, float(1.0 / std[0]), float(1.0 / std[1]), float(model.effort_scale), list(idx)


def save_torchscript(module, path: str | Path, example, metadata: dict[str, Any]) -> Path:
    """Trace ``module`` on ``example`` and save it atomically with ``metadata`` in
    ``_extra_files["actuatorlab.json"]``."""

    torch = _torch()
    import io
    import warnings

    buf = io.BytesIO()
    with warnings.catch_warnings():
        # torch >= 2.10 marks TorchScript deprecated; Isaac Lab and mjlab load actuator nets with torch.jit.load
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"torch\.jit")
        with torch.no_grad():
            traced = torch.jit.trace(module, example, check_trace=False)
        torch.jit.save(traced, buf, _extra_files={EXTRA_FILE: json.dumps(metadata, sort_keys=True)})
    return atomic_write(Path(path), buf.getvalue())


def load_metadata(path: str | Path) -> dict[str, Any]:
    """(TorchScript) the metadata stored by :func:`save_torchscript`."""
    import warnings

    torch = _torch()
    extra = {EXTRA_FILE: ""}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"torch\.jit")
        torch.jit.load(str(path), map_location="cpu", _extra_files=extra)
    return json.loads(extra[EXTRA_FILE])


def learned_metadata(model, d: dict[str, Any], target: str, dt: float) -> dict[str, Any]:
    """Metadata of a learned one-joint model's export: layout, lags, normalizer, scales."""

    meta = common_metadata(d, target, dt)
    H = model.layout.history
    meta.update({
        "arch": d.get("arch"),
        "layout": {"per_channel": list(model.layout.per_channel), "history": H,
                   "frames": "oldest first; row H is the current physics step",
                   "frame_lag_s": [(H - i) * dt for i in range(H + 1)],
                   "feature_meaning": {f: PER_CHANNEL_FEATURES.get(f, {"kp": "firmware position gain of the log",
                                                                       "enable": "torque enable [0/1]"}.get(f, ""))
                                       for f in model.layout.per_channel}},
        "normalizer": {"mean": _a(model.norm.mean).tolist(), "std": _a(model.norm.std).tolist(),
                       "formula": "x_n = (x - mean) / std"},
        "effort_scale": model.effort_scale, "effort_bound": model.effort_bound,
        "effort": "clip(effort_scale * net(x_n).torque, -effort_bound, effort_bound)",
        "history_init": "actuatorlab fills the history before the first step with copies of the first frame",
        "physics": {k: float(v) for k, v in model.params.items() if k in ("armature", "q_offset", "force_offset")},
    })
    if model.kind == "residual":
        meta["residual"] = ("the effort is a correction added to the drive effort of the analytic model "
                            f"{(d.get('base') or {}).get('model')} (model.json 'base'), not a whole actuator")
    return meta

"""Input features of the learned actuators: their layout, normalization and causal windows.

A learned actuator sees, at every control step, a window of ``history + 1`` frames (oldest first,
the last row is the current frame). One frame is a flat float32 vector laid out channel-major::

    [ch0.f0, ch0.f1, ..., ch0.fF-1,  ch1.f0, ...,  chC-1.fF-1,  g0, ..., gG-1]

with ``F = len(per_channel)`` per-channel features (commanded target, position, velocity,
tracking error, current / PWM / load telemetry, voltage, temperature) for each of the ``C``
actuator channels, then the ``G`` global features (e.g. the gripper coordinate). The layout is
stored with the weights (:mod:`actuatorlab.learned.checkpoint`); a model loaded against data with
another layout is refused with one line naming what differs.

Causality: :func:`build_window` / :func:`push_history` only ever concatenate the current frame to
past frames, so a rollout can build the input inside ``lax.scan`` from *simulated* positions and
velocities and *logged* commands/telemetry up to the present sample. Before the first sample the
history is filled with copies of the first frame (:func:`init_history`), never with later samples.
:func:`sliding_windows` builds the same windows offline for a whole log (teacher forcing).

Every function here is pure and jittable; the layout is plain static Python data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..errors import ModelError

__all__ = ["PER_CHANNEL_FEATURES", "FeatureLayout", "Normalizer", "fit_normalizer", "assemble_frame",
           "init_history", "push_history", "build_window", "sliding_windows"]

#: Per-channel feature names with an agreed meaning and unit (others may be added freely).
PER_CHANNEL_FEATURES: dict[str, str] = {
    "q_target": "commanded position [rad] (or [m] for a prismatic channel)",
    "q": "position [rad] (or [m])",
    "dq": "velocity [rad/s] (or [m/s])",
    "err": "tracking error q_target - q [rad] (or [m])",
    "current": "measured motor current [A]",
    "pwm": "applied PWM duty [-1, 1]",
    "load": "firmware load / effort estimate [-] (as logged)",
    "voltage": "supply voltage [V]",
    "temperature": "motor temperature [degC]",
    "tau_ext": "estimated external joint torque [N.m]: the causal inverse-dynamics residual of the model's "
               "residual_input (a classical estimator calibrated on training logs), log channel tau_ext/<joint>",
    "f_lever": "tau_ext over the joint's lever arm to the end-effector point, tau_ext / max(|J_p[:, j]|, 0.02 m) "
               "[N]: the force along the joint's own end-effector motion that would explain it, log channel "
               "f_lever/<joint>",
}


@dataclass(frozen=True)
class FeatureLayout:
    """Which numbers a learned actuator reads, in which order.

    Frame length ``n_features = len(channels) * len(per_channel) + len(global_features)``; the
    network input is ``(history + 1, n_features)`` float32 (normalized, see :class:`Normalizer`).
    """

    channels: tuple[str, ...]          # actuator channel (joint) names, length C
    per_channel: tuple[str, ...]       # per-channel feature names, length F (see PER_CHANNEL_FEATURES)
    global_features: tuple[str, ...] = ()  # robot-level features, length G (e.g. "gripper")
    history: int = 8                   # frames before the current one [frames]

    def __post_init__(self):
        object.__setattr__(self, "channels", tuple(str(c) for c in self.channels))
        object.__setattr__(self, "per_channel", tuple(str(f) for f in self.per_channel))
        object.__setattr__(self, "global_features", tuple(str(g) for g in self.global_features))
        object.__setattr__(self, "history", int(self.history))
        if not self.channels:
            raise ModelError("feature layout: no channels")
        if not self.per_channel and not self.global_features:
            raise ModelError("feature layout: no features")
        for what, names in (("channels", self.channels), ("per_channel", self.per_channel),
                            ("global_features", self.global_features)):
            if len(set(names)) != len(names):
                raise ModelError(f"feature layout: duplicate names in {what}: {list(names)}")
        if self.history < 0:
            raise ModelError(f"feature layout: history must be >= 0, got {self.history}")

    @property
    def n_channels(self) -> int:
        return len(self.channels)

    @property
    def n_features(self) -> int:
        """Length of one frame."""
        return len(self.channels) * len(self.per_channel) + len(self.global_features)

    @property
    def n_frames(self) -> int:
        """Frames in one network input (history + current)."""
        return self.history + 1

    @property
    def feature_names(self) -> tuple[str, ...]:
        """``"channel.feature"`` for every per-channel entry, then the global names, in frame order."""
        return tuple(f"{c}.{f}" for c in self.channels for f in self.per_channel) + self.global_features

    def index(self, channel: str, feature: str) -> int:
        """Position of ``channel.feature`` in a frame."""
        try:
            return self.channels.index(channel) * len(self.per_channel) + self.per_channel.index(feature)
        except ValueError:
            raise ModelError(f"feature layout has no {channel}.{feature}; channels {list(self.channels)}, "
                             f"per-channel features {list(self.per_channel)}") from None

    def to_dict(self) -> dict[str, Any]:
        return {"channels": list(self.channels), "per_channel": list(self.per_channel),
                "global_features": list(self.global_features), "history": self.history}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "FeatureLayout":
        try:
            return cls(channels=tuple(d["channels"]), per_channel=tuple(d["per_channel"]),
                       global_features=tuple(d.get("global_features", ())), history=int(d.get("history", 8)))
        except (KeyError, TypeError, ValueError) as e:
            raise ModelError(f"feature layout: malformed entry ({type(e).__name__}: {e})") from None

    def check_compatible(self, other: "FeatureLayout", where: str | None = None) -> None:
        """Raise a one-line :class:`ModelError` naming every field that differs (``where``: a file
        or context to prefix the message with)."""
        diffs = []
        for name in ("channels", "per_channel", "global_features", "history"):
            a, b = getattr(self, name), getattr(other, name)
            if a != b:
                diffs.append(f"{name} {list(a) if isinstance(a, tuple) else a} "
                             f"vs {list(b) if isinstance(b, tuple) else b}")
        if diffs:
            msg = "feature layout mismatch (model vs data): " + "; ".join(diffs)
            raise ModelError(f"{where}: {msg}" if where else msg)


class Normalizer(eqx.Module):
    """Per-feature affine normalization ``x_n = (x - mean) / std`` (float32), fitted on training
    frames only (:func:`fit_normalizer`). A pytree: pass it into jitted functions as an argument."""

    mean: jax.Array  # (n_features,) float32, in each feature's unit
    std: jax.Array   # (n_features,) float32, > 0, in each feature's unit

    def __init__(self, mean, std):
        self.mean = jnp.asarray(mean, jnp.float32)
        self.std = jnp.asarray(std, jnp.float32)

    def apply(self, x: jax.Array) -> jax.Array:
        """Normalize frames or windows ``(..., n_features)``; returns float32."""
        return (jnp.asarray(x, jnp.float32) - self.mean) / self.std

    def invert(self, x_n: jax.Array) -> jax.Array:
        return jnp.asarray(x_n, jnp.float32) * self.std + self.mean

    def to_dict(self) -> dict[str, Any]:
        return {"mean": np.asarray(self.mean, np.float64).tolist(), "std": np.asarray(self.std, np.float64).tolist()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], n_features: int | None = None) -> "Normalizer":
        try:
            mean = np.asarray(d["mean"], np.float32)
            std = np.asarray(d["std"], np.float32)
        except (KeyError, TypeError, ValueError) as e:
            raise ModelError(f"normalizer: malformed entry ({type(e).__name__}: {e})") from None
        if mean.ndim != 1 or mean.shape != std.shape:
            raise ModelError(f"normalizer: mean {mean.shape} and std {std.shape} must be equal 1-D shapes")
        if n_features is not None and mean.shape[0] != n_features:
            raise ModelError(f"normalizer has {mean.shape[0]} features, the layout {n_features}")
        if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(std)) and np.all(std > 0)):
            raise ModelError("normalizer: mean/std must be finite and std > 0")
        return cls(mean, std)


def fit_normalizer(frames, min_std: float = 1e-3) -> Normalizer:
    """Mean and std of training frames ``(..., n_features)`` (flattened over leading axes).

    A feature whose std is below ``min_std`` (in its own unit; e.g. a constant voltage) gets std 1
    so it passes through centred, not amplified noise. Compute it on training data only."""
    x = np.asarray(frames, np.float64).reshape(-1, np.shape(frames)[-1])
    if x.shape[0] == 0:
        raise ModelError("normalizer: no training frames")
    if not np.all(np.isfinite(x)):
        raise ModelError("normalizer: training frames contain NaN or inf")
    mean, std = x.mean(0), x.std(0)
    std = np.where(std < min_std, 1.0, std)
    return Normalizer(mean.astype(np.float32), std.astype(np.float32))


def assemble_frame(layout: FeatureLayout, per_channel: Mapping[str, jax.Array],
                   global_values: Mapping[str, jax.Array] | None = None) -> jax.Array:
    """One frame ``(..., n_features)`` float32 from per-channel arrays ``(..., C)`` keyed by feature
    name and global scalars ``(...)`` keyed by name, in ``layout`` order. Jittable (the layout is
    static); extra keys are ignored, missing ones raise :class:`ModelError` at trace time."""
    global_values = {} if global_values is None else global_values
    missing = [f for f in layout.per_channel if f not in per_channel] + \
              [g for g in layout.global_features if g not in global_values]
    if missing:
        raise ModelError(f"feature frame: missing {missing}; given {sorted(per_channel)} "
                         f"+ {sorted(global_values)}")
    C = layout.n_channels
    parts = []
    if layout.per_channel:
        cols = [jnp.asarray(per_channel[f], jnp.float32) for f in layout.per_channel]
        cols = jnp.broadcast_arrays(*cols)
        if cols[0].shape[-1:] != (C,):
            raise ModelError(f"feature frame: per-channel arrays must end in {C} channels, got {cols[0].shape}")
        x = jnp.stack(cols, axis=-1)                              # (..., C, F)
        parts.append(x.reshape(*x.shape[:-2], C * len(layout.per_channel)))
    if layout.global_features:
        g = jnp.stack([jnp.asarray(global_values[n], jnp.float32) for n in layout.global_features], axis=-1)
        if parts:
            g = jnp.broadcast_to(g, parts[0].shape[:-1] + g.shape[-1:])
        parts.append(g)
    return jnp.concatenate(parts, axis=-1) if len(parts) > 1 else parts[0]


def init_history(first_frame: jax.Array, history: int) -> jax.Array:
    """History buffer ``(history, n_features)`` before the first sample: copies of the first frame."""
    f = jnp.asarray(first_frame, jnp.float32)
    return jnp.broadcast_to(f, (history,) + f.shape)


def build_window(history_buf: jax.Array, frame: jax.Array) -> jax.Array:
    """Network input ``(history + 1, n_features)``: the past frames (oldest first) then the current one."""
    return jnp.concatenate([jnp.asarray(history_buf, jnp.float32), jnp.asarray(frame, jnp.float32)[None]], axis=0)


def push_history(history_buf: jax.Array, frame: jax.Array) -> jax.Array:
    """The history buffer one step later: drop the oldest frame, append ``frame`` (same shape)."""
    if history_buf.shape[0] == 0:
        return history_buf
    return build_window(history_buf, frame)[1:]


def sliding_windows(frames: jax.Array | np.ndarray, history: int) -> jax.Array:
    """Causal windows ``(T, history + 1, n_features)`` for every sample of a log ``(T, n_features)``:
    window ``t`` holds frames ``t - history .. t``, frames before 0 replaced by frame 0."""
    x = jnp.asarray(frames, jnp.float32)
    T = x.shape[0]
    idx = jnp.arange(T)[:, None] + jnp.arange(-history, 1)[None, :]  # (T, H+1)
    return x[jnp.clip(idx, 0, T - 1)]

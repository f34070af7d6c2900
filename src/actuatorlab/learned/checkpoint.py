"""Learned-actuator files: weights + everything needed to use them, in one self-checking file.

Layout of a ``.eqx`` learned-actuator file (format version 1)::

    b"ACTUATORLAB-LEARNED\\n"               magic line
    8 bytes, little-endian uint64          length N of the JSON header
    N bytes UTF-8 JSON header              arch, sizes, n_features, n_channels, history, feature
                                           layout, normalizer, meta, weights_nbytes, weights_sha256
    weights_nbytes bytes                   equinox.tree_serialise_leaves of the network

The header alone rebuilds the network's structure (:func:`actuatorlab.models.nets.make_net`), the
leaves are then read into it. A truncated or corrupted file (bad magic, short header, checksum
mismatch, wrong shapes) or a model whose feature layout does not match the data raises a one-line
:class:`~actuatorlab.errors.ModelError` that names the file. Files are written atomically
(temporary file in the same folder, then ``os.replace``).
"""

from __future__ import annotations

import hashlib
import io
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, cast

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..errors import ActuatorlabError, ModelError
from ..models.features import FeatureLayout, Normalizer
from ..models.nets import Heads, arch_sizes, make_net, param_count
from ..files import atomic_write

__all__ = ["LearnedModel", "save_learned", "load_learned", "read_header", "apply_learned", "MAGIC",
           "FORMAT_VERSION"]

MAGIC = b"ACTUATORLAB-LEARNED\n"
FORMAT_VERSION = 1
#: revision of the networks' parameter structure (header "structure"; absent = 1). 2: the
#: Transformer's attention holds q, k, v and the gate in one ``qkvg`` matrix (1: ``qkv`` + ``gate``).
STRUCTURE = 2


class _AttentionV1(eqx.Module):
    """Parameter layout of :class:`~actuatorlab.models.nets.GatedAttention` in structure 1."""

    qkv: eqx.nn.Linear
    gate: eqx.nn.Linear
    out: eqx.nn.Linear
    n_heads: int = eqx.field(static=True)


def _read_transformer_v1(weights: bytes, like):
    """Read structure-1 Transformer weights (separate qkv and gate) into today's network: the
    (3d, d) and (d, d) matrices are stacked into the (4d, d) ``qkvg`` (same function)."""
    def v1(a):
        d = a.out.in_features
        lin = lambda o: eqx.filter_eval_shape(eqx.nn.Linear, d, o, key=jax.random.PRNGKey(0), dtype=jnp.float32)
        return _AttentionV1(lin(3 * d), lin(d), a.out, a.n_heads)

    attns = lambda n: [b.attn for b in n.blocks]
    old = eqx.tree_deserialise_leaves(io.BytesIO(weights), eqx.tree_at(attns, like, [v1(a) for a in attns(like)]))

    def v2(a, new_like):
        qkvg = eqx.tree_at(lambda l: (l.weight, l.bias), new_like.qkvg,
                           (jnp.concatenate([a.qkv.weight, a.gate.weight]), jnp.concatenate([a.qkv.bias, a.gate.bias])))
        return eqx.tree_at(lambda t: (t.qkvg, t.out), new_like, (qkvg, a.out))

    return eqx.tree_at(attns, old, [v2(a, n) for a, n in zip(attns(old), attns(like))])



@dataclass(frozen=True)
class LearnedModel:
    """A loaded learned actuator: the network, its input layout and normalization, and metadata.

    ``net`` and ``normalizer`` are pytrees (pass them into jitted code as arguments); ``layout``,
    ``arch`` and ``sizes`` are static."""

    net: eqx.Module
    layout: FeatureLayout
    normalizer: Normalizer
    arch: str
    sizes: dict[str, int] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    path: str | None = None

    def __call__(self, window: jax.Array) -> Heads:
        """Heads for one raw (un-normalized) window ``(history + 1, n_features)``."""
        return apply_learned(self.net, self.normalizer, window)


def apply_learned(net: eqx.Module, normalizer: Normalizer, window: jax.Array) -> Heads:
    """Normalize one raw window ``(history + 1, n_features)`` and run the network (float32)."""
    apply = cast(Callable[[jax.Array], Heads], net)  # every models.nets architecture: window -> Heads
    return apply(normalizer.apply(window))


def _header(net, layout: FeatureLayout, normalizer: Normalizer, arch: str, sizes: Mapping[str, int],
            meta: Mapping[str, Any]) -> dict[str, Any]:
    return {"format": "actuatorlab-learned", "version": FORMAT_VERSION, "structure": STRUCTURE, "arch": arch,
            "sizes": {k: int(v) for k, v in sizes.items()}, "n_features": layout.n_features,
            "n_channels": layout.n_channels, "history": layout.history, "params": param_count(net),
            "layout": layout.to_dict(), "normalizer": normalizer.to_dict(), "meta": dict(meta)}


def save_learned(path: str | Path, model: eqx.Module, *, layout: FeatureLayout, normalizer: Normalizer,
                 arch: str, sizes: Mapping[str, int] | None = None,
                 meta: Mapping[str, Any] | None = None) -> Path:
    """Write network ``model`` (built by ``make_net(arch, ..., **sizes)`` for ``layout``) with its
    layout, normalizer and JSON-serialisable ``meta`` to ``path`` atomically; returns the path."""
    path = Path(path)
    sizes = arch_sizes(arch, **(sizes or {}))
    if np.shape(normalizer.mean) != (layout.n_features,):
        raise ModelError(f"{path}: normalizer has {np.shape(normalizer.mean)} features, layout {layout.n_features}")
    # the network must have the structure the header describes, or loading would fail later
    like = eqx.filter_eval_shape(lambda: make_net(arch, n_features=layout.n_features, n_channels=layout.n_channels,
                                                  history=layout.history, key=jax.random.PRNGKey(0), **sizes))
    # jaxlib ships no stub for PyTreeDef (compiled), so mypy cannot see its __ne__
    if jax.tree_util.tree_structure(like) != jax.tree_util.tree_structure(model) or any(  # type: ignore[operator]
            np.shape(a) != np.shape(b) for a, b in zip(jax.tree_util.tree_leaves(like), jax.tree_util.tree_leaves(model))):
        raise ModelError(f"{path}: network does not match arch {arch!r} with sizes {sizes} for this layout")
    buf = io.BytesIO()
    eqx.tree_serialise_leaves(buf, model)
    weights = buf.getvalue()
    header = _header(model, layout, normalizer, arch, sizes, meta or {})
    header["weights_nbytes"] = len(weights)
    header["weights_sha256"] = hashlib.sha256(weights).hexdigest()
    try:
        hb = json.dumps(header, sort_keys=True).encode()
    except TypeError as e:
        raise ModelError(f"{path}: meta is not JSON-serialisable ({e})") from None

    return atomic_write(path, MAGIC + struct.pack("<Q", len(hb)) + hb + weights)


def _read(path: Path) -> tuple[dict[str, Any], bytes]:
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ModelError(f"{path}: cannot read learned model ({e.strerror or e})") from None
    if not data.startswith(MAGIC):
        raise ModelError(f"{path}: not an actuatorlab learned-model file (bad magic)")
    off = len(MAGIC)
    if len(data) < off + 8:
        raise ModelError(f"{path}: truncated learned-model file (no header length)")
    (n,) = struct.unpack("<Q", data[off:off + 8])
    off += 8
    if len(data) < off + n:
        raise ModelError(f"{path}: truncated learned-model file (header cut at {len(data) - off} of {n} bytes)")
    try:
        header = json.loads(data[off:off + n].decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ModelError(f"{path}: corrupt learned-model header ({e})") from None
    if not isinstance(header, dict) or header.get("format") != "actuatorlab-learned":
        raise ModelError(f"{path}: corrupt learned-model header")
    if header.get("version") != FORMAT_VERSION:
        raise ModelError(f"{path}: learned-model format version {header.get('version')!r}, "
                         f"this actuatorlab reads {FORMAT_VERSION}")
    return header, data[off + n:]


def read_header(path: str | Path) -> dict[str, Any]:
    """The JSON header of a learned-model file (no weights read into a network)."""
    return _read(Path(path))[0]


def load_learned(path: str | Path, layout: FeatureLayout | None = None) -> LearnedModel:
    """Read a file written by :func:`save_learned`; if ``layout`` is given (the data's), it must
    equal the model's. Any problem raises a one-line :class:`ModelError` naming the file."""
    path = Path(path)
    header, weights = _read(path)
    try:
        nbytes, sha = int(header["weights_nbytes"]), str(header["weights_sha256"])
        arch, sizes = str(header["arch"]), dict(header["sizes"])
        model_layout = FeatureLayout.from_dict(header["layout"])
        normalizer = Normalizer.from_dict(header["normalizer"], model_layout.n_features)
        meta = dict(header.get("meta", {}))
    except ActuatorlabError as e:
        raise ModelError(f"{path}: {e}") from None
    except (KeyError, TypeError, ValueError) as e:
        raise ModelError(f"{path}: corrupt learned-model header (missing or bad {e})") from None
    if len(weights) != nbytes:
        raise ModelError(f"{path}: truncated learned-model file (weights {len(weights)} of {nbytes} bytes)")
    if hashlib.sha256(weights).hexdigest() != sha:
        raise ModelError(f"{path}: corrupt learned-model file (weights checksum mismatch)")
    if layout is not None:
        model_layout.check_compatible(layout, where=str(path))
    try:
        like = eqx.filter_eval_shape(lambda: make_net(
            arch, n_features=model_layout.n_features, n_channels=model_layout.n_channels,
            history=model_layout.history, key=jax.random.PRNGKey(0), **sizes))
        try:
            net = eqx.tree_deserialise_leaves(io.BytesIO(weights), like)
        except Exception:
            if not (arch == "transformer" and int(header.get("structure", 1)) < 2):
                raise
            net = _read_transformer_v1(weights, like)  # written before the qkvg matrix
    except ActuatorlabError as e:
        raise ModelError(f"{path}: {e}") from None
    except Exception as e:  # equinox/numpy raise various errors on malformed leaves
        raise ModelError(f"{path}: weights do not match arch {arch!r} ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})") from None
    return LearnedModel(net=net, layout=model_layout, normalizer=normalizer, arch=arch, sizes=sizes,
                        meta=meta, path=str(path))

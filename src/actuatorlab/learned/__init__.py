"""Learned actuator models: feature layout and normalization (``features``), networks
(``nets``: Transformer, MLP, GRU, LSTM), self-checking weight files (``checkpoint``); the generic
training loop (``trainer``) and the one training algorithm over it (``learn``: warm start, curriculum,
BPTT through a simulator); learned and residual one-joint actuators in the one-joint replay
(``joint``, ``joint_train``) and whole-robot ones trained through MJX (``arm``; import those
submodules directly).

Learned networks compute in float32 regardless of JAX's x64 mode; see :mod:`actuatorlab.precision`.
"""

from .checkpoint import LearnedModel, apply_learned, load_learned, read_header, save_learned
from ..models.features import (FeatureLayout, Normalizer, assemble_frame, build_window, fit_normalizer,
                       init_history, push_history, sliding_windows)
from ..models.nets import ARCHS, Heads, condition_score, contact_force, list_archs, make_net, param_count

__all__ = ["FeatureLayout", "Normalizer", "fit_normalizer", "assemble_frame", "init_history", "push_history",
           "build_window", "sliding_windows", "Heads", "ARCHS", "make_net", "list_archs", "param_count",
           "contact_force", "condition_score", "LearnedModel", "save_learned", "load_learned", "read_header",
           "apply_learned"]

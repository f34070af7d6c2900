"""Online joint-condition monitoring: a learned model's condition head on live telemetry, one frame
at a time, with the calibration chosen on validation logs applied causally.

What ``actuatorlab condition`` computes from a whole log (docs/condition.md), a robot's control
loop needs frame by frame: :class:`ConditionMonitor` takes each :class:`~.force.ForceFrame` (the
commands, the measured positions and velocities and the servo telemetry of one control period)
and returns, per channel c of the model (C = ``model.layout.channels``):

``score``
    s_k, the condition head's per-frame score in [0, 1] (1 = normal, 0 = restricted) through
    :class:`~actuatorlab.sim.arm_learned.OnlineEstimator`. A model that reads the estimated
    external torque ``tau_ext`` gets it from its ``residual_input`` stepped on the same frame
    (:class:`~.force.LearnedTelemetry`), so nothing but the raw telemetry is needed on hardware.
``smoothed``
    the calibration's causal mean over the last n = round(smooth_s / dt) frames (fewer at
    start)::

        m_k = sum_{j=k-n+1..k} w_j s_j / sum_{j=k-n+1..k} w_j

    with w_j = 1, or for a motion-weighted calibration w_j = sd(q_{j-L+1..j}) + floor (the
    joint's position spread over the detector's L-frame window plus the calibration's floor); a
    ``smooth_space`` "log_odds" calibration takes this mean of clip(logit(s_j), -10, 10) and
    returns its sigmoid (:func:`~actuatorlab.estimate.condition_calibrate.smooth_log_odds`); the same numbers
    as :func:`~actuatorlab.estimate.condition_calibrate.calibrated_scores` on the whole log.
``alarm``
    m_k < ``window_threshold`` (restricted now), and k >= the warm-up; with an on-delay
    ``alarm_hold_s`` > 0, only once m has stayed below the threshold for the last
    h = round(alarm_hold_s / dt) frames after the warm-up
    (:func:`~actuatorlab.estimate.condition_calibrate.persistent_alarm`): fewer onsets from short dips on a
    normal joint, a first alarm up to ``alarm_hold_s`` later on a restricted one.
``verdict_score``, ``verdict``
    the mean of m over the last ``verdict_s`` seconds (fewer at start) and whether it is below
    ``verdict_threshold`` (never during the warm-up): at a log's last frame, the per-log verdict
    of :func:`~actuatorlab.estimate.condition.run_condition`.

The warm-up (``warmup_frames``, default the network's window, history + 1 frames: 0.64 s for the
benchmark's detector) keeps both flags down until the network has seen a full window of real
frames; before that its window holds copies of the first frame and the residual's filters are
starting (qdd = 0). Measured on the 9 scale-1 benchmark runs (bench/README.md, "The per-frame
alarm"): most false alarm onsets on normal logs fell in the first 0.64 s.

Without a calibration (``calibration`` None or {}): no smoothing and both thresholds 0.5. Every
output at frame k depends on frames 0..k only.
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

import numpy as np

from ..errors import ModelError
from .condition_windows import WINDOW
from .condition_calibrate import _smooth_n, clipped_log_odds, hold_frames
from ..robots.loader import Robot
from ..sim.force import ForceFrame, ForceLog, LearnedTelemetry
from ..sim.arm_learned import OnlineEstimator

__all__ = ["ConditionEstimate", "ConditionMonitor"]


class ConditionEstimate(NamedTuple):
    """One frame of :class:`ConditionMonitor` (C = the model's channels, its order): score,
    smoothed, verdict_score (C,) in [0, 1] (1 = normal); alarm, verdict (C,) bool (True = restricted)."""

    score: np.ndarray
    smoothed: np.ndarray
    alarm: np.ndarray
    verdict_score: np.ndarray
    verdict: np.ndarray


class ConditionMonitor:
    """Causal condition monitoring with a learned whole-robot model (module docstring):
    ``reset()`` at the start of a log or a session, then ``step(frame)`` once per control period;
    :meth:`run` does a whole :class:`~.force.ForceLog` that way.

    ``calibration``: a dict of :func:`~actuatorlab.estimate.condition_calibrate.calibrate_condition` (the
    model file's ``condition_calibration``, e.g. ``load_arm_model(path)[2]["condition_calibration"]``);
    None or {}: the head's raw scores with thresholds 0.5. ``warmup_frames``: frames without a flag
    at the start (None: the network's window, ``model.layout.history + 1``). ``alarm_hold_s``: the
    alarm's on-delay [s] (0: none, the default)."""

    def __init__(self, robot: Robot, model, calibration: dict | None = None, warmup_frames: int | None = None,
                 alarm_hold_s: float = 0.0):
        cal = dict(calibration or {})
        self.model, self.calibration = model, cal
        self.channels = tuple(model.layout.channels)
        self.dt = float(robot.control_dt)
        self.n_smooth = _smooth_n(float(cal.get("smooth_s", 0.0)), self.dt)
        self.window_threshold = float(cal.get("window_threshold", 0.5))
        self.verdict_threshold = float(cal.get("verdict_threshold", 0.5))
        self.n_verdict = max(1, int(round(float(cal.get("verdict_s", 5.0)) / self.dt)))
        self.warmup_frames = int(model.layout.history + 1 if warmup_frames is None else warmup_frames)
        self.hold_frames = max(1, hold_frames(alarm_hold_s, self.dt))
        if self.warmup_frames < 0:
            raise ModelError(f"condition monitor: warmup_frames must be >= 0, got {warmup_frames}")
        self.motion = cal.get("smooth_weight") == "motion" and self.n_smooth > 1
        space = cal.get("smooth_space")
        if space not in (None, "log_odds"):
            raise ModelError(f"condition monitor: unknown smooth_space {space!r} (known: 'log_odds' or none)")
        self.log_odds = space == "log_odds" and self.n_smooth > 1
        if self.motion:
            if "motion_floor" not in cal:
                raise ModelError("condition monitor: a motion-weighted calibration lacks its motion_floor")
            self.floor = np.asarray(cal["motion_floor"], float).reshape(-1)
            if self.floor.shape != (len(self.channels),) or not np.all(self.floor > 0):
                raise ModelError(f"condition monitor: motion_floor must be {len(self.channels)} positive values, "
                                 f"got {cal['motion_floor']!r}")
            self.n_motion = int(cal.get("motion_frames", WINDOW))
        self._idx = np.array(model.channel_index)
        self._tel = LearnedTelemetry(robot, model, "condition monitor")
        self._online = OnlineEstimator(model)
        self.reset()

    def reset(self) -> None:
        """Forget every frame seen (the network's history, the residual's filters, the means)."""
        self._online.reset()
        self._tel.reset()
        self._s: deque = deque(maxlen=self.n_smooth)
        self._w: deque = deque(maxlen=self.n_smooth)
        self._q: deque = deque(maxlen=self.n_motion if self.motion else 1)
        self._m: deque = deque(maxlen=self.n_verdict)
        self._k = 0
        self._run = np.zeros(len(self.channels), int)  # consecutive frames below the threshold after the warm-up

    def step(self, frame: ForceFrame) -> ConditionEstimate:
        """The estimate after ``frame`` (robot-ordered (n,) fields, :class:`~.force.ForceFrame`)."""
        o = self._online.step(frame.q_target, frame.q, frame.dq, frame.v_supply, frame.enable, self._tel(frame))
        s = np.asarray(o["condition"], float)
        self._s.append(clipped_log_odds(s) if self.log_odds else s)
        if self.motion:
            self._q.append(np.asarray(frame.q, float)[self._idx])
            self._w.append(np.asarray(self._q).std(axis=0) + self.floor)
            w = np.asarray(self._w)
            m = (w * np.asarray(self._s)).sum(0) / w.sum(0)
        else:
            m = np.asarray(self._s).mean(0)
        if self.log_odds:
            m = 1.0 / (1.0 + np.exp(-m))
        self._m.append(m)
        v = np.asarray(self._m).mean(0)
        ready = self._k >= self.warmup_frames
        self._k += 1
        below = (m < self.window_threshold) & ready
        self._run = np.where(below, self._run + 1, 0)
        return ConditionEstimate(s, m, self._run >= self.hold_frames, v, (v < self.verdict_threshold) & ready)

    def run(self, log: ForceLog) -> dict[str, np.ndarray]:
        """Reset, then one :meth:`step` per frame of ``log`` in time order: the estimate's fields
        stacked over time, (T, C) each."""
        self.reset()
        rows = [self.step(log.frame(k)) for k in range(log.n)]
        C = len(self.channels)
        return {f: (np.stack([getattr(r, f) for r in rows]) if rows else np.zeros((0, C)))
                for f in ConditionEstimate._fields}

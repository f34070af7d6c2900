"""Command generators: what a host (or a leader arm) sends to the servos, sampled at the log rate.

Each generator is a pure function of a seeded ``numpy.random.Generator``, a duration and the robot
(:class:`~actuatorlab.synth.robot.Kinematics` for task-space paths) and returns joint targets
``(T, n)`` [rad] on the grid ``t_k = k dt``. Payload schedules and push profiles travel in a
:class:`Plan`. The families (docs/synth.md):

* ``teleop``: a leader arm moved by a person: band-limited random motion (filtered noise, 0.15-0.8 Hz)
  played back with a random time warp that produces pauses (the hand rests);
* ``chirp``: one joint, frequency rising linearly 0.1 Hz -> f1, amplitude limited by a speed cap;
* ``steps``: random steps held 0.5-2 s (all joints, or one joint);
* ``joint_sweep``: one joint swept over 90 % of its range and back (raised cosine), others still;
* ``circle``: the end effector on a circle (horizontal ``xy`` or vertical ``xz`` plane, ``cw``/``ccw``)
  through a damped least-squares IK;
* ``lean_extend``: the whole arm between tucked, leaning and extended key poses (minimum jerk);
* ``pick_place``: above A -> A -> grip -> above A -> above B -> B -> release -> above B (IK + minimum
  jerk); with a payload it is carried from grip to release;
* ``lift_hold``: lift a (grasped) payload from a low pose to an extended pose, hold, lower;
* ``push_hold``: hold a pose (slow small motion) while an external force is applied in pulses.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .robot import Kinematics

__all__ = ["Plan", "plan_of", "random_pose", "push_profile", "min_jerk_path", "teleop", "chirp", "steps",
           "joint_sweep", "circle",
           "lean_extend", "pick_place", "lift_hold", "push_hold", "SAFE_BOX"]

#: [rad] (n, 2) joint box used by the random generators (OpenManipulator-X): keeps the arm in front
#: of and above its base; sweeps use 90 % of the full MJCF range instead.
SAFE_BOX = np.array([[-2.0, 2.0], [-1.2, 1.2], [-1.2, 1.0], [-1.4, 1.6]])
#: [rad/s] speed cap of generated targets (the XM430-W350 no-load speed is 4.8 rad/s).
V_CAP = 2.0


@dataclass(frozen=True, eq=False)
class Plan:
    """Everything the world does to the robot during one trajectory, on the log grid.

    Attributes:
        q_cmd: (T, n) [rad] host targets (before the Goal Position register rounds them).
        enable: (T, n) [0/1] torque enable.
        payload: (T,) [kg] payload mass carried at the end effector (0 = none).
        push_dir: (3,) unit vector of the external force in the base frame (zeros = no push).
        pulses: ((t_start [s], rise [s], hold [s], magnitude [N]), ...) of the external force.
        events: named times [s] (e.g. "grip", "release") for the dataset card.
    """

    q_cmd: np.ndarray
    enable: np.ndarray
    payload: np.ndarray
    push_dir: np.ndarray = field(default_factory=lambda: np.zeros(3))
    pulses: tuple[tuple[float, float, float, float], ...] = ()
    events: dict[str, float] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return int(self.q_cmd.shape[0])


def plan_of(q_cmd: np.ndarray, payload: float | np.ndarray = 0.0, **kw) -> Plan:
    """A :class:`Plan` with torque enabled throughout and a constant (or given) payload."""
    T = q_cmd.shape[0]
    pay = np.full(T, float(payload)) if np.ndim(payload) == 0 else np.asarray(payload, dtype=np.float64)
    return Plan(q_cmd=q_cmd, enable=np.ones_like(q_cmd), payload=pay, **kw)


def push_profile(t: np.ndarray, pulses: tuple[tuple[float, float, float, float], ...]) -> np.ndarray:
    """Magnitude [N] (T,) of a sum of smooth pulses at times t [s] (T,).

    Each pulse rises as 0.5 (1 - cos(pi (t - t0) / rise)), holds its magnitude for ``hold`` s and
    falls symmetrically (C1-continuous: no force step, like a hand pressing a force gauge).
    """
    out = np.zeros_like(t, dtype=np.float64)
    for t0, rise, hold, mag in pulses:
        u = t - t0
        w = np.where(u < 0, 0.0,
            np.where(u < rise, 0.5 * (1 - np.cos(np.pi * np.clip(u, 0, rise) / rise)),
            np.where(u < rise + hold, 1.0,
            np.where(u < 2 * rise + hold, 0.5 * (1 + np.cos(np.pi * np.clip(u - rise - hold, 0, rise) / rise)), 0.0))))
        out += mag * w
    return out


def _min_jerk(s: np.ndarray) -> np.ndarray:
    """Minimum-jerk blend 10 s^3 - 15 s^4 + 6 s^5 of s in [0, 1] (Flash & Hogan, J. Neurosci. 1985)."""
    s = np.clip(s, 0.0, 1.0)
    return s**3 * (10.0 - 15.0 * s + 6.0 * s**2)


def min_jerk_path(poses: list[np.ndarray], moves: list[float], holds: list[float], dt: float, T: int) -> np.ndarray:
    """(T, n) path through ``poses``: from pose i, hold ``holds[i]`` s, then move to pose i+1 in ``moves[i]`` s
    (minimum jerk); after the last pose, hold it to the end (or cut at T samples)."""
    t = np.arange(T) * dt
    q = np.repeat(np.asarray(poses[0], dtype=np.float64)[None, :], T, axis=0)
    t_cur = 0.0
    for i in range(len(poses) - 1):
        t_cur += holds[i]
        a, b = np.asarray(poses[i], float), np.asarray(poses[i + 1], float)
        s = _min_jerk((t - t_cur) / moves[i])
        active = t >= t_cur
        q[active] = a + (b - a) * s[active, None]
        t_cur += moves[i]
    return q


def _move_time(a: np.ndarray, b: np.ndarray, v: float = 0.9 * V_CAP) -> float:
    """[s] duration of a minimum-jerk move a -> b whose peak speed (1.875 |b - a| / T) is v [rad/s]."""
    return max(0.6, 1.875 * float(np.max(np.abs(b - a))) / v)


def _lowpass_noise(rng: np.random.Generator, T: int, dt: float, fc: float) -> np.ndarray:
    """(T,) unit-variance noise low-passed at fc [Hz]: white noise shaped in the frequency domain by
    |H(f)|^2 = 1 / (1 + (f / fc)^4), the zero-phase (forward-backward) response of a 2nd-order
    Butterworth filter; computed on a padded window so that the circular wrap falls outside."""
    pad = int(3.0 / (fc * dt))
    n = T + 2 * pad
    x = rng.standard_normal(n)
    f = np.fft.rfftfreq(n, dt)
    y = np.fft.irfft(np.fft.rfft(x) / (1.0 + (f / fc) ** 4), n)[pad:pad + T]
    return y / (np.std(y) + 1e-12)


def _cap_speed(q: np.ndarray, dt: float, v: float = V_CAP) -> np.ndarray:
    """Rate-limit each column of q (T, n) to |dq/dt| <= v [rad/s] (a leader arm cannot move faster)."""
    out = q.copy()
    step = v * dt
    for k in range(1, q.shape[0]):
        out[k] = out[k - 1] + np.clip(q[k] - out[k - 1], -step, step)
    return out


def _box_centre_half(box: np.ndarray = SAFE_BOX) -> tuple[np.ndarray, np.ndarray]:
    return 0.5 * (box[:, 0] + box[:, 1]), 0.5 * (box[:, 1] - box[:, 0])


def random_pose(rng: np.random.Generator, spread: float = 0.6, box: np.ndarray = SAFE_BOX) -> np.ndarray:
    """A pose drawn uniformly in the central ``spread`` fraction of ``box`` (n,) [rad]."""
    c, h = _box_centre_half(box)
    return c + spread * h * rng.uniform(-1.0, 1.0, size=c.size)


def teleop(rng: np.random.Generator, T: int, dt: float, *, amplitude: float = 1.0,
           centre: np.ndarray | None = None, joints: tuple[int, ...] | None = None) -> np.ndarray:
    """Leader-arm teleoperation (T, n) [rad].

    Per joint: x_j = unit-variance noise low-passed at fc_j ~ U(0.15, 0.8) Hz; q_j = c_j + A_j tanh(x_j / 1.5)
    with A_j = amplitude * U(0.3, 0.8) * half box width (bounded, smooth). The whole path is played
    back through a time warp s(t) = integral of a gate in [0.05, 1] (smooth random pauses: the
    operator's hand rests), then rate limited to 2 rad/s. ``joints`` restricts motion to some joints.
    """
    n = SAFE_BOX.shape[0]
    c, h = _box_centre_half()
    centre = random_pose(rng, 0.4) if centre is None else np.asarray(centre, float)
    gate = 0.5 + 0.5 * np.tanh(2.0 * _lowpass_noise(rng, T, dt, 0.15) + 0.8)
    s = np.cumsum(np.maximum(gate, 0.05)) * dt
    s = s - s[0]
    tt = np.arange(T) * dt
    q = np.repeat(centre[None, :], T, axis=0)
    for j in range(n):
        fc = rng.uniform(0.15, 0.8)
        a = amplitude * rng.uniform(0.3, 0.8) * h[j]
        x = _lowpass_noise(rng, T, dt, fc)
        if joints is not None and j not in joints:
            continue
        q[:, j] = np.clip(centre[j] + a * np.tanh(np.interp(s, tt, x) / 1.5), SAFE_BOX[j, 0], SAFE_BOX[j, 1])
    return _cap_speed(q, dt)


def chirp(rng: np.random.Generator, T: int, dt: float, joint: int, *, f1: float | None = None,
          centre: np.ndarray | None = None) -> np.ndarray:
    """Chirp on one joint (T, n) [rad]: q_j = c_j + w(t) A(f) sin(2 pi (f0 t + (f1 - f0) t^2 / (2 T))).

    f0 = 0.1 Hz, f1 ~ U(1.5, 3) Hz, A(f) = min(A, V_CAP / (2 pi f)) (speed cap), A ~ U(0.2, 0.5) rad,
    w a 0.5 s raised-cosine taper at both ends; the other joints hold ``centre``.
    """
    centre = random_pose(rng, 0.3) if centre is None else np.asarray(centre, float)
    f1 = rng.uniform(1.5, 3.0) if f1 is None else f1
    f0 = 0.1
    amp = rng.uniform(0.2, 0.5)
    t = np.arange(T) * dt
    dur = max(t[-1], dt)
    f = f0 + (f1 - f0) * t / dur
    phase = 2 * np.pi * (f0 * t + 0.5 * (f1 - f0) * t**2 / dur)
    a = np.minimum(amp, V_CAP / (2 * np.pi * f))
    taper = np.minimum(1.0, np.minimum(t, dur - t) / 0.5)
    taper = 0.5 * (1 - np.cos(np.pi * np.clip(taper, 0, 1)))
    q = np.repeat(centre[None, :], T, axis=0)
    lo, hi = SAFE_BOX[joint]
    q[:, joint] = np.clip(centre[joint] + taper * a * np.sin(phase), lo, hi)
    return q


def steps(rng: np.random.Generator, T: int, dt: float, *, joint: int | None = None,
          centre: np.ndarray | None = None) -> np.ndarray:
    """Random steps (T, n) [rad]: every U(0.5, 2) s the target jumps by U(-0.5, 0.5) rad (one joint,
    or all joints at once), kept in :data:`SAFE_BOX`."""
    centre = random_pose(rng, 0.3) if centre is None else np.asarray(centre, float)
    q = np.repeat(centre[None, :], T, axis=0)
    cur = centre.copy()
    k = 0
    while k < T:
        hold = int(rng.uniform(0.5, 2.0) / dt)
        q[k:k + hold] = cur
        k += hold
        jump = rng.uniform(-0.5, 0.5, size=cur.size)
        if joint is not None:
            mask = np.zeros(cur.size)
            mask[joint] = 1.0
            jump = jump * mask
        nxt = cur + jump
        # reflect off the box
        nxt = np.where(nxt > SAFE_BOX[:, 1], cur - jump, nxt)
        nxt = np.where(nxt < SAFE_BOX[:, 0], cur - jump, nxt)
        cur = np.clip(nxt, SAFE_BOX[:, 0], SAFE_BOX[:, 1])
    return q


def joint_sweep(rng: np.random.Generator, T: int, dt: float, joint: int, joint_range: np.ndarray, *,
                speed: float | None = None, rest: np.ndarray | None = None) -> np.ndarray:
    """One joint swept over 90 % of its MJCF range (T, n) [rad], raised cosine between the ends.

    q_j = m - h cos(2 pi t / P), h = 0.45 (range), P = 2 pi h / v, starting from the low end after a
    minimum-jerk approach from ``rest``; other joints hold ``rest``. The peak speed v ~ U(0.4, 1.0) rad/s
    is raised (up to 2 rad/s) so that one full sweep there and back fits in the trajectory.
    """
    rest = np.array([0.0, -0.3, -0.2, 0.3]) if rest is None else np.asarray(rest, float)
    lo, hi = joint_range[joint]
    m, h = 0.5 * (lo + hi), 0.45 * (hi - lo)
    v = rng.uniform(0.4, 1.0) if speed is None else speed
    t = np.arange(T) * dt
    start = rest.copy()
    start[joint] = m - h
    approach = _move_time(rest, start)
    v = min(max(v, 2 * np.pi * h / max(t[-1] - approach, 1e-3)), V_CAP)
    P = 2 * np.pi * h / v
    q = min_jerk_path([rest, start], [approach], [0.0], dt, T)
    after = t >= approach
    q[after, joint] = m - h * np.cos(2 * np.pi * (t[after] - approach) / P)
    return q


def _circle_points(centre: np.ndarray, radius: float, plane: str, phi: np.ndarray) -> np.ndarray:
    if plane == "xy":
        return centre + radius * np.stack([np.cos(phi), np.sin(phi), np.zeros_like(phi)], axis=1)
    return centre + radius * np.stack([np.cos(phi), np.zeros_like(phi), np.sin(phi)], axis=1)


def circle(rng: np.random.Generator, T: int, dt: float, kin: Kinematics, *, direction: str, plane: str) -> np.ndarray:
    """End-effector circle (T, n) [rad] through IK.

    p(t) = c + r (cos phi, sin phi, 0) in ``xy`` or c + r (cos phi, 0, sin phi) in ``xz``;
    phi increases for ``ccw`` (counter-clockwise seen from +z for xy, from -y for xz), decreases for
    ``cw``; c = (U(0.18, 0.24), U(-0.05, 0.05), U(0.10, 0.18)) m, r ~ U(0.03, 0.07) m, period
    U(3, 8) s. A 2 s minimum-jerk approach from home reaches the start point.
    """
    sign = 1.0 if direction == "ccw" else -1.0
    c = np.array([rng.uniform(0.18, 0.24), rng.uniform(-0.05, 0.05), rng.uniform(0.10, 0.18)])
    r = rng.uniform(0.03, 0.07)
    period = rng.uniform(3.0, 8.0)
    phi0 = rng.uniform(0, 2 * np.pi)
    t = np.arange(T) * dt
    approach = 2.0
    phi = phi0 + sign * 2 * np.pi * np.clip(t - approach, 0, None) / period
    pts = _circle_points(c, r, plane, phi)
    home = np.asarray(kin.scene.robot.home, float)
    q_start = kin.ik(pts[0], home, posture=home)
    q = min_jerk_path([home, q_start], [approach], [0.0], dt, T)
    prev = q_start
    for k in np.flatnonzero(t >= approach):
        prev = kin.ik(pts[k], prev, posture=home, iters=10)
        q[k] = prev
    return q


def lean_extend(rng: np.random.Generator, T: int, dt: float) -> np.ndarray:
    """Whole-arm lean and extend (T, n) [rad]: minimum-jerk moves between key poses.

    Key poses: tucked (0, -1.0, 0.3, 0.7); extended forward (yaw, 0.9, -0.9, 0.0); leaning back
    (yaw, -1.1, -0.4, 0.3); leaning forward low (yaw, 1.1, 0.2, -0.9); reaching up (yaw, -0.3, -1.0, -0.6);
    each with a random yaw U(-1.2, 1.2) rad and U(-0.1, 0.1) rad jitter, holds U(0.3, 1.0) s.
    """
    keys = [np.array([0.0, 0.9, -0.9, 0.0]), np.array([0.0, -1.1, -0.4, 0.3]),
            np.array([0.0, 1.1, 0.2, -0.9]), np.array([0.0, -0.3, -1.0, -0.6])]
    tucked = np.array([0.0, -1.0, 0.3, 0.7])
    poses, moves, holds = [tucked], [], []
    t_used = 0.0
    while t_used < T * dt:
        key = keys[int(rng.integers(len(keys)))].copy()
        key[0] = rng.uniform(-1.2, 1.2)
        key[1:] += rng.uniform(-0.1, 0.1, size=3)
        back = tucked.copy()
        back[0] = key[0]
        for target in (key, back):
            hold = rng.uniform(0.3, 1.0)
            move = _move_time(poses[-1], target)
            holds.append(hold)
            moves.append(move)
            poses.append(target)
            t_used += hold + move
    return min_jerk_path(poses, moves, holds, dt, T)


def _pp_points(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Pick A and place B on the table [m]: radius U(0.18, 0.26), azimuths >= 0.4 rad apart, z U(0.04, 0.07)."""
    ra, rb = rng.uniform(0.18, 0.26, size=2)
    aa = rng.uniform(-1.0, 1.0)
    ab = aa + rng.choice([-1.0, 1.0]) * rng.uniform(0.4, 1.0)
    za, zb = rng.uniform(0.04, 0.07, size=2)
    return (np.array([ra * np.cos(aa), ra * np.sin(aa), za]), np.array([rb * np.cos(ab), rb * np.sin(ab), zb]))


def pick_place(rng: np.random.Generator, T: int, dt: float, kin: Kinematics, *, mass: float = 0.0) -> Plan:
    """Pick and place cycles: home -> above A -> A -> grip (0.6 s hold) -> above A -> above B -> B ->
    release (0.6 s hold) -> above B -> home, repeated until T. IK per waypoint (posture near home),
    minimum jerk in joint space. With ``mass`` > 0 the payload is carried from the grip (middle of
    the hold at A) to the release (middle of the hold at B)."""
    home = np.asarray(kin.scene.robot.home, float)
    up = np.array([0.0, 0.0, 0.08])
    poses, moves, holds = [home], [], []
    windows: list[tuple[float, float]] = []
    t_used = 0.0
    while t_used < T * dt:
        A, B = _pp_points(rng)
        # (waypoint, hold there before leaving); None = home
        wps = [(A + up, 0.2), (A, 0.6), (A + up, 0.1), (B + up, 0.2), (B, 0.6), (B + up, 0.1), (None, 0.3)]
        grip = release = 0.0
        for i, (point, hold) in enumerate(wps):
            target = home if point is None else kin.ik(point, poses[-1], posture=home)
            move = _move_time(poses[-1], target)
            moves.append(move)
            poses.append(target)
            t_used += move
            if i == 1:
                grip = t_used + 0.5 * hold
            if i == 4:
                release = t_used + 0.5 * hold
            holds.append(hold)
            t_used += hold
        windows.append((grip, release))
    # min_jerk_path holds *before* each move: shift the holds by one (none before the first move)
    q = min_jerk_path(poses, moves, [0.0] + holds[:-1], dt, T)
    t = np.arange(T) * dt
    payload = np.zeros(T)
    events: dict[str, float] = {}
    if mass > 0:
        for grip, release in windows:
            payload[(t >= grip) & (t < release)] = mass
        events = {"grip": windows[0][0], "release": windows[0][1]}
    return plan_of(q, payload, events=events)


def lift_hold(rng: np.random.Generator, T: int, dt: float, kin: Kinematics, *, mass: float) -> Plan:
    """Lift and hold a payload ``mass`` [kg] grasped from the start: low pose (z ~ 0.05 m) -> extended
    hold pose (reach U(0.24, 0.32) m, z U(0.12, 0.22) m) -> hold ~45 % of T -> back down -> hold."""
    home = np.asarray(kin.scene.robot.home, float)
    az = rng.uniform(-0.8, 0.8)
    r_low, r_hi = rng.uniform(0.18, 0.22), rng.uniform(0.24, 0.32)
    low = kin.ik(np.array([r_low * np.cos(az), r_low * np.sin(az), 0.05]), home, posture=home)
    high = kin.ik(np.array([r_hi * np.cos(az), r_hi * np.sin(az), rng.uniform(0.12, 0.22)]), low, posture=home)
    dur = T * dt
    move = min(_move_time(low, high, v=0.6), 0.2 * dur)
    hold_low = 0.1 * dur
    hold_high = max(dur - 2 * move - 2 * hold_low, 0.1 * dur)
    q = min_jerk_path([low, high, low], [move, move], [hold_low, hold_high], dt, T)
    return plan_of(q, mass, events={"hold_start": hold_low + move, "hold_end": hold_low + move + hold_high})


def push_hold(rng: np.random.Generator, T: int, dt: float, kin: Kinematics, direction: np.ndarray) -> Plan:
    """Hold a pose in front of the robot (slow +-0.03 rad teleop wander) while an external force along
    ``direction`` (3,) is applied in 1-3 smooth pulses (rise U(0.3, 0.6) s, hold U(0.5, 2.0) s,
    magnitude U(1.0, 3.5) N, 0.5 s apart at least). The same seed without the force is the
    matching no-contact trajectory."""
    home = np.asarray(kin.scene.robot.home, float)
    az = rng.uniform(-0.7, 0.7)
    r = rng.uniform(0.20, 0.27)
    pose = kin.ik(np.array([r * np.cos(az), r * np.sin(az), rng.uniform(0.10, 0.18)]), home, posture=home)
    q = teleop(rng, T, dt, amplitude=0.05, centre=pose)
    pulses: list[tuple[float, float, float, float]] = []  # (start [s], rise [s], hold [s], magnitude [N])
    t0 = rng.uniform(0.5, 1.0)
    while True:
        rise, hold, mag = rng.uniform(0.3, 0.6), rng.uniform(0.5, 2.0), rng.uniform(1.0, 3.5)
        if t0 + 2 * rise + hold > T * dt - 0.3 or len(pulses) == 3:
            break
        pulses.append((float(t0), float(rise), float(hold), float(mag)))
        t0 += 2 * rise + hold + rng.uniform(0.5, 1.5)
    if not pulses:  # short trajectory: one pulse that fits
        span = T * dt
        rise = min(0.3, span / 6)
        hold = max(0.6 * span - 2 * rise, 0.05)
        pulses.append((float(0.1 * span), float(rise), float(hold), float(rng.uniform(1.0, 3.5))))
    d = np.asarray(direction, dtype=np.float64)
    return plan_of(q, 0.0, push_dir=d / np.linalg.norm(d), pulses=tuple(pulses))

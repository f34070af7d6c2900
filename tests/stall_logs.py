"""Synthetic stall logs for the torque-envelope tests: a high-gain servo lifts a heavy pendulum
against gravity until its torque runs out, on a supply that sags under load.

Made with actuatorlab's own closed-loop replay (:mod:`synthetic`) from a ground truth with a source
resistance (``m1+sag``); the logs carry only the nominal supply voltage (no voltage channel), as a
bench with an unlogged battery would, and the firmware's PWM limit (``max_duty``, the Dynamixel
"PWM Limit" register) as a per-log constant.
"""

from __future__ import annotations

import numpy as np

from synthetic import ENCODER_STEP, TRUTH_M1, make_trajectory, simulate, xl330_setup

__all__ = ["TRUTH_ENVELOPE", "ENVELOPE_MODEL", "STALL_CASES", "sweep", "stall_logs", "stall_window"]

#: ground truth: the m1 servo of the recovery tests behind a 2 ohm supply. At stall the bridge is at
#: the firmware's PWM limit d_max and the current is d_max V0 / (R + d_max^2 R_s): the supply sags
#: less at a lower PWM limit, which no constant resistance reproduces.
TRUTH_ENVELOPE: dict[str, float] = {**TRUTH_M1, "source_resistance": 2.0}
ENVELOPE_MODEL = "m1+sag"
#: (name, mass [kg] at 0.1 m, nominal supply [V], sweep direction +-1, firmware PWM limit [1]):
#: several stall angles (0.5-1.2 rad) on 6 / 7.4 / 8.4 V, at PWM limits 100 % and 60 %
STALL_CASES = [("m70_v6", 0.70, 6.0, 1, 1.0), ("m50_v84_d60", 0.50, 8.4, 1, 0.6), ("m80_v74n", 0.80, 7.4, -1, 1.0),
               ("m80_v6n", 0.80, 6.0, -1, 1.0), ("m60_v74_d60n", 0.60, 7.4, -1, 0.6), ("m90_v84", 0.90, 8.4, 1, 1.0)]
DT = 0.005
DURATION = 2.0
#: [s] the part of each log where the target has stopped rising and the joint stays stalled
_HOLD = (1.3, 1.6)


def sweep(t: np.ndarray, direction: float) -> np.ndarray:
    """q_target [rad] (T,): a smooth (cubic) sweep 0 -> direction * pi/2 over 1.2 s, held 0.4 s,
    back to 0 over 0.4 s: the target outruns a joint that stalls against gravity."""
    def cubic(x):
        x = np.clip(x, 0.0, 1.0)
        return x * x * (3.0 - 2.0 * x)

    up = cubic(t / 1.2)
    down = cubic((t - 1.6) / 0.4)
    return direction * 0.5 * np.pi * (up - down)


def stall_logs(cases=STALL_CASES, params: dict | None = None, model: str = ENVELOPE_MODEL, kp: float = 800.0,
               chirp: bool = True):
    """Synthetic logs (Trajectory list) for ``cases`` replayed with ``params`` (default: the truth);
    plus one kp-400 chirp on the light bench (0.49 kg, 7.4 V) for the dynamics when ``chirp``."""
    params = TRUTH_ENVELOPE if params is None else params
    n = int(round(DURATION / DT)) + 1
    t = DT * np.arange(n)
    drafts = []
    for name, mass, volts, direction, max_duty in cases:
        s = xl330_setup(kp, mass=mass, v_supply=volts, max_duty=max_duty)
        drafts.append(make_trajectory(name, t, sweep(t, direction), setup=s,
                                      conditions={"excitation": "stall", "mass": str(mass)},
                                      source_file=f"{name}.synthetic"))
    if chirp:
        q_t = 0.8 * np.sin(2 * np.pi * (0.5 * t + 0.75 * t**2))
        drafts.append(make_trajectory("chirp", t, q_t, setup=xl330_setup(400.0),
                                      conditions={"excitation": "chirp"}, source_file="chirp.synthetic"))
    out = []
    for tr, (q, dq) in zip(drafts, simulate(drafts, params, model, DT)):
        q = np.round(q / ENCODER_STEP) * ENCODER_STEP
        out.append(tr.replace(data={**tr.data, "position": q, "velocity": dq}))
    return out


def stall_window(t: np.ndarray) -> np.ndarray:
    """Mask (T,) of the samples where the joint is stalled (target held beyond reach)."""
    return (t >= _HOLD[0]) & (t <= _HOLD[1])

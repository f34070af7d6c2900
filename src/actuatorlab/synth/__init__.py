"""Virtual hardware: realistic synthetic multi-joint logs with known ground truth.

A robot's MJCF (OpenManipulator-X) is simulated with native MuJoCo while every joint is driven by a
simulated Dynamixel XM430-W350 whose ground truth is richer than any model actuatorlab fits
(firmware PWM position law on quantised encoder counts, DC motor with back-EMF, current limit and
temperature-dependent resistance, first-order heating, two-mass backlash with a compliant mesh,
Stribeck/Coulomb/viscous friction with asymmetric driving/backdriving loss, command delay,
unit-to-unit variation, sensor quantisation, noise and filters). Payloads and pushes exist only in
the ground-truth scene and are labelled in the logs.

Public API (docs/synth.md)::

    from actuatorlab.synth import run_synth, SUITES
    summary = run_synth("open_manipulator_x", "neural_actuator", "data/synth", seed=0, scale=0.1)
"""

from .dataset import GENERATOR_VERSION as GENERATOR_VERSION
from .dataset import run_synth as run_synth
from .dataset import split_groups as split_groups
from .robot import ROBOTS as ROBOTS
from .robot import locate_mjcf as locate_mjcf
from .simulate import Rates as Rates
from .simulate import Restriction as Restriction
from .simulate import RunConditions as RunConditions
from .simulate import SimResult as SimResult
from .simulate import simulate as simulate
from .suites import SUITES as SUITES
from .suites import TrajectorySpec as TrajectorySpec
from .suites import get_suite as get_suite
from .truth import NOMINAL_XM430_W350 as NOMINAL_XM430_W350
from .truth import JointTruth as JointTruth
from .truth import draw_joint_truths as draw_joint_truths

__all__ = ["GENERATOR_VERSION", "NOMINAL_XM430_W350", "ROBOTS", "SUITES", "JointTruth", "Rates", "Restriction",
           "SimResult", "TrajectorySpec", "draw_joint_truths", "get_suite", "locate_mjcf", "run_synth", "simulate",
           "split_groups"]

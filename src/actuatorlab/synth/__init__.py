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

The actuator zoo (one-joint pendulum bench, docs/synth.md "The actuator zoo")::

    from actuatorlab.synth import run_bench, ZOO
    summary = run_bench("xl330_like", "data/zoo_xl330", seed=0, scale=0.3)
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
from .zoo import ZOO as ZOO
from .zoo import ZooActuator as ZooActuator
from .zoo import ZooError as ZooError
from .zoo import actuator_from_dict as actuator_from_dict
from .zoo import get_actuator as get_actuator
from .zoo_bench import BENCH_SUITE as BENCH_SUITE
from .zoo_bench import run_bench as run_bench
from .zoo_sim import ZooRun as ZooRun
from .legged import LEGGED_SUITE as LEGGED_SUITE
from .legged_sim import run_legged as run_legged
from .zoo_sim import simulate_zoo as simulate_zoo

__all__ = ["BENCH_SUITE", "LEGGED_SUITE", "run_legged", "GENERATOR_VERSION", "NOMINAL_XM430_W350", "ROBOTS", "SUITES", "ZOO", "JointTruth", "Rates",
           "Restriction", "SimResult", "TrajectorySpec", "ZooActuator", "ZooError", "ZooRun", "actuator_from_dict",
           "draw_joint_truths", "get_actuator", "get_suite", "locate_mjcf", "run_bench", "run_synth", "simulate",
           "simulate_zoo", "split_groups"]

"""actuatorlab: identify, trust and use actuator models from real joint logs.

Data flow (one subpackage each): ``logs`` (load, audit) -> ``models`` (pure JAX blocks and the
registry of nested models) -> ``sim`` (closed-loop replay) -> ``identify`` (fit, identifiability)
-> ``evaluate`` (metrics by regime, report) -> ``export`` (MuJoCo); ``learned`` holds the learned
actuator networks.

Precision is explicit (:mod:`actuatorlab.precision`): the physics entry points run in float64
(positions are integrated over tens of thousands of steps and compared at the 1e-5 relative level,
where float32 rounding would show), learned networks in float32. Importing actuatorlab changes no
JAX setting.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]

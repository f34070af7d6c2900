"""actuatorlab: identify, trust and use actuator models from real joint logs.

Data flow (one subpackage each): ``logs`` (load, audit) -> ``models`` (pure JAX blocks and the
registry of nested models) -> ``sim`` (closed-loop replay) -> ``identify`` (fit, identifiability)
-> ``evaluate`` (metrics by regime, report) -> ``export`` (MuJoCo).

JAX runs in 64-bit here: positions are integrated over tens of thousands of steps and compared at
the 1e-5 relative level (EMPS), where float32 rounding would show.
"""

import jax as _jax

_jax.config.update("jax_enable_x64", True)

__version__ = "0.1.0"
__all__ = ["__version__"]

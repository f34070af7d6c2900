"""actuatorlab: identify, trust and use actuator models from real joint logs.

Layers, bottom to top; a package imports only packages below it (no import cycles, no imports
inside functions except of optional extras such as torch or ray):

``errors``, ``files``, ``precision``
    one-line errors, atomic writes, float64 physics / float32 networks.
``models``
    pure JAX blocks (control laws, motor, friction, plant, step), the registry of nested models,
    the networks and their feature layout, and the model file.
``robots`` -> ``logs``
    robot configs with MuJoCo models; log formats, importers, resampling, timing audit.
``sim``
    closed-loop replay: the one-joint scan, whole robots in MJX and native MuJoCo, learned
    actuators in the loop, inverse dynamics and the classical force observers.
``synth``
    virtual hardware with known ground truth.
``identify`` -> ``learned``
    fit, nested selection, calibration, identifiability; learned and residual actuators, heads.
``evaluate`` -> ``estimate`` -> ``excite``
    metrics by regime, replay, envelope, regression suites; force and condition estimation;
    excitation design.
``envs`` -> ``export`` -> ``policy``
    RL environments with the actuator in the loop; MJCF / mjlab / Isaac Lab / TorchScript / ONNX
    exports; PPO with model homotopy.
``report`` -> ``app``
    self-contained HTML reports; the jobs and the typer CLI.

Precision is explicit (:mod:`actuatorlab.precision`): the physics entry points run in float64
(positions are integrated over tens of thousands of steps and compared at the 1e-5 relative level,
where float32 rounding would show), learned networks in float32. Importing actuatorlab changes no
JAX setting.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]

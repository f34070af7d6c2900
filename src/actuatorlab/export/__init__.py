"""Export fitted actuator models to simulators and runtimes: MuJoCo MJCF, mjlab and Isaac Lab
configurations, TorchScript and ONNX (:func:`export_targets`); whole robots (``arm_model.json``,
:mod:`.robot`). See docs/export.md."""

from .mjcf import BENCH_TIMESTEP as BENCH_TIMESTEP
from .mjcf import ExportResult as ExportResult
from .mjcf import export_mjcf as export_mjcf
from .mjcf import has_dcmotor as has_dcmotor
from .robot import RobotExport as RobotExport
from .robot import export_robot_cfg as export_robot_cfg
from .robot import export_robot_mjcf as export_robot_mjcf
from .targets import TARGETS as TARGETS
from .targets import TargetResult as TargetResult
from .targets import export_targets as export_targets

__all__ = ["BENCH_TIMESTEP", "ExportResult", "export_mjcf", "has_dcmotor", "TARGETS", "TargetResult",
           "export_targets", "RobotExport", "export_robot_mjcf", "export_robot_cfg"]

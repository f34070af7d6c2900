"""Export fitted actuator models to simulators (MuJoCo MJCF). See docs/export.md."""

from .mjcf import BENCH_TIMESTEP as BENCH_TIMESTEP
from .mjcf import ExportResult as ExportResult
from .mjcf import export_mjcf as export_mjcf
from .mjcf import has_dcmotor as has_dcmotor

__all__ = ["BENCH_TIMESTEP", "ExportResult", "export_mjcf", "has_dcmotor"]

"""Published baselines re-implemented as references (EMPS: IDIM-LS and its closed-loop check).

See docs/emps.md.
"""

from actuatorlab.baselines.emps_reference import (
    PUBLISHED_IDIM_LS_PARAMS as PUBLISHED_IDIM_LS_PARAMS,
    PUBLISHED_SIMULATION_ERRORS_PCT as PUBLISHED_SIMULATION_ERRORS_PCT,
    EmpsLoop as EmpsLoop,
    EmpsRecord as EmpsRecord,
    bang_bang_reference as bang_bang_reference,
    benchmark_simulation as benchmark_simulation,
    benchmark_time_base as benchmark_time_base,
    load_emps_mat as load_emps_mat,
    measured_signals as measured_signals,
    relative_errors as relative_errors,
    simulate_emps_closed_loop as simulate_emps_closed_loop,
)
from actuatorlab.baselines.idim_ls import (
    IDIM_PARAMETER_NAMES as IDIM_PARAMETER_NAMES,
    PUBLISHED_IDIM_LS as PUBLISHED_IDIM_LS,
    fit_idim_ls as fit_idim_ls,
    force_relative_error as force_relative_error,
    idim_observation as idim_observation,
)

__all__ = [
    "EmpsLoop",
    "EmpsRecord",
    "IDIM_PARAMETER_NAMES",
    "PUBLISHED_IDIM_LS",
    "PUBLISHED_IDIM_LS_PARAMS",
    "PUBLISHED_SIMULATION_ERRORS_PCT",
    "bang_bang_reference",
    "benchmark_simulation",
    "benchmark_time_base",
    "fit_idim_ls",
    "force_relative_error",
    "idim_observation",
    "load_emps_mat",
    "measured_signals",
    "relative_errors",
    "simulate_emps_closed_loop",
]

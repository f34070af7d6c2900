"""Identification of actuator models from logs (CMA-ES + gradient refinement), model selection
on validation data, and the identifiability summary."""

from .fit import FitResult, ParamSpace, fit_model, make_loss
from .identifiability import identifiability
from .select import SelectionResult, fit_family, split_validation

__all__ = ["FitResult", "ParamSpace", "fit_model", "make_loss", "identifiability", "SelectionResult",
           "fit_family", "split_validation"]

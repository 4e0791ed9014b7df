"""Deprecated: moved to ``runkernel.adapters.drive.model_errors``; this alias goes in runkernel 0.3."""

from runkernel._deprecation import moved_module
from runkernel.adapters.drive.model_errors import (
    DEFAULT_MODEL_ATTEMPTS as DEFAULT_MODEL_ATTEMPTS,
    MODEL_BACKOFF_CAP as MODEL_BACKOFF_CAP,
    MODEL_BACKOFF_FIRST as MODEL_BACKOFF_FIRST,
    TransientPredicate as TransientPredicate,
    checked_attempts as checked_attempts,
    model_backoff as model_backoff,
    model_error as model_error,
    transient_model_error as transient_model_error,
)

moved_module(__name__, "runkernel.adapters.drive.model_errors")

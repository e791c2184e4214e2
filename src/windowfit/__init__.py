"""windowfit: keep long LLM agent turns inside the model's context window.

The core imports the standard library only. Optional extras add real tokenizers
(``windowfit[tokenizers]``), the provider SDK wrappers (``windowfit[sdk]``), the local
provider-compatible server (``windowfit[server]``) and plots (``windowfit[plot]``).
"""

from .calibration import Correction, UsageCalibrator, provider_input_tokens
from .classify import ErrorInfo, ErrorKind, classify_error, is_context_overflow
from .errors import (
    CONTEXT_OVERFLOW_MESSAGE,
    ContextOverflowError,
    ConversationError,
    LogFormatError,
    MissingExtraError,
    SettingsError,
    TokenizerError,
    WindowfitError,
)
from .fitter import DEFAULT_MAX_BYTES, Fitter
from .fitting import FitReport, FitResult, fit
from .formats import detect_format
from .instructions import (
    CLEARED_RESULT_NOTE,
    SAFETY_NET,
    TRIMMED_CONVERSATION_NOTE,
    add_safety_net,
    add_safety_net_to_messages,
)
from .models import ModelLimits, model_limits
from .profiles import FAMILIES, Profile, ProfileEstimator, estimator_for, family_for_model
from .retry import RetryPolicy, retry_call, retry_call_async
from .settings import PRESETS, FitSettings
from .sizing import Sizer
from .tokens import CharacterBreakdown, Estimator, SeedEstimator, breakdown, estimate_tokens
from .wrap import UsageRecord, wrap

__version__ = "0.1.0"

__all__ = [
    "CLEARED_RESULT_NOTE",
    "CONTEXT_OVERFLOW_MESSAGE",
    "DEFAULT_MAX_BYTES",
    "FAMILIES",
    "PRESETS",
    "SAFETY_NET",
    "TRIMMED_CONVERSATION_NOTE",
    "CharacterBreakdown",
    "ContextOverflowError",
    "ConversationError",
    "Correction",
    "ErrorInfo",
    "ErrorKind",
    "Estimator",
    "FitReport",
    "FitResult",
    "FitSettings",
    "Fitter",
    "LogFormatError",
    "MissingExtraError",
    "ModelLimits",
    "Profile",
    "ProfileEstimator",
    "RetryPolicy",
    "SeedEstimator",
    "SettingsError",
    "Sizer",
    "TokenizerError",
    "UsageCalibrator",
    "UsageRecord",
    "WindowfitError",
    "__version__",
    "add_safety_net",
    "add_safety_net_to_messages",
    "breakdown",
    "classify_error",
    "detect_format",
    "estimate_tokens",
    "estimator_for",
    "family_for_model",
    "fit",
    "is_context_overflow",
    "model_limits",
    "provider_input_tokens",
    "retry_call",
    "retry_call_async",
    "wrap",
]

"""windowfit: keep long LLM agent turns inside the model's context window.

The core imports the standard library only. Optional extras add real tokenizers
(``windowfit[tokenizers]``), the provider SDK wrappers (``windowfit[sdk]``), the local
provider-compatible server (``windowfit[server]``) and plots (``windowfit[plot]``).
"""

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
from .retry import RetryPolicy, retry_call, retry_call_async
from .settings import PRESETS, FitSettings
from .sizing import Sizer
from .tokens import CharacterBreakdown, Estimator, SeedEstimator, breakdown, estimate_tokens
from .wrap import UsageRecord, wrap

__version__ = "0.1.0"

__all__ = [
    "CLEARED_RESULT_NOTE",
    "CONTEXT_OVERFLOW_MESSAGE",
    "PRESETS",
    "SAFETY_NET",
    "TRIMMED_CONVERSATION_NOTE",
    "CharacterBreakdown",
    "ContextOverflowError",
    "ConversationError",
    "ErrorInfo",
    "ErrorKind",
    "Estimator",
    "FitReport",
    "FitResult",
    "FitSettings",
    "LogFormatError",
    "MissingExtraError",
    "ModelLimits",
    "RetryPolicy",
    "SeedEstimator",
    "SettingsError",
    "Sizer",
    "TokenizerError",
    "UsageRecord",
    "WindowfitError",
    "__version__",
    "add_safety_net",
    "add_safety_net_to_messages",
    "breakdown",
    "classify_error",
    "detect_format",
    "estimate_tokens",
    "fit",
    "is_context_overflow",
    "model_limits",
    "retry_call",
    "retry_call_async",
    "wrap",
]

"""windowfit: keep long LLM agent turns inside the model's context window.

The core imports the standard library only. Optional extras add real tokenizers
(``windowfit[tokenizers]``), the provider SDK wrappers (``windowfit[sdk]``), the local
provider-compatible server (``windowfit[server]``) and plots (``windowfit[plot]``).
"""

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

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing at start-up
if TYPE_CHECKING:
    from .calibration import Correction, UsageCalibrator, provider_input_tokens
    from .classify import ErrorInfo, ErrorKind, classify_error, is_context_overflow
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
    from .profiles import (
        FAMILIES,
        Profile,
        ProfileEstimator,
        default_estimator,
        estimator_for,
        family_for_model,
    )
    from .retry import RetryPolicy, retry_call, retry_call_async
    from .settings import PRESETS, FitSettings
    from .sizing import Sizer
    from .tokens import CharacterBreakdown, Estimator, SeedEstimator, breakdown, estimate_tokens
    from .wrap import UsageRecord, wrap


#: Where each public name lives. ``import windowfit`` loads only the error tree; a name
#: loads its module when first used (PEP 562), so that a program that only fits never
#: pays for asyncio, the SDK wrappers or the error-classification tables.
_LAZY: dict[str, str] = {
    "CLEARED_RESULT_NOTE": ".instructions",
    "CharacterBreakdown": ".tokens",
    "Correction": ".calibration",
    "DEFAULT_MAX_BYTES": ".fitter",
    "ErrorInfo": ".classify",
    "ErrorKind": ".classify",
    "Estimator": ".tokens",
    "FAMILIES": ".profiles",
    "FitReport": ".fitting",
    "FitResult": ".fitting",
    "FitSettings": ".settings",
    "Fitter": ".fitter",
    "ModelLimits": ".models",
    "PRESETS": ".settings",
    "Profile": ".profiles",
    "ProfileEstimator": ".profiles",
    "RetryPolicy": ".retry",
    "SAFETY_NET": ".instructions",
    "SeedEstimator": ".tokens",
    "Sizer": ".sizing",
    "TRIMMED_CONVERSATION_NOTE": ".instructions",
    "UsageCalibrator": ".calibration",
    "UsageRecord": ".wrap",
    "add_safety_net": ".instructions",
    "add_safety_net_to_messages": ".instructions",
    "breakdown": ".tokens",
    "classify_error": ".classify",
    "detect_format": ".formats",
    "default_estimator": ".profiles",
    "estimate_tokens": ".tokens",
    "estimator_for": ".profiles",
    "family_for_model": ".profiles",
    "fit": ".fitting",
    "is_context_overflow": ".classify",
    "model_limits": ".models",
    "provider_input_tokens": ".calibration",
    "retry_call": ".retry",
    "retry_call_async": ".retry",
    "wrap": ".wrap",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'windowfit' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


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
    "default_estimator",
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

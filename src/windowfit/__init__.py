"""windowfit: keep long LLM agent turns inside the model's context window.

The core imports the standard library only. Optional extras add real tokenizers
(``windowfit[tokenizers]``), the provider SDK wrappers (``windowfit[sdk]``), the local
provider-compatible server (``windowfit[server]``) and plots (``windowfit[plot]``).
"""

from .errors import (
    CONTEXT_OVERFLOW_MESSAGE,
    ContextOverflowError,
    ConversationError,
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
from .settings import PRESETS, FitSettings
from .sizing import Sizer
from .tokens import CharacterBreakdown, Estimator, SeedEstimator, breakdown, estimate_tokens

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
    "Estimator",
    "FitReport",
    "FitResult",
    "FitSettings",
    "MissingExtraError",
    "SeedEstimator",
    "SettingsError",
    "Sizer",
    "TokenizerError",
    "WindowfitError",
    "__version__",
    "add_safety_net",
    "add_safety_net_to_messages",
    "breakdown",
    "detect_format",
    "estimate_tokens",
    "fit",
]

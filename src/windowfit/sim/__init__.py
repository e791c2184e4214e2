"""A simulated provider, scripted agents and the write-up's scenarios, all offline.

* :class:`SimulatedProvider` implements :class:`windowfit.agent.Model` on the simulator's
  core (:mod:`windowfit.simcore`, which ``windowfit serve-sim`` uses too): a hard context
  limit counted with a real tokenizer (cl100k by default), Anthropic's "prompt is too
  long" error, faults on demand, and usage from the core's prefix cache; its default
  policy :class:`Scripted` is the server's scripted model;
* :class:`Reader` and :class:`Coordinator` are scripted models that behave like a diligent
  agent (read the files asked for, one per step; split files across sub-agents);
* :class:`Scenarios` runs ``subagents``, ``chapters`` and ``russian``, before (the old
  system, :class:`LegacyShaper`) and after (windowfit);
* :func:`generated_text` writes the files they read (``DirectoryTexts`` reads real ones).

``windowfit demo`` runs them all. The standard library is used, plus the tokenizer files
of :mod:`windowfit.tokenizers` (its optional extras) for the real counts.
"""

from ._legacy import LEGACY_NOTE, LEGACY_RETRY, LegacyShaper, chars4, legacy_should_retry
from ._provider import (
    DEFAULT_HARD_LIMIT,
    DEFAULT_TOKENIZER,
    AgentUsage,
    Policy,
    PolicyView,
    RequestRecord,
    Scripted,
    SimulatedProvider,
    cached_tokenizer,
    prompt_too_long,
)
from ._scenarios import FIGURE_KEYS, MODES, SCENARIOS, Figures, ScenarioConfig, Scenarios
from ._scripted import (
    Coordinator,
    Reader,
    Team,
    coordinator_instruction,
    files_in,
    reader_instruction,
)
from ._texts import (
    LANGUAGES,
    MEASURED,
    DirectoryTexts,
    GeneratedTexts,
    TextSource,
    generated_text,
)

__all__ = [
    "DEFAULT_HARD_LIMIT",
    "DEFAULT_TOKENIZER",
    "FIGURE_KEYS",
    "LANGUAGES",
    "LEGACY_NOTE",
    "LEGACY_RETRY",
    "MEASURED",
    "MODES",
    "SCENARIOS",
    "AgentUsage",
    "Coordinator",
    "DirectoryTexts",
    "Figures",
    "GeneratedTexts",
    "LegacyShaper",
    "Policy",
    "PolicyView",
    "Reader",
    "RequestRecord",
    "ScenarioConfig",
    "Scenarios",
    "Scripted",
    "SimulatedProvider",
    "Team",
    "TextSource",
    "cached_tokenizer",
    "chars4",
    "coordinator_instruction",
    "files_in",
    "generated_text",
    "legacy_should_retry",
    "prompt_too_long",
    "reader_instruction",
]

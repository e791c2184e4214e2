"""Policies: what an agent would send at each model call, by name.

A policy turns the conversation so far into the request to send. Every policy here is a
pure function of the request (``messages[:upto]``, the system prompt and tools, and the
replay's budget): none keeps state from one request to the next, so each can be asked
about any request in any order (a per-run cache of rebuilt messages never changes an
answer). The peers are written from their public documentation; their docstrings say
which defaults they use and where they come from.

Names (``--policies``):

* every windowfit preset in :data:`windowfit.PRESETS` (``windowfit``, ``seed``, and
  ``windowfit-lean`` once it exists): :func:`windowfit.fit` with that preset;
* ``raw``: send everything;
* ``anthropic-clear-tool-uses``, ``openhands-masking``, ``swe-agent-last-n``
  (:mod:`windowfit.replay.peers`);
* ``langchain-trim`` when ``langchain_core`` is installed
  (:mod:`windowfit.replay.langchain_trim`).

A name may carry settings after colons, ``NAME:KEY=VALUE:KEY=VALUE``, for example
``windowfit:low_water=0.6`` or ``swe-agent-last-n:polling=10``; lists are written with
``|`` (``anthropic-clear-tool-uses:exclude_tools=memory|todo``).
"""

from __future__ import annotations

import dataclasses
import importlib.util
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

from ..errors import ContextOverflowError, MissingExtraError, SettingsError
from ..fitter import Fitter
from ..settings import PRESETS, FitSettings
from ..tokens import Estimator
from .conversation import Conversation

__all__ = [
    "Policy",
    "RawPolicy",
    "Refused",
    "WindowfitPolicy",
    "available_policies",
    "make_policy",
    "parse_policies",
]


class Refused(Exception):
    """The policy would not send this request (windowfit's context-overflow answer: the
    agent stops or asks the person)."""


class Policy(ABC):
    """What an agent sends at a model call. ``name`` is the registry name, ``label`` the
    name with its settings as given."""

    name: ClassVar[str] = "policy"
    #: One line for reports: what the policy is and where its behaviour comes from.
    summary: ClassVar[str] = ""
    _label: str | None = None

    @property
    def label(self) -> str:
        """The name as given, with its settings (``swe-agent-last-n:polling=10``)."""
        return self._label or self.default_label()

    @label.setter
    def label(self, value: str) -> None:
        self._label = value

    def default_label(self) -> str:
        return self.name

    @abstractmethod
    def shape(self, conv: Conversation, upto: int) -> list[dict[str, Any]]:
        """The messages sent for the request ``conv.messages[:upto]``; raises
        :class:`Refused` when the policy would not send one."""

    def begin(self, conv: Conversation) -> None:  # noqa: B027 - optional hook
        """Called before the first request of a run (for per-run caches only)."""

    def describe(self) -> str:
        """One line: what the policy is (its settings are in :meth:`settings`)."""
        return self.summary or (type(self).__doc__ or self.name).strip().splitlines()[0]

    def settings(self) -> dict[str, Any]:
        """The settings in force, for reports."""
        return {}


class RawPolicy(Policy):
    """Send every message as it is (the run as it was logged)."""

    name = "raw"
    summary = "send every message as it is (the run as it was logged)"

    def shape(self, conv: Conversation, upto: int) -> list[dict[str, Any]]:
        return conv.messages[:upto]


class WindowfitPolicy(Policy):
    """:func:`windowfit.fit` with a preset from :data:`windowfit.PRESETS`.

    The budget is the replay's budget for the run, and ``limit`` (when set) its hard
    limit, which ``fit`` takes as the model's window: a request that cannot fit the
    budget but fits the window is sent over the budget instead of refused. ``fit`` counts
    with ``estimator`` (the replay's tokenizer by default, or windowfit's own seed
    estimate). A :class:`~windowfit.ContextOverflowError` means windowfit would not send
    the request: it is counted as refused.
    """

    name = "windowfit-preset"

    def __init__(
        self, preset: str, settings: FitSettings, estimator: Estimator | None = None
    ) -> None:
        self.preset = preset
        self.fit_settings = settings
        self.estimator = estimator
        self.limit: int | None = None
        self.fitter = Fitter()  # this policy's own: replaying runs in threads stays exact

    def default_label(self) -> str:
        return self.preset

    def shape(self, conv: Conversation, upto: int) -> list[dict[str, Any]]:
        run = conv.run
        try:
            result = self.fitter.fit(
                conv.messages[:upto],
                budget=conv.budget,
                system=run.system,
                tools=run.tools,
                settings=self.fit_settings,
                format=run.format,
                estimator=self.estimator,
                limit=self.limit,
            )
        except ContextOverflowError:
            raise Refused from None
        return result.messages

    def describe(self) -> str:
        return f"windowfit.fit with the {self.preset!r} preset"

    def settings(self) -> dict[str, Any]:
        return self.fit_settings.to_dict()


# --------------------------------------------------------------------------------------
# The registry

PolicyFactory = Callable[[dict[str, str], "Estimator | None"], Policy]


def _langchain_available() -> bool:
    try:
        return importlib.util.find_spec("langchain_core") is not None
    except (ImportError, ValueError):
        return False


def _peer_factories() -> dict[str, PolicyFactory]:
    from . import peers

    factories: dict[str, PolicyFactory] = {
        "anthropic-clear-tool-uses": lambda o, _e: peers.AnthropicClearToolUses(
            **_options(peers.AnthropicClearToolUses, o)
        ),
        "openhands-masking": lambda o, _e: peers.OpenHandsObservationMasking(
            **_options(peers.OpenHandsObservationMasking, o)
        ),
        "swe-agent-last-n": lambda o, _e: peers.SweAgentLastNObservations(
            **_options(peers.SweAgentLastNObservations, o)
        ),
    }
    return factories


def _langchain_factory(options: dict[str, str], _estimator: Estimator | None) -> Policy:
    if not _langchain_available():
        raise MissingExtraError("langchain-core", "peers", "the langchain-trim policy")
    from .langchain_trim import LangChainTrim

    return LangChainTrim(**_options(LangChainTrim, options))


def _windowfit_factory(preset: str) -> PolicyFactory:
    def make(options: dict[str, str], estimator: Estimator | None) -> Policy:
        settings = PRESETS[preset]
        if options:
            settings = settings.with_(**_settings_options(settings, options))
        return WindowfitPolicy(preset, settings, estimator)

    return make


def _registry(include_missing: bool = False) -> dict[str, PolicyFactory]:
    """Every policy name in report order: windowfit presets, raw, the peers."""
    registry: dict[str, PolicyFactory] = {}
    presets = sorted(PRESETS, key=lambda name: (name != "windowfit", name == "seed", name))
    for preset in presets:
        registry[preset] = _windowfit_factory(preset)
    registry["raw"] = lambda o, _e: RawPolicy(**_options(RawPolicy, o))
    registry.update(_peer_factories())
    if include_missing or _langchain_available():
        registry["langchain-trim"] = _langchain_factory
    return registry


def available_policies() -> list[str]:
    """The policy names that can run here, in report order (``langchain-trim`` only when
    ``langchain_core`` is installed; windowfit presets as :data:`PRESETS` has them now)."""
    return list(_registry())


def make_policy(spec: str, estimator: Estimator | None = None) -> Policy:
    """The policy named by ``spec`` (``NAME`` or ``NAME:KEY=VALUE:...``)."""
    name, _, rest = spec.strip().partition(":")
    registry = _registry(include_missing=True)
    factory = registry.get(name)
    if factory is None:
        known = ", ".join(available_policies())
        raise SettingsError(f"unknown policy {name!r}; known policies: {known}")
    options: dict[str, str] = {}
    for item in rest.split(":") if rest else ():
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise SettingsError(f"policy {name!r}: expected KEY=VALUE, not {item!r}")
        options[key.strip().replace("-", "_")] = value.strip()
    policy = factory(options, estimator)
    policy.label = spec.strip()
    return policy


def parse_policies(text: str | None, estimator: Estimator | None = None) -> list[Policy]:
    """Policies from a comma-separated list (every available policy when ``None``)."""
    specs = available_policies() if text is None else [s for s in text.split(",") if s.strip()]
    if not specs:
        raise SettingsError("no policy given")
    policies = [make_policy(spec, estimator) for spec in specs]
    labels = [p.label for p in policies]
    duplicates = sorted({label for label in labels if labels.count(label) > 1})
    if duplicates:
        raise SettingsError(f"policy given twice: {', '.join(duplicates)}")
    return policies


# --------------------------------------------------------------------------------------
# Settings given as text


def _convert(value: str, kind: str, where: str) -> Any:
    """``value`` read as the dataclass field type ``kind`` (its annotation's text)."""
    options = [part.strip() for part in kind.split("|")]
    if value.lower() == "none" and "None" in options:
        return None
    base = options[0]
    try:
        if base == "bool":
            lowered = value.lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
        if base == "int":
            return int(value.replace("_", ""))
        if base == "float":
            return float(value)
        if base.startswith("tuple"):
            return tuple(v for v in value.split("|") if v)
    except ValueError:
        raise SettingsError(f"{where}: cannot read {value!r} as {base}") from None
    return value


def _typed_options(cls: type[Any], label: str, options: dict[str, str]) -> dict[str, Any]:
    """Keyword arguments for dataclass ``cls`` from text options, typed by its fields."""
    known = dataclasses.fields(cls) if dataclasses.is_dataclass(cls) else ()
    fields = {f.name: f for f in known if f.init and f.name != "name"}
    out: dict[str, Any] = {}
    for key, value in options.items():
        field = fields.get(key)
        if field is None:
            names = ", ".join(sorted(fields)) or "none"
            raise SettingsError(f"policy {label!r}: unknown setting {key!r}; known: {names}")
        out[key] = _convert(value, str(field.type), f"{label}:{key}")
    return out


def _settings_options(settings: FitSettings, options: dict[str, str]) -> dict[str, Any]:
    return _typed_options(FitSettings, settings.name, options)


def _options(cls: type[Any], options: dict[str, str]) -> dict[str, Any]:
    return _typed_options(cls, str(cls.name), options)

"""The simulated provider's one core, behind both of its doors.

The ASGI server (``windowfit serve-sim``, :mod:`windowfit.server`) and the in-process
model the agent runtime and ``windowfit demo`` use (:class:`windowfit.sim.SimulatedProvider`)
answer a request the same way, with a :class:`SimCore`:

1. it is counted with a real tokenizer (:meth:`SimCore.sizer`: one remembering tokenizer
   for every wire format, each format with its own framing);
2. it is refused when it does not fit the window (:meth:`SimCore.refusal`), in the API's
   own words (the door passes its :class:`WindowRule`);
3. the prefix cache says what was read and written (:meth:`SimCore.cache_use`);
4. the scripted model answers (:meth:`SimCore.answer`), and an answer over the request's
   output limit is cut (:meth:`SimCore.cut`);
5. usage is reported in one shape (:meth:`SimCore.usage`), which each door writes in its
   API's fields.

Faults (errors, delays, dropped connections) wait in :attr:`SimCore.faults`, taken per
route. A door owns only what is its API's: reading the request, its error bodies, how
its answer and its stream look on the wire.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..formats._dialect import Usage
from ..sizing import Sizer
from ..tokens import Estimator
from ._cache import (
    DEFAULT_CACHE_BYTES,
    CacheUse,
    MemoEstimator,
    PrefixCache,
    Segment,
    memo_tokenizer,
)
from ._faults import Fault, FaultQueue
from ._script import Answer, ScriptedModel, ToolOffer

__all__ = ["SimCore", "WindowRule"]

ErrorBody = tuple[int, dict[str, Any]]


@dataclass(frozen=True)
class WindowRule:
    """How one API refuses an input that does not fit its window.

    ``overflow(tokens, window)`` is the status and body for an input over the window;
    ``output_overflow(tokens, max_tokens, window)`` the one for an input that fits but
    leaves no room for the requested output (``None``: the API says ``overflow`` then
    too). ``counts_output`` is false for an API whose window limits the input alone
    (Gemini's).
    """

    overflow: Callable[[int, int], ErrorBody]
    output_overflow: Callable[[int, int, int], ErrorBody] | None = None
    counts_output: bool = True


class Asking(Protocol):
    """What a door's parsed request tells the scripted model: the tools offered, the
    tool choice (and the tool it names), and how many tool results it carries."""

    choice: str
    named: str | None

    def offers(self) -> list[ToolOffer]: ...

    def results(self) -> int: ...


class SimCore:
    """Counting, the window check, the prefix cache, the scripted model and the faults of
    one simulated provider (module docstring).

    ``window`` is the hard limit in tokens counted with ``tokenizer`` (a
    :func:`~windowfit.tokenizers.load_backend` name or an estimator); with
    ``reserve_output`` an input plus its output limit must fit it too. The prefix cache
    stores prefixes of at least ``cache_min_tokens`` for ``cache_ttl`` seconds in at most
    ``cache_max_bytes``; automatic reads are rounded down to ``cache_increment``.
    """

    def __init__(
        self,
        *,
        window: int,
        tokenizer: str | Estimator,
        model: ScriptedModel | None = None,
        reserve_output: bool = True,
        cache_min_tokens: int = 1024,
        cache_increment: int = 128,
        cache_ttl: float = 300.0,
        cache_max_bytes: int = DEFAULT_CACHE_BYTES,
        faults: Iterable[Fault] = (),
    ) -> None:
        if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
            raise ValueError(f"the window must be a positive whole number, not {window!r}")
        self.window = window
        self.reserve_output = reserve_output
        self.estimator: MemoEstimator = memo_tokenizer(tokenizer)
        self.model = model or ScriptedModel()
        self.cache = PrefixCache(
            min_tokens=cache_min_tokens,
            increment=cache_increment,
            ttl=cache_ttl,
            max_bytes=cache_max_bytes,
        )
        self.faults = FaultQueue(tuple(faults))
        self._sizers: dict[str, Sizer] = {}

    @property
    def tokenizer(self) -> str:
        """The name of the real tokenizer requests are counted with."""
        return self.estimator.name

    def sizer(self, format_name: str) -> Sizer:
        """The sizer for one wire format: the shared tokenizer, that format's framing."""
        sizer = self._sizers.get(format_name)
        if sizer is None:
            sizer = self._sizers[format_name] = Sizer(self.estimator, format_name)
        return sizer

    def reset(self) -> None:
        """Forget cached prefixes and waiting faults (counted texts are kept)."""
        self.cache.clear()
        self.faults.clear()

    # -- the steps ---------------------------------------------------------------------

    def refusal(self, rule: WindowRule, tokens: int, max_tokens: int | None) -> ErrorBody | None:
        """The API's refusal of an input of ``tokens`` with an output limit of
        ``max_tokens``, or ``None`` when it fits."""
        if tokens > self.window:
            return rule.overflow(tokens, self.window)
        if (
            rule.counts_output
            and self.reserve_output
            and max_tokens is not None
            and tokens + max_tokens > self.window
        ):
            if rule.output_overflow is None:
                return rule.overflow(tokens, self.window)
            return rule.output_overflow(tokens, max_tokens, self.window)
        return None

    def cache_use(self, namespace: str, segments: Sequence[Segment], *, explicit: bool) -> CacheUse:
        """What the prefix cache reads and writes for ``segments``: at ``cache_control``
        breakpoints only (``explicit``, Anthropic's rule) or automatically (OpenAI's and
        Gemini's)."""
        if explicit:
            return self.cache.explicit(namespace, segments)
        return self.cache.automatic(namespace, segments)

    def answer_to(self, request: Asking, tokens: int, model: str) -> Answer:
        """The scripted model's answer to ``request`` (any door's parsed request), of
        ``tokens`` input tokens, for ``model``."""
        return self.answer(
            request.offers(),
            choice=request.choice,
            named=request.named,
            results=request.results(),
            tokens=tokens,
            model=model,
        )

    def answer(
        self,
        tools: Sequence[ToolOffer],
        *,
        choice: str,
        named: str | None,
        results: int,
        tokens: int,
        model: str,
    ) -> Answer:
        """The scripted model's answer (see :class:`~windowfit.simcore.ScriptedModel`)."""
        return self.model.answer(
            tools, choice=choice, named=named, results=results, tokens=tokens, model=model
        )

    @staticmethod
    def cut(text: str, tokens: int, limit: int | None) -> tuple[str, int, bool]:
        """An answer's text within an output limit: the text, its tokens, and whether it
        was cut (a model stops at the limit; its text is shortened in proportion)."""
        if limit is None or tokens <= limit:
            return text, tokens, False
        return text[: max(1, len(text) * limit // max(1, tokens))], limit, True

    @staticmethod
    def usage(tokens: int, use: CacheUse, output: int) -> Usage:
        """The answered request's usage: the whole input, its cached parts, the output."""
        return Usage(
            input_tokens=tokens,
            output_tokens=output,
            cache_read_tokens=use.read,
            cache_write_tokens=use.write,
        )

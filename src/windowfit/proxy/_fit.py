"""Fitting one proxied request: from the body bytes to the bytes to forward.

A pure function of the request and what was learned about its conversation, so that any
number of proxy processes give the same answer. What windowfit cannot read (bad JSON, an
unknown shape, a conversation the API itself would refuse, a model without a known
window and no budget given) is not refused: it is forwarded exactly as it came, with the
reason noted, so that the proxy never makes a request fail that would have succeeded
without it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
from dataclasses import dataclass
from typing import Any

from ..errors import CONTEXT_OVERFLOW_MESSAGE, ContextOverflowError, WindowfitError
from ..fitter import Fitter
from ..fitting import FitReport
from ..formats import Dialect, RequestParts
from ..formats._facts import json_text
from ..models import model_limits
from ..profiles import estimator_for, family_for_model
from ..settings import FitSettings
from ..tokens import Estimator
from . import _json
from ._config import ProxyConfig
from ._learning import ConversationLearning
from ._reparse import BodyParser, Remembered

__all__ = ["KEPT_MIN_BYTES", "Fitted", "RequestFitter", "conversation_key", "with_sentence"]

#: Only conversations whose body is at least this large are kept by the proxy's Fitter
#: between requests. Counting a smaller one afresh costs at most about 0.2 ms, while
#: thousands of them, kept, would push out of the bound the large conversations, whose
#: recount costs milliseconds (about 10 ms for 1 MB).
KEPT_MIN_BYTES = 64 * 1024

#: The top-level field of each dialect's body that holds the conversation (what
#: :class:`~._reparse.BodyParser` reads element by element).
_CONVERSATION_FIELD = {"openai-responses": "input", "gemini": "contents"}

_log = logging.getLogger("windowfit.proxy")


@dataclass
class Fitted:
    """What fitting made of one request.

    ``body``: the bytes to forward (the very bytes received when nothing changed).
    ``data`` / ``parts``: the parsed body and its parts (``None`` when unreadable).
    ``report``: what fitting did (``None``: not fitted, ``skipped`` says why in a word
    and ``detail`` in a sentence).
    ``refusal``: an overflow nothing fits, as ``(status, body)`` in the API's shape.
    """

    body: bytes
    data: Any = None
    #: Whether ``data`` may be written back with the fast writer (see ``_json``).
    fast: bool = True
    parts: RequestParts | None = None
    key: str | None = None
    budget: int | None = None
    report: FitReport | None = None
    skipped: str | None = None
    detail: str | None = None
    refusal: tuple[int, dict[str, Any]] | None = None


def conversation_key(dialect: Dialect, parts: RequestParts) -> str | None:
    """Which conversation a request belongs to: its API, model and first message (which
    fitting always keeps as it is), so that every request of a conversation, from any
    client process, finds the same learned state."""
    spec = dialect.format
    first = next(
        (
            m
            for m in parts.messages
            if not (isinstance(m, dict) and m.get("role") in spec.system_roles)
        ),
        None,
    )
    if first is None:
        return None
    text = json_text(first, None, "messages")
    digest = hashlib.sha256(f"{dialect.name}\x00{parts.model}\x00{text}".encode("utf-8", "replace"))
    return digest.hexdigest()[:32]


def with_sentence(body: dict[str, Any]) -> dict[str, Any]:
    """An error body with windowfit's sentence for the person after the API's own words
    (``error.message``: Anthropic, OpenAI and Gemini all have one)."""
    error = body.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        message = f"{error['message']}. windowfit: {CONTEXT_OVERFLOW_MESSAGE}"
        return {**body, "error": {**error, "message": message}}
    return body


def _estimator(model: str | None) -> Estimator | None:
    """The calibrated profile for a known model family; ``None`` (windowfit's
    script-aware rule) for a model whose tokenizer it cannot guess."""
    if not model or family_for_model(model) == "conservative":
        return None
    return estimator_for(model=model)


class RequestFitter:
    """Fits requests for the proxy with one :class:`~windowfit.Fitter` for large
    conversations (what it keeps only makes their next request cheaper), one that keeps
    nothing for small ones (:data:`KEPT_MIN_BYTES`), and what was learned."""

    def __init__(self, config: ProxyConfig, learning: ConversationLearning) -> None:
        self.config = config
        self.learning = learning
        self.fitter = Fitter(max_bytes=config.fitter_max_bytes)
        self.unkept = Fitter(max_bytes=0)
        #: Reads a large body that begins as an earlier one did from its new bytes only.
        self.bodies = BodyParser()
        self.settings = FitSettings.preset(config.settings) if config.settings else None
        #: Windows upstreams stated in overflow errors, by API and model: smaller than the
        #: model table says (a gateway's limit, a simulator), they cap later budgets.
        self.windows: dict[str, int] = {}

    def limits(self, parts: RequestParts) -> tuple[int, int | None] | None:
        """``(budget, hard limit)`` before learning, or ``None`` when neither a budget nor
        the model's window is known."""
        limits = model_limits(parts.model) if parts.model else None
        hard: int | None = None
        if limits is not None:
            reserve = parts.max_output_tokens or limits.max_output
            hard = limits.context_window - reserve
            if hard <= 0:
                return None  # the API will say what is wrong with max_tokens
        if self.config.budget is not None:
            budget = self.config.budget if hard is None else min(self.config.budget, hard)
        elif hard is None:
            return None
        elif self.config.budget_fraction is not None:
            budget = max(1, math.floor(hard * self.config.budget_fraction))
        else:
            budget = hard
        return budget, (hard if hard is not None and hard > budget else None)

    def likely_budget(self, model: str) -> int | None:
        """The budget a request for ``model`` would most likely get, before reading it
        (its answer's limit taken from the model table; nothing learned applied), for
        guessing whether it will be forwarded as it is; ``None`` when unknown."""
        found = self.limits(RequestParts(messages=[], model=model))
        return None if found is None else found[0]

    def fit(self, dialect: Dialect, raw: bytes, model: str | None = None) -> Fitted:
        """The request to forward for the body ``raw`` (see :class:`Fitted`); ``model``:
        the model named by the URL (Gemini's), when the body names none."""
        try:
            data, fast, seen = self.bodies.read(
                raw, _CONVERSATION_FIELD.get(dialect.name, "messages")
            )
        except (ValueError, RecursionError):
            return Fitted(raw, skipped="not-json")
        try:
            parts = dialect.read_request(data)
        except WindowfitError as exc:
            return Fitted(raw, data, fast, skipped="unreadable", detail=str(exc))
        if model and parts.model is None:
            parts = dataclasses.replace(parts, model=model)
        return self.refit(dialect, raw, data, parts, fast=fast, seen=seen)

    def refit(
        self,
        dialect: Dialect,
        raw: bytes,
        data: Any,
        parts: RequestParts,
        *,
        retry: bool = False,
        cap: int | None = None,
        fast: bool = True,
        seen: Remembered | None = None,
    ) -> Fitted:
        """Fit an already parsed request (again, after an overflow, with ``retry``;
        ``cap``: the window the upstream's error stated, which the budget must not pass;
        ``fast``: whether the fast JSON writer may write ``data``, see ``_json``;
        ``seen``: the body parser's record of this body, whose messages are never edited:
        the Fitter reuses the facts it scanned for those it shares with the body before,
        and leaves there what it scanned for the next)."""
        out = Fitted(raw, data, fast, parts)
        if not parts.messages:
            out.skipped = "no-messages"
            return out
        limits = self.limits(parts)
        if limits is None:
            out.skipped = "unknown-model"
            out.detail = f"no context window known for model {parts.model!r}"
            return out
        budget, hard = limits
        model_key = f"{dialect.name}\x00{parts.model}"
        if cap is not None and cap > 0:
            if len(self.windows) >= 1024 and model_key not in self.windows:
                self.windows.clear()  # bounded: many models seen, start over
            self.windows[model_key] = min(cap, self.windows.get(model_key, cap))
        cap = self.windows.get(model_key)
        if cap is not None:
            budget = min(budget, cap)
            hard = None if hard is None else min(hard, cap)
        try:
            key = conversation_key(dialect, parts)
        except WindowfitError as exc:
            out.skipped, out.detail = "unreadable", str(exc)
            return out
        out.key = key
        if key is not None:
            budget = self.learning.budget_for(key, budget)
            if hard is not None:
                hard = self.learning.budget_for(key, hard)
                hard = hard if hard > budget else None
        out.budget = budget
        try:
            fitter = self.fitter if len(raw) >= KEPT_MIN_BYTES else self.unkept
            known = None
            if seen is not None:
                known, seen.scan = seen.scan, None
            result, scanned = fitter._fit_scanned(
                known,
                parts.messages,
                budget=budget,
                system=parts.system,
                tools=parts.tools,
                settings=self.settings,
                format=dialect.format.name,
                estimator=_estimator(parts.model),
                limit=hard,
            )
            if seen is not None and parts.messages is seen.elements:
                seen.scan = scanned  # the next body of this conversation starts from it
        except ContextOverflowError as exc:
            limit = exc.limit if exc.limit is not None else budget
            tokens = exc.tokens if exc.tokens is not None else limit + 1
            status, body = dialect.overflow_error(tokens, limit)
            out.refusal = (status, with_sentence(body))
            return out
        except WindowfitError as exc:  # the API's own checks will answer the client
            out.skipped, out.detail = "unreadable", str(exc)
            return out
        except Exception:  # a bug in windowfit must not fail a request that would succeed
            _log.exception("windowfit proxy: fitting failed; the request is forwarded as sent")
            out.skipped = "internal-error"
            return out
        out.report = result.report
        if result.report.stage > 0 or retry:
            fitted = dialect.write_request(data, result.messages, result.system)
            out.body = _json.dumps(fitted, fast)
        return out

"""Classify what a provider said went wrong, and say what to do about it (DESIGN section 5).

:func:`classify_error` takes an exception from the ``anthropic`` or ``openai`` SDK (read by
duck typing: neither package is imported), a ``botocore`` ``ClientError``, a
``google-genai`` error, an ``httpx`` or builtin timeout or connection error, or just an
HTTP status and a response body, and returns an :class:`ErrorInfo`. It never raises.

Each kind says whether to send the same request again and whether to wake an operator:

=================  =========  =====  ==================================================
kind               retryable  alert  why
=================  =========  =====  ==================================================
context_overflow   no         no     the same request gets the same answer; the person
                                     decides what happens next (a new chat), it is not
                                     an outage
invalid_request    no         no     the request itself is wrong (400, 413, 422);
                                     resending cannot help, and nothing is down
authentication     no         yes    a key is missing, wrong or revoked (401)
permission         no         yes    the account may not use this model, or has no
                                     credit left (402, 403)
not_found          no         yes    the model name or the endpoint is misconfigured
rate_limit         yes        no     too many requests for now (429): back off.  A quota
                                     or spend limit that is used up, or one request
                                     bigger than the per-minute budget, is *not*
                                     retryable and *does* alert (see
                                     :data:`CODE_RULES` and :data:`WORDINGS`)
overloaded         yes        no     the provider is short of capacity for everyone
                                     (Anthropic 529, 503); it clears by itself
server             yes        yes    the provider failed (500, 502, 504); worth a look
                                     if it keeps happening
timeout            yes        no     no answer in time; a slow answer is not an outage
connection         yes        yes    the provider could not be reached, which is often
                                     our own network, DNS or proxy
unknown            no         yes    not recognised: do not guess, tell a person
=================  =========  =====  ==================================================

How a kind is decided, first match wins:

1. a provider's own wording (:data:`WORDINGS`, a data table of regular expressions), which
   also yields the token counts the message states;
2. a specific error code or type in the body (:data:`CODE_RULES` rows marked specific,
   e.g. OpenAI ``context_length_exceeded``, llama.cpp ``exceed_context_size_error``);
3. the HTTP status (:data:`STATUS_KINDS`);
4. a generic error type (``invalid_request_error``, ``INVALID_ARGUMENT``, ...);
5. an exception class that names a timeout or a connection failure
   (:data:`TIMEOUT_CLASS_NAMES`, :data:`CONNECTION_CLASS_NAMES`);
6. an error code found in free text (a logged ``str(error)``);
7. for an exception still unknown, its ``__cause__`` (or ``__context__``); else ``unknown``.

``ErrorInfo.provider`` names who answered when the body's shape shows it (an OpenRouter
envelope, a botocore error, Gemini's gRPC status, ...), else whose wording matched. Some
wordings are shared: "you requested N tokens (X in the messages, Y in the completion)" is
said by OpenAI's older models, Azure OpenAI, DeepSeek and old vLLM alike, and is reported
as ``"openai-compatible"`` unless the body tells them apart.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timezone
from enum import Enum
from types import MappingProxyType
from typing import NamedTuple

from .errors import CONTEXT_OVERFLOW_MESSAGE, ContextOverflowError

__all__ = [
    "CODE_RULES",
    "CONNECTION_CLASS_NAMES",
    "KIND_POLICIES",
    "QUOTA_MESSAGE",
    "STATUS_KINDS",
    "TIMEOUT_CLASS_NAMES",
    "WORDINGS",
    "CodeRule",
    "ErrorInfo",
    "ErrorKind",
    "KindPolicy",
    "Wording",
    "classify_error",
    "is_context_overflow",
]


class ErrorKind(str, Enum):
    """What kind of failure a provider error is; the value is the kind's name."""

    CONTEXT_OVERFLOW = "context_overflow"
    INVALID_REQUEST = "invalid_request"
    AUTHENTICATION = "authentication"
    PERMISSION = "permission"
    NOT_FOUND = "not_found"
    RATE_LIMIT = "rate_limit"
    OVERLOADED = "overloaded"
    SERVER = "server"
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return self.value


class KindPolicy(NamedTuple):
    """What to do about one kind of error: the table in this module's docstring."""

    retryable: bool
    alert: bool
    user_message: str


_K = ErrorKind

#: Retry, alert and the person-facing sentence, per kind (see the module docstring).
KIND_POLICIES: Mapping[ErrorKind, KindPolicy] = MappingProxyType(
    {
        _K.CONTEXT_OVERFLOW: KindPolicy(False, False, CONTEXT_OVERFLOW_MESSAGE),
        _K.INVALID_REQUEST: KindPolicy(
            False,
            False,
            "The model's service could not accept this request, so it was not sent again.",
        ),
        _K.AUTHENTICATION: KindPolicy(
            False,
            True,
            "The assistant could not sign in to the model's service. "
            "This is a setup problem, not something you did.",
        ),
        _K.PERMISSION: KindPolicy(
            False,
            True,
            "The assistant is not allowed to use this model right now. "
            "This is an account problem, not something you did.",
        ),
        _K.NOT_FOUND: KindPolicy(
            False,
            True,
            "The model this assistant is set up to use could not be found. "
            "This is a setup problem, not something you did.",
        ),
        _K.RATE_LIMIT: KindPolicy(
            True,
            False,
            "The model's service is receiving too many requests right now. "
            "Please try again in a moment.",
        ),
        _K.OVERLOADED: KindPolicy(
            True, False, "The model's service is busy right now. Please try again in a moment."
        ),
        _K.SERVER: KindPolicy(
            True,
            True,
            "The model's service had a problem on its side. Please try again in a moment.",
        ),
        _K.TIMEOUT: KindPolicy(True, False, "The model took too long to answer. Please try again."),
        _K.CONNECTION: KindPolicy(
            True,
            True,
            "The assistant could not reach the model's service. Please try again in a moment.",
        ),
        _K.UNKNOWN: KindPolicy(
            False,
            True,
            "Something went wrong while talking to the model. Please try again, and if it "
            "keeps happening, tell the people who run this assistant.",
        ),
    }
)

#: What a person sees when a quota or spend limit is used up: waiting will not help.
QUOTA_MESSAGE = (
    "The usage limit for the model's service has been reached. "
    "This is an account problem, not something you did."
)


class Wording(NamedTuple):
    """One provider sentence: which provider says it, what it means, where its numbers are.

    ``tokens`` and ``limit`` name the regex groups that hold the prompt's size and the
    model's window. When the ``tokens`` group is absent or did not take part in the match,
    the prompt size is ``total - output`` if the pattern has those groups (providers that
    state the whole request and the completion part), else ``total``.
    """

    provider: str
    pattern: re.Pattern[str]
    kind: ErrorKind
    tokens: str | None = "tokens"
    limit: str | None = "limit"
    #: Overrides the kind's default when not None (only ever to make it not retryable).
    retryable: bool | None = None
    #: Where the wording was seen, for whoever maintains this table.
    source: str = ""


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


_N = r"\d[\d,]*"  # a count as providers print it: 200000 or 200,000

#: Provider wordings, most specific first; the first row that matches any message wins.
WORDINGS: tuple[Wording, ...] = (
    Wording(
        "anthropic",
        _rx(
            rf"prompt is too long(?::\s*(?P<tokens>{_N})\s*tokens\s*>\s*(?P<limit>{_N})\s*maximum)?"
        ),
        _K.CONTEXT_OVERFLOW,
        source="https://github.com/anthropics/claude-code/issues/14195",
    ),
    Wording(
        "anthropic",
        _rx(
            r"input length and `?max_tokens`? exceed context limit"
            rf"(?::\s*(?P<tokens>{_N})\s*\+\s*(?P<output>{_N})\s*>\s*(?P<limit>{_N}))?"
        ),
        _K.CONTEXT_OVERFLOW,
        source="https://github.com/continuedev/continue/issues/6080",
    ),
    Wording(
        "openai",
        _rx(
            rf"maximum context length is (?P<limit>{_N}) tokens\.?\s*However,? "
            rf"your messages resulted in (?P<tokens>{_N}) tokens"
        ),
        _K.CONTEXT_OVERFLOW,
        source="https://github.com/crewAIInc/crewAI-examples/issues/121",
    ),
    Wording(
        "openai",
        _rx(r"Your input exceeds the context window of this model"),
        _K.CONTEXT_OVERFLOW,
        source="https://github.com/dyad-sh/dyad/issues/1672 (Responses API)",
    ),
    Wording(
        # The same sentence comes from OpenAI's older models, Azure OpenAI, DeepSeek and
        # vLLM before 0.6; the body's shape tells which one answered, when it can.
        "openai-compatible",
        _rx(
            rf"maximum context length is (?P<limit>{_N}) tokens\.?,?\s*However,? you requested "
            rf"(?P<total>{_N}) tokens \((?P<tokens>{_N}) in the messages, "
            rf"(?P<output>{_N}) in the completion\)"
        ),
        _K.CONTEXT_OVERFLOW,
        source=(
            "vllm-project/vllm vllm/entrypoints/openai/serving_engine.py; "
            "https://github.com/Azure/azure-sdk-for-net/issues/41892; "
            "https://github.com/RooCodeInc/Roo-Code/issues/1767 (DeepSeek)"
        ),
    ),
    Wording(
        "openai",
        _rx(
            rf"maximum context length is (?P<limit>{_N}) tokens,? however you requested "
            rf"(?P<total>{_N}) tokens \((?P<tokens>{_N}) in your prompt; "
            rf"(?P<output>{_N}) for the completion\)"
        ),
        _K.CONTEXT_OVERFLOW,
        source="https://github.com/acheong08/ChatGPT/issues/501 (legacy completions)",
    ),
    Wording(
        "vllm",
        _rx(
            rf"maximum context length is (?P<limit>{_N}) tokens\.?\s*However,? "
            rf"your request has (?P<tokens>{_N}) input tokens"
        ),
        _K.CONTEXT_OVERFLOW,
        source="vllm-project/vllm renderer _create_tokens_prompt (vLLM 0.10+)",
    ),
    Wording(
        "vllm",
        _rx(
            rf"maximum context length is (?P<limit>{_N}) tokens\.?\s*However,? you requested "
            rf"(?P<output>{_N}) output tokens and your prompt contains (?:at least )?"
            rf"(?P<tokens>{_N}) input tokens"
        ),
        _K.CONTEXT_OVERFLOW,
        source="vLLM 0.11+ VLLMValidationError, quoted in public issue trackers",
    ),
    Wording(
        "vllm",
        _rx(
            rf"'?max_tokens'? or '?max_completion_tokens'? is too large: (?P<output>{_N})\.?\s*"
            rf"This model's maximum context length is (?P<limit>{_N}) tokens and your request "
            rf"has (?P<tokens>{_N}) input tokens"
        ),
        _K.CONTEXT_OVERFLOW,
        source="vLLM serving_engine.py _validate_input, quoted in public issue trackers",
    ),
    Wording(
        "xai",
        _rx(
            rf"maximum prompt length is (?P<limit>{_N}) but the request contains "
            rf"(?P<tokens>{_N}) tokens"
        ),
        _K.CONTEXT_OVERFLOW,
        source="xAI chat completions 400, quoted in public test suites",
    ),
    Wording(
        "openrouter",
        _rx(
            rf"This endpoint's maximum context length is (?P<limit>{_N}) tokens"
            rf"(?:\.\s*However,? you requested about (?P<total>{_N}) tokens"
            rf"(?: \((?:[^)]*?, )?(?P<output>{_N}) in the output\)| \([^)]*\))?)?"
        ),
        _K.CONTEXT_OVERFLOW,
        source="https://github.com/RooCodeInc/Roo-Code/issues/11998",
    ),
    Wording(
        "gemini",
        _rx(
            rf"input token count(?: \((?P<tokens>{_N})\))? exceeds the maximum number of "
            rf"tokens allowed(?: \((?P<limit>{_N})\))?"
        ),
        _K.CONTEXT_OVERFLOW,
        source="https://github.com/google-gemini/gemini-cli/issues/6678",
    ),
    Wording(
        "gemini",
        _rx(
            rf"input token count is (?P<tokens>{_N}) but (?:the )?model only supports up to "
            rf"(?P<limit>{_N})"
        ),
        _K.CONTEXT_OVERFLOW,
        source="Vertex AI 400 INVALID_ARGUMENT, quoted in public test suites",
    ),
    Wording(
        "bedrock",
        _rx(r"Input is too long for requested model"),
        _K.CONTEXT_OVERFLOW,
        source="https://github.com/aws-samples/assessment-generator/issues/2",
    ),
    Wording(
        "bedrock",
        _rx(r"Input Tokens Exceeded: Number of input tokens exceeds maximum length"),
        _K.CONTEXT_OVERFLOW,
        source="Bedrock Converse with Amazon Nova, quoted in public agent logs",
    ),
    Wording(
        "mistral",
        _rx(
            rf"Prompt contains (?P<tokens>{_N}) tokens(?: and {_N} draft tokens)?, too large "
            rf"for model with (?P<limit>{_N}) maximum context length"
        ),
        _K.CONTEXT_OVERFLOW,
        source="Mistral La Plateforme 400, quoted in public test suites and SDK errors",
    ),
    Wording(
        "llamacpp",
        _rx(
            rf"request \((?P<tokens>{_N}) tokens\) exceeds the available context size "
            rf"\((?P<limit>{_N}) tokens\)"
        ),
        _K.CONTEXT_OVERFLOW,
        source="llama.cpp tools/server (exceed_context_size_error)",
    ),
    Wording(
        "llamacpp",
        _rx(r"the request exceeds the available context size"),
        _K.CONTEXT_OVERFLOW,
        source="llama.cpp tools/server, older builds",
    ),
    Wording(
        # Catch-all for the rest of the OpenAI-compatible family (vLLM embeddings, Bedrock
        # Llama, gateways that cut the sentence short).
        "openai-compatible",
        _rx(rf"maximum context length is (?P<limit>{_N}) tokens"),
        _K.CONTEXT_OVERFLOW,
        source="vllm-project/vllm serving_engine.py (embeddings); Bedrock Meta models",
    ),
    Wording(
        "openai",
        _rx(r"\bcontext_length_exceeded\b"),
        _K.CONTEXT_OVERFLOW,
        source="OpenAI error code, seen in logged SDK messages",
    ),
    Wording(
        "llamacpp",
        _rx(r"\bexceed_context_size_error\b"),
        _K.CONTEXT_OVERFLOW,
        source="llama.cpp error type, seen in logged messages",
    ),
    Wording(
        # One request larger than the per-minute token budget: waiting never lets it through.
        "openai",
        _rx(
            r"Request too large for [^\s:]+(?: in organization \S+)?"
            r"(?: on tokens per min \(TPM\))?: Limit"
        ),
        _K.RATE_LIMIT,
        tokens=None,
        limit=None,
        retryable=False,
        source="OpenAI 429 rate_limit_exceeded, quoted in public issue trackers",
    ),
)


class CodeRule(NamedTuple):
    """What an error ``type``, ``code`` or ``status`` string in a body means.

    ``specific`` codes beat the HTTP status (OpenAI sends ``invalid_api_key`` with type
    ``invalid_request_error`` and status 401, so the generic type must lose to the status).
    """

    kind: ErrorKind
    provider: str | None = None
    specific: bool = False
    retryable: bool | None = None


_SPEC = True

#: Error types and codes, keyed in lower case. Sources: docs.anthropic.com/en/api/errors,
#: platform.openai.com/docs/guides/error-codes, ai.google.dev (gRPC statuses), the Bedrock
#: Runtime API reference, llama.cpp tools/server, vLLM protocol.py, Mistral bodies.
CODE_RULES: Mapping[str, CodeRule] = MappingProxyType(
    {
        # Anthropic error types.
        "invalid_request_error": CodeRule(_K.INVALID_REQUEST),
        "authentication_error": CodeRule(_K.AUTHENTICATION),
        "permission_error": CodeRule(_K.PERMISSION),
        "not_found_error": CodeRule(_K.NOT_FOUND),
        "request_too_large": CodeRule(_K.INVALID_REQUEST, "anthropic", _SPEC),
        "billing_error": CodeRule(_K.PERMISSION, "anthropic", _SPEC),
        "rate_limit_error": CodeRule(_K.RATE_LIMIT),
        "api_error": CodeRule(_K.SERVER),
        "timeout_error": CodeRule(_K.TIMEOUT, "anthropic", _SPEC),
        "overloaded_error": CodeRule(_K.OVERLOADED, "anthropic", _SPEC),
        # Anthropic error.details.error_code: the monthly spend limit, not a rate.
        "enforced_spend_limit_reached": CodeRule(_K.RATE_LIMIT, "anthropic", _SPEC, False),
        # OpenAI and Azure OpenAI codes.
        "context_length_exceeded": CodeRule(_K.CONTEXT_OVERFLOW, "openai", _SPEC),
        "invalid_api_key": CodeRule(_K.AUTHENTICATION, "openai", _SPEC),
        "insufficient_quota": CodeRule(_K.RATE_LIMIT, "openai", _SPEC, False),
        "rate_limit_exceeded": CodeRule(_K.RATE_LIMIT),
        "model_not_found": CodeRule(_K.NOT_FOUND, None, _SPEC),
        "server_error": CodeRule(_K.SERVER),
        "content_filter": CodeRule(_K.INVALID_REQUEST, "azure", _SPEC),
        # Google gRPC statuses (Gemini API, Vertex AI).
        "invalid_argument": CodeRule(_K.INVALID_REQUEST, "gemini"),
        "failed_precondition": CodeRule(_K.INVALID_REQUEST, "gemini"),
        "unauthenticated": CodeRule(_K.AUTHENTICATION, "gemini"),
        "permission_denied": CodeRule(_K.PERMISSION, "gemini"),
        "not_found": CodeRule(_K.NOT_FOUND, "gemini"),
        "resource_exhausted": CodeRule(_K.RATE_LIMIT, "gemini"),
        "unavailable": CodeRule(_K.OVERLOADED, "gemini"),
        "internal": CodeRule(_K.SERVER, "gemini"),
        "deadline_exceeded": CodeRule(_K.TIMEOUT, "gemini", _SPEC),
        # AWS Bedrock Runtime exceptions (botocore Error.Code, x-amzn-errortype).
        "validationexception": CodeRule(_K.INVALID_REQUEST, "bedrock"),
        "accessdeniedexception": CodeRule(_K.PERMISSION, "bedrock"),
        "unrecognizedclientexception": CodeRule(_K.AUTHENTICATION, "bedrock", _SPEC),
        "expiredtokenexception": CodeRule(_K.AUTHENTICATION, "bedrock", _SPEC),
        "resourcenotfoundexception": CodeRule(_K.NOT_FOUND, "bedrock"),
        "throttlingexception": CodeRule(_K.RATE_LIMIT, "bedrock"),
        # HTTP 400, but AWS says "you can resubmit your request later".
        "servicequotaexceededexception": CodeRule(_K.RATE_LIMIT, "bedrock", _SPEC),
        "modeltimeoutexception": CodeRule(_K.TIMEOUT, "bedrock", _SPEC),
        "modelnotreadyexception": CodeRule(_K.OVERLOADED, "bedrock", _SPEC),
        "serviceunavailableexception": CodeRule(_K.OVERLOADED, "bedrock"),
        "internalserverexception": CodeRule(_K.SERVER, "bedrock"),
        "modelerrorexception": CodeRule(_K.SERVER, "bedrock", _SPEC),
        "modelstreamerrorexception": CodeRule(_K.SERVER, "bedrock", _SPEC),
        # llama.cpp server error types.
        "exceed_context_size_error": CodeRule(_K.CONTEXT_OVERFLOW, "llamacpp", _SPEC),
        "unavailable_error": CodeRule(_K.OVERLOADED, "llamacpp", _SPEC),
        "not_supported_error": CodeRule(_K.INVALID_REQUEST, "llamacpp"),
        # vLLM ErrorResponse types.
        "badrequesterror": CodeRule(_K.INVALID_REQUEST, "vllm"),
        "notfounderror": CodeRule(_K.NOT_FOUND, "vllm"),
        "internalservererror": CodeRule(_K.SERVER, "vllm"),
        # Mistral types.
        "invalid_request_message_order": CodeRule(_K.INVALID_REQUEST, "mistral"),
        "invalid_request_invalid_args": CodeRule(_K.INVALID_REQUEST, "mistral"),
        "invalid_request_message_error": CodeRule(_K.INVALID_REQUEST, "mistral"),
    }
)

#: HTTP statuses. Others: 4xx is invalid_request, 5xx is server.
STATUS_KINDS: Mapping[int, ErrorKind] = MappingProxyType(
    {
        400: _K.INVALID_REQUEST,
        401: _K.AUTHENTICATION,
        402: _K.PERMISSION,  # no credit left (OpenRouter, DeepSeek, Anthropic billing)
        403: _K.PERMISSION,
        404: _K.NOT_FOUND,
        408: _K.TIMEOUT,
        409: _K.SERVER,  # a conflict on the provider's side; the SDKs retry it
        413: _K.INVALID_REQUEST,
        422: _K.INVALID_REQUEST,
        429: _K.RATE_LIMIT,
        500: _K.SERVER,
        502: _K.SERVER,
        503: _K.OVERLOADED,  # DeepSeek "Server Overloaded", Gemini UNAVAILABLE
        504: _K.SERVER,
        529: _K.OVERLOADED,  # Anthropic overloaded_error
    }
)

#: Exception class names (anywhere in the class's MRO) that mean no answer came in time:
#: builtin and asyncio TimeoutError, the SDKs' APITimeoutError, httpx, requests, urllib3,
#: aiohttp and botocore timeouts, google.api_core DeadlineExceeded.
TIMEOUT_CLASS_NAMES: frozenset[str] = frozenset(
    {
        "TimeoutError",
        "APITimeoutError",
        "TimeoutException",
        "ReadTimeout",
        "WriteTimeout",
        "ConnectTimeout",
        "PoolTimeout",
        "Timeout",
        "ReadTimeoutError",
        "ConnectTimeoutError",
        "ServerTimeoutError",
        "DeadlineExceeded",
    }
)

#: Exception class names that mean the provider could not be reached or hung up.
CONNECTION_CLASS_NAMES: frozenset[str] = frozenset(
    {
        "ConnectionError",
        "APIConnectionError",
        "ConnectError",
        "NetworkError",
        "RemoteProtocolError",
        "ReadError",
        "WriteError",
        "ProtocolError",
        "EndpointConnectionError",
        "ClientConnectorError",
        "ClientConnectionError",
        "ServerDisconnectedError",
        "IncompleteRead",
    }
)


@dataclass(frozen=True)
class ErrorInfo:
    """What went wrong, whether to retry, whether to alert, and what to tell the person."""

    kind: ErrorKind
    retryable: bool
    alert: bool
    #: For a person: exactly :data:`windowfit.errors.CONTEXT_OVERFLOW_MESSAGE` on overflow.
    user_message: str
    #: Whose wording or body shape was recognised ("anthropic", "openrouter", ...), or None.
    provider: str | None = None
    #: The provider's own message text, for logs.
    message: str | None = None
    #: The prompt's size and the model's window, when the provider's error states them.
    prompt_tokens: int | None = None
    limit: int | None = None
    #: Seconds the provider asked to wait (Retry-After, retry-after-ms, a body field).
    retry_after: float | None = None
    status: int | None = None

    @property
    def is_context_overflow(self) -> bool:
        return self.kind is ErrorKind.CONTEXT_OVERFLOW


# --------------------------------------------------------------------------- reading

_MAX_TEXT = 20_000  # characters of any one text that are scanned
_MAX_MESSAGE = 4_000  # characters kept in ErrorInfo.message
_MAX_NODES = 2_000  # JSON nodes walked in one body
_MAX_DEPTH = 12
_MAX_CAUSES = 5

_MESSAGE_KEYS = frozenset({"message", "detail", "error", "errormessage", "error_message", "raw"})
_CODE_KEYS = frozenset({"type", "code", "status", "__type", "error_code", "errortype"})
_STATUS_KEYS = frozenset({"code", "status", "status_code", "httpstatuscode", "raw_status_code"})
_TOKEN_FIELDS = frozenset({"n_prompt_tokens"})  # llama.cpp exceed_context_size_error
_LIMIT_FIELDS = frozenset({"n_ctx"})
_RETRY_FIELDS = frozenset({"retrydelay", "retry_after"})  # Gemini RetryInfo, generic
_VLLM_TYPES = frozenset({"BadRequestError", "NotFoundError", "InternalServerError"})
_GRPC_STATUS = re.compile(r"[A-Z][A-Z_]+")

#: Texts that say who answered even when the body is plain text.
_TEXT_HINTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (_rx(r"An error occurred \((?P<code>\w+)\) when calling the \w+ operation"), "bedrock"),
    (_rx(r"The model returned the following errors"), "bedrock"),
    (re.compile(r"Azure OpenAI"), "azure"),
)
_TEXT_STATUS = _rx(r"\b(?:Error code|status(?: code)?|HTTP(?:/[\d.]+)?)[:=\s-]+(?P<s>[1-5]\d\d)\b")
_TEXT_WORD = re.compile(r"[A-Za-z][A-Za-z_]{3,}")
_RETRY_HINT = _rx(
    r"(?:try again|retry)\s+(?:in|after)\s+(?P<d>(?:\d+(?:\.\d+)?\s*"
    r"(?:ms|milliseconds?|h|hours?|m|minutes?|s|secs?|seconds?)(?![a-z])\s*)+)"
)
_DURATION_PART = _rx(
    r"(\d+(?:\.\d+)?)\s*(ms|milliseconds?|h|hours?|m|minutes?|s|secs?|seconds?)(?![a-z])"
)
_UNIT_SECONDS = {"ms": 0.001, "h": 3600.0, "m": 60.0, "s": 1.0}


@dataclass
class _Facts:
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)  # body messages, outermost first
    texts: list[str] = field(default_factory=list)  # other text: plain bodies, str(error)
    codes: list[str] = field(default_factory=list)
    tokens: int | None = None
    limit: int | None = None
    retry_after: float | None = None
    shape: str | None = None
    exception_message: str | None = None


def _safe_getattr(obj: object, name: str) -> object:
    try:
        return getattr(obj, name, None)
    except Exception:
        return None


def _safe_str(obj: object) -> str:
    try:
        return str(obj)
    except Exception:
        return ""


def _as_status(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.isdigit() and len(value) == 3:
        value = int(value)
    if isinstance(value, int) and 100 <= value <= 599:
        return value
    return None


def _as_count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _parse_count(text: str | None) -> int | None:
    if not text:
        return None
    digits = text.replace(",", "")
    return int(digits) if digits.isdigit() else None


def _as_seconds(value: float) -> float | None:
    try:
        seconds = float(value)
    except OverflowError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _parse_duration(text: str) -> float | None:
    """Seconds in "33s", "1.5", "6ms", "1m12.5s" or "60 seconds"; None if unreadable."""
    text = text.strip()
    try:
        seconds = float(text)
    except ValueError:
        parts = _DURATION_PART.findall(text)
        if not parts or _DURATION_PART.sub("", text).strip():
            return None
        seconds = 0.0
        for number, unit in parts:
            unit = unit.lower()
            key = "ms" if unit.startswith("mil") or unit == "ms" else unit[0]
            seconds += float(number) * _UNIT_SECONDS[key]
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return seconds


def _parse_json(text: str) -> tuple[object | None, bool]:
    """A JSON object or array in ``text``: (value, whether text had more around it)."""
    stripped = text.strip()
    if not stripped:
        return None, False
    if stripped[0] in "{[":
        try:
            value = json.loads(stripped)
        except (ValueError, RecursionError):
            pass
        else:
            if isinstance(value, (dict, list)):
                return value, False
    start = text.find("{")
    if start < 0:
        return None, False
    try:
        value, _ = json.JSONDecoder().raw_decode(text, start)
    except (ValueError, RecursionError):
        return None, False
    return (value, True) if isinstance(value, dict) else (None, False)


def _normalise_headers(headers: object) -> dict[str, str]:
    out: dict[str, str] = {}
    if headers is None:
        return out
    try:
        items = _safe_getattr(headers, "items")
        pairs = items() if callable(items) else headers
        if not isinstance(pairs, Iterable) or isinstance(pairs, (str, bytes)):
            return out
        for pair in pairs:
            if not isinstance(pair, tuple) or len(pair) != 2:
                continue
            key, value = pair
            if isinstance(key, bytes):
                key = key.decode("latin-1")
            if isinstance(value, bytes):
                value = value.decode("latin-1")
            if isinstance(key, str) and isinstance(value, (str, int, float)):
                out[key.lower()] = str(value)
    except Exception:
        return out
    return out


def _shape(node: Mapping[object, object]) -> str | None:
    """Who answered, from the body's shape alone (only shapes that are distinctive)."""
    err = node.get("error")
    if isinstance(err, Mapping):
        meta = err.get("metadata")
        if isinstance(meta, Mapping) and ("raw" in meta or "provider_name" in meta):
            return "openrouter"
        if err.get("type") == "exceed_context_size_error" or "n_ctx" in err:
            return "llamacpp"
        status = err.get("status")
        if isinstance(status, str) and _GRPC_STATUS.fullmatch(status) and "code" in err:
            return "gemini"
        if "innererror" in err or err.get("code") == "content_filter":
            return "azure"
        if node.get("type") == "error":
            # Anthropic's envelope; OpenAI's Responses stream numbers its error events.
            return "openai" if "sequence_number" in node else "anthropic"
        if err.get("type") in _VLLM_TYPES:
            return "vllm"
    aws = node.get("Error")
    if isinstance(aws, Mapping) and "Code" in aws:
        return "bedrock"
    if node.get("object") == "error":
        kind = node.get("type")
        if kind in _VLLM_TYPES:
            return "vllm"
        if "raw_status_code" in node or (
            isinstance(kind, str)
            and kind.startswith("invalid_request_")
            and kind != "invalid_request_error"
        ):
            return "mistral"
    return None


def _walk(facts: _Facts, root: object) -> None:
    """Collect messages, codes, status, counts and retry hints from a parsed body."""
    queue: deque[tuple[object, int]] = deque([(root, 0)])
    seen = 0
    while queue and seen < _MAX_NODES:
        node, depth = queue.popleft()
        seen += 1
        if depth > _MAX_DEPTH:
            continue
        if isinstance(node, (list, tuple)):
            queue.extend((item, depth + 1) for item in node[:100])
            continue
        if not isinstance(node, Mapping):
            continue
        if facts.shape is None and depth <= 3:
            facts.shape = _shape(node)
        for key, value in list(node.items())[:200]:
            if not isinstance(key, str):
                continue
            lowered = key.lower()
            if isinstance(value, str):
                _walk_string(facts, lowered, value, depth, queue)
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                if lowered in _STATUS_KEYS and facts.status is None:
                    facts.status = _as_status(value)
                if lowered in _TOKEN_FIELDS and facts.tokens is None:
                    facts.tokens = _as_count(value)
                if lowered in _LIMIT_FIELDS and facts.limit is None:
                    facts.limit = _as_count(value)
                if lowered in _RETRY_FIELDS and facts.retry_after is None:
                    facts.retry_after = _as_seconds(value)
            elif isinstance(value, (Mapping, list, tuple)):
                queue.append((value, depth + 1))


def _walk_string(
    facts: _Facts, key: str, value: str, depth: int, queue: deque[tuple[object, int]]
) -> None:
    if key in _MESSAGE_KEYS:
        parsed, embedded = _parse_json(value) if "{" in value or "[" in value else (None, False)
        if parsed is not None:
            queue.append((parsed, depth + 1))  # OpenRouter metadata.raw, nested Gemini bodies
        if parsed is None or embedded:
            facts.messages.append(value[:_MAX_TEXT])
    if key in _CODE_KEYS:
        facts.codes.append(value[:200])
    if key in _STATUS_KEYS and facts.status is None:
        facts.status = _as_status(value)
    if key in _RETRY_FIELDS and facts.retry_after is None:
        facts.retry_after = _parse_duration(value[:100])


def _absorb_body(facts: _Facts, body: object) -> None:
    if body is None:
        return
    if isinstance(body, (bytes, bytearray)):
        body = bytes(body[:1_000_000]).decode("utf-8", "replace")
    if isinstance(body, str):
        parsed, embedded = _parse_json(body)
        if parsed is not None:
            _walk(facts, parsed)
        if parsed is None or embedded:
            facts.texts.append(body[:_MAX_TEXT])
        return
    if isinstance(body, (Mapping, list, tuple)):
        _walk(facts, body)
        return
    text = _safe_str(body)
    if text:
        _absorb_body(facts, text)


def _absorb_exception(facts: _Facts, error: BaseException, *, body_given: bool) -> None:
    """Read an SDK exception by duck typing: status, body, headers and message."""
    for name in ("status_code", "http_status", "status", "code"):
        status = _as_status(_safe_getattr(error, name))
        if status is not None:
            facts.status = status
            break
    for name in ("type", "code", "status", "error_code"):
        value = _safe_getattr(error, name)
        if isinstance(value, str):
            facts.codes.append(value[:200])

    response = _safe_getattr(error, "response")
    if isinstance(response, Mapping):  # botocore ClientError.response
        meta = response.get("ResponseMetadata")
        if isinstance(meta, Mapping):
            if facts.status is None:
                facts.status = _as_status(meta.get("HTTPStatusCode"))
            facts.headers = _normalise_headers(meta.get("HTTPHeaders")) | facts.headers
    elif response is not None:
        if facts.status is None:
            for name in ("status_code", "status"):
                facts.status = _as_status(_safe_getattr(response, name))
                if facts.status is not None:
                    break
        facts.headers = _normalise_headers(_safe_getattr(response, "headers")) | facts.headers

    if not body_given:
        body = _safe_getattr(error, "body")
        if body is None:
            details = _safe_getattr(error, "details")  # google-genai APIError
            body = details if isinstance(details, Mapping) else None
        if body is None and isinstance(response, Mapping):
            body = response
        if body is None and response is not None:
            text = _safe_getattr(response, "text")  # raises on an unread stream: caught
            body = text if isinstance(text, str) else None
        _absorb_body(facts, body)

    message = _safe_getattr(error, "message")
    if isinstance(message, str) and message:
        facts.exception_message = message[:_MAX_TEXT]
        facts.texts.append(message[:_MAX_TEXT])
    text = _safe_str(error)
    if text and text != message:
        facts.texts.append(text[:_MAX_TEXT])
        if facts.exception_message is None:
            facts.exception_message = text[:_MAX_TEXT]


def _retry_after(facts: _Facts) -> float | None:
    headers = facts.headers
    if "retry-after-ms" in headers:
        seconds = _parse_duration(headers["retry-after-ms"])
        if seconds is not None:
            return seconds / 1000.0
    if "retry-after" in headers:
        raw = headers["retry-after"]
        seconds = _parse_duration(raw)
        if seconds is not None:
            return seconds
        from email.utils import parsedate_to_datetime

        try:
            when = parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError, OverflowError):
            when = None
        if when is not None:
            if when.tzinfo is None:
                when = when.replace(tzinfo=timezone.utc)
            return max(0.0, when.timestamp() - time.time())
    if facts.retry_after is not None:
        return facts.retry_after
    for text in (*facts.messages, *facts.texts):
        match = _RETRY_HINT.search(text)
        if match:
            return _parse_duration(match.group("d"))
    return None


def _class_names(error: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(error).__mro__}


# --------------------------------------------------------------------------- deciding


class _Verdict(NamedTuple):
    kind: ErrorKind
    provider: str | None = None
    message: str | None = None
    tokens: int | None = None
    limit: int | None = None
    retryable: bool | None = None


def _from_wording(facts: _Facts) -> _Verdict | None:
    texts = [*reversed(facts.messages), *facts.texts]  # innermost body message first
    for wording in WORDINGS:
        for text in texts:
            match = wording.pattern.search(text, 0, _MAX_TEXT)
            if match is None:
                continue
            groups = match.groupdict()
            tokens = _parse_count(groups.get(wording.tokens)) if wording.tokens else None
            if tokens is None and wording.tokens is not None:
                total = _parse_count(groups.get("total"))
                output = _parse_count(groups.get("output"))
                if total is not None:
                    tokens = total - output if output is not None and output <= total else total
            limit = _parse_count(groups.get(wording.limit)) if wording.limit else None
            return _Verdict(wording.kind, wording.provider, text, tokens, limit, wording.retryable)
    return None


def _from_codes(codes: Iterable[str], *, specific: bool) -> _Verdict | None:
    for code in codes:
        key = code.strip().lower()
        rule = CODE_RULES.get(key)
        if rule is None and ":" in key:  # x-amzn-errortype "ValidationException:http://..."
            rule = CODE_RULES.get(key.split(":", 1)[0])
        if rule is not None and rule.specific == specific:
            return _Verdict(rule.kind, rule.provider, retryable=rule.retryable)
    return None


def _from_status(status: int | None) -> _Verdict | None:
    if status is None or status < 400:
        return None
    kind = STATUS_KINDS.get(status)
    if kind is None:
        kind = _K.INVALID_REQUEST if status < 500 else _K.SERVER
    return _Verdict(kind)


def _looks_like_code(word: str) -> bool:
    """An identifier, not an English word: snake_case, an exception name, or UPPER_CASE."""
    return "_" in word or word.endswith(("Exception", "Error")) or word.isupper()


def _from_text_codes(facts: _Facts) -> _Verdict | None:
    words = [
        word
        for text in (*facts.messages, *facts.texts)
        for word in _TEXT_WORD.findall(text, 0, _MAX_TEXT)
        if _looks_like_code(word)
    ]
    return _from_codes(words, specific=True) or _from_codes(words, specific=False)


def _decide(facts: _Facts, error: BaseException | None) -> _Verdict:
    verdict = (
        _from_wording(facts)
        or _from_codes(facts.codes, specific=True)
        or _from_status(facts.status)
        or _from_codes(facts.codes, specific=False)
    )
    if verdict is not None:
        return verdict
    if error is not None:
        names = _class_names(error)
        if names & TIMEOUT_CLASS_NAMES:
            return _Verdict(_K.TIMEOUT)
        if names & CONNECTION_CLASS_NAMES:
            return _Verdict(_K.CONNECTION)
    return _from_text_codes(facts) or _Verdict(_K.UNKNOWN)


def _text_hints(facts: _Facts) -> str | None:
    for text in (*facts.messages, *facts.texts):
        for pattern, provider in _TEXT_HINTS:
            match = pattern.search(text, 0, _MAX_TEXT)
            if match is not None:
                code = match.groupdict().get("code")
                if code:
                    facts.codes.append(code)
                return provider
    return None


def _gather(
    error: BaseException | None, status: int | None, body: object, headers: object
) -> _Facts:
    facts = _Facts()
    if error is not None:
        _absorb_exception(facts, error, body_given=body is not None)
    explicit_status = _as_status(status)
    if explicit_status is not None:
        facts.status = explicit_status
    if headers is not None:
        facts.headers = facts.headers | _normalise_headers(headers)
    if body is not None:
        _absorb_body(facts, body)
    amzn_type = facts.headers.get("x-amzn-errortype")
    if amzn_type:
        facts.codes.append(amzn_type)
        facts.shape = facts.shape or "bedrock"
    return facts


def _classify(
    error: BaseException | None, status: int | None, body: object, headers: object, depth: int
) -> ErrorInfo:
    if isinstance(error, ContextOverflowError):
        policy = KIND_POLICIES[_K.CONTEXT_OVERFLOW]
        return ErrorInfo(
            _K.CONTEXT_OVERFLOW,
            policy.retryable,
            policy.alert,
            policy.user_message,
            message=error.provider_message or error.detail or None,
            prompt_tokens=error.tokens,
            limit=error.limit,
        )
    facts = _gather(error, status, body, headers)
    if facts.status is None:
        for text in facts.texts:
            match = _TEXT_STATUS.search(text, 0, _MAX_TEXT)
            if match is not None:
                facts.status = int(match.group("s"))
                break
    hinted = _text_hints(facts)
    verdict = _decide(facts, error)

    if verdict.kind is _K.UNKNOWN and error is not None and depth < _MAX_CAUSES:
        cause = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
        if cause is not None:
            return _classify(cause, None, None, None, depth + 1)

    policy = KIND_POLICIES[verdict.kind]
    retryable = policy.retryable
    alert = policy.alert
    user_message = policy.user_message
    if verdict.retryable is False and retryable:
        retryable = False
        alert = True
        if verdict.kind is _K.RATE_LIMIT:
            user_message = QUOTA_MESSAGE

    tokens = verdict.tokens
    limit = verdict.limit
    if verdict.kind is _K.CONTEXT_OVERFLOW:
        tokens = tokens if tokens is not None else facts.tokens
        limit = limit if limit is not None else facts.limit

    message = verdict.message
    if message is None:
        if facts.messages:
            message = facts.messages[-1]
        elif facts.exception_message is not None:
            message = facts.exception_message
        elif facts.texts:
            message = facts.texts[0]
    if message is not None:
        message = message.strip()[:_MAX_MESSAGE] or None

    return ErrorInfo(
        kind=verdict.kind,
        retryable=retryable,
        alert=alert,
        user_message=user_message,
        provider=facts.shape or hinted or verdict.provider,
        message=message,
        prompt_tokens=tokens,
        limit=limit,
        retry_after=_retry_after(facts),
        status=facts.status,
    )


def classify_error(
    error: BaseException | None = None,
    *,
    status: int | None = None,
    body: object = None,
    headers: object = None,
) -> ErrorInfo:
    """Classify a provider error from an exception, or from a status, body and headers.

    ``body`` may be a dict (the parsed JSON), a JSON string, bytes or plain text; the
    ``status``, ``body`` and ``headers`` given here take precedence over what is read from
    ``error``. ``headers`` is any mapping or iterable of pairs (``httpx.Headers`` works).
    Never raises: what cannot be read is classified ``unknown``.
    """
    try:
        if error is not None and not isinstance(error, BaseException):
            if body is None:
                body = error
            error = None
        return _classify(error, status, body, headers, 0)
    except Exception:  # pragma: no cover - a last guard; classification must not raise
        policy = KIND_POLICIES[_K.UNKNOWN]
        return ErrorInfo(_K.UNKNOWN, policy.retryable, policy.alert, policy.user_message)


def is_context_overflow(
    error: BaseException | None = None, *, status: int | None = None, body: object = None
) -> bool:
    """True when the provider rejected the request as too long for the model's window."""
    return classify_error(error, status=status, body=body).kind is ErrorKind.CONTEXT_OVERFLOW

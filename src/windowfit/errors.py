"""Every exception windowfit raises, in one tree.

::

    WindowfitError
    ├── ConversationError      the input is not a valid conversation (says where)
    ├── LogFormatError         an agent log could not be read (names the file and line)
    ├── SettingsError          a budget or setting is out of range
    ├── MissingExtraError      an optional dependency is not installed (names the extra)
    ├── TokenizerError         a tokenizer file could not be found or read
    ├── ContextOverflowError   nothing fits: the person decides what happens next
    ├── ToolError              an agent's tool could not do what was asked (the agent
    │                          gets the message as an error result; the loop goes on)
    ├── HistoryError           a saved session or agent is missing or cannot be continued
    └── SimulatedProviderError the simulated provider (windowfit.sim) rejected a request;
                               shaped like an SDK status error (status_code, body)

Errors that a provider returns are not raised as these classes by default; they are
classified into :class:`windowfit.ErrorInfo` by :func:`windowfit.classify_error`.
``ContextOverflowError`` is the one place where both meet: fitting raises it before a
request is sent, and the SDK wrappers raise it when the provider rejects a request as
too long.
"""

from __future__ import annotations

__all__ = [
    "CONTEXT_OVERFLOW_MESSAGE",
    "ContextOverflowError",
    "ConversationError",
    "HistoryError",
    "LogFormatError",
    "MissingExtraError",
    "SettingsError",
    "SimulatedProviderError",
    "TokenizerError",
    "ToolError",
    "WindowfitError",
]

#: What a person sees when their conversation no longer fits (DESIGN section 5).
CONTEXT_OVERFLOW_MESSAGE = (
    "This conversation has become too long for the model to read at once. "
    "Start a new chat for the next step. Everything done so far is kept."
)


class WindowfitError(Exception):
    """Base of every windowfit exception."""


class ConversationError(WindowfitError, ValueError):
    """The messages given are not a valid conversation.

    ``index`` is the message's position in the list given (``None`` for the whole
    request) and ``field`` the key inside it, so that a person can find the problem.
    """

    def __init__(self, problem: str, *, index: int | None = None, field: str | None = None):
        self.problem = problem
        self.index = index
        self.field = field
        where = []
        if index is not None:
            where.append(f"message {index}")
        if field is not None:
            where.append(f"field {field!r}")
        prefix = f"{', '.join(where)}: " if where else ""
        super().__init__(f"{prefix}{problem}")


class SettingsError(WindowfitError, ValueError):
    """A budget or a fitting setting is out of its range."""


class MissingExtraError(WindowfitError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""

    def __init__(self, package: str, extra: str, purpose: str):
        self.package = package
        self.extra = extra
        super().__init__(
            f"{purpose} needs the {package!r} package: pip install 'windowfit[{extra}]'"
        )


class TokenizerError(WindowfitError):
    """A tokenizer's files could not be found or read."""


class ContextOverflowError(WindowfitError):
    """The conversation cannot be made to fit the budget or the model's window.

    ``str(error)`` is the person-facing text. ``tokens`` and ``limit`` carry the numbers
    when they are known (estimated by fitting, or stated by the provider's error), and
    ``detail`` says, for logs, what did not fit.
    """

    user_message = CONTEXT_OVERFLOW_MESSAGE

    def __init__(
        self,
        detail: str = "",
        *,
        tokens: int | None = None,
        limit: int | None = None,
        provider_message: str | None = None,
    ):
        self.detail = detail
        self.tokens = tokens
        self.limit = limit
        self.provider_message = provider_message
        super().__init__(CONTEXT_OVERFLOW_MESSAGE)


class LogFormatError(WindowfitError, ValueError):
    """An agent log could not be read (see :func:`windowfit.logs.read_runs`).

    ``path`` is the file and ``line`` the 1-based line of the problem, or ``None`` when
    the problem is not tied to one line (an empty file, a misshapen message inside a
    JSON document: the problem text then names the message, e.g. ``history[3]``).
    """

    def __init__(self, problem: str, *, path: str, line: int | None = None):
        self.problem = problem
        self.path = path
        self.line = line
        where = f"{path}, line {line}" if line is not None else path
        super().__init__(f"{where}: {problem}")


class ToolError(WindowfitError):
    """A tool of the agent runtime could not do what the model asked.

    The message is written for the model: it goes back as the tool's result with
    ``is_error`` set, and the agent decides what to do next. It never stops the loop.
    """


class HistoryError(WindowfitError):
    """A saved session or agent is missing, or its saved history cannot be continued."""


class SimulatedProviderError(WindowfitError):
    """The simulated provider (:mod:`windowfit.sim`) rejected a request.

    Shaped like the provider SDKs' status errors, so that
    :func:`windowfit.classify.classify_error` reads it exactly as it reads a real one:
    ``status_code`` (HTTP status), ``body`` (the parsed JSON error body) and ``message``.
    """

    def __init__(self, status_code: int, body: dict[str, object], message: str):
        self.status_code = status_code
        self.body = body
        self.message = message
        super().__init__(f"Error code: {status_code} - {body}")

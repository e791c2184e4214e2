"""A small, model-agnostic agent runtime with sub-agents (DESIGN section 7).

:class:`Runtime` runs an agent against any :class:`Model` (an object with an async
``respond(request)``): before every request the conversation is fitted with
:func:`windowfit.fit`, after every error the error is classified, tools run (``read_file``,
``run_command``, ``spawn_subagent``: sub-agents run concurrently under asyncio), and every
message of every agent is saved in full in a :class:`HistoryStore` (SQLite). A saved
session can be reopened and continued with :meth:`Runtime.resume`.

The runtime's history is in the Anthropic Messages format. Only the standard library is
used.
"""

from ._loop import (
    DEFAULT_BUDGET,
    DEFAULT_SUBAGENT_SYSTEM,
    DEFAULT_SYSTEM,
    DEFAULT_TOOL_TIMEOUT,
    LOG_LEVELS,
    AgentEvent,
    AgentResult,
    AgentStats,
    FitShaper,
    Runtime,
    Shaped,
    Shaper,
)
from ._model import AgentInfo, Model, ModelRequest, ModelResponse, ToolCall, Usage
from ._store import (
    APPLICATION_ID,
    DEFAULT_FILENAME,
    AgentRecord,
    HistoryStore,
    SessionRecord,
    default_store_path,
)
from ._tools import (
    DEFAULT_COMMAND_TIMEOUT,
    DEFAULT_ENV_ALLOWLIST,
    DEFAULT_MAX_OUTPUT,
    DEFAULT_MAX_READ,
    ReadFile,
    RunCommand,
    SpawnSubagent,
    Tool,
    ToolContext,
    ToolOutput,
    run_tool,
    tool_definition,
)

__all__ = [
    "APPLICATION_ID",
    "DEFAULT_BUDGET",
    "DEFAULT_COMMAND_TIMEOUT",
    "DEFAULT_ENV_ALLOWLIST",
    "DEFAULT_FILENAME",
    "DEFAULT_MAX_OUTPUT",
    "DEFAULT_MAX_READ",
    "DEFAULT_SUBAGENT_SYSTEM",
    "DEFAULT_SYSTEM",
    "DEFAULT_TOOL_TIMEOUT",
    "LOG_LEVELS",
    "AgentEvent",
    "AgentInfo",
    "AgentRecord",
    "AgentResult",
    "AgentStats",
    "FitShaper",
    "HistoryStore",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "ReadFile",
    "RunCommand",
    "Runtime",
    "SessionRecord",
    "Shaped",
    "Shaper",
    "SpawnSubagent",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolOutput",
    "Usage",
    "default_store_path",
    "run_tool",
    "tool_definition",
]

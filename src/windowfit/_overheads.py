"""Fixed token costs of a request beyond its text (shared by sizing and the scanners).

They err high: OpenAI documents 3-4 tokens of framing per message; the others cover the
ids, names and delimiters a provider adds around blocks, tool calls and results.
"""

from __future__ import annotations

#: Per message (role and framing tokens). OpenAI documents 3-4 per message; we use 4.
MESSAGE_OVERHEAD = 4
#: Per content block.
BLOCK_OVERHEAD = 3
#: Per tool call or tool result (ids, names, framing).
TOOL_OVERHEAD = 10
#: Per tool definition, on top of its JSON.
TOOL_DEFINITION_OVERHEAD = 10

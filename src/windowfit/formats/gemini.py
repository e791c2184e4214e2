"""Gemini ``generateContent`` format <-> neutral model, and the Gemini API dialect.

A request's ``contents`` is a list of turns ``{"role": "user" | "model", "parts": [...]}``
(``role`` may be left out: the API takes such a turn as the user's). A part holds one
datum: ``text`` (a *thought* when ``"thought": true``), ``functionCall`` ``{name, args,
id?}``, ``functionResponse`` ``{name, response, id?}``, ``inlineData`` ``{mimeType,
data}``, ``fileData``, ``executableCode`` or ``codeExecutionResult``; beside it a part may
carry ``thoughtSignature`` and other metadata, which travel unchanged. The REST API spells
fields in camelCase; Python callers often write the snake_case of ``google-genai``
(``function_call``, ``inline_data``, ``mime_type``...). Both are read, and whatever came in
goes out.

In the neutral model a text part is :class:`~windowfit.messages.Text` (a thought part
:class:`~windowfit.messages.Thinking`), a function call a
:class:`~windowfit.messages.ToolCall`, a function response a
:class:`~windowfit.messages.ToolResult` (its content the JSON text of ``response``), an
inline image an :class:`~windowfit.messages.Image`; every other part is
:class:`~windowfit.messages.Opaque`. Calls, responses and images carry the whole part in
``extra["part"]`` and are written back from it: fitting never rewrites them through the
neutral model (clearing works on the JSON, see :func:`clear`), so the part is the truth.

**Pairing.** The API answers 400 unless the function responses of a user turn answer the
function calls of the model turn *just before it*, all of them, in that one turn ("Please
ensure that function response turn comes immediately after a function call turn", "...
that the number of function response parts is equal to the number of function call
parts of the function call turn"). Ids are optional (``google-genai`` and most REST
callers send none; some models set them and some clients copy them back), so a call and
its response are matched by name and order: the k-th call of ``read_file`` in model turn
``i`` is the key ``read_file#k@i``, and the k-th response named ``read_file`` in turn
``i + 1`` names the same key. A response turn that does not follow its call turn, or
answers a different number of calls, then breaks the one pairing rule
(:class:`~windowfit.formats._rules.PairingRule`) as the API says.

**Clearing** replaces a function response's ``response`` with ``{"result": "<note>"}``
(the object the API requires, holding the cleared-result note); its ``name``, ``id`` and
the part's other fields are kept, so that the pair stays a pair.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .._overheads import BLOCK_OVERHEAD, MESSAGE_OVERHEAD, TOOL_OVERHEAD
from ..errors import ConversationError
from ..images import image_tokens
from ..instructions import CLEARED_RESULT_NOTE
from ..messages import Block, Image, Message, Opaque, Text, Thinking, ToolCall, ToolResult
from ._common import Counts, FormatSpec, require_mapping, rest
from ._dialect import Dialect, RequestParts, Usage
from ._facts import Facts, describe, json_text

__all__ = [
    "DIALECT",
    "SPEC",
    "from_message",
    "overflow_error",
    "read_request",
    "scan",
    "to_message",
    "usage",
    "write_request",
]

_ROLES = frozenset({"user", "model"})

# Each datum of a part, in both spellings (REST camelCase first).
_TEXT = ("text",)
_CALL = ("functionCall", "function_call")
_RESPONSE = ("functionResponse", "function_response")
_INLINE = ("inlineData", "inline_data")
_DATA_KEYS: tuple[tuple[str, ...], ...] = (
    _TEXT,
    _CALL,
    _RESPONSE,
    _INLINE,
    ("fileData", "file_data"),
    ("executableCode", "executable_code"),
    ("codeExecutionResult", "code_execution_result"),
)
_ALL_DATA_KEYS = frozenset(k for keys in _DATA_KEYS for k in keys)
_SIGNATURE_KEYS = ("thoughtSignature", "thought_signature")
_MIME_KEYS = ("mimeType", "mime_type")

#: The JSON a cleared response holds (see the module docstring), and its key.
CLEARED_KEY = "result"
_CLEARED_JSON = json_text({CLEARED_KEY: CLEARED_RESULT_NOTE}, None, "response")


# --------------------------------------------------------------------------------------
# Reading one part


def _datum(part: Mapping[str, Any], index: int, where: str) -> str | None:
    """The key of the part's one datum (``None``: a part of a kind not known here)."""
    found = [k for k in part if k in _ALL_DATA_KEYS]
    if len(found) > 1:
        raise ConversationError(
            f"a part holds exactly one datum, not {' and '.join(found)}", index=index, field=where
        )
    return found[0] if found else None


def _first_key(value: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        if key in value:
            return key
    return None


def _mime(inline: Mapping[str, Any]) -> Any:
    key = _first_key(inline, _MIME_KEYS)
    return inline.get(key) if key is not None else None


def _image_source(inline: Mapping[str, Any]) -> dict[str, Any]:
    """An inline image as the image size rule reads it (base64 data, media type)."""
    return {"type": "base64", "media_type": _mime(inline), "data": inline.get("data")}


# --------------------------------------------------------------------------------------
# Conversion


def _role(msg: Mapping[str, Any], index: int) -> str:
    if "role" not in msg:
        return "user"
    role = msg["role"]
    if not isinstance(role, str):
        raise ConversationError(
            f"must be a string, not {describe(role)}", index=index, field="role"
        )
    if role not in _ROLES:
        raise ConversationError(
            f"role {role!r} is not a Gemini role (user, model)", index=index, field="role"
        )
    return role


#: ``Message.extra`` key marking a turn that came without ``role`` (never sent).
_NO_ROLE = "\x00windowfit:no-role"


def _block_from_part(part: Any, index: int, where: str, keys: dict[str, int], i: int) -> Block:
    """One part as a neutral block (``keys`` counts the calls/responses per name)."""
    part = require_mapping(part, index, f"{where} part")
    datum = _datum(part, index, where)
    if datum == "text" and isinstance(part["text"], str):
        if part.get("thought") is True:
            return Thinking(part["text"], None, False, rest(part, "text"))
        return Text(part["text"], rest(part, "text"))
    if datum in _CALL:
        call = require_mapping(part[datum], index, f"{where}.{datum}")
        name = _name(call, index, f"{where}.{datum}")
        args = call.get("args") or {}
        key = _key(name, keys, i)
        return ToolCall(
            key, name, json_text(args, index, f"{where}.{datum}.args"), args, {"part": part}
        )
    if datum in _RESPONSE:
        response = require_mapping(part[datum], index, f"{where}.{datum}")
        name = _name(response, index, f"{where}.{datum}")
        content = json_text(response.get("response"), index, f"{where}.{datum}.response")
        return ToolResult(_key(name, keys, i - 1), content, None, {"part": part})
    if datum in _INLINE:
        inline = part[datum]
        if isinstance(inline, Mapping) and _is_image(_mime(inline)):
            return Image(_image_source(inline), {"part": part})
    return Opaque(part)


def _name(value: Mapping[str, Any], index: int, where: str) -> str:
    name = value.get("name")
    if type(name) is not str:
        raise ConversationError(
            "is missing" if name is None else f"must be a string, not {describe(name)}",
            index=index,
            field=f"{where}.name",
        )
    return name


def _key(name: str, seen: dict[str, int], turn: int) -> str:
    """The pairing key of the next call (or response) named ``name`` (module docstring)."""
    k = seen.get(name, 0)
    seen[name] = k + 1
    return f"{name}#{k}@{turn}"


def _is_image(mime: Any) -> bool:
    return isinstance(mime, str) and mime.startswith("image/")


def from_message(raw: Any, index: int) -> Message:
    msg = require_mapping(raw, index, "content")
    role = _role(msg, index)
    extra = rest(msg, "role", "parts")
    if "role" not in msg:
        extra[_NO_ROLE] = True
    if "parts" not in msg:
        return Message(role, (), "absent", extra)
    parts = msg["parts"]
    if not isinstance(parts, list):
        raise ConversationError(
            f"must be a list of parts, not {describe(parts)}", index=index, field="parts"
        )
    calls: dict[str, int] = {}
    answers: dict[str, int] = {}
    blocks = []
    for k, part in enumerate(parts):
        is_response = isinstance(part, Mapping) and any(key in part for key in _RESPONSE)
        blocks.append(
            _block_from_part(part, index, f"parts[{k}]", answers if is_response else calls, index)
        )
    return Message(role, tuple(blocks), "list", extra)


def _part_from_block(block: Block) -> dict[str, Any]:
    if isinstance(block, (Text, Thinking)):
        return {"text": block.text, **block.extra}
    if isinstance(block, (ToolCall, ToolResult, Image)):
        part = block.extra.get("part")
        if isinstance(part, Mapping):
            return dict(part)
        raise TypeError(f"a {block.type} block made elsewhere cannot be a Gemini part")
    if isinstance(block, Opaque):
        return dict(block.data)
    raise TypeError(f"not a block: {block!r}")


def to_message(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {}
    extra = dict(message.extra)
    if not extra.pop(_NO_ROLE, False):
        out["role"] = message.role
    if message.form == "string":
        out["parts"] = [{"text": "".join(b.text for b in message.blocks if isinstance(b, Text))}]
    elif message.form != "absent":
        out["parts"] = [_part_from_block(b) for b in message.blocks]
    out.update(extra)
    return out


# --------------------------------------------------------------------------------------
# Scanning: checked and sized straight from the JSON (see ``_facts``)


def scan(raw: Any, index: int, counts: Counts) -> Facts:
    """Check one Gemini turn and size it, without building the neutral form.

    Besides each part's own fields, checks what the API rejects with a 400: a role other
    than user or model, parts that are not a non-empty list of objects, a part with two
    data, a function call in a user turn or a function response in a model turn, a call or
    response without a name, a response that is not an object.
    """
    if type(raw) is not dict and not isinstance(raw, Mapping):
        raise ConversationError(
            f"a content must be a JSON object, not {describe(raw)}", index=index
        )
    role = _role(raw, index)
    parts = raw.get("parts")
    if type(parts) is not list:
        if parts is None:
            problem = "is missing" if "parts" not in raw else "must not be null"
            raise ConversationError(problem, index=index, field="parts")
        raise ConversationError(
            f"must be a list of parts, not {describe(parts)}", index=index, field="parts"
        )
    if not parts:
        raise ConversationError("must not be empty", index=index, field="parts")
    estimate = counts.text
    tokens = other = MESSAGE_OVERHEAD
    calls: list[str] = []
    results: list[tuple[str, int, int]] = []
    seen: dict[str, int] = {}
    model_side = role == "model"
    for k, part in enumerate(parts):
        where = f"parts[{k}]"
        if type(part) is not dict and not isinstance(part, Mapping):
            raise ConversationError(
                f"a part must be a JSON object, not {describe(part)}", index=index, field=where
            )
        datum = _datum(part, index, where)
        _check_metadata(part, index, where)
        if datum == "text":
            text = part["text"]
            if type(text) is not str:
                raise ConversationError(
                    f"must be a string, not {describe(text)}", index=index, field=f"{where}.text"
                )
            n = BLOCK_OVERHEAD + estimate(text)
        elif datum in _CALL:
            if not model_side:
                raise ConversationError(
                    "a function call belongs in a model turn, not a user turn",
                    index=index,
                    field=f"{where}.{datum}",
                )
            name, arguments = _call_fields(part[datum], index, f"{where}.{datum}")
            n = TOOL_OVERHEAD + estimate(name) + estimate(arguments)
            calls.append(_key(name, seen, index))
        elif datum in _RESPONSE:
            if model_side:
                raise ConversationError(
                    "a function response belongs in a user turn, not a model turn",
                    index=index,
                    field=f"{where}.{datum}",
                )
            name, content = _response_fields(part[datum], index, f"{where}.{datum}")
            n = TOOL_OVERHEAD + estimate(content)
            cleared = TOOL_OVERHEAD + estimate(_CLEARED_JSON)
            results.append((_key(name, seen, index - 1), n, cleared))
            tokens += n
            continue
        elif datum in _INLINE:
            n = _inline_size(part, datum, index, where, counts)
        else:
            n = BLOCK_OVERHEAD + estimate(json_text(part, index, where))
        tokens += n
        other += n
    has_input = not model_side and other != MESSAGE_OVERHEAD
    return Facts(role, tokens, tuple(calls), tuple(results), bool(results), has_input, other)


def _check_metadata(part: Mapping[str, Any], index: int, where: str) -> None:
    thought = part.get("thought")
    if thought is not None and type(thought) is not bool:
        raise ConversationError(
            f"must be true or false, not {describe(thought)}", index=index, field=f"{where}.thought"
        )
    for key in _SIGNATURE_KEYS:
        signature = part.get(key)
        if signature is not None and type(signature) is not str:
            raise ConversationError(
                f"must be a base64 string, not {describe(signature)}",
                index=index,
                field=f"{where}.{key}",
            )


def _call_fields(call: Any, index: int, where: str) -> tuple[str, str]:
    """A function call's name and the JSON text of its arguments."""
    if type(call) is not dict and not isinstance(call, Mapping):
        raise ConversationError(
            f"must be a JSON object, not {describe(call)}", index=index, field=where
        )
    name = _name(call, index, where)
    call_id = call.get("id")
    if call_id is not None and type(call_id) is not str:
        raise ConversationError(
            f"must be a string, not {describe(call_id)}", index=index, field=f"{where}.id"
        )
    args = call.get("args")
    if args is None:
        args = _EMPTY
    elif type(args) is not dict and not isinstance(args, Mapping):
        raise ConversationError(
            f"must be a JSON object, not {describe(args)}", index=index, field=f"{where}.args"
        )
    return name, json_text(args, index, f"{where}.args")


def _response_fields(response: Any, index: int, where: str) -> tuple[str, str]:
    """A function response's name and the JSON text of its ``response`` object."""
    if type(response) is not dict and not isinstance(response, Mapping):
        raise ConversationError(
            f"must be a JSON object, not {describe(response)}", index=index, field=where
        )
    name = _name(response, index, where)
    call_id = response.get("id")
    if call_id is not None and type(call_id) is not str:
        raise ConversationError(
            f"must be a string, not {describe(call_id)}", index=index, field=f"{where}.id"
        )
    value = response.get("response")
    if type(value) is not dict and not isinstance(value, Mapping):
        raise ConversationError(
            "is missing" if value is None else f"must be a JSON object, not {describe(value)}",
            index=index,
            field=f"{where}.response",
        )
    return name, json_text(value, index, f"{where}.response")


def _inline_size(
    part: Mapping[str, Any], datum: str, index: int, where: str, counts: Counts
) -> int:
    """An inline datum's size: an image by the image size rule, other media (audio, PDF,
    video) by their JSON, which errs high."""
    inline = part[datum]
    field = f"{where}.{datum}"
    if type(inline) is not dict and not isinstance(inline, Mapping):
        raise ConversationError(
            f"must be a JSON object, not {describe(inline)}", index=index, field=field
        )
    mime = _mime(inline)
    if type(mime) is not str:
        raise ConversationError(
            "is missing" if mime is None else f"must be a string, not {describe(mime)}",
            index=index,
            field=f"{field}.mimeType",
        )
    data = inline.get("data")
    if type(data) is not str:
        raise ConversationError(
            "is missing" if data is None else f"must be a base64 string, not {describe(data)}",
            index=index,
            field=f"{field}.data",
        )
    if _is_image(mime):
        json_text(part, index, where)
        return BLOCK_OVERHEAD + image_tokens(_image_source(inline), counts.provider)
    return BLOCK_OVERHEAD + counts.text(json_text(part, index, where))


_EMPTY: dict[str, Any] = {}


def result_field(raw: Any, call_id: str) -> str:
    """Where in ``raw`` the function response with pairing key ``call_id`` is."""
    seen: dict[str, int] = {}
    turn = _turn_of(call_id)
    for k, part in enumerate(raw.get("parts") or ()):
        datum = _response_datum(part)
        if datum is None:
            continue
        name = part[datum].get("name")
        if isinstance(name, str) and _key(name, seen, turn) == call_id:
            return f"parts[{k}].{datum}"
    return "parts"


def _turn_of(call_id: str) -> int:
    _, _, turn = call_id.rpartition("@")
    return int(turn) if turn.lstrip("-").isdigit() else -1


def _response_datum(part: Any) -> str | None:
    if not isinstance(part, Mapping):
        return None
    for key in _RESPONSE:
        if isinstance(part.get(key), Mapping):
            return key
    return None


def clear(raw: Any, ids: frozenset[str], note: str) -> dict[str, Any]:
    """A copy of ``raw`` whose function responses with pairing keys in ``ids`` hold
    ``{"result": note}`` as their ``response``. Keys keep their order."""
    # The keys name the call turn, one before this one; any of them tells which it is.
    turn = min((_turn_of(i) for i in ids), default=-1)
    seen: dict[str, int] = {}
    parts = []
    for part in raw["parts"]:
        datum = _response_datum(part)
        if datum is not None:
            response = part[datum]
            name = response.get("name")
            if isinstance(name, str) and _key(name, seen, turn) in ids:
                part = {**part, datum: {**response, "response": {CLEARED_KEY: note}}}
        parts.append(part)
    return {**raw, "parts": parts}


def strip(raw: Any) -> dict[str, Any]:
    """A copy of ``raw`` without its function responses (its other parts kept)."""
    return {**raw, "parts": [p for p in raw["parts"] if _response_datum(p) is None]}


SPEC = FormatSpec(
    name="gemini",
    from_message=from_message,
    to_message=to_message,
    system_roles=frozenset(),
    roles=_ROLES,
    scan=scan,
    result_field=result_field,
    calls_field="parts",
    clear=clear,
    strip=strip,
    assistant_role="model",
)


# --------------------------------------------------------------------------------------
# The whole request and response (the Dialect)

_SYSTEM_KEYS = ("systemInstruction", "system_instruction")
_CONFIG_KEYS = ("generationConfig", "generation_config")
_MAX_OUTPUT_KEYS = ("maxOutputTokens", "max_output_tokens")


def system_parts(system: Any) -> Any:
    """The system prompt as :func:`windowfit.fit` takes it: the ``systemInstruction``
    content's parts (a list of text parts), a string as it is, ``None`` when absent."""
    if system is None or isinstance(system, str):
        return system
    if isinstance(system, Mapping):
        parts = system.get("parts")
        if not isinstance(parts, list):
            raise ConversationError(
                f"must be a list of parts, not {describe(parts)}", field="systemInstruction.parts"
            )
        return parts
    if isinstance(system, list):
        return system
    raise ConversationError(
        f"must be a content object, not {describe(system)}", field="systemInstruction"
    )


def read_request(body: Mapping[str, Any]) -> RequestParts:
    """The parts of a ``generateContent`` body that fitting reads (the model is in the
    URL, not the body; ``model`` is read only if a caller put it there)."""
    if not isinstance(body, Mapping):
        raise ConversationError(f"a request must be a JSON object, not {describe(body)}")
    contents = body.get("contents")
    if not isinstance(contents, list):
        raise ConversationError(
            "is missing" if contents is None else f"must be a list, not {describe(contents)}",
            field="contents",
        )
    system_key = _first_key(body, _SYSTEM_KEYS)
    config_key = _first_key(body, _CONFIG_KEYS)
    limit: int | None = None
    if config_key is not None:
        config = body[config_key]
        if not isinstance(config, Mapping):
            raise ConversationError(
                f"must be a JSON object, not {describe(config)}", field=config_key
            )
        limit_key = _first_key(config, _MAX_OUTPUT_KEYS)
        if limit_key is not None:
            value = config[limit_key]
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConversationError(
                    f"must be a whole number, not {describe(value)}",
                    field=f"{config_key}.{limit_key}",
                )
            limit = value
    model = body.get("model")
    return RequestParts(
        messages=contents,
        system=body[system_key] if system_key is not None else None,
        tools=body.get("tools"),
        model=model if isinstance(model, str) else None,
        max_output_tokens=limit,
    )


def write_request(body: Mapping[str, Any], messages: list[Any], system: Any) -> dict[str, Any]:
    """``body`` with the fitted ``contents`` (and system instruction, when given) in place."""
    out = {**body, "contents": messages}
    if system is not None:
        out[_first_key(body, _SYSTEM_KEYS) or "systemInstruction"] = system
    return out


def _count(value: Any, *keys: str) -> int:
    if not isinstance(value, Mapping):
        return 0
    for key in keys:
        got = value.get(key)
        if isinstance(got, int) and not isinstance(got, bool):
            return got
    return 0


def usage_from_metadata(metadata: Any) -> Usage | None:
    """:class:`Usage` from a ``usageMetadata`` object (either spelling). Gemini counts
    thoughts apart from the answer (``thoughtsTokenCount`` beside
    ``candidatesTokenCount``): both are output, the first its reasoning part.
    ``cachedContentTokenCount`` is the part of ``promptTokenCount`` read from the cache;
    Gemini reports no cache writes."""
    if not isinstance(metadata, Mapping):
        return None
    thoughts = _count(metadata, "thoughtsTokenCount", "thoughts_token_count")
    return Usage(
        input_tokens=_count(metadata, "promptTokenCount", "prompt_token_count"),
        output_tokens=_count(metadata, "candidatesTokenCount", "candidates_token_count") + thoughts,
        cache_read_tokens=_count(metadata, "cachedContentTokenCount", "cached_content_token_count"),
        reasoning_tokens=thoughts,
    )


def usage(response: Any) -> Usage | None:
    """The usage of a whole ``generateContent`` response."""
    if not isinstance(response, Mapping):
        return None
    metadata = response.get("usageMetadata", response.get("usage_metadata"))
    return usage_from_metadata(metadata)


def stream_usage(event: Any) -> Usage | None:
    """The usage a streamed chunk carries (a chunk is a whole response's shape; the last
    one holds the final counts, so a reader keeps the last it sees)."""
    return usage(event)


OVERFLOW_STATUS = "INVALID_ARGUMENT"
_OVERFLOW_WORDING = re.compile(
    r"input token count \((\d+)\) exceeds the maximum number of tokens allowed \((\d+)\)"
)


def overflow_message(tokens: int, limit: int) -> str:
    """Gemini's words for a prompt too long for the model (gemini-cli issues 6678, 4231)."""
    return (
        f"The input token count ({tokens}) exceeds the maximum number of tokens allowed ({limit})."
    )


def error_body(code: int, message: str, status: str) -> dict[str, Any]:
    """An error in Gemini's shape: ``{"error": {"code", "message", "status"}}``."""
    return {"error": {"code": code, "message": message, "status": status}}


#: google.rpc status names by HTTP status, for errors of Gemini's shape.
_RPC_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def status_error(status: int, message: str) -> dict[str, Any]:
    """The API's error body for an HTTP ``status`` (its google.rpc status name)."""
    return error_body(status, message, _RPC_STATUS.get(status, "UNKNOWN"))


def overflow_error(tokens: int, limit: int) -> tuple[int, dict[str, Any]]:
    return 400, error_body(400, overflow_message(tokens, limit), OVERFLOW_STATUS)


def is_overflow(status: int, body: Any) -> bool:
    if status != 400 or not isinstance(body, Mapping):
        return False
    error = body.get("error")
    message = error.get("message") if isinstance(error, Mapping) else None
    return isinstance(message, str) and _OVERFLOW_WORDING.search(message) is not None


DIALECT = Dialect(
    name="gemini",
    format=SPEC,
    output_limit_field="generationConfig.maxOutputTokens",
    read_request=read_request,
    write_request=write_request,
    usage=usage,
    stream_usage=stream_usage,
    overflow_error=overflow_error,
    is_overflow=is_overflow,
    provider="gemini",
    status_error=status_error,
    sdk_package="google.genai",
    sdk_resource="models",
)

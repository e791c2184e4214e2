"""Test helpers for the Gemini format: generated ``contents`` and an independent checker
of what the Gemini API accepts, written from the API's documented rules and its 400
messages, not from windowfit's code."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from collections import Counter
from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

from windowfit import CLEARED_RESULT_NOTE

from conversations import SCRIPTS


def _text(script: str, length: int) -> str:
    base = SCRIPTS[script]
    return (base * (length // len(base) + 1))[:length]


def png(width: int, height: int) -> str:
    """A real (tiny, valid) PNG of the given size, base64-encoded."""
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    chunk = b"IHDR" + header
    ihdr = struct.pack(">I", len(header)) + chunk + struct.pack(">I", zlib.crc32(chunk))
    return base64.b64encode(b"\x89PNG\r\n\x1a\n" + ihdr).decode()


#: The two spellings of each field the generator uses: REST camelCase, google-genai snake.
SPELLINGS = {
    "camel": {"call": "functionCall", "response": "functionResponse", "inline": "inlineData"},
    "snake": {"call": "function_call", "response": "function_response", "inline": "inline_data"},
}


@st.composite
def gemini_conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Contents that end at a request point (user input or function responses), with
    user turns (sometimes with an image), text-only model replies, and tool rounds of one
    to three calls (names repeat; ids on some; thought parts and signatures on some)
    whose responses range from tiny to large."""
    script = draw(st.sampled_from(sorted(SCRIPTS)))
    spelling = SPELLINGS[draw(st.sampled_from(sorted(SPELLINGS)))]
    contents: list[dict[str, Any]] = []
    n_turns = draw(st.integers(1, 4))
    call_no = 0
    for turn in range(n_turns):
        parts: list[dict[str, Any]] = [
            {"text": _text(script, draw(st.integers(1, 400))) + f" #{turn}"}
        ]
        if draw(st.integers(0, 5)) == 0:
            size = draw(st.sampled_from([64, 500, 2000]))
            parts.append({spelling["inline"]: {"mimeType": "image/png", "data": png(size, size)}})
        user: dict[str, Any] = {"role": "user", "parts": parts}
        if turn == 0 and draw(st.booleans()):
            del user["role"]  # the API takes a turn without a role as the user's
        contents.append(user)
        for _ in range(draw(st.integers(0, 10))):
            n_calls = draw(st.integers(1, 3))
            names = [draw(st.sampled_from(["read_file", "grep"])) for _ in range(n_calls)]
            with_ids = draw(st.booleans())
            model_parts: list[dict[str, Any]] = []
            thought = _text(script, draw(st.integers(0, 200)))
            if thought:
                model_parts.append({"text": thought, "thought": True, "thoughtSignature": "c2ln"})
            calls = []
            for name in names:
                call: dict[str, Any] = {"name": name, "args": {"path": f"f{call_no}.txt"}}
                if with_ids:
                    call["id"] = f"call-{call_no}"
                call_no += 1
                calls.append(call)
                part: dict[str, Any] = {spelling["call"]: call}
                if draw(st.integers(0, 3)) == 0:
                    part["thoughtSignature"] = "c2lnbmF0dXJl"
                model_parts.append(part)
            contents.append({"role": "model", "parts": model_parts})
            responses = []
            for call in calls:
                size = draw(st.sampled_from([5, 40, 300, 1500, 6000]))
                response: dict[str, Any] = {
                    "name": call["name"],
                    "response": {"output": _text(script, size)},
                }
                if "id" in call:
                    response["id"] = call["id"]
                responses.append({spelling["response"]: response})
            contents.append({"role": "user", "parts": responses})
        if turn < n_turns - 1:
            contents.append({"role": "model", "parts": [{"text": _text(script, 50)}]})
    return contents


def request_points(contents: Sequence[dict[str, Any]]) -> list[int]:
    """Lengths of the prefixes that were requests: before each model turn, and all."""
    points = [i for i, c in enumerate(contents) if c.get("role") == "model" and i > 0]
    return [*points, len(contents)]


def _datum(part: dict[str, Any], camel: str, snake: str) -> Any:
    return part.get(camel, part.get(snake))


def calls_of(content: dict[str, Any]) -> list[str]:
    return [
        c["name"]
        for p in content.get("parts") or []
        if (c := _datum(p, "functionCall", "function_call")) is not None
    ]


def responses_of(content: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        r
        for p in content.get("parts") or []
        if (r := _datum(p, "functionResponse", "function_response")) is not None
    ]


def is_cleared(response: dict[str, Any]) -> bool:
    return response.get("response") == {"result": CLEARED_RESULT_NOTE}


def gemini_rejection(contents: Sequence[Any]) -> str | None:
    """Why the Gemini API would answer 400 to these contents (``None`` if it would take
    them): roles user or model; function calls only in model turns and responses only
    in user turns; a response turn only right after a call turn, with as many responses
    as calls, by name; every call turn answered by the turn after it."""
    try:
        json.dumps(list(contents), allow_nan=False)
    except (TypeError, ValueError) as exc:
        return f"not JSON: {exc}"
    if not contents:
        return "contents is not specified"
    for i, content in enumerate(contents):
        role = content.get("role", "user")
        if role not in ("user", "model"):
            return f"role {role!r} at {i}"
        if not content.get("parts"):
            return f"no parts at {i}"
        calls, responses = calls_of(content), responses_of(content)
        if calls and role != "model":
            return f"function call in a user turn at {i}"
        if responses and role != "user":
            return f"function response in a model turn at {i}"
        previous = calls_of(contents[i - 1]) if i else []
        if responses and Counter(r["name"] for r in responses) != Counter(previous):
            return f"function response turn at {i} does not answer the call turn before it"
        if calls:
            following = responses_of(contents[i + 1]) if i + 1 < len(contents) else []
            if not following:
                return f"function call turn at {i} is not answered"
    return None

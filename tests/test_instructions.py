"""The safety net reaches the model, and the notes say what happened."""

from __future__ import annotations

from typing import Any

import pytest

from windowfit import SAFETY_NET, add_safety_net, add_safety_net_to_messages
from windowfit.images import image_size, image_tokens


@pytest.mark.parametrize(
    "system",
    [
        None,
        "",
        "You are helpful.",
        [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
    ],
)
def test_add_safety_net_is_idempotent(system: Any) -> None:
    once = add_safety_net(system)
    assert SAFETY_NET in (once if isinstance(once, str) else once[-1]["text"])
    assert add_safety_net(once) == once
    if isinstance(system, list):
        assert once[0] == system[0]  # cache_control on existing blocks untouched


def test_safety_net_in_openai_messages() -> None:
    messages = [{"role": "user", "content": "hi"}]
    out = add_safety_net_to_messages(messages)
    assert out[0] == {"role": "system", "content": SAFETY_NET}
    assert messages == [{"role": "user", "content": "hi"}]
    again = add_safety_net_to_messages([{"role": "developer", "content": "rules"}, *messages])
    assert again[0]["content"].startswith("rules") and SAFETY_NET in again[0]["content"]


def test_safety_net_says_what_the_seed_asks() -> None:
    text = SAFETY_NET.lower()
    assert "oldest tool results are cleared" in text
    assert "do not stop" in text and "again" in text


def _png(width: int, height: int) -> bytes:
    return (
        b"\x89PNG\r\n\x1a\n"
        + b"\x00\x00\x00\rIHDR"
        + width.to_bytes(4, "big")
        + height.to_bytes(4, "big")
    )


@pytest.mark.parametrize(
    ("size", "anthropic", "openai"),
    [
        ((200, 200), 54, 255),  # ceil(40,000 / 750); 1 tile
        ((1000, 1000), 1334, 765),  # 768 x 768: 4 tiles
        ((4000, 3000), 1600, 765),  # Anthropic: long edge to 1568, capped; OpenAI 1024 x 768
        ((2048, 4096), 1600, 1105),  # OpenAI's own example: 768 x 1536, 6 tiles
    ],
)
def test_image_rules(size: tuple[int, int], anthropic: int, openai: int) -> None:
    import base64

    data = base64.b64encode(_png(*size)).decode()
    assert image_size(_png(*size)) == size
    assert (
        image_tokens({"type": "base64", "media_type": "image/png", "data": data}, "anthropic")
        == anthropic
    )
    assert image_tokens({"url": f"data:image/png;base64,{data}"}, "openai") == openai
    assert image_tokens({"url": "https://example.com/a.png", "detail": "low"}, "openai") == 85

"""Image token counts by each provider's published size rule.

* Anthropic (vision docs, "Calculate image costs"): tokens = width * height / 750, after
  the image is scaled down so that its long edge is at most 1568 px and it holds at most
  about 1,600 tokens (~1.15 megapixels).
* OpenAI (vision docs, GPT-4o class): ``detail: low`` costs 85 tokens; otherwise the image
  is fitted into 2048 x 2048, then scaled so its short side is at most 768 px, and costs
  85 + 170 per 512 px tile.
* Gemini (token docs): Gemini 2 counts 258 tokens per 768 x 768 tile (258 for an image
  within 384 x 384); Gemini 3 about 1,100 per image at its default media resolution. The
  larger of the two is used, so the estimate errs high for both.

Dimensions are read from the image header (PNG, GIF, WebP, JPEG) when the data is inline;
for a URL, or an unreadable image, the rule's maximum is used, so the estimate errs high.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "ANTHROPIC_IMAGE_MAX",
    "GEMINI_IMAGE_MAX",
    "OPENAI_IMAGE_MAX",
    "image_size",
    "image_tokens",
]

ANTHROPIC_IMAGE_MAX = 1600
OPENAI_IMAGE_MAX = 85 + 170 * 8  # 768 x 2048: 2 x 4 tiles
GEMINI_IMAGE_FLOOR = 1120  # Gemini 3, media_resolution high (its default for images)
GEMINI_IMAGE_MAX = 258 * 12  # an unreadable image: a 4K frame's 4 x 3 tiles


def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a PNG, GIF, WebP or JPEG header; ``None`` if unknown."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        w, h = struct.unpack(">II", data[16:24])
        return int(w), int(h)
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        w, h = struct.unpack("<HH", data[6:10])
        return int(w), int(h)
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP" and len(data) >= 30:
        chunk = data[12:16]
        if chunk == b"VP8X":
            w = 1 + int.from_bytes(data[24:27], "little")
            h = 1 + int.from_bytes(data[27:30], "little")
            return w, h
        if chunk == b"VP8 ":
            w, h = struct.unpack("<HH", data[26:30])
            return int(w) & 0x3FFF, int(h) & 0x3FFF
        if chunk == b"VP8L":
            bits = int.from_bytes(data[21:25], "little")
            return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if data[:2] == b"\xff\xd8":
        return _jpeg_size(data)
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        length = int.from_bytes(data[i + 2 : i + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            h, w = struct.unpack(">HH", data[i + 5 : i + 9])
            return int(w), int(h)
        i += 2 + length
    return None


def _decode(source: Mapping[str, Any]) -> bytes | None:
    """The image bytes of an inline image (Anthropic base64 source or a data: URL)."""
    encoded: Any = None
    if source.get("type") == "base64":
        encoded = source.get("data")
    else:
        url = source.get("url", source.get("image_url"))  # Responses: image_url is the URL
        if isinstance(url, str) and url.startswith("data:") and "," in url:
            encoded = url.split(",", 1)[1]
    if not isinstance(encoded, str):
        return None
    try:
        # The header is all we need; 64 KiB of base64 covers any JPEG's frame marker in practice.
        return base64.b64decode(encoded[: 4 * 16384], validate=False)
    except (binascii.Error, ValueError):
        return None


Size = tuple[int, int]


def _openai_tokens(size: Size | None, detail: str | None) -> int:
    if detail == "low":
        return 85
    if size is None:
        return OPENAI_IMAGE_MAX
    width, height = float(size[0]), float(size[1])
    scale = min(1.0, 2048 / max(width, height, 1.0))
    width, height = width * scale, height * scale
    scale = min(1.0, 768 / max(min(width, height), 1.0))
    width, height = width * scale, height * scale
    return 85 + 170 * math.ceil(width / 512) * math.ceil(height / 512)


def _gemini_tokens(size: Size | None, detail: str | None) -> int:
    if size is None:
        return GEMINI_IMAGE_MAX
    tiles = 1 if max(size) <= 384 else math.ceil(size[0] / 768) * math.ceil(size[1] / 768)
    return max(GEMINI_IMAGE_FLOOR, 258 * tiles)


def _anthropic_tokens(size: Size | None, detail: str | None) -> int:
    if size is None:
        return ANTHROPIC_IMAGE_MAX
    w, h = size
    scale = min(1.0, 1568 / max(w, h, 1))
    area = w * h * scale * scale
    return min(ANTHROPIC_IMAGE_MAX, max(1, math.ceil(area / 750)))


#: Each wire format's rule (Chat ``image_url`` and Responses ``input_image`` cost by
#: OpenAI's); a format not listed costs by Anthropic's.
_RULES: dict[str, Callable[[Size | None, str | None], int]] = {
    "anthropic": _anthropic_tokens,
    "openai": _openai_tokens,
    "openai-responses": _openai_tokens,
    "gemini": _gemini_tokens,
}


def image_tokens(source: Mapping[str, Any], provider: str, detail: str | None = None) -> int:
    """Tokens an image costs under ``provider``'s rule ("anthropic", "openai", "gemini")."""
    data = _decode(source)
    size = image_size(data) if data else None
    rule = _RULES.get(provider, _anthropic_tokens)
    given = source.get("detail")
    return rule(size, detail or (given if isinstance(given, str) else None))

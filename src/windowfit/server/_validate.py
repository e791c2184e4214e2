"""Small helpers for checking JSON values and naming what is wrong."""

from __future__ import annotations

from typing import Any

__all__ = ["json_type", "python_type_word"]


def json_type(value: Any) -> str:
    """The JSON name of a value's type, as OpenAI's messages say it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a decimal"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def python_type_word(kind: type) -> str:
    """The word pydantic uses in "Input should be a valid ..." for ``kind``."""
    return {
        str: "string",
        int: "integer",
        bool: "boolean",
        list: "list",
        dict: "dictionary",
        float: "number",
    }.get(kind, kind.__name__)

from typing import final

@final
class Weigher:
    def __init__(
        self,
        *,
        classes: bytes,
        weights: bytes,
        class_extras: bytes,
        char_extras: bytes | None,
        astral_low: int,
        astral_high: int,
        lower_code: int,
        lower_run: int,
        lower_units: int,
        punct_code: int,
        punct_run: int,
        punct_units: int,
        framing: float,
    ) -> None: ...
    def __call__(self, text: str, /) -> int: ...
    def units(self, text: str, /) -> int: ...

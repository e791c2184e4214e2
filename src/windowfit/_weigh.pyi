from collections.abc import Sequence
from typing import final

#: 1 where the module was built with the AVX2 pass over pure ASCII (x86, GCC or Clang).
AVX2_BUILT: int

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
    def units(self, text: str, /, *, simd: bool = True) -> int: ...
    def estimates(self, text: str, cuts: Sequence[int], /) -> list[int]: ...
    def strata(
        self, text: str, windows: int, width: int, alike: float, /
    ) -> list[tuple[bytes, float, int]]: ...
    @property
    def simd(self) -> bool: ...

from collections.abc import Sequence
from typing import final

@final
class Vocabulary:
    def __init__(
        self,
        *,
        blob: bytes,
        offsets: bytes,
        categories: bytes,
        pattern: int,
        merges: bytes | None = None,
    ) -> None: ...
    def count(self, data: bytes, /) -> int: ...
    def weigh(
        self, strata: Sequence[tuple[bytes, float, int]], /
    ) -> tuple[float, float, float]: ...
    def pieces(self, data: bytes, /) -> list[bytes]: ...
    def rank(self, token: bytes, /) -> int: ...
    @property
    def tokens(self) -> int: ...

@final
class Joint:
    def __init__(self, *, vocabularies: tuple[Vocabulary, ...]) -> None: ...
    def counts(self, data: bytes, /) -> list[int]: ...
    def weigh(
        self, strata: Sequence[tuple[bytes, float, int]], /
    ) -> list[tuple[float, float, float]]: ...

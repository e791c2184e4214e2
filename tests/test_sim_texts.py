"""Generated texts: deterministic, in the right script, with real prose's token statistics."""

from __future__ import annotations

from pathlib import Path

import pytest

from windowfit.sim import LANGUAGES, MEASURED, DirectoryTexts, generated_text
from windowfit.tokenizers import load_backend
from windowfit.tokens import breakdown

REAL = {"ru": "ru_tolstoy-voyna-i-mir-vol1.txt", "en": "en_stoker-dracula.txt"}


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("chars", [10, 5_000, 100_000])
def test_generated_text_is_deterministic_and_about_the_size_asked(
    language: str, chars: int
) -> None:
    text = generated_text(language, "chapter-3", chars)
    assert text == generated_text(language, "chapter-3", chars)
    assert text != generated_text(language, "chapter-4", chars)
    assert chars <= len(text) <= chars + 1_500  # cut after a sentence
    assert text.startswith("Глава III" if language == "ru" else "Chapter III")


@pytest.mark.parametrize(("language", "low", "high"), [("ru", 0.75, 0.9), ("en", 0.99, 1.0)])
def test_generated_text_is_in_its_script(language: str, low: float, high: float) -> None:
    text = generated_text(language, "x", 50_000)
    counts = breakdown(text)
    share = (counts.other if language == "ru" else counts.ascii) / len(text)
    assert low <= share <= high
    assert counts.cjk == 0


def test_unknown_language() -> None:
    with pytest.raises(ValueError, match="no generator"):
        generated_text("xx", "k", 100)


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("tokenizer", ["o200k", "cl100k"])
def test_characters_per_token_are_as_measured(language: str, tokenizer: str) -> None:
    text = generated_text(language, "calibration", 100_000)
    ratio = len(text) / load_backend(tokenizer).estimate(text)
    assert ratio == pytest.approx(MEASURED[language][tokenizer], rel=0.05)


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("tokenizer", ["o200k", "cl100k"])
def test_close_to_real_prose(shared_data: Path, language: str, tokenizer: str) -> None:
    real = (shared_data / "texts" / REAL[language]).read_text(encoding="utf-8")[:200_000]
    estimator = load_backend(tokenizer)
    real_ratio = len(real) / estimator.estimate(real)
    assert real_ratio == pytest.approx(MEASURED[language][f"real_{tokenizer}"], rel=0.03)
    generated = generated_text(language, "compare", 200_000)
    assert len(generated) / estimator.estimate(generated) == pytest.approx(real_ratio, rel=0.1)


def test_directory_texts(tmp_path: Path) -> None:
    paragraphs = [f"Абзац {k}. " + "слово " * 20 for k in range(10)]
    (tmp_path / "ru_a.txt").write_text("\n\n".join(paragraphs[:5]), encoding="utf-8")
    (tmp_path / "ru_b.txt").write_text("\n\n".join(paragraphs[5:]), encoding="utf-8")
    texts = DirectoryTexts(tmp_path)
    first = texts.text("ru", "one", 300)
    assert first.startswith("Абзац 0.")
    assert texts.text("ru", "one", 300) == first  # the same key, the same piece
    second = texts.text("ru", "two", 300)
    assert second != first and second.startswith("Абзац 2.")
    assert 200 <= len(first) <= 300
    assert not texts.wrapped
    for k in range(10):
        texts.text("ru", f"more {k}", 300)
    assert texts.wrapped == {"ru"}
    with pytest.raises(FileNotFoundError, match="en_"):
        texts.text("en", "k", 100)
    with pytest.raises(FileNotFoundError):
        DirectoryTexts(tmp_path / "missing")

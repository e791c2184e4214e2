"""benchmarks/languages_report.py: its reading of translation catalogs and its counts.

The report measures the profiles on real text of many languages that no fit has seen
(issue 10, item 1); these tests check the instrument, not the ratios: a catalog's
translated strings are read exactly (escapes, continuation lines, plurals, contexts; the
header and untranslated entries left out), a wheel's catalogs are grouped by language,
scripts are named, and a run over a small wheel goes end to end.
"""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import languages_report as report
from real_tokenizers import real_backend

CATALOG = r"""# A comment
msgid ""
msgstr ""
"Project-Id-Version: test\n"
"Language: it\n"

#: file.py:1
msgid "Save"
msgstr "Salva"

msgid "A long "
"message"
msgstr "Un messaggio "
"lungo con \"virgolette\"\n"
"e una riga"

msgctxt "month"
msgid "May"
msgstr "maggio"

msgid "%(count)s file"
msgid_plural "%(count)s files"
msgstr[0] "%(count)s documento"
msgstr[1] "%(count)s documenti"

msgid "Untranslated"
msgstr ""

#, fuzzy
msgid "Fuzzy"
msgstr "Sfocato"

#~ msgid "Obsolete"
#~ msgstr "Obsoleto"
"""


def test_translations_reads_every_translated_string_and_nothing_else() -> None:
    assert report.translations(CATALOG) == [
        "Salva",
        'Un messaggio lungo con "virgolette"\ne una riga',
        "maggio",
        "%(count)s documento",
        "%(count)s documenti",
        "Sfocato",
    ]


@pytest.mark.parametrize("text", ["", "# only a comment\n", 'msgid ""\nmsgstr "Header: x\\n"\n'])
def test_translations_of_a_catalog_without_entries_is_empty(text: str) -> None:
    assert report.translations(text) == []


def _wheel(tmp_path: Path, files: dict[str, str]) -> Path:
    path = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)
    return path


def test_read_wheel_groups_catalogs_by_language(tmp_path: Path) -> None:
    wheel = _wheel(
        tmp_path,
        {
            "pkg/locale/it/LC_MESSAGES/one.po": CATALOG,
            "pkg/contrib/locale/it/LC_MESSAGES/two.po": 'msgid "Yes"\nmsgstr "Sì"\n',
            "pkg/locale/sw/LC_MESSAGES/one.po": 'msgid "Save"\nmsgstr "Hifadhi"\n',
            "pkg/locale/de/LC_MESSAGES/one.po": 'msgid "Save"\nmsgstr ""\n',
            "pkg/locale/it/LC_MESSAGES/one.mo": "binary",
            "pkg/README.po": 'msgid "x"\nmsgstr "y"\n',
        },
    )
    catalogs = {c.language: c for c in report.read_wheel(wheel, "pkg")}
    assert sorted(catalogs) == ["it", "sw"]  # de has no translation
    assert "Sì" in catalogs["it"].strings
    assert len(catalogs["it"].strings) == 7
    assert catalogs["sw"].name == "pkg:sw"
    assert catalogs["sw"].text == "Hifadhi"


@pytest.mark.parametrize(
    ("text", "script"),
    [
        ("Hifadhi faili", "ASCII"),
        ("Salva il documento prima di chiudere la finestra del programma. Perché", "ASCII"),
        ("Perché così è già", "LATIN"),
        ("Сохранить файл", "CYRILLIC"),
        ("ファイルを保存", "KATAKANA"),
        ("12 + 3 = 15", "none"),
    ],
)
def test_script_of_names_the_script_most_letters_are_in(text: str, script: str) -> None:
    assert report.script_of(text) == script


def test_a_run_over_a_small_wheel_prints_every_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("o200k", "cl100k", "deepseek", "claude-legacy", "tekken"):
        real_backend(name)  # skips when a tokenizer file is not installed
    sentences = {
        "it": "Salva il documento prima di chiudere la finestra",
        "sw": "Hifadhi hati kabla ya kufunga dirisha",
        "en": "Save the document before closing the window",
    }
    files = {
        f"pkg/locale/{lang}/LC_MESSAGES/a.po": "".join(
            f'msgid "m{k}"\nmsgstr "{text} {k}"\n' for k in range(60)
        )
        for lang, text in sentences.items()
    }
    wheel = _wheel(tmp_path, files)
    out = tmp_path / "counts.json"
    assert report.main(["--corpus", str(wheel), "--json", str(out), "--greedy"]) == 0
    printed = capsys.readouterr().out
    headings = ("Whole catalogs, per family", "One script", "string alone", "greedy")
    for heading in headings:
        assert heading in printed
    assert "| pkg:sw | ASCII |" in printed
    dump = json.loads(out.read_text())
    assert sorted(dump) == ["pkg:en", "pkg:it", "pkg:sw"]
    whole = dump["pkg:sw"]["whole"]
    assert whole["real"]["o200k"] == real_backend("o200k").estimate(
        "\n".join(f"{sentences['sw']} {k}" for k in range(60))
    )
    assert len(dump["pkg:sw"]["strings"]) == 60


def test_without_a_corpus_it_says_where_it_looked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nothing.whl"
    assert report.main(["--corpus", str(missing)]) == 2
    assert str(missing) in capsys.readouterr().out


def test_the_pinned_corpora_hold_about_a_hundred_languages() -> None:
    corpora = report.find_corpora()
    if len(corpora) < len(report.CORPORA):
        pytest.skip(f"the corpus wheels are not in {report.CORPUS_DIR} (make setup downloads them)")
    catalogs = [c for source, path in corpora for c in report.read_wheel(path, source)]
    languages = {c.language for c in catalogs}
    assert len(languages) >= 100
    assert {"sw", "it", "nl", "ja", "ka", "he", "vi", "th"} <= languages
    assert all(c.strings and all(c.strings) for c in catalogs)

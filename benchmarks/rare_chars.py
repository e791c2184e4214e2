"""Write src/windowfit/_rare_table.py: what each BMP character costs alone in each real
tokenizer (issue 10, item 1: a character a tokenizer has no token for costs what it costs).

Run:  .venv/bin/python benchmarks/rare_chars.py            (--dry-run: print, write nothing)

Needs tiktoken and tokenizers with the tokenizer files of the litellm and mistral-common
wheels (``make setup``). Deterministic: no text, no data folder, no random choice; the
table is a property of the tokenizer files, whose versions it records.

For every code point of the Basic Multilingual Plane (surrogates apart) and each tokenizer
of ``windowfit.tokenizers.FAMILY_BACKENDS``, the cost of the character is the largest of:
its tokens alone; the tokens it adds after a space; the tokens it adds after a letter of
its Unicode block (the block's first letter, or an ASCII letter for a block without
one). A byte-level BPE that has no token for a character spends that many tokens on it
whatever the text around it: no merge involves a character that is not a token
(measured on the real texts: the tokens that hold a rare character's bytes are 0.84-1.00
of its cost alone, 1.00 for Chinese and Japanese), so the estimate must never count it
less. The characters that cost at least 2 are written as ranges with their cost.

The characters of the blocks that the profiles' real texts are written in
(:data:`FITTED_BLOCKS`) are left out: their class's rate is measured on real text of
exactly those characters, rare ones included at the rate real text has them (cl100k
spends 2-3 tokens on 39% of the characters of the Chinese novel, 21% of the Hindi
Bible), and held-out figures say it holds there. A block that only shares a class with
them (Bopomofo, Kanbun, Enclosed CJK and the other U+3100-33FF blocks beside the kana,
CJK Extension A beside the Han, Sinhala and Oriya beside Devanagari, Meetei Mayek and
Saurashtra beside Hangul, the Arabic presentation forms beside the fullwidth forms) is
not measured by that rate, and its characters keep their cost alone.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import importlib.metadata
import sys
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from windowfit.tokenizers import BACKEND_OF_FAMILY, FAMILY_BACKENDS, load_backend

sys.path.insert(0, str(Path(__file__).resolve().parent))
import profiles_report

ROOT = Path(__file__).resolve().parents[1]
TABLE_PATH = ROOT / "src" / "windowfit" / "_rare_table.py"

#: Blocks whose class rates are fitted on real text of them (the scripts of
#: ../shared/data/texts: Greek, Russian, Arabic, Hindi, Japanese, Chinese, Korean, and the
#: CJK punctuation and fullwidth forms of the Japanese and Chinese texts).
FITTED_BLOCKS: tuple[tuple[int, int, str], ...] = (
    (0x0370, 0x03FF, "Greek and Coptic"),
    (0x0400, 0x047F, "Cyrillic (the Russian part: the cyrillic class)"),
    (0x0600, 0x06FF, "Arabic"),
    (0x0900, 0x097F, "Devanagari"),
    (0x3000, 0x303F, "CJK Symbols and Punctuation"),
    (0x3040, 0x309F, "Hiragana"),
    (0x30A0, 0x30FF, "Katakana"),
    (0x4E00, 0x9FFF, "CJK Unified Ideographs"),
    (0xAC00, 0xD7AF, "Hangul Syllables"),
    (0xFF00, 0xFFEF, "Halfwidth and Fullwidth Forms"),
)
#: Characters that cost at least this many tokens alone are written.
RARE_COST = 2


def code_points() -> list[int]:
    """Every BMP code point but the fitted blocks' and the surrogates (which no tokenizer
    takes: a lone surrogate in a text counts as a character of its class)."""
    return [
        cp
        for cp in range(0x80, 0x10000)
        if not 0xD800 <= cp <= 0xDFFF and not any(a <= cp <= b for a, b, _ in FITTED_BLOCKS)
    ]


def block_letters() -> dict[int, str]:
    """Code point -> a letter of its block to put before it (ASCII ``a`` for a block
    without letters)."""
    out: dict[int, str] = {}
    for block in profiles_report.unicode_blocks():
        letter = next(
            (
                chr(cp)
                for cp in range(block.first, block.last + 1)
                if not 0xD800 <= cp <= 0xDFFF and unicodedata.category(chr(cp)).startswith("L")
            ),
            "a",
        )
        for cp in range(block.first, block.last + 1):
            out[cp] = letter
    return out


def batch_lengths(backend: Any, texts: Sequence[str]) -> list[int]:
    """Tokens of each text, in one batch call of the tokenizer."""
    encoding = getattr(backend, "encoding", None)
    if encoding is not None:
        return [len(ids) for ids in encoding.encode_ordinary_batch(list(texts))]
    encodings = backend.tokenizer.encode_batch(list(texts), add_special_tokens=False)
    return [len(e.ids) for e in encodings]


def costs(name: str, cps: Sequence[int], letters: dict[int, str]) -> dict[int, int]:
    """Code point -> its cost in tokenizer ``name`` (see the module docstring)."""
    backend = load_backend(name)
    chars = [chr(cp) for cp in cps]
    alone = batch_lengths(backend, chars)
    after_space = batch_lengths(backend, [" " + c for c in chars])
    space = batch_lengths(backend, [" "])[0]
    befores = sorted({letters.get(cp, "a") for cp in cps})
    before_cost = dict(zip(befores, batch_lengths(backend, befores), strict=True))
    after_letter = batch_lengths(backend, [letters.get(cp, "a") + chr(cp) for cp in cps])
    return {
        cp: max(a, s - space, t - before_cost[letters.get(cp, "a")])
        for cp, a, s, t in zip(cps, alone, after_space, after_letter, strict=True)
    }


def ranges(cost_of: dict[int, int]) -> list[tuple[int, int, int]]:
    """(first, last, cost) of the runs of consecutive rare code points of one cost."""
    out: list[tuple[int, int, int]] = []
    for cp in sorted(cost_of):
        cost = cost_of[cp]
        if cost < RARE_COST:
            continue
        if out and out[-1][1] == cp - 1 and out[-1][2] == cost:
            out[-1] = (out[-1][0], cp, cost)
        else:
            out.append((cp, cp, cost))
    return out


def versions() -> dict[str, str]:
    """Each tokenizer's data file (name and SHA-256 prefix), and the packages' versions."""
    out = {}
    for name in FAMILY_BACKENDS:
        source = load_backend(name).source
        digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
        out[name] = f"{source.name} sha256:{digest}"
    for package in ("tiktoken", "tokenizers", "litellm", "mistral_common"):
        try:
            out[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            out[package] = "absent"
    return out


def render(table: dict[str, list[tuple[int, int, int]]], about: dict[str, str]) -> str:
    lines = [
        '"""What BMP characters cost alone in each real tokenizer, generated by',
        "benchmarks/rare_chars.py: do not edit (see that script and windowfit._rare_chars).",
        "",
        f"Generated {datetime.date.today().isoformat()}; Unicode blocks of Python "
        f"{sys.version_info.major}.{sys.version_info.minor} (unicodedata "
        f"{unicodedata.unidata_version}). Tokenizers:",
        *(f"    {name}: {value}" for name, value in about.items()),
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "#: Blocks left out: their classes' rates are fitted on real text of them.",
        "FITTED_BLOCKS: tuple[tuple[int, int], ...] = (",
        *(f"    (0x{a:04X}, 0x{b:04X}),  # {label}" for a, b, label in FITTED_BLOCKS),
        ")",
        "",
        "#: Each calibrated family's tokenizer (another family, conservative included: max).",
        "FAMILY_TABLES: dict[str, str] = {",
        *(f'    "{family}": "{name}",' for family, name in BACKEND_OF_FAMILY.items()),
        "}",
        "",
        f"#: Tokenizer -> (first, last, cost, ...): code points that cost at least {RARE_COST}",
        "#: tokens alone, by runs of one cost, flattened; max: the largest of the tokenizers.",
        "RARE: dict[str, tuple[int, ...]] = {",
    ]
    for name, spans in table.items():
        lines.append(f'    "{name}": (')
        flat = [f"0x{a:04X}, 0x{b:04X}, {c}," for a, b, c in spans]
        row: list[str] = []
        for item in flat:
            if sum(len(x) + 1 for x in row) + len(item) > 84:
                lines.append("        " + " ".join(row))
                row = []
            row.append(item)
        if row:
            lines.append("        " + " ".join(row))
        lines.append("    ),")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--dry-run", action="store_true", help="print the counts, write nothing")
    args = parser.parse_args()
    cps = code_points()
    letters = block_letters()
    table: dict[str, list[tuple[int, int, int]]] = {}
    largest: dict[int, int] = dict.fromkeys(cps, 0)
    for name in FAMILY_BACKENDS:
        cost_of = costs(name, cps, letters)
        largest = {cp: max(cost, cost_of[cp]) for cp, cost in largest.items()}
        table[name] = ranges(cost_of)
        rare = sum(1 for c in cost_of.values() if c >= RARE_COST)
        print(
            f"{name:14} {rare:6,} of {len(cps):,} code points cost {RARE_COST}+ alone "
            f"(max {max(cost_of.values())}), {len(table[name]):,} ranges"
        )
    table["max"] = ranges(largest)
    print(f"{'max':14} {len(table['max']):,} ranges")
    source = render(table, versions())
    if args.dry_run:
        print("(dry run: nothing written)")
        return 0
    TABLE_PATH.write_text(source, encoding="utf-8")
    print(f"wrote {TABLE_PATH.relative_to(ROOT)} ({len(source):,} characters)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

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
less. The cost of every character that costs at least 2 is written, a byte per code
point, compressed.

The characters the profiles' real texts hold (``../shared/data/texts``, at least
:data:`SEEN_MIN` times) are left out: their class's rate is fitted on real text of
them, rare ones included at the rate real text has them (cl100k spends 2-3 tokens on
39% of the characters of the Chinese novel, 21% of the Hindi Bible), and held-out
figures say it holds there. Every other character of their blocks, and every character
of a block that only shares a class with them (Bopomofo, Kanbun, Enclosed CJK beside
the kana, CJK Extension A beside the Han, Sinhala and Oriya beside Devanagari, Meetei
Mayek beside Hangul, the Arabic presentation forms beside the fullwidth forms), is not
measured by that rate, and keeps its cost alone. Which characters are left out is
written with the table (``SEEN``): the library never reads the data.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import hashlib
import importlib.metadata
import sys
import unicodedata
import zlib
from collections import Counter
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from windowfit.tokenizers import BACKEND_OF_FAMILY, FAMILY_BACKENDS, load_backend

sys.path.insert(0, str(Path(__file__).resolve().parent))
import profiles_report
from calibrate import data_dir  # the shared data, found the way the refit finds it

ROOT = Path(__file__).resolve().parents[1]
TABLE_PATH = ROOT / "src" / "windowfit" / "_rare_table.py"

#: A character the real texts hold at least this many times is measured by its class's
#: fitted rate (see the module docstring).
SEEN_MIN = 1
#: Code points of the Basic Multilingual Plane.
BMP = 0x10000
#: Characters that cost at least this many tokens alone are written.
RARE_COST = 2


def seen_characters(data: Path) -> set[int]:
    """The non-ASCII BMP characters the real texts hold at least SEEN_MIN times."""
    counts: Counter[str] = Counter()
    for path in sorted((data / "texts").glob("*.txt")):
        counts.update(path.read_text(encoding="utf-8"))
    return {ord(c) for c, n in counts.items() if n >= SEEN_MIN and 0x80 <= ord(c) < 0x10000}


def code_points(seen: Collection[int] = ()) -> list[int]:
    """Every non-ASCII BMP code point but ``seen`` and the surrogates (which no tokenizer
    takes: a lone surrogate in a text counts as a character of its class)."""
    left_out = set(seen)
    return [cp for cp in range(0x80, 0x10000) if not 0xD800 <= cp <= 0xDFFF and cp not in left_out]


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


def costs(backend: Any, cps: Sequence[int], letters: dict[int, str]) -> dict[int, int]:
    """Code point -> its cost in ``backend`` (a loaded tokenizer; see the module
    docstring)."""
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


def cost_bytes(cost_of: dict[int, int]) -> bytes:
    """One byte per BMP code point: its cost when it is at least RARE_COST, else 0."""
    out = bytearray(BMP)
    for cp, cost in cost_of.items():
        if cost >= RARE_COST:
            out[cp] = min(cost, 255)
    return bytes(out)


def pack(data: bytes) -> list[str]:
    """``data`` compressed (zlib) and in Base85, cut into string literals of a line each."""
    text = base64.b85encode(zlib.compress(data, 9)).decode("ascii")
    return [text[k : k + 88] for k in range(0, len(text), 88)]


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


def render(table: dict[str, bytes], seen: set[int], about: dict[str, str]) -> str:
    seen_bytes = bytes(1 if cp in seen else 0 for cp in range(BMP))
    lines = [
        '"""What BMP characters cost alone in each real tokenizer, generated by',
        "benchmarks/rare_chars.py: do not edit (see that script and windowfit._rare_chars).",
        "",
        f"Generated {datetime.date.today().isoformat()}; Unicode blocks of Python "
        f"{sys.version_info.major}.{sys.version_info.minor} (unicodedata "
        f"{unicodedata.unidata_version}). Tokenizers:",
        *(f"    {name}: {value}" for name, value in about.items()),
        "",
        "Each string is zlib-compressed, Base85-encoded bytes, one per BMP code point.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        f"#: 1 for the characters the real texts hold at least {SEEN_MIN} times (their classes'",
        "#: rates are fitted on them: left out of RARE), else 0.",
        "SEEN = (",
        *(f'    "{piece}"' for piece in pack(seen_bytes)),
        ")",
        "",
        "#: Each calibrated family's tokenizer (another family, conservative included: max).",
        "FAMILY_TABLES: dict[str, str] = {",
        *(f'    "{family}": "{name}",' for family, name in BACKEND_OF_FAMILY.items()),
        "}",
        "",
        f"#: Tokenizer -> each code point's cost alone when it is at least {RARE_COST}, else 0",
        "#: (max: the largest of the tokenizers).",
        "RARE: dict[str, str] = {",
    ]
    for name, data in table.items():
        lines.append(f'    "{name}": (')
        lines.extend(f'        "{piece}"' for piece in pack(data))
        lines.append("    ),")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--dry-run", action="store_true", help="print the counts, write nothing")
    parser.add_argument("--data", help="the shared data folder (default ../shared/data)")
    args = parser.parse_args()
    data = data_dir(args.data)
    if data is None:
        print("rare_chars: no data folder (../shared/data or WINDOWFIT_DATA)", file=sys.stderr)
        return 2
    seen = seen_characters(data)
    print(f"{len(seen):,} characters the real texts hold {SEEN_MIN}+ times: left out")
    cps = code_points(seen)
    letters = block_letters()
    table: dict[str, bytes] = {}
    largest: dict[int, int] = dict.fromkeys(cps, 0)
    for name in FAMILY_BACKENDS:
        cost_of = costs(load_backend(name), cps, letters)
        largest = {cp: max(cost, cost_of[cp]) for cp, cost in largest.items()}
        table[name] = cost_bytes(cost_of)
        rare = sum(1 for c in cost_of.values() if c >= RARE_COST)
        print(
            f"{name:14} {rare:6,} of {len(cps):,} code points cost {RARE_COST}+ alone "
            f"(max {max(cost_of.values())})"
        )
    table["max"] = cost_bytes(largest)
    source = render(table, seen, versions())
    if args.dry_run:
        print("(dry run: nothing written)")
        return 0
    TABLE_PATH.write_text(source, encoding="utf-8")
    print(f"wrote {TABLE_PATH.relative_to(ROOT)} ({len(source):,} characters)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``windowfit demo``: fitting at work on a long sub-agent run, offline.

A sub-agent is asked to read 40 long chapters, one tool call each, within a 400,000-token
budget. Its requests are replayed three ways: as the old system sent them (it trimmed only
at user messages, and a sub-agent has only one, so every request carries the whole
history), with the seed's stages, and with windowfit's cache-stable defaults. For each, the
table shows how large the requests got and what they cost under prompt caching.
"""

from __future__ import annotations

import json
import math
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .cache import PrefixCacheMeter
from .errors import ContextOverflowError
from .fitting import fit
from .formats import get_format
from .instructions import SAFETY_NET
from .settings import FitSettings
from .sizing import default_sizer
from .tokens import estimate_tokens

__all__ = ["chapter_text", "run_demo"]

_RU_WORDS = " ".join(
    [
        "и в не он на я что тот быть с а весь это как она по но они к у ты из мы за вы",
        "так же от сказать этот который мочь человек о один ещё бы такой только себя своё",
        "какой когда уже для вот кто да говорить год знать мой до или если время рука нет",
        "самый ни стать большой даже другой наш свой ну под где дело есть сам раз чтобы",
        "два там чем глаз жизнь первый день тут во ничто потом очень со хотеть ли при",
        "голова надо без видеть идти теперь тоже стоять друг дом сейчас можно после слово",
        "здесь думать место спросить через лицо что-то",
    ]
).split()
_EN_WORDS = " ".join(
    [
        "the of and to in he was that it his her with as had for she not at but be on you",
        "him all by which they so my have from this were me one said there would an what",
        "when no their who if could been we them or more upon into out some then only",
        "little now very man time like about over before must than such our your may well",
        "made came again down",
    ]
).split()


def chapter_text(number: int, words: int, language: str = "ru", seed: int = 0) -> str:
    """A deterministic chapter of plausible prose in Russian or English."""
    rng = random.Random(f"{language}:{number}:{seed}")
    vocab = _RU_WORDS if language == "ru" else _EN_WORDS
    title = f"Глава {number}" if language == "ru" else f"Chapter {number}"
    out = [title, ""]
    sentence: list[str] = []
    for _ in range(words):
        sentence.append(rng.choice(vocab))
        if len(sentence) >= rng.randint(6, 18):
            text = " ".join(sentence)
            out.append(text[0].upper() + text[1:] + rng.choice([".", ".", ".", "!", "?", ","]))
            sentence = []
    return " ".join(out)


@dataclass
class _Row:
    policy: str
    requests: int = 0
    peak: int = 0
    over_budget: int = 0
    over_limit: int = 0
    refused: int = 0
    breaks: int = 0
    cost: float = 0.0
    read_share: float = 0.0


def _subagent_run(chapters: int, words: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": f"Read chapters 1 to {chapters} and check them against the notes.",
        }
    ]
    for n in range(1, chapters + 1):
        call_id = f"toolu_{n:03d}"
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Reading chapter {n}."},
                    {
                        "type": "tool_use",
                        "id": call_id,
                        "name": "read_file",
                        "input": {"path": f"chapters/{n:02d}.txt"},
                    },
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": call_id,
                        "content": chapter_text(n, words),
                    }
                ],
            }
        )
    return messages


def _replay(
    name: str,
    messages: list[dict[str, Any]],
    shape: Callable[[list[dict[str, Any]]], list[dict[str, Any]]],
    budget: int,
    hard_limit: int,
    fixed: int,
) -> _Row:
    sizer = default_sizer(provider="anthropic")
    spec = get_format("anthropic")
    meter = PrefixCacheMeter()
    row = _Row(name)
    for point in range(1, len(messages) + 1, 2):
        try:
            request = shape(messages[:point])
        except ContextOverflowError:
            row.refused += 1
            continue
        sizes = [sizer.size_of(spec.from_message(m, i)).tokens for i, m in enumerate(request)]
        size = fixed + sum(sizes)
        row.requests += 1
        row.peak = max(row.peak, size)
        row.over_budget += size > budget
        if size > hard_limit:
            row.over_limit += 1  # the provider rejects it: nothing is read or written
            continue
        meter.observe(request, sizes, fixed)
    row.breaks = meter.breaks
    row.cost = meter.cost
    row.read_share = meter.read_share
    return row


def run_demo(as_json: bool = False, chapters: int = 40, words: int = 9000) -> int:
    budget, hard_limit = 400_000, 1_000_000
    system = "You are a careful research sub-agent.\n\n" + SAFETY_NET
    fixed = estimate_tokens(system) + 4
    messages = _subagent_run(chapters, words)
    if not as_json:
        print(f"A sub-agent reads {chapters} chapters of Russian prose, one tool call each;")
        print(f"budget {budget:,} tokens, hard limit {hard_limit:,}. Replaying its requests:")

    def old(ms: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return ms  # trimming at user messages: a sub-agent has one, so nothing is cut

    policies: list[tuple[str, Callable[[list[dict[str, Any]]], list[dict[str, Any]]]]] = [
        ("old (cut at user messages)", old),
        ("seed stages", lambda ms: fit(ms, budget=budget - fixed, settings="seed").messages),
        ("windowfit", lambda ms: fit(ms, budget=budget - fixed, settings=FitSettings()).messages),
    ]
    rows = []
    for name, shape in policies:
        if not as_json:
            print(f"  replaying: {name} ...", file=sys.stderr, flush=True)
        rows.append(_replay(name, messages, shape, budget, hard_limit, fixed))
    sample = chapter_text(1, words)
    chars = len(sample)
    estimates = {
        "chars": chars,
        "estimate_chars4": math.ceil(chars / 4),
        "estimate_script": estimate_tokens(sample),
    }
    if as_json:
        print(json.dumps({"rows": [r.__dict__ for r in rows], "russian_chapter": estimates}))
        return 0
    raw_cost = rows[0].cost or 1.0
    header = (
        f"  {'policy':<28}{'requests':>9}{'peak':>11}{'>budget':>8}{'>limit':>7}"
        f"{'breaks':>7}{'cost':>8}"
    )
    print()
    print(header)
    for r in rows:
        print(
            f"  {r.policy:<28}{r.requests:>9}{r.peak:>11,}{r.over_budget:>8}{r.over_limit:>7}"
            f"{r.breaks:>7}{r.cost / raw_cost:>7.2f}x"
        )
    print()
    print("  cost: input cost with prompt caching (reads 0.1x, writes 1.25x), relative to old;")
    print("  requests over the hard limit are rejected and cost nothing, but the work stops there.")
    print()
    print(
        f"One Russian chapter: {chars:,} characters; chars/4 says {estimates['estimate_chars4']:,}"
        f" tokens, the script-aware rule {estimates['estimate_script']:,}."
    )
    return 0

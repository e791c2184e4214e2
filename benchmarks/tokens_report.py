"""Token counts you can trust (issue 3): the calibrated profiles against real tokenizers
and against what providers counted, with and without learning, and their speed.

Run:  .venv/bin/python benchmarks/tokens_report.py            (--write: update RESULTS.md)

Prints markdown tables and asserts nothing; says where a target is not met. Needs the
shared data (../shared/data or WINDOWFIT_DATA) and the real tokenizers (``make setup``).

1. Every text in texts/, every family: estimate / real count (target 0.98-1.20), with the
   seed's rule and chars/4 beside it. Claude 3+ has no public tokenizer: its profile is
   shown against the legacy Claude tokenizer, which is only a guide.
2. Real traffic: Claude Code sessions (differences between consecutive requests' totals,
   the claude profile) and mini-swe-agent DeepSeek runs (prompt_tokens, the deepseek
   profile), summed per run: target 1.00-1.15x of what the provider counted.
3. The same with windowfit.calibration.UsageCalibrator learning from each answer's usage:
   each request's estimate is corrected with what was learned from the requests before
   it; summed over the requests after the first 5: target 1.00-1.08x.
4. Throughput on 300,000 characters of each script: the calibrated estimator against
   tiktoken (o200k_base, cl100k_base): target 10x faster; and on pure ASCII (real and
   generated, hard on an estimate) every default estimator: target 100x, with the
   estimate against the real count beside it (``--throughput``: only these tables).
"""

from __future__ import annotations

import argparse
import functools
import math
import platform
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from _speed import compared
from calibrate import (
    BACKENDS,
    TrafficRun,
    claude_differences,
    claude_file_ratio,
    data_dir,
    deepseek_file_ratio,
    emoji_sequences,
    estimate_messages,
    generated_text,
    load_backends,
    request_estimates,
    text_files,
    traffic_runs,
)
from profiles_report import CLAUDE_MODEL, with_derived
from windowfit.calibration import UsageCalibrator
from windowfit.profiles import CALIBRATED_FAMILIES, estimator_for
from windowfit.tokenizers import BACKEND_OF_FAMILY
from windowfit.tokens import Estimator, estimate_tokens

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
HEADING = "## Token counts (issue 3)"
TEXT_WINDOW = (0.98, 1.20)
TRAFFIC_WINDOW = (1.00, 1.15)
LEARNED_WINDOW = (1.00, 1.08)
WARMUP = 5  # requests before the learned correction is judged
#: Each family against the real tokenizer it is checked on; claude (no public tokenizer)
#: against the legacy one scaled as windowfit models Claude 3+ (profiles_report.DERIVED).
CHECKED_ON = {**BACKEND_OF_FAMILY, "claude": CLAUDE_MODEL}


def inside(value: float, window: tuple[float, float]) -> bool:
    return window[0] <= value <= window[1]


def mark(value: float, window: tuple[float, float]) -> str:
    return f"{value:.3f}" if inside(value, window) else f"**{value:.3f}**"


# ---------------------------------------------------------------------------------------
# 1. Texts
# ---------------------------------------------------------------------------------------


def texts_section(data: Path, backends: dict[str, Estimator], out: list[str]) -> None:
    files = [(p.name, p.read_text(encoding="utf-8")) for p in text_files(data)]
    emoji = [t for name, t in files if name.startswith("emoji")]
    if emoji:
        files.append(("emoji column only (derived)", "".join(emoji_sequences(emoji[0]))))
    estimators = {family: estimator_for(family=family) for family in CHECKED_ON}
    conservative = estimator_for(family="conservative")
    rows = []
    for name, text in files:
        real = with_derived({b: backends[b].estimate(text) for b in BACKENDS})
        rows.append(
            {
                "name": name,
                "chars": len(text),
                "real": real,
                "profile": {f: e.estimate(text) for f, e in estimators.items()},
                "seed": estimate_tokens(text),
                "quarter": math.ceil(len(text) / 4),
                "conservative": conservative.estimate(text),
            }
        )
    out.append("### Every text, every family: estimate / real count\n")
    out.append(
        "Profile = the family's default estimator: its calibrated profile, checked by the "
        "family's vocabulary where that is on the machine (windowfit.vocabulary; deepseek "
        "scaled x1.03 for the API's chat template, claude by the legacy Claude tokenizer "
        "x1.137), the profile alone otherwise. claude real = the legacy tokenizer's count "
        f"x1.137 to the nearest token ({CLAUDE_MODEL}: what Claude 3+ counts as far as the "
        "API's usage shows; it has no public tokenizer); conservative is against the "
        "largest of the five, that one included. seed = the write-up's rule; c/4 = chars/4. "
        f"Target for the profile: {TEXT_WINDOW[0]:.2f}-{TEXT_WINDOW[1]:.2f}; "
        "**bold** = outside it.\n"
    )
    header = "| text | chars | " + " | ".join(
        f"{f} real | {f} profile | seed | c/4" for f in CHECKED_ON
    )
    out.append(header + " |")
    out.append("|---|---:|" + "---:|---:|---:|---:|" * len(CHECKED_ON))
    for row in rows:
        cells = [row["name"], f"{row['chars']:,}"]
        for family, backend in CHECKED_ON.items():
            real = row["real"][backend]
            cells += [
                f"{real:,}",
                mark(row["profile"][family] / real, TEXT_WINDOW),
                f"{row['seed'] / real:.2f}",
                f"{row['quarter'] / real:.2f}",
            ]
        out.append("| " + " | ".join(cells) + " |")
    out.append("\n### Per family, over the texts\n")
    out.append(
        "| family | vs | profile min | profile max | seed min | seed max | c/4 min | c/4 max |"
    )
    out.append("|---|---|---:|---:|---:|---:|---:|---:|")
    measured = [r for r in rows if not r["name"].endswith("(derived)")]
    for family, backend in CHECKED_ON.items():
        p = [r["profile"][family] / r["real"][backend] for r in measured]
        s = [r["seed"] / r["real"][backend] for r in measured]
        q = [r["quarter"] / r["real"][backend] for r in measured]
        out.append(
            f"| {family} | {backend} | {mark(min(p), TEXT_WINDOW)} | {mark(max(p), TEXT_WINDOW)}"
            f" | {min(s):.2f} | {max(s):.2f} | {min(q):.2f} | {max(q):.2f} |"
        )
    low = min(r["conservative"] / max(r["real"].values()) for r in rows)
    high = max(r["conservative"] / max(r["real"].values()) for r in rows)
    out.append(
        f"\nconservative / the largest real count of the five tokenizers, every text "
        f"(the derived emoji column included): {low:.3f}-{high:.3f} "
        f"({'never under' if low >= 1 else 'UNDER on some text'})."
    )
    misses = [
        f"{r['name']} ({family} {r['profile'][family] / r['real'][backend]:.3f})"
        for r in rows
        for family, backend in CHECKED_ON.items()
        if not inside(r["profile"][family] / r["real"][backend], TEXT_WINDOW)
    ]
    out.append(
        "\nTarget met on every text and family."
        if not misses
        else "\nOutside the target: "
        + "; ".join(misses)
        + ". (The derived emoji column is not one of the texts; it is there because the "
        "emoji file is mostly ASCII, so the file alone says little about emoji. The claude "
        "profile is above the legacy tokenizer by design: Claude 3+ counts more than the "
        "legacy tokenizer on the traffic measured, and the profile keeps that scale on "
        "every class.)"
    )


# ---------------------------------------------------------------------------------------
# 2 and 3. Real traffic, without and with learning
# ---------------------------------------------------------------------------------------


def learned_ratio(estimator: Estimator, run: TrafficRun) -> tuple[float, float, int]:
    """Sum over the requests after WARMUP of the corrected estimate over the provider's
    count; the lowest single request's ratio; how many requests were judged."""
    calibrator = UsageCalibrator()
    predicted = counted = 0
    lowest = math.inf
    judged = 0
    for k, ((_, tokens), estimate) in enumerate(
        zip(run.points, request_estimates(estimator, run), strict=True)
    ):
        guess = calibrator.correct(estimate)
        if k >= WARMUP:
            predicted += guess
            counted += tokens
            lowest = min(lowest, guess / tokens)
            judged += 1
        calibrator.observe(estimate, tokens)
    return (predicted / counted if counted else math.nan), lowest, judged


def _tools_called(messages: Sequence[dict[str, Any]]) -> list[str]:
    names = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            names += [b.get("name", "?") for b in content if b.get("type") == "tool_use"]
        names += [c["function"]["name"] for c in message.get("tool_calls") or []]
    return names


def why(estimator: Estimator, run: TrafficRun, value: float) -> str:
    """Why a run is outside the target: where the provider counted most beyond the
    estimate (content the log does not hold), or how little the run has."""
    if run.source != "claude_code":
        return "see the table."
    per_message = estimate_messages(estimator, run)
    gaps = []
    for first, end, tokens in claude_differences(run):
        estimated = sum(per_message[first:end])
        gaps.append((tokens - estimated, first, end, tokens, estimated))
    gaps.sort(reverse=True)
    total = sum(g[3] for g in gaps)
    if value > TRAFFIC_WINDOW[1]:
        return (
            f"{len(gaps)} differences, {total:,} tokens in all: a run this small is mostly "
            "the per-text framing and rounding, which the profile sets for the typical run."
        )
    _, first, end, tokens, estimated = gaps[0]
    tools = ", ".join(_tools_called(run.run.messages[first:end])) or "no tool call"
    without = (value * total - estimated) / (total - tokens) if total > tokens else value
    return (
        f"the provider counted {tokens:,} tokens for messages {first}-{end - 1} "
        f"(estimated {estimated:,}; they call {tools}): content the log does not hold "
        "(Claude Code injects instructions, e.g. on entering plan mode, and hook output). "
        f"Without that difference the run is at {without:.3f}. Learning from usage "
        "absorbs it (next column)."
    )


def traffic_section(
    runs: Sequence[TrafficRun], backends: dict[str, Estimator], out: list[str]
) -> None:
    seed = estimator_for(family="seed")
    legacy = backends["claude-legacy"]
    for title, source, family, ratio_of, note in (
        (
            "Claude Code sessions: estimate of the messages added between consecutive "
            "requests / the provider's difference of totals",
            "claude_code",
            "claude",
            claude_file_ratio,
            "The logs leave out the system prompt and tools; the differences do not need them.",
        ),
        (
            "mini-swe-agent DeepSeek runs: estimate of each request / prompt_tokens",
            "deepseek",
            "deepseek",
            deepseek_file_ratio,
            "The requests are complete (system prompt and the bash tool included).",
        ),
    ):
        profile = estimator_for(family=family)
        chosen = [r for r in runs if r.source == source]
        out.append(f"\n### {title}\n")
        out.append(
            f"{note} Summed per run. Target without learning "
            f"{TRAFFIC_WINDOW[0]:.2f}-{TRAFFIC_WINDOW[1]:.2f}x; with learning (requests after "
            f"the first {WARMUP}) {LEARNED_WINDOW[0]:.2f}-{LEARNED_WINDOW[1]:.2f}x. "
            "**bold** = outside.\n"
        )
        extra = " | legacy tokenizer" if source == "claude_code" else " | DeepSeek tokenizer"
        out.append(
            f"| run | model | requests | provider tokens | {family} profile | seed{extra} | "
            "learned | lowest request, learned |"
        )
        out.append("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        plain, learned = [], []
        for run in chosen:
            estimated, counted = ratio_of(profile, run)
            if counted <= 0:
                continue
            seed_estimated, _ = ratio_of(seed, run)
            real_backend = legacy if source == "claude_code" else backends["deepseek"]
            real_estimated, _ = ratio_of(real_backend, run)
            with_learning, lowest, judged = learned_ratio(profile, run)
            plain.append((run.name, estimated / counted))
            if judged:
                learned.append((run.name, with_learning))
            out.append(
                f"| {run.name} | {run.model} | {len(run.points)} | {counted:,} | "
                f"{mark(estimated / counted, TRAFFIC_WINDOW)} | {seed_estimated / counted:.3f} | "
                f"{real_estimated / counted:.3f} | "
                + (
                    f"{mark(with_learning, LEARNED_WINDOW)} | {lowest:.3f} |"
                    if judged
                    else "- | - |"
                )
            )
        p_in = sum(inside(v, TRAFFIC_WINDOW) for _, v in plain)
        l_in = sum(inside(v, LEARNED_WINDOW) for _, v in learned)
        values = [v for _, v in plain]
        lvalues = [v for _, v in learned]
        out.append(
            f"\n{family} profile: {p_in}/{len(plain)} runs inside "
            f"{TRAFFIC_WINDOW[0]:.2f}-{TRAFFIC_WINDOW[1]:.2f} (range {min(values):.3f}-"
            f"{max(values):.3f}); with learning {l_in}/{len(learned)} inside "
            f"{LEARNED_WINDOW[0]:.2f}-{LEARNED_WINDOW[1]:.2f} (range {min(lvalues):.3f}-"
            f"{max(lvalues):.3f})."
        )
        misses = [f"{name} {v:.3f}" for name, v in plain if not inside(v, TRAFFIC_WINDOW)]
        if misses:
            out.append("Outside the target without learning: " + "; ".join(misses) + ".")
            for run in chosen:
                value = dict(plain).get(run.name)
                if value is not None and not inside(value, TRAFFIC_WINDOW):
                    out.append(f"- {run.name}: " + why(profile, run, value))
        lmisses = [f"{name} {v:.3f}" for name, v in learned if not inside(v, LEARNED_WINDOW)]
        if lmisses:
            out.append("Outside the target with learning: " + "; ".join(lmisses) + ".")


# ---------------------------------------------------------------------------------------
# 4. Throughput
# ---------------------------------------------------------------------------------------

SCRIPTS = {
    "en_stoker-dracula.txt": "ASCII prose (English)",
    "code_python_sweagent-agent.txt": "ASCII code (Python)",
    "ru_tolstoy-voyna-i-mir-vol1.txt": "Cyrillic (Russian)",
    "el_bible-vamvas.txt": "Greek",
    "ar_bible-van-dyck.txt": "Arabic",
    "hi_bible-hindi-ov.txt": "Devanagari (Hindi)",
    "zh_xiyouji.txt": "Han (Chinese)",
    "ja_soseki-wagahai-neko.txt": "Kana + Han (Japanese)",
    "ko_bible-gaeyeok-hangeul-part1.txt": "Hangul (Korean)",
    "emoji_unicode-emoji-test.txt": "emoji test file",
}


#: Scripts no real text holds, classed by the second pass over their pages (Thai,
#: Georgian, Vietnamese letters): generated words of their blocks (calibrate's generator,
#: a seed of this report's own).
GENERATED_SCRIPTS = {
    "Thai": "Thai (generated words)",
    "Georgian": "Georgian (generated words)",
    "Latin Extended Additional": "Vietnamese letters (generated words)",
}


def script_texts(data: Path) -> dict[str, str]:
    """300,000 characters of each script: the real texts, then the generated ones."""
    texts = {}
    for name, label in SCRIPTS.items():
        path = data / "texts" / name
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            texts[label] = (text * (1 + 300_000 // max(1, len(text))))[:300_000]
    for kind, label in GENERATED_SCRIPTS.items():
        texts[label] = generated_text(kind, 300_000, "throughput")
    return texts


def best(
    fn: Callable[[str], Any],
    text: str,
    repeat: int,
    before: Callable[[], Any] | None = None,
) -> float:
    """Best time of ``fn`` on fresh copies of ``text``: CPython keeps a string's UTF-8
    form once something asked for it (tiktoken does), which would make every later
    ``encode`` a copy; each timed call gets a string that never had it. ``before`` runs
    ahead of each timed call, untimed (:func:`evict_caches`, for a cold count)."""
    times = []
    for _ in range(repeat):
        if before is not None:
            before()
        fresh = (text + ".")[:-1]
        start = time.perf_counter()
        fn(fresh)
        times.append(time.perf_counter() - start)
    return min(times)


#: More memory than the processor's caches hold (32 MB of L3 on the machines here).
EVICT_BYTES = 96 << 20


def evict_caches(buffer: bytearray) -> None:
    """Reads every byte of ``buffer`` (bigger than the caches): what other work between
    two counts in an agent does to the processor's caches, so that the vocabularies'
    tables (megabytes) come from memory. Calls repeated on one text find them cached."""
    buffer.count(1)


def ascii_texts(data: Path) -> dict[str, str]:
    """Pure ASCII, 300,000 characters each: the real prose and code with their few
    non-ASCII characters left out, and generated text that is hard on an estimate
    (digits, punctuation runs, single letters between spaces, base64, long words)."""
    import base64
    import random

    rng = random.Random(10)
    texts: dict[str, str] = {}
    for name, label in (
        ("en_stoker-dracula.txt", "pure ASCII prose"),
        ("code_python_sweagent-agent.txt", "pure ASCII code"),
    ):
        path = data / "texts" / name
        if path.is_file():
            text = path.read_text(encoding="utf-8").encode("ascii", "ignore").decode()
            texts[label] = (text * (1 + 300_000 // max(1, len(text))))[:300_000]
    letters = "abcdefghijklmnopqrstuvwxyz"
    generated = {
        "digits": "".join(rng.choice("0123456789") for _ in range(300_000)),
        "digits between spaces": " ".join(rng.choice("0123456789") for _ in range(150_000)),
        "punctuation runs": "".join(
            rng.choice("!\"#$%&'()*+,-./:;<=>?@[]^_`{|}~") for _ in range(300_000)
        ),
        "single letters between spaces": " ".join(rng.choice(letters) for _ in range(150_000)),
        "base64": base64.b64encode(rng.randbytes(225_000)).decode(),
        "long words": "".join(rng.choice(letters) for _ in range(300_000)),
    }
    texts.update({name: text[:300_000] for name, text in generated.items()})
    return texts


def ascii_throughput_section(data: Path, backends: dict[str, Estimator], out: list[str]) -> None:
    """Pure ASCII (issue 10 asks every estimator for 100x tiktoken there): every default a
    user can get (``conservative`` without a model, each family's checked estimate with
    one) and the profile alone, timed against tiktoken in the same rounds, and the estimate
    against the real counts, so that speed is never bought with an under-count."""
    estimators = {"conservative": estimator_for(family="conservative")}
    estimators.update({family: estimator_for(family=family) for family in CALIBRATED_FAMILIES})
    estimators["o200k profile"] = estimator_for(family="o200k", vocabulary=False)
    encoder = getattr(backends["o200k"], "encoding", None)
    cl100k = getattr(backends["cl100k"], "encoding", None)
    out.append("\n### Throughput on pure ASCII, 300,000 characters (best of several)\n")
    out.append(
        "As above: every default against tiktoken's o200k_base (`encode_ordinary`), timed in "
        "the same rounds. *conservative* is the default without a model; a family's column "
        "is what a model of that family gets (the profile checked by the family's vocabulary "
        "where it is on the machine: "
        + ", ".join(f"{k} `{e.name}`" for k, e in estimators.items() if k != "o200k profile")
        + "); *o200k profile* is the profile alone. Each cell: milliseconds, and how much "
        "faster than tiktoken. The last three columns are estimates over real counts (at or "
        "above 1.00): conservative over cl100k's count, the o200k default and the o200k "
        "profile alone over o200k's.\n"
    )
    out.append(
        "| text | tiktoken ms | "
        + " | ".join(estimators)
        + " | conservative / cl100k count | o200k / o200k count | o200k profile / o200k count |"
    )
    out.append("|---|---:|" + "---:|" * len(estimators) + "---:|---:|---:|")
    texts = ascii_texts(data)
    cold: dict[str, dict[str, float]] = {}
    buffer = bytearray(EVICT_BYTES)
    evict = functools.partial(evict_caches, buffer)
    for label, text in texts.items():
        ours = {name: math.inf for name in estimators}
        theirs = math.inf
        for _ in range(3):
            for name, estimator in estimators.items():
                ours[name] = min(ours[name], best(estimator.estimate, text, 7))
            if encoder is not None:
                theirs = min(theirs, best(encoder.encode_ordinary, text, 2))
        if encoder is not None:
            cold[label] = {
                name: best(estimator.estimate, text, 5, evict)
                for name, estimator in estimators.items()
            }
            cold[label]["tiktoken"] = best(encoder.encode_ordinary, text, 3, evict)
        real = len(encoder.encode_ordinary(text)) if encoder is not None else math.nan
        real_cl100k = len(cl100k.encode_ordinary(text)) if cl100k is not None else math.nan
        cells = [f"{ours[name] * 1e3:.3f} ({theirs / ours[name]:.0f}x)" for name in estimators]
        out.append(
            f"| {label} | {theirs * 1e3:.1f} | "
            + " | ".join(cells)
            + f" | {estimators['conservative'].estimate(text) / real_cl100k:.2f} | "
            f"{estimators['o200k'].estimate(text) / real:.2f} | "
            f"{estimators['o200k profile'].estimate(text) / real:.2f} |"
        )
    if not cold:
        return
    out.append(
        f"\nThe same with cold caches: before each timed call (tiktoken's too) "
        f"{EVICT_BYTES >> 20} MB are read, more than the processor's caches hold, as other "
        "work between two counts in an agent does; the tables a count needs (megabytes for "
        "each vocabulary) then come from memory. Above, calls repeated on one text find "
        "them in the cache.\n"
    )
    out.append("| text | tiktoken ms | " + " | ".join(estimators) + " |")
    out.append("|---|---:|" + "---:|" * len(estimators))
    for label, times in cold.items():
        theirs = times["tiktoken"]
        cells = [f"{times[n] * 1e3:.3f} ({theirs / times[n]:.0f}x)" for n in estimators]
        out.append(f"| {label} | {theirs * 1e3:.1f} | " + " | ".join(cells) + " |")


def exact_counter_section(data: Path, backends: dict[str, Estimator], out: list[str]) -> None:
    """The vocabulary counter (windowfit._bpe) against tiktoken: the same counts, timed."""
    from windowfit.vocabulary import find_vocabulary

    out.append("\n### Exact counts: windowfit's vocabulary counter against tiktoken\n")
    out.append(
        "windowfit.vocabulary.VocabularyCounter (the C counter the checks use) and tiktoken's "
        "encode_ordinary on the same 300,000 characters, best of several, interleaved; "
        "*same* says whether the counts are equal.\n"
    )
    out.append("| script | family | windowfit ms | tiktoken ms | windowfit vs tiktoken | same |")
    out.append("|---|---|---:|---:|---:|---|")
    for label, text in script_texts(data).items():
        for family in ("o200k", "cl100k"):
            counter = find_vocabulary(family)
            encoding = getattr(backends[family], "encoding", None)
            if counter is None or encoding is None:
                continue
            ours = theirs = math.inf
            for _ in range(3):
                ours = min(ours, best(counter.estimate, text, 2))
                theirs = min(theirs, best(encoding.encode_ordinary, text, 2))
            same = counter.estimate(text) == len(encoding.encode_ordinary(text))
            out.append(
                f"| {label} | {family} | {ours * 1e3:.1f} | {theirs * 1e3:.1f} | "
                f"{compared(theirs, ours)} | {'yes' if same else '**no**'} |"
            )


#: The lengths the check's cost is timed at (it counts texts up to 4,096 characters
#: exactly, longer ones on 16 windows).
CHECK_LENGTHS = (100, 1_000, 4_000, 10_000, 100_000, 300_000)


def check_cost_section(data: Path, backends: dict[str, Estimator], out: list[str]) -> None:
    """What the vocabulary check costs by length: the o200k default against tiktoken and
    the profile alone, on a Latin, a Cyrillic and a Han text."""
    checked = estimator_for(family="o200k")
    alone = estimator_for(family="o200k", vocabulary=False)
    encoding = getattr(backends["o200k"], "encoding", None)
    if encoding is None:
        return
    texts = {p.name: p.read_text(encoding="utf-8") for p in text_files(data)}
    chosen = {
        "English": next((t for n, t in texts.items() if n.startswith("en_")), None),
        "Russian": next((t for n, t in texts.items() if n.startswith("ru_")), None),
        "Chinese": next((t for n, t in texts.items() if n.startswith("zh_")), None),
    }
    out.append("\n### What the vocabulary check costs, by length (o200k, best of several)\n")
    out.append(
        f"The o200k default ({checked.name}) counts a text of up to 4,096 characters exactly "
        "and a longer one on 16 windows of 256; tiktoken (encode_ordinary) and the profile "
        "alone beside it. Microseconds a call.\n"
    )
    out.append(
        "| text | characters | default µs | profile µs | tiktoken µs | default vs tiktoken |"
    )
    out.append("|---|---:|---:|---:|---:|---:|")
    for label, full in chosen.items():
        if full is None:
            continue
        for n in CHECK_LENGTHS:
            text = full[:n]
            if len(text) < n:
                continue
            ours = mine = theirs = math.inf
            repeats = 5 if n >= 100_000 else 20
            for _ in range(3):
                ours = min(ours, best(checked.estimate, text, repeats))
                mine = min(mine, best(alone.estimate, text, repeats))
                theirs = min(theirs, best(encoding.encode_ordinary, text, max(2, repeats // 4)))
            out.append(
                f"| {label} | {n:,} | {ours * 1e6:,.1f} | {mine * 1e6:,.1f} | "
                f"{theirs * 1e6:,.1f} | {compared(theirs, ours)} |"
            )


def throughput_section(data: Path, backends: dict[str, Estimator], out: list[str]) -> None:
    # the default without a model (checked by every family's vocabulary where they are
    # here), and the profile alone (every profile runs the same passes)
    default = estimator_for(family="conservative")
    profile = estimator_for(family="conservative", vocabulary=False)
    checked = estimator_for(family="o200k")
    encoders = {name: getattr(backends[name], "encoding", None) for name in ("o200k", "cl100k")}
    out.append("\n### Throughput: 300,000 characters of each script (best of several)\n")
    out.append(
        "Same run, interleaved rounds, best time of each, every call on a fresh string "
        "(no cached UTF-8 form). tiktoken is called directly (encode_ordinary, one "
        f"thread). *conservative* is the default without a model ({default.name}), "
        "*profile* the conservative profile alone, *o200k default* what a model of that "
        "family gets. Target: 10x faster than tiktoken on every script.\n"
    )
    out.append(
        "| script | conservative ms | profile ms | o200k default ms | seed ms | o200k ms | "
        "cl100k ms | conservative vs o200k | conservative vs cl100k | profile vs o200k | "
        "o200k default vs o200k |"
    )
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    estimators = {"conservative": default, "profile": profile, "checked": checked}
    slowest = dict.fromkeys(estimators, math.inf)
    for label, text in script_texts(data).items():
        ours = dict.fromkeys(estimators, math.inf)
        seed = math.inf
        theirs = {k: math.inf for k in encoders}
        for _ in range(3):  # interleave: the machine is shared and noisy
            for name, estimator in estimators.items():
                ours[name] = min(ours[name], best(estimator.estimate, text, 7))
            seed = min(seed, best(estimate_tokens, text, 7))
            for key, enc in encoders.items():
                if enc is not None:
                    theirs[key] = min(theirs[key], best(enc.encode_ordinary, text, 2))
        for name in estimators:
            ratios = [theirs[k] / ours[name] for k in encoders if theirs[k] < math.inf]
            slowest[name] = min([slowest[name], *ratios])
        out.append(
            f"| {label} | {ours['conservative'] * 1e3:.2f} | {ours['profile'] * 1e3:.2f} | "
            f"{ours['checked'] * 1e3:.2f} | {seed * 1e3:.2f} | {theirs['o200k'] * 1e3:.1f} | "
            f"{theirs['cl100k'] * 1e3:.1f} | {compared(theirs['o200k'], ours['conservative'])} | "
            f"{compared(theirs['cl100k'], ours['conservative'])} | "
            f"{compared(theirs['o200k'], ours['profile'])} | "
            f"{compared(theirs['o200k'], ours['checked'])} |"
        )
    names = {
        "conservative": f"conservative ({default.name})",
        "profile": "the conservative profile alone",
        "checked": f"o200k default ({checked.name})",
    }
    for name, value in slowest.items():
        out.append(
            f"\nSlowest, {names[name]}: {compared(value, 1.0)} than tiktoken "
            + ("(target met)." if value >= 10 else "(**below the 10x target** on this run).")
        )


# ---------------------------------------------------------------------------------------


def write_results(section: str) -> None:
    """Replace (or add) this report's section of RESULTS.md, keeping every other one."""
    existing = RESULTS.read_text(encoding="utf-8") if RESULTS.is_file() else "# Results\n"
    lines = existing.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == HEADING), None)
    if start is None:
        body = existing.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n"
    else:
        end = next(
            (i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines)
        )
        body = "\n".join([*lines[:start], *section.rstrip("\n").splitlines(), "", *lines[end:]])
        body = body.rstrip("\n") + "\n"
    RESULTS.write_text(body, encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", help="the shared data folder (default ../shared/data)")
    parser.add_argument("--write", action="store_true", help=f"update {RESULTS.name}")
    parser.add_argument(
        "--throughput", action="store_true", help="only the throughput tables (no --write)"
    )
    args = parser.parse_args()
    data = data_dir(args.data)
    if data is None:
        print("tokens_report: no data folder (../shared/data or WINDOWFIT_DATA)", file=sys.stderr)
        return 2
    print(f"python {platform.python_version()} on {platform.machine()}", file=sys.stderr)
    backends = load_backends()
    if args.throughput:
        out: list[str] = []
        throughput_section(data, backends, out)
        ascii_throughput_section(data, backends, out)
        check_cost_section(data, backends, out)
        exact_counter_section(data, backends, out)
        print("\n".join(out))
        return 0
    out = [
        HEADING,
        "",
        "Command: `.venv/bin/python benchmarks/tokens_report.py --write` (the table it "
        "checks is refitted by `.venv/bin/python benchmarks/calibrate.py`). Data: "
        "../shared/data (texts/, trajectories/claude_code, "
        "trajectories/mini_swe_agent_deepseek).",
        "",
    ]
    print("texts ...", file=sys.stderr, flush=True)
    texts_section(data, backends, out)
    print("traffic ...", file=sys.stderr, flush=True)
    traffic_section(traffic_runs(data), backends, out)
    print("throughput ...", file=sys.stderr, flush=True)
    throughput_section(data, backends, out)
    ascii_throughput_section(data, backends, out)
    check_cost_section(data, backends, out)
    exact_counter_section(data, backends, out)
    section = "\n".join(out) + "\n"
    print(section)
    if args.write:
        write_results(section)
        print(f"updated {RESULTS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Load and fault benchmark of ``windowfit proxy`` against ``windowfit serve-sim``.

Run:  .venv/bin/python benchmarks/proxy.py            (on a quiet machine; prints tables)
      .venv/bin/python benchmarks/proxy.py --quick    (small sizes: checks that it all runs)
      .venv/bin/python benchmarks/proxy.py --litellm  (also LiteLLM's proxy, pass-through)
      .venv/bin/python benchmarks/proxy.py --floor --skip memory --skip faults  (the floor)
      (``--skip paced``: without the concurrency-20 run against a paced upstream;
      ``--skip events``: without the CPU per relayed event)

Side by side in one run, every process on loopback:

* **latency**: the same kind of traffic (streamed Anthropic Messages requests of about
  200k tokens, an agent's conversation growing by a tool result per request) sent to
  serve-sim directly and through the proxy, at concurrency 1 and 20; time to the first
  byte and to the end of the stream, p50 and p99, and what the proxy added (the
  difference of the two paths' percentiles, the issue's definition; beside it the
  percentiles of the *paired* differences, each request against the direct one of the
  same round, worker and index). The paths run interleaved, in alternating rounds
  (:func:`run_interleaved`: 20 rounds of 10 requests per path at concurrency 1, 6
  rounds of 40 at 20, 4 of 60 paced), so that the machine's drift falls on every path alike instead
  of on whichever ran in a quiet minute. The model is one with a 1M window, so the
  proxy counts every request but forwards it as sent (stage 0) and serve-sim does the
  same work on both paths. Each path has its own conversations (serve-sim memoises
  counts; a shared text would favour whichever path came second). At concurrency 1 the
  CPU the process in between spent on each request is read around it
  (``/proc/PID/task/*/schedstat``): its distribution, and the first request of a
  conversation (counted from scratch) apart; and the proxy's collector passes per
  request (its ``/metrics``).
* **paced** (``--skip paced`` leaves it out): concurrency 20 once more, against a
  serve-sim paced like a provider (time to first token, output tokens per second:
  :data:`PACED_TTFT`, :data:`PACED_TOKENS_PER_SECOND`), so that the 20 streams do not
  all want the 2 cores at once; the saturated run above stays as it is.
* **events** (``--skip events`` leaves it out): the CPU one relayed event costs each
  process in between, from answers of two lengths at serve-sim's fastest pace (every
  event on its own, as a provider sends them): the slope of CPU per request over events
  per request (:data:`EVENT_RATE`, :data:`EVENT_WORDS`).
* **memory**: the proxy's RSS (``/proc/PID/status``) over 10,000 small requests, each of
  a distinct conversation (what its bounded per-conversation state must absorb).
* **faults**: serve-sim's ``/_sim/faults`` makes the upstream answer 429, 529, 500, 503,
  an error event or a dropped connection mid-stream, a dropped answer, a slow answer; and
  a client disconnects mid-request. For each: what a client sees directly and through
  the proxy, how long it took, and that nothing hung (every request has a deadline).
* **LiteLLM** (``--litellm``): the latency runs through LiteLLM's proxy in pass-through
  mode (its ``/anthropic`` route), the version pinned by pyproject's ``litellm`` extra
  (``make setup`` installs it in .venv); when it is missing or does not start, the output
  says so.
* **the floor** (``--floor``): the same latency runs through two minimal proxies of
  ``benchmarks/proxy_floor.py``, a pass-through on windowfit's own stack (uvicorn, ASGI,
  aiohttp; no parse, no fit) and a raw asyncio byte relay (no HTTP), so that what
  windowfit's proxy adds splits into what any Python proxy on this machine pays and what
  is windowfit's. Every path's CPU per request is printed for each process: the client,
  serve-sim and the process in between.

Prints figures and asserts nothing; exit status 0 unless a process could not start.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out"
MODEL = "claude-sonnet-4-6"  # 1M window in windowfit's model table: 200k requests fit as sent
WINDOW = 1_000_000
DEADLINE = 60.0  # seconds any one request may take before it counts as hung
HEADERS = {"x-api-key": "sk-bench", "anthropic-version": "2023-06-01"}
#: LiteLLM's proxy refuses to start without a strong master key; clients send it instead.
LITELLM_KEY = "sk-windowfit-bench-7c1e4f0a9b2d4e6f8a1c3b5d7e9f0a2b"

_WORDS = (  # noqa: SIM905
    "the of and to in is that for it as was with be by on not he this are or his from at "
    "which but have an they you were her she there been one all we their has would when "
    "file line error return value function class import self result test path data config "
    "request response token window context budget stage cache read write tool call output"
).split()


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def _windowfit() -> str:
    found = Path(sys.executable).parent / "windowfit"
    return str(found) if found.exists() else shutil.which("windowfit") or "windowfit"


# --------------------------------------------------------------------------- processes


@dataclass
class Service:
    name: str
    url: str
    proc: subprocess.Popen[str]

    def rss_mb(self) -> float:
        return rss_mb(self.proc.pid)


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` in MB (0 where /proc is not there)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) ``pid`` has used so far (0 where /proc is not there)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def upstream_connections(pid: int, port: int) -> set[str]:
    """The established TCP connections (socket inodes) ``pid`` holds to local ``port``."""
    inodes = set()
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        return set()
    found: set[str] = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            remote_port = int(cols[2].rsplit(":", 1)[1], 16)
            if cols[3] == "01" and remote_port == port and cols[9] in inodes:
                found.add(cols[9])
    return found


def start(name: str, argv: list[str], env: dict[str, str] | None = None) -> Service:
    """Start ``argv`` and wait for the ``http://HOST:PORT`` line it prints."""
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 120
    seen: list[str] = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line.rstrip())
        found = re.search(r"(http://(?:127\.0\.0\.1|localhost|0\.0\.0\.0):\d+)", line)
        if found:
            url = found.group(1).replace("0.0.0.0", "127.0.0.1")
            _drain(proc)
            return Service(name, url, proc)
    proc.kill()
    proc.wait()
    tail = "\n".join(seen[-15:])
    raise RuntimeError(f"{name} did not start:\n{tail}")


def _drain(proc: subprocess.Popen[str]) -> None:
    """Keep reading a child's output so that it never blocks on a full pipe."""
    import threading

    def read() -> None:
        assert proc.stdout is not None
        for _ in proc.stdout:
            pass

    threading.Thread(target=read, daemon=True).start()


def stop(service: Service | None) -> None:
    if service is None or service.proc.poll() is not None:
        return
    service.proc.terminate()
    try:
        service.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        service.proc.kill()
        service.proc.wait()


#: The paced upstream (``--skip paced`` leaves it out): a provider's time to first token
#: and output rate, Artificial Analysis's medians for Claude Sonnet through Anthropic's
#: API (artificialanalysis.ai, "Claude 3.5 Sonnet: API Provider Benchmarking": 0.80 s,
#: 64 tokens/s; Sonnet 4.5 is listed at 63 tokens/s, 1.8 s), and an answer of about 100
#: tokens (an agent's tool call and a sentence) instead of the scripted one-liner.
PACED_TTFT = 0.8
PACED_TOKENS_PER_SECOND = 63.0
PACED_REPLY = "Done: I read {results} tool results. " + " ".join(
    ["The files agree with the plan and the tests pass, so the next step is the patch."] * 5
)


@contextmanager
def services(
    args: argparse.Namespace, paced: bool = False
) -> Iterator[tuple[Service, Service | None]]:
    pacing: tuple[str, ...] = ()
    if paced:
        rate = str(PACED_TOKENS_PER_SECOND)
        pacing = ("--latency", str(PACED_TTFT), "--stream-tokens-per-second", rate)
        pacing += ("--reply", PACED_REPLY)
    sim = start(
        "serve-sim",
        [
            *(_windowfit(), "serve-sim", "--port", "0", "--context-window", str(WINDOW)),
            *("--tool-rounds", "0", "--cache-max-bytes", str(256 * 1024 * 1024)),
            *pacing,
        ],
    )
    proxy: Service | None = None
    try:
        try:
            proxy = start(
                "windowfit proxy",
                [
                    *(_windowfit(), "proxy", "--port", "0", "--anthropic-upstream", sim.url),
                    *("--openai-upstream", sim.url),
                    *(("--fitter-max-mb", str(args.fitter_max_mb)) if args.fitter_max_mb else ()),
                ],
            )
        except RuntimeError as exc:
            print(f"windowfit proxy could not start, direct figures only: {exc}\n")
        yield sim, proxy
    finally:
        stop(proxy)
        stop(sim)


# --------------------------------------------------------------------------- traffic


class Conversation:
    """An agent's conversation: a task, then tool calls and results; each request adds one
    result. ``tokens`` is about how large the first request is."""

    def __init__(self, seed: int, tokens: int, step_tokens: int) -> None:
        self.rng = random.Random(seed)
        self.step_words = max(1, step_tokens)  # these words are a token each in o200k
        task = f"Task {seed}: read the files and report. " + _text(self.rng, 40)
        self.messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
        self.calls = 0
        rounds = max(1, tokens // 5000)
        for _ in range(rounds):
            self._add_round(max(1, tokens // rounds))

    def _add_round(self, words: int) -> None:
        self.calls += 1
        call_id = f"toolu_{self.calls:06d}"
        self.messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": call_id, "name": "Bash", "input": {"cmd": "cat f"}}
                ],
            }
        )
        self.messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": call_id,
                        "content": _text(self.rng, words),
                    }
                ],
            }
        )

    def next_body(self, stream: bool) -> bytes:
        body = {"model": MODEL, "max_tokens": 1024, "stream": stream, "messages": self.messages}
        data = json.dumps(body).encode()
        self._add_round(self.step_words)
        return data


@dataclass
class Timing:
    first_byte: float
    total: float
    status: int
    stage: str | None  # the proxy's x-windowfit-stage header, where there is one
    #: Where the request stood in an interleaved run: (round, worker, its k-th request
    #: in the round); the request of the same place on another path is its pair.
    place: tuple[int, int, int] = (0, 0, 0)
    #: CPU milliseconds the process in between spent on this request (concurrency 1
    #: only, where nothing else ran in it meanwhile; ``None`` elsewhere).
    middle_cpu_ms: float | None = None


async def timed_stream(
    client: httpx.AsyncClient, url: str, body: bytes, headers: dict[str, str] = HEADERS
) -> Timing:
    started = time.perf_counter()
    first = 0.0
    async with client.stream("POST", url, content=body, headers=headers) as response:
        async for _ in response.aiter_raw():
            if not first:
                first = time.perf_counter() - started
    total = time.perf_counter() - started
    stage = response.headers.get("x-windowfit-stage")
    return Timing(first or total, total, response.status_code, stage)


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile (0-100) of ``values``, by linear interpolation."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * q / 100
    low = int(k)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (k - low)


@dataclass
class PathResult:
    name: str
    timings: list[Timing] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def q(self, what: str, q: float) -> float:
        return pct([getattr(t, what) for t in self.timings], q)


@dataclass
class Target:
    """One way to serve-sim: directly, or through a process in between (``middle``)."""

    label: str
    url: str  # the Messages route's URL
    middle: Service | None = None
    headers: dict[str, str] = field(default_factory=lambda: dict(HEADERS))


def cpu_ms_exact(pid: int) -> float:
    """CPU milliseconds all of ``pid``'s threads have run so far, from
    ``/proc/PID/task/*/schedstat`` (nanoseconds, where ``/proc/PID/stat`` counts in
    ticks of 10 ms: too coarse for one request); 0 where /proc is not there."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    for task in tasks:
        try:
            total += int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total / 1e6


@dataclass
class Lane:
    """One path of an interleaved run: its client, its conversations (one per worker,
    kept across rounds, so that serve-sim's memo and the proxy's kept scans see each
    path's conversations grow as an agent's would) and what was measured on it."""

    target: Target
    client: httpx.AsyncClient
    conversations: list[Conversation]
    result: PathResult
    cpu: list[float]  # CPU ms of [client, serve-sim, middle] over this lane's slices


#: How much a conversation grows per request, and at most over a run: an agent's tool
#: result of 800 tokens per request, but no more than the 48k tokens the 60 requests of
#: the earlier concurrency-1 runs grew by, so that 200 requests of one conversation stay
#: "~200k-token requests" (201k to 249k) instead of reaching 360k.
STEP_TOKENS = 800
GROWTH_TOKENS = 48_000


def step_tokens(per_conversation: int) -> int:
    """Tokens added per request to a conversation that serves ``per_conversation``."""
    return max(1, min(STEP_TOKENS, GROWTH_TOKENS // max(1, per_conversation)))


def rounds_for(concurrency: int, requests: int, staggered: bool = False) -> tuple[int, int]:
    """How an interleaved run of ``requests`` per path splits: ``(rounds, per_worker)``,
    each round being ``per_worker`` requests of each of the ``concurrency`` workers on
    one path, then the same on the next. About 10 requests per round at concurrency 1
    and 2 per worker at 20 (3 when the workers' starts are ``staggered``, which every
    round pays again): short enough that the machine's drift is shared by the paths,
    long enough that a path's connections stay warm."""
    per_worker = 10 if concurrency == 1 else 3 if staggered else 2
    total_per_worker = max(1, requests // concurrency)
    per_worker = min(per_worker, total_per_worker)
    return max(1, total_per_worker // per_worker), per_worker


async def run_interleaved(
    targets: list[Target],
    concurrency: int,
    requests: int,
    tokens: int,
    seed: int,
    pids: tuple[int, int],
    stagger: float = 0.0,
) -> list[Lane]:
    """The same traffic on every path in alternating rounds (:func:`rounds_for`): round
    ``r`` runs its slice on each path in turn, starting with path ``r mod n`` so that no
    path always follows the same one. Each path's samples pool over the rounds, and each
    request keeps its place, so that a path's request can be paired with the direct
    path's of the same round, worker and index. ``pids``: the client (this process) and
    serve-sim, whose CPU is counted per path. ``stagger``: within a round, worker ``w``
    starts ``w * stagger / concurrency`` seconds late (requests of about ``stagger``
    seconds each then arrive spread out, not in step)."""
    rounds, per_worker = rounds_for(concurrency, requests, stagger > 0)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    lanes: list[Lane] = []
    try:
        for k, target in enumerate(targets):
            client = httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(DEADLINE))
            convs = [
                Conversation((seed * 100 + k) * 1000 + w, tokens, step_tokens(rounds * per_worker))
                for w in range(concurrency)
            ]
            lanes.append(Lane(target, client, convs, PathResult(target.label), [0.0] * 3))
        for lane in lanes:  # one warm-up request per worker (connections, tokenizers)
            warm = Conversation(seed * 1000 + 999, 2000, 100)
            await asyncio.gather(
                *(
                    timed_stream(
                        lane.client, lane.target.url, warm.next_body(True), lane.target.headers
                    )
                    for _ in range(concurrency)
                )
            )
        for r in range(rounds):
            for j in range(len(lanes)):
                await _slice(lanes[(r + j) % len(lanes)], r, per_worker, pids, stagger)
    finally:
        for lane in lanes:
            await lane.client.aclose()
    return lanes


async def _slice(
    lane: Lane, r: int, per_worker: int, pids: tuple[int, int], stagger: float
) -> None:
    """One round's requests on one path, every worker's ``per_worker`` in turn."""
    target, result = lane.target, lane.result
    middle = target.middle.proc.pid if target.middle is not None else None
    concurrency = len(lane.conversations)
    every = (*pids, middle) if middle is not None else pids
    before = [cpu_ms_exact(pid) for pid in every]

    async def worker(w: int) -> None:
        conv = lane.conversations[w]
        await asyncio.sleep(w * stagger / concurrency)
        for i in range(per_worker):
            body = conv.next_body(stream=True)
            own = cpu_ms_exact(middle) if middle is not None and concurrency == 1 else None
            try:
                timing = await asyncio.wait_for(
                    timed_stream(lane.client, target.url, body, target.headers), DEADLINE
                )
            except Exception as exc:  # a failure is a figure too
                result.failures.append(f"{type(exc).__name__}: {exc}"[:120])
                continue
            if own is not None and middle is not None:
                timing.middle_cpu_ms = cpu_ms_exact(middle) - own
            timing.place = (r, w, i)
            if timing.status != 200:
                result.failures.append(f"HTTP {timing.status}")
            result.timings.append(timing)

    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    for n, (pid, was) in enumerate(zip(every, before, strict=True)):
        lane.cpu[n] += cpu_ms_exact(pid) - was


def paired(result: PathResult, direct: PathResult, what: str = "total") -> list[float]:
    """Per request, ``result``'s time minus the direct path's request of the same place
    (round, worker, index); places missing on either side (a failure) are left out."""
    mine = {t.place: getattr(t, what) for t in result.timings}
    theirs = {t.place: getattr(t, what) for t in direct.timings}
    return [mine[p] - theirs[p] for p in sorted(mine) if p in theirs]


def latency_table(rows: list[tuple[str, int, PathResult, PathResult | None]]) -> list[str]:
    """The latency table. "added" is the issue's definition, the difference of the two
    paths' percentiles; "paired" the percentiles of the per-request differences against
    the direct request of the same place (:func:`paired`)."""
    ms = 1000.0
    out = [
        "| path | concurrency | requests | first byte p50 / p99 (ms) | total p50 / p99 (ms) "
        "| added p50 / p99 (ms) | paired added p50 / p99 (ms) | first byte added p50 (ms) "
        "| stages | failures |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, conc, result, direct in rows:
        fb = f"{result.q('first_byte', 50) * ms:.1f} / {result.q('first_byte', 99) * ms:.1f}"
        tot = f"{result.q('total', 50) * ms:.1f} / {result.q('total', 99) * ms:.1f}"
        if direct is None:
            added = pair = fb_added = "—"
        else:
            a50 = (result.q("total", 50) - direct.q("total", 50)) * ms
            a99 = (result.q("total", 99) - direct.q("total", 99)) * ms
            added = f"{a50:+.1f} / {a99:+.1f}"
            diffs = paired(result, direct)
            pair = f"{pct(diffs, 50) * ms:+.1f} / {pct(diffs, 99) * ms:+.1f}" if diffs else "—"
            fb_added = f"{(result.q('first_byte', 50) - direct.q('first_byte', 50)) * ms:+.1f}"
        stages = Counter(t.stage for t in result.timings if t.stage is not None)
        staged = " ".join(f"{k}×{n}" for k, n in sorted(stages.items())) or "—"
        fails = str(len(result.failures))
        if result.failures:
            fails += f" ({result.failures[0]})"
        out.append(
            f"| {label} | {conc} | {len(result.timings)} | {fb} | {tot} | {added} | {pair} "
            f"| {fb_added} | {staged} | {fails} |"
        )
    return out


def middle_cpu_table(rows: list[PathResult]) -> list[str]:
    """Concurrency 1: the CPU the process in between spent on each request (nothing
    else ran in it meanwhile), as a distribution, with the first request of the
    conversation (counted from scratch) apart from the rest (a kept conversation)."""
    out = [
        "| path | p50 | p99 | max | first request of the conversation | the others' p99 |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for result in rows:
        spent = [t.middle_cpu_ms for t in result.timings if t.middle_cpu_ms is not None]
        if not spent:
            continue
        first = [t.middle_cpu_ms for t in result.timings if t.place == (0, 0, 0)]
        rest = [
            t.middle_cpu_ms
            for t in result.timings
            if t.middle_cpu_ms is not None and t.place != (0, 0, 0)
        ]
        head = f"{first[0]:.2f}" if first and first[0] is not None else "—"
        out.append(
            f"| {result.name} | {pct(spent, 50):.2f} | {pct(spent, 99):.2f} | {max(spent):.2f} "
            f"| {head} | {pct(rest, 99):.2f} |"
        )
    return out


# --------------------------------------------------------------------------- memory


async def memory_run(sim: Service, proxy: Service, requests: int, concurrency: int) -> list[str]:
    samples: list[tuple[int, float]] = [(0, proxy.rss_mb())]
    done = 0
    failures: Counter[str] = Counter()
    every = max(1, requests // 10)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(DEADLINE)) as client:
        queue: asyncio.Queue[int] = asyncio.Queue()
        for i in range(requests):
            queue.put_nowait(i)

        async def worker() -> None:
            nonlocal done
            while True:
                try:
                    i = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                conv = Conversation(10_000_000 + i, 1500, 100)
                try:
                    r = await client.post(
                        proxy.url + "/v1/messages",
                        content=conv.next_body(stream=i % 2 == 0),
                        headers=HEADERS,
                    )
                    if r.status_code != 200:
                        failures[f"HTTP {r.status_code}"] += 1
                except httpx.HTTPError as exc:
                    failures[type(exc).__name__] += 1
                done += 1
                if done % every == 0:
                    samples.append((done, proxy.rss_mb()))

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    start_mb = samples[0][1]
    warm_mb = samples[1][1] if len(samples) > 1 else start_mb
    peak = max(mb for _, mb in samples)
    end = samples[-1][1]
    line = ", ".join(f"{n}: {mb:.0f}" for n, mb in samples)
    failed = ", ".join(f"{n}× {why}" for why, n in failures.most_common()) or "none"
    return [
        f"proxy RSS over {requests:,} requests of distinct conversations "
        f"(concurrency {concurrency}, half streamed), MB after N requests: {line}",
        f"start {start_mb:.1f} MB, after the first {every:,} {warm_mb:.1f} MB, peak {peak:.1f} MB, "
        f"end {end:.1f} MB: growth {end - start_mb:+.1f} MB from start, "
        f"{end - warm_mb:+.1f} MB after warm-up (goal: under 50 MB); failed: {failed}",
    ]


# --------------------------------------------------------------------------- faults


@dataclass(frozen=True)
class Scenario:
    name: str
    faults: tuple[dict[str, Any], ...]
    stream: bool
    disconnect_after: float | None = None  # the client hangs up after this many seconds


SCENARIOS = (
    Scenario("429 rate limit (retry_after=1)", ({"status": 429, "retry_after": 1},), False),
    Scenario("529 overloaded, streamed", ({"status": 529},), True),
    Scenario("500 api error", ({"status": 500},), False),
    Scenario("503, streamed", ({"status": 503},), True),
    Scenario("error event after 3 events", ({"status": 529, "after_events": 3},), True),
    Scenario("stream dropped after 3 events", ({"drop": True, "after_events": 3},), True),
    Scenario("answer dropped before its body", ({"drop": True},), False),
    Scenario("slow upstream (2 s)", ({"delay": 2.0},), True),
    Scenario("client disconnects (upstream 5 s)", ({"delay": 5.0},), True, disconnect_after=0.5),
)


async def _set_faults(sim: Service, faults: tuple[dict[str, Any], ...]) -> None:
    async with httpx.AsyncClient(timeout=10) as c:
        r = await c.post(sim.url + "/_sim/faults", json={"faults": list(faults), "replace": True})
        r.raise_for_status()


def _describe_error(status: int, body: bytes, headers: httpx.Headers) -> str:
    try:
        error = json.loads(body).get("error", {})
        what = f"{error.get('type')}: {str(error.get('message'))[:40]}"
    except (ValueError, AttributeError):
        what = f"not JSON: {body[:30].decode('utf-8', 'replace')!r}"
    retry = headers.get("retry-after")
    return f"{status} {what}" + (f" (retry-after {retry})" if retry else "")


async def _one_fault(url: str, scenario: Scenario, seed: int) -> str:
    body = Conversation(seed, 3000, 100).next_body(scenario.stream)
    async with (
        httpx.AsyncClient(timeout=httpx.Timeout(DEADLINE)) as client,
        client.stream("POST", url + "/v1/messages", content=body, headers=HEADERS) as r,
    ):
        if scenario.disconnect_after is not None:
            return f"{r.status_code}; the client hung up"
        if r.status_code != 200:
            return _describe_error(r.status_code, await r.aread(), r.headers)
        events: list[str] = []
        buffer = b""
        try:
            async for chunk in r.aiter_raw():
                buffer += chunk
        except httpx.HTTPError as exc:
            names = re.findall(rb"^event: (\S+)", buffer, re.M)
            return f"200, {len(names)} events, then {type(exc).__name__} (connection cut)"
        names = re.findall(rb"^event: (\S+)", buffer, re.M)
        events = [n.decode() for n in names]
        if not scenario.stream:
            try:
                kind = json.loads(buffer).get("type")
            except ValueError:
                kind = "unreadable"
            return f"200 {kind}"
        return f"200, {len(events)} events, last {events[-1] if events else 'none'}"


async def fault_run(sim: Service, proxy: Service | None) -> list[str]:
    out = [
        "| fault | directly: the client sees | s | through the proxy: the client sees | s |",
        "|---|---|---|---|---|",
    ]
    sim_port = int(sim.url.rsplit(":", 1)[1])
    for k, scenario in enumerate(SCENARIOS):
        cells = []
        for target in (sim, proxy):
            if target is None or (scenario.disconnect_after is not None and target is sim):
                cells += ["—", "—"]
                continue
            await _set_faults(sim, scenario.faults)
            started = time.perf_counter()
            try:
                if scenario.disconnect_after is not None:
                    seen = await _disconnect(target, scenario, sim_port, k)
                else:
                    seen = await asyncio.wait_for(_one_fault(target.url, scenario, k), DEADLINE)
            except asyncio.TimeoutError:
                seen = f"HUNG (no answer in {DEADLINE:.0f} s)"
            except httpx.HTTPError as exc:
                seen = f"{type(exc).__name__}: {str(exc)[:50]}"
            cells += [seen.replace("|", "/"), f"{time.perf_counter() - started:.2f}"]
        out.append(f"| {scenario.name} | " + " | ".join(cells) + " |")
    await _set_faults(sim, ())
    if proxy is not None:
        after = await _after_faults(proxy)
        out.append("")
        out.append(f"after the faults, a normal request through the proxy: {after}")
    return out


async def _disconnect(proxy: Service, scenario: Scenario, sim_port: int, seed: int) -> str:
    """Start a request the upstream answers slowly (5 s), hang up, and see whether the
    proxy closes an upstream connection (the one of the cancelled request: pooled idle
    ones stay open) well before the upstream would have answered."""
    pid = proxy.proc.pid
    body = Conversation(seed, 3000, 100).next_body(True)
    async with httpx.AsyncClient(timeout=httpx.Timeout(DEADLINE)) as client:

        async def hang_up() -> None:
            async with client.stream(
                "POST", proxy.url + "/v1/messages", content=body, headers=HEADERS
            ):
                pass

        task = asyncio.create_task(hang_up())
        await asyncio.sleep(scenario.disconnect_after or 0.5)
        during = upstream_connections(pid, sim_port)
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task
    hung_up = time.perf_counter()
    window = 3.0  # the upstream answers 4.5 s after the hang-up: a close before is a cancel
    while time.perf_counter() - hung_up < window:
        if during - upstream_connections(pid, sim_port):
            closed = time.perf_counter() - hung_up
            return (
                f"hung up after {scenario.disconnect_after} s; the proxy closed its upstream "
                f"connection {closed:.2f} s later (request cancelled)"
            )
        await asyncio.sleep(0.02)
    if not during:
        return "no upstream connection seen (/proc not readable?)"
    return f"hung up; the proxy's upstream connection still open {window:.0f} s later"


async def _after_faults(proxy: Service) -> str:
    try:
        seen = await asyncio.wait_for(
            _one_fault(proxy.url, Scenario("normal", (), True), 4242), DEADLINE
        )
    except (asyncio.TimeoutError, httpx.HTTPError) as exc:
        return f"FAILED ({type(exc).__name__})"
    return seen


# --------------------------------------------------------------------------- LiteLLM


def litellm_service(sim: Service) -> tuple[Service | None, str]:
    """LiteLLM's proxy, forwarding its /anthropic pass-through route to serve-sim."""
    exe = Path(sys.executable).parent / "litellm"
    if not exe.exists():  # the pinned `litellm` extra of pyproject.toml (make setup installs it)
        return None, "LiteLLM's proxy is not installed: pip install -e '.[litellm]'"
    config = OUT / "litellm-config.yaml"
    config.write_text("model_list: []\ngeneral_settings: {}\n")
    try:
        service = start(
            "litellm",
            [str(exe), "--config", str(config), "--host", "127.0.0.1", "--port", str(_free_port())],
            env={
                "ANTHROPIC_API_BASE": sim.url,
                "ANTHROPIC_API_KEY": "sk-bench",
                "LITELLM_MASTER_KEY": LITELLM_KEY,
                "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no download at start
                "LITELLM_TELEMETRY": "False",
            },
        )
    except RuntimeError as exc:
        return None, f"LiteLLM's proxy did not start: {str(exc)[-300:]}"
    return service, "LiteLLM's proxy: its /anthropic pass-through route"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --------------------------------------------------------------------------- main


async def request_tokens(sim: Service, tokens: int) -> int:
    """serve-sim's own count (its real tokenizer) of a first request of ``tokens``."""
    body = Conversation(7, tokens, 800).next_body(stream=False)
    async with httpx.AsyncClient(timeout=DEADLINE) as c:
        r = await c.post(sim.url + "/v1/messages", content=body, headers=HEADERS)
    usage = r.json().get("usage", {}) if r.status_code == 200 else {}
    return int(usage.get("input_tokens", 0)) + int(usage.get("cache_read_input_tokens", 0))


def floor_services(sim: Service, kinds: tuple[str, ...] = ()) -> list[Service]:
    """The two minimal proxies of ``benchmarks/proxy_floor.py`` in front of serve-sim
    (``kinds``: only these of its variants)."""
    script = str(ROOT / "benchmarks" / "proxy_floor.py")
    found = []
    variants = {  # the same stack as windowfit proxy's; as it was before (h11, glibc's)
        "asgi": ("asgi",),
        "asgi-h11": ("asgi", "--http", "h11", "--keep-freed-mb", "0"),
        "relay": ("relay",),
    }
    for kind, how in variants.items():
        if kinds and kind not in kinds:
            continue
        argv = [sys.executable, script, *how, "--upstream", sim.url, "--port", "0"]
        try:
            found.append(start(f"floor {kind}", argv))
        except RuntimeError as exc:
            print(f"the {kind} floor could not start: {exc}\n")
    return found


def _paths(
    sim: Service, proxy: Service | None, litellm: Service | None, floors: list[Service]
) -> list[Target]:
    paths = [Target("serve-sim directly", sim.url + "/v1/messages")]
    if proxy is not None:
        paths.append(Target("through windowfit proxy", proxy.url + "/v1/messages", proxy))
    labels = {
        "floor asgi": "through a minimal ASGI pass-through (uvicorn + aiohttp)",
        "floor asgi-h11": "the same pass-through on h11, freed memory returned",
        "floor relay": "through a raw asyncio byte relay",
    }
    for floor in floors:
        paths.append(Target(labels[floor.name], floor.url + "/v1/messages", floor))
    if litellm is not None:
        paths.append(
            Target(
                "through LiteLLM pass-through",
                litellm.url + "/anthropic/v1/messages",
                litellm,
                {**HEADERS, "x-api-key": LITELLM_KEY},
            )
        )
    return paths


async def _latency(
    args: argparse.Namespace,
    sim: Service,
    proxy: Service | None,
    litellm: Service | None,
    floors: list[Service] = [],  # noqa: B006 - read only
    concurrencies: tuple[int, ...] = (1, 20),
    stagger: float = 0.0,
) -> list[str]:
    rows: list[tuple[str, int, PathResult, PathResult | None]] = []
    cpu = [
        "CPU per request (ms; /proc/PID/task/*/schedstat over each path's slices, the "
        "warm-ups left out; the client is this benchmark process, which also builds the "
        "bodies):",
        "",
        "| path | concurrency | client | serve-sim | the process in between | all |",
        "|---|---|---:|---:|---:|---:|",
    ]
    own: list[str] = []
    layout: list[str] = []
    passes: list[str] = []
    pids = (os.getpid(), sim.proc.pid)
    targets = _paths(sim, proxy, litellm, floors)
    for conc in concurrencies:
        n = args.requests if conc == 1 else args.requests_20
        rounds, per_worker = rounds_for(conc, n, stagger > 0)
        plural = "s" if rounds != 1 else ""
        layout.append(f"concurrency {conc}: {rounds} round{plural} of {per_worker * conc} requests")
        gc_before = await gc_passes(proxy) if proxy is not None else None
        lanes = await run_interleaved(targets, conc, n, args.tokens, conc, pids, stagger)
        gc_after = await gc_passes(proxy) if proxy is not None else None
        direct = lanes[0].result
        for lane in lanes:
            result = lane.result
            rows.append((result.name, conc, result, None if lane is lanes[0] else direct))
            done = max(1, len(result.timings) + len(result.failures))
            used = [c / done for c in lane.cpu]
            if lane.target.middle is None:
                used = used[:2]
            cells = [f"{u:.1f}" for u in used] + ([] if lane.target.middle else ["—"])
            cpu.append(f"| {result.name} | {conc} | " + " | ".join(cells) + f" | {sum(used):.1f} |")
        if conc == 1:
            own = middle_cpu_table([lane.result for lane in lanes])
        proxied = next((lane for lane in lanes if proxy and lane.target.middle is proxy), None)
        if gc_before is not None and gc_after is not None and proxied is not None:
            done = max(1, len(proxied.result.timings))
            per = " / ".join(
                f"{(b - a) / done:.3f}" for a, b in zip(gc_before, gc_after, strict=True)
            )
            passes.append(
                f"windowfit proxy, concurrency {conc}: the collector's passes per request, "
                f"generation 0 / 1 / 2 (python_gc_collections_total): {per}"
            )
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    middles = [t.middle for t in targets if t.middle is not None]
    rss = ", ".join(f"{m.name} {m.rss_mb():.0f}" for m in middles)
    out = [
        *latency_table(rows),
        "",
        "Paths interleaved, per path "
        + "; ".join(layout)
        + " (a round runs each path's slice in turn, its first path rotating; the paired "
        "figures compare each request with the direct one of the same round, worker and "
        "index)",
        "",
        f"load average at the end: {load}",
        f"RSS after the runs (MB): {rss}",
        "",
        *cpu,
    ]
    if own:
        out += [
            "",
            "CPU of the process in between per request at concurrency 1 (ms; "
            "/proc/PID/task/*/schedstat around each request):",
            "",
            *own,
        ]
    if passes:
        out += ["", *passes]
    return out


async def gc_passes(proxy: Service) -> list[int] | None:
    """The proxy process's collector passes so far, by generation (its ``/metrics``)."""
    try:
        async with httpx.AsyncClient(timeout=10) as c:
            r = await c.get(proxy.url + "/metrics")
    except httpx.HTTPError:
        return None
    found = dict(
        re.findall(r'^python_gc_collections_total\{generation="(\d)"\} (\d+)', r.text, re.M)
    )
    if len(found) != 3:
        return None
    return [int(found[str(g)]) for g in range(3)]


def _paced(args: argparse.Namespace) -> list[str]:
    """Concurrency 20 again, with an upstream paced as a provider answers (the services
    started afresh in front of a paced serve-sim, the 20 workers' starts spread over one
    request's time): the run above loads the 2 cores with 20 streams at once; here they
    arrive apart as an agent's requests do, so what is measured is the process in
    between rather than the queue for the CPU."""
    out = [
        f"## Concurrency 20 with a paced upstream (serve-sim --latency {PACED_TTFT} "
        f"--stream-tokens-per-second {PACED_TOKENS_PER_SECOND:g}, an answer of about 100 "
        "tokens)\n"
    ]
    with services(args, paced=True) as (sim, proxy):
        floors = floor_services(sim, ("asgi", "relay")) if args.floor else []
        try:
            # workers start spread over about one request's time (the answer's ~100
            # tokens at the paced rate after the first token), so requests arrive apart
            stagger = PACED_TTFT + 100 / PACED_TOKENS_PER_SECOND
            out += asyncio.run(_latency(args, sim, proxy, None, floors, (20,), stagger))
        finally:
            for floor in floors:
                stop(floor)
    return out


#: The per-event run (``--skip events`` leaves it out): serve-sim streams at its fastest
#: pace (an event every ``stream_chunk_chars / 4 / rate`` seconds, 5 ms), so that every
#: event reaches the process in between on its own, as a provider's do; two answer
#: lengths, and the slope of CPU per request over events per request is the cost of one.
EVENT_RATE = 600.0
EVENT_WORDS = (10, 200)


async def _events_on(target: Target, requests: int) -> tuple[float, float]:
    """Events and CPU milliseconds of the process in between, per request, at
    concurrency 1 (small bodies: the answer's events are most of the work)."""
    assert target.middle is not None
    pid = target.middle.proc.pid
    events = 0
    spent = 0.0
    async with httpx.AsyncClient(timeout=httpx.Timeout(DEADLINE)) as client:
        conv = Conversation(77, 2000, 50)
        for _ in range(2):  # warm-up
            await timed_stream(client, target.url, conv.next_body(True), target.headers)
        for _ in range(requests):
            body = conv.next_body(True)
            before = cpu_ms_exact(pid)
            async with client.stream("POST", target.url, content=body, headers=target.headers) as r:
                async for chunk in r.aiter_raw():
                    events += chunk.count(b"\n\n")
            await asyncio.sleep(0.005)  # the proxy's work after the last byte (learning)
            spent += cpu_ms_exact(pid) - before
    return events / requests, spent / requests


def _events(args: argparse.Namespace) -> list[str]:
    """CPU per relayed event of each process in between (module docstring)."""
    requests = 2 if args.quick else 15
    lengths = (EVENT_WORDS[0], 40) if args.quick else EVENT_WORDS
    found: dict[str, list[tuple[float, float]]] = {}
    for words in lengths:
        reply = " ".join(["word"] * words)
        pacing = ["--stream-tokens-per-second", str(EVENT_RATE), "--reply", reply]
        sim = start(
            "serve-sim",
            [_windowfit(), "serve-sim", "--port", "0", "--tool-rounds", "0", *pacing],
        )
        middles: list[Service] = []
        try:
            with suppress(RuntimeError):
                middles.append(
                    start(
                        "windowfit proxy",
                        [_windowfit(), "proxy", "--port", "0", "--anthropic-upstream", sim.url],
                    )
                )
            middles += floor_services(sim, ("asgi", "relay")) if args.floor else []
            for target in _paths(sim, *(_split(middles))):
                if target.middle is not None:
                    got = asyncio.run(_events_on(target, requests))
                    found.setdefault(target.label, []).append(got)
        finally:
            for middle in middles:
                stop(middle)
            stop(sim)
    out = [
        f"## CPU per relayed event (serve-sim at {EVENT_RATE:g} tokens/s: an event every "
        f"5 ms; answers of {lengths[0]} and {lengths[1]} words; {requests} requests "
        "each at concurrency 1; /proc/PID/task/*/schedstat)\n",
        "| path | events per request (short / long) | CPU per request (ms, short / long) "
        "| CPU per event (µs) |",
        "|---|---|---|---:|",
    ]
    for label, pair in found.items():
        if len(pair) != 2:
            continue
        (e1, c1), (e2, c2) = pair
        slope = (c2 - c1) / (e2 - e1) * 1000 if e2 > e1 else float("nan")
        out.append(f"| {label} | {e1:.0f} / {e2:.0f} | {c1:.2f} / {c2:.2f} | {slope:.0f} |")
    return out


def _split(middles: list[Service]) -> tuple[Service | None, None, list[Service]]:
    """``middles`` as :func:`_paths` takes them: windowfit's proxy, LiteLLM, the floors."""
    proxy = next((m for m in middles if m.name == "windowfit proxy"), None)
    return proxy, None, [m for m in middles if m is not proxy]


async def _proxy_metrics(proxy: Service) -> list[str]:
    async with httpx.AsyncClient(timeout=10) as c:
        r = await c.get(proxy.url + "/metrics")
    if r.status_code != 200:
        return [f"/metrics: HTTP {r.status_code}"]
    wanted = (
        "windowfit_proxy_added_seconds_sum",
        "windowfit_proxy_added_seconds_count",
        "windowfit_proxy_early_total",
        "windowfit_proxy_early_body_bytes_total",
    )
    lines = [ln for ln in r.text.splitlines() if ln.startswith(wanted)]
    return [
        "the proxy's own /metrics (added seconds; bodies sent on as they arrived):",
        *lines[:10],
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: check that it runs")
    parser.add_argument("--tokens", type=int, default=200_000, help="size of a request")
    parser.add_argument(
        "--requests", type=int, default=200, help="requests per path at concurrency 1"
    )
    parser.add_argument(
        "--requests-20",
        type=int,
        default=240,
        help="requests per path at concurrency 20 (each paced run too)",
    )
    parser.add_argument("--rss-requests", type=int, default=10_000)
    parser.add_argument("--litellm", action="store_true", help="include LiteLLM's proxy")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also a minimal ASGI pass-through and a raw asyncio relay (benchmarks/proxy_floor.py)",
    )
    parser.add_argument(
        "--fitter-max-mb",
        type=int,
        default=0,
        help="the proxy's --fitter-max-mb (default: the proxy's own default)",
    )
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        choices=["latency", "paced", "events", "memory", "faults"],
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.tokens, args.requests, args.requests_20, args.rss_requests = 5_000, 5, 20, 200
    OUT.mkdir(parents=True, exist_ok=True)
    print(f"# windowfit proxy benchmark ({'quick' if args.quick else 'full'})\n")
    with services(args) as (sim, proxy):
        litellm: Service | None = None
        note = "LiteLLM: not run (pass --litellm)"
        if args.litellm:
            litellm, note = litellm_service(sim)
        floors = floor_services(sim) if args.floor else []
        try:
            if "latency" not in args.skip:
                counted = asyncio.run(request_tokens(sim, args.tokens))
                one = step_tokens(args.requests)
                twenty = step_tokens(max(1, args.requests_20 // 20))
                print(
                    f"## Added latency: streamed Anthropic requests of {counted:,} tokens and "
                    f"growing by {one} per request at concurrency 1, {twenty} at 20 "
                    f"(serve-sim's count; {MODEL}, serve-sim window {WINDOW:,})\n"
                )
                for line in asyncio.run(_latency(args, sim, proxy, litellm, floors)):
                    print(line)
                print(f"\n{note}\n")
                if proxy is not None:
                    print("\n".join(asyncio.run(_proxy_metrics(proxy))) + "\n")
            if "paced" not in args.skip and "latency" not in args.skip:
                print("\n".join(_paced(args)) + "\n")
            if "events" not in args.skip:
                print("\n".join(_events(args)) + "\n")
            if "memory" not in args.skip and proxy is not None:
                print("## Memory\n")
                conc = 20
                for line in asyncio.run(memory_run(sim, proxy, args.rss_requests, conc)):
                    print(line)
                print()
            if "faults" not in args.skip:
                print("## Faults (upstream faults from serve-sim's /_sim/faults)\n")
                for line in asyncio.run(fault_run(sim, proxy)):
                    print(line)
        finally:
            stop(litellm)
            for floor in floors:
                stop(floor)
    return 0


if __name__ == "__main__":
    sys.exit(main())

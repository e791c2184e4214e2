"""The proxy's live page (``GET /_windowfit/``): what was done to each recent conversation.

:class:`ConversationLog` keeps, per conversation, running totals and the last few hundred
:class:`RequestRecord` s, for a bounded number of conversations (the least recently
active are forgotten first), so that the page costs a fixed amount of memory however
long the proxy runs. :func:`render_page` turns it into one HTML document with inline CSS
and inline SVG charts: no scripts, fonts or images from anywhere, so it works offline
and behind any content security policy. Conversation ids and error texts come from
clients and upstreams; every piece of text is HTML-escaped on the way out.
"""

from __future__ import annotations

import html
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass
from urllib.parse import quote

__all__ = [
    "MAX_ERROR_CHARS",
    "MAX_ID_CHARS",
    "ConversationLog",
    "ConversationSummary",
    "RequestRecord",
    "render_page",
]

#: Conversation ids longer than this are kept cut (a client picks them).
MAX_ID_CHARS = 200
#: Error texts longer than this are kept cut (an upstream picks them).
MAX_ERROR_CHARS = 500


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One request through the proxy, as the page shows it.

    ``at``: when it was answered (``time.time()``). ``stage``: the fitting stage that was
    needed (0 = sent as it came), ``None`` when it was not fitted. ``tokens_before`` /
    ``tokens_after``: estimated input tokens as the client sent it and as forwarded.
    ``budget``: the input budget fitting aimed at. ``input_tokens`` /
    ``cache_read_tokens``: the upstream's usage (whole input, cached part included, and
    the part read from the prompt cache), ``None`` when the answer carried none.
    ``refit``: sent again after an upstream overflow. ``status``: the HTTP status the
    client got; ``error``: the upstream's (or the proxy's) error message, if any.
    """

    at: float
    route: str
    model: str | None
    stage: int | None
    tokens_before: int
    tokens_after: int
    budget: int | None
    input_tokens: int | None
    cache_read_tokens: int | None
    refit: bool
    status: int
    error: str | None


@dataclass(frozen=True)
class ConversationSummary:
    """What the page shows about one conversation (totals over all its requests; the
    ``recent`` records are the last ones kept, oldest first)."""

    conversation: str
    model: str | None
    requests: int
    first_at: float
    last_at: float
    tokens_before: int
    tokens_after: int
    stages: tuple[tuple[int | None, int], ...]
    input_tokens: int
    cache_read_tokens: int
    refits: int
    errors: int
    last_error: str | None
    last_status: int
    budget: int | None
    recent: tuple[RequestRecord, ...]

    @property
    def cache_read_share(self) -> float | None:
        """The share of the upstream's input read from the prompt cache (``None`` when
        no answer carried usage)."""
        if self.input_tokens <= 0:
            return None
        return min(1.0, self.cache_read_tokens / self.input_tokens)

    @property
    def sent_share(self) -> float | None:
        """Tokens forwarded as a share of the tokens clients sent (1.0 = nothing cleared)."""
        if self.tokens_before <= 0:
            return None
        return self.tokens_after / self.tokens_before


class _Conversation:
    __slots__ = (
        "budget",
        "cache_read_tokens",
        "errors",
        "first_at",
        "input_tokens",
        "last_at",
        "last_error",
        "last_status",
        "model",
        "recent",
        "refits",
        "requests",
        "stages",
        "tokens_after",
        "tokens_before",
    )

    def __init__(self, max_requests: int, at: float) -> None:
        self.recent: deque[RequestRecord] = deque(maxlen=max_requests)
        self.model: str | None = None
        self.requests = 0
        self.first_at = at
        self.last_at = at
        self.tokens_before = 0
        self.tokens_after = 0
        self.stages: dict[int | None, int] = {}
        self.input_tokens = 0
        self.cache_read_tokens = 0
        self.refits = 0
        self.errors = 0
        self.last_error: str | None = None
        self.last_status = 0
        self.budget: int | None = None

    def add(self, record: RequestRecord) -> None:
        self.recent.append(record)
        self.requests += 1
        self.last_at = max(self.last_at, record.at)
        self.first_at = min(self.first_at, record.at)
        if record.model:
            self.model = record.model
        self.tokens_before += max(0, record.tokens_before)
        self.tokens_after += max(0, record.tokens_after)
        self.stages[record.stage] = self.stages.get(record.stage, 0) + 1
        if record.input_tokens is not None and record.input_tokens > 0:
            self.input_tokens += record.input_tokens
            self.cache_read_tokens += max(0, record.cache_read_tokens or 0)
        self.refits += bool(record.refit)
        if record.error is not None or record.status >= 400:
            self.errors += 1
            self.last_error = record.error or f"HTTP {record.status}"
        self.last_status = record.status
        if record.budget is not None:
            self.budget = record.budget

    def summary(self, conversation: str) -> ConversationSummary:
        stages = sorted(self.stages.items(), key=lambda item: -1 if item[0] is None else item[0])
        return ConversationSummary(
            conversation=conversation,
            model=self.model,
            requests=self.requests,
            first_at=self.first_at,
            last_at=self.last_at,
            tokens_before=self.tokens_before,
            tokens_after=self.tokens_after,
            stages=tuple(stages),
            input_tokens=self.input_tokens,
            cache_read_tokens=self.cache_read_tokens,
            refits=self.refits,
            errors=self.errors,
            last_error=self.last_error,
            last_status=self.last_status,
            budget=self.budget,
            recent=tuple(self.recent),
        )


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ConversationLog:
    """Recent conversations and their requests, bounded and safe to share between threads.

    At most ``max_conversations`` conversations are kept (the least recently active is
    dropped when a new one comes), and for each the last ``max_requests`` records (its
    totals still count every request). Memory is therefore bounded by
    ``max_conversations × max_requests`` small records.
    """

    def __init__(self, max_conversations: int = 200, max_requests: int = 500) -> None:
        if max_conversations < 1 or max_requests < 1:
            raise ValueError("max_conversations and max_requests must be at least 1")
        self.max_conversations = max_conversations
        self.max_requests = max_requests
        self._lock = threading.Lock()
        self._conversations: OrderedDict[str, _Conversation] = OrderedDict()
        self.forgotten = 0

    def record(self, conversation: str, record: RequestRecord) -> None:
        """Add ``record`` to ``conversation`` (which becomes the most recently active)."""
        key = _cut(conversation, MAX_ID_CHARS)
        if record.error is not None and len(record.error) > MAX_ERROR_CHARS:
            record = _with_error(record, _cut(record.error, MAX_ERROR_CHARS))
        with self._lock:
            entry = self._conversations.get(key)
            if entry is None:
                entry = _Conversation(self.max_requests, record.at)
                self._conversations[key] = entry
                while len(self._conversations) > self.max_conversations:
                    self._conversations.popitem(last=False)
                    self.forgotten += 1
            else:
                self._conversations.move_to_end(key)
            entry.add(record)

    def summaries(self) -> list[ConversationSummary]:
        """Every kept conversation, the most recently active first."""
        with self._lock:
            items = [(key, entry.summary(key)) for key, entry in self._conversations.items()]
        return [summary for _, summary in reversed(items)]

    def __len__(self) -> int:
        with self._lock:
            return len(self._conversations)


def _with_error(record: RequestRecord, error: str) -> RequestRecord:
    return RequestRecord(
        at=record.at,
        route=record.route,
        model=record.model,
        stage=record.stage,
        tokens_before=record.tokens_before,
        tokens_after=record.tokens_after,
        budget=record.budget,
        input_tokens=record.input_tokens,
        cache_read_tokens=record.cache_read_tokens,
        refit=record.refit,
        status=record.status,
        error=error,
    )


# --------------------------------------------------------------------------- the page

_CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5em;color:#1d2330;
background:#fafbfc}
h1{font-size:1.4em;margin:0 0 .3em}h2{font-size:1.1em;margin:1.2em 0 .4em}
.totals{color:#4a5260;margin:.2em 0 1em}
table{border-collapse:collapse;width:100%;background:#fff}
th,td{border-bottom:1px solid #e3e6ea;padding:.35em .6em;text-align:left;vertical-align:middle}
th{background:#f0f2f5;font-weight:600;font-size:.9em}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.err{color:#a3261a;max-width:28em;overflow-wrap:anywhere;font-size:.9em}
td.id{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.85em;overflow-wrap:anywhere;
max-width:16em}
tr.selected{background:#eef5ff}
a{color:#1a5fb4}
.muted{color:#8a919c}
.legend span{margin-right:1.2em}
.sw{display:inline-block;width:.9em;height:.9em;vertical-align:-.1em;margin-right:.3em}
svg{display:block}
"""

_SENT = "#1a5fb4"
_HISTORY = "#b8c0cc"
_BUDGET = "#c0392b"


def _tokens(n: int) -> str:
    return f"{n:,}"


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def _ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f} s ago"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"


def _stages(summary: ConversationSummary) -> str:
    parts = [f"{'—' if stage is None else stage}×{count}" for stage, count in summary.stages]
    return " ".join(parts)


def _chart(summary: ConversationSummary, width: int, height: int, *, labels: bool) -> str:
    """An SVG of each kept request's size: history (what the client sent, grey), sent
    (what was forwarded, blue), the budget (dashed red); re-fits and errors as red dots."""
    records = summary.recent
    budgets = [r.budget for r in records if r.budget is not None]
    sizes = [max(r.tokens_before, r.tokens_after) for r in records]
    top = max([1, *budgets, *sizes])
    pad_left = 62 if labels else 2
    pad = 4
    plot_w = width - pad_left - pad
    plot_h = height - 2 * pad
    n = len(records)
    slot = min(plot_w / max(n, 1), 24.0 if labels else 8.0)  # a few requests: narrow bars
    bar = max(1.0, slot * 0.7)

    def y(tokens: int) -> float:
        return pad + plot_h * (1 - min(tokens, top) / top)

    esc = html.escape
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{esc(f"request sizes of {summary.conversation} against the budget")}">',
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#fff"/>',
    ]
    for i, r in enumerate(records):
        x = pad_left + i * slot + (slot - bar) / 2
        hy = y(r.tokens_before)
        sy = y(r.tokens_after)
        tip = esc(
            f"request {summary.requests - n + i + 1}: sent {_tokens(r.tokens_after)} "
            f"of {_tokens(r.tokens_before)} tokens, stage "
            f"{'—' if r.stage is None else r.stage}, status {r.status}"
        )
        parts.append(
            f'<g class="req"><title>{tip}</title>'
            f'<rect class="history" x="{x:.1f}" y="{hy:.1f}" width="{bar:.1f}" '
            f'height="{pad + plot_h - hy:.1f}" fill="{_HISTORY}"/>'
            f'<rect class="sent" x="{x:.1f}" y="{sy:.1f}" width="{bar:.1f}" '
            f'height="{pad + plot_h - sy:.1f}" fill="{_SENT}"/></g>'
        )
        if r.refit or r.status >= 400:
            parts.append(
                f'<circle class="mark" cx="{x + bar / 2:.1f}" cy="{pad + 3:.1f}" r="2.5" '
                f'fill="{_BUDGET}"/>'
            )
    if summary.budget is not None:
        by = y(summary.budget)
        parts.append(
            f'<line class="budget" x1="{pad_left}" x2="{width - pad}" y1="{by:.1f}" '
            f'y2="{by:.1f}" stroke="{_BUDGET}" stroke-width="1.5" stroke-dasharray="5,3"/>'
        )
        if labels:
            parts.append(
                f'<text x="{pad_left - 4}" y="{by + 4:.1f}" text-anchor="end" font-size="11" '
                f'fill="{_BUDGET}">{_tokens(summary.budget)}</text>'
            )
    if labels:
        if summary.budget is None or summary.budget < top * 0.9:  # else the labels overlap
            parts.append(
                f'<text x="{pad_left - 4}" y="{pad + 10}" text-anchor="end" font-size="11" '
                f'fill="#4a5260">{_tokens(top)}</text>'
            )
        parts.append(
            f'<text x="{pad_left - 4}" y="{height - pad}" text-anchor="end" font-size="11" '
            f'fill="#4a5260">0</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _row(summary: ConversationSummary, now: float, selected: bool) -> str:
    esc = html.escape
    link = "?conversation=" + quote(summary.conversation, safe="")
    error = summary.last_error
    cells = [
        f'<td class="id"><a href="{esc(link)}">{esc(summary.conversation)}</a></td>',
        f"<td>{esc(summary.model or '—')}</td>",
        f'<td class="num requests">{summary.requests}</td>',
        f'<td class="num tokens">{_tokens(summary.tokens_after)} / '
        f"{_tokens(summary.tokens_before)} "
        f'<span class="muted">({_share(summary.sent_share)})</span></td>',
        f'<td class="stages">{esc(_stages(summary))}</td>',
        f'<td class="num cache">{_share(summary.cache_read_share)}</td>',
        f'<td class="num refits">{summary.refits}</td>',
        f'<td class="err">{esc(error) if error else ""}</td>',
        f"<td>{_chart(summary, 160, 36, labels=False)}</td>",
        f'<td class="num muted">{_ago(now - summary.last_at)}</td>',
    ]
    cls = ' class="selected"' if selected else ""
    return f'<tr{cls} data-conversation="{esc(summary.conversation)}">{"".join(cells)}</tr>'


def render_page(
    log: ConversationLog,
    *,
    title: str = "windowfit proxy",
    selected: str | None = None,
    refresh_seconds: int | None = 5,
    now: float | None = None,
) -> str:
    """The live page: totals, a large chart of the ``selected`` conversation (the most
    recently active one when ``None`` or unknown), and one row per kept conversation.

    ``selected`` is typically the page's ``?conversation=`` query parameter (each row
    links to it). ``refresh_seconds`` adds a ``<meta http-equiv="refresh">`` (``None``:
    no refresh). ``now`` is the time that "last seen" is measured from.
    """
    esc = html.escape
    now = time.time() if now is None else now
    summaries = log.summaries()
    chosen = next((s for s in summaries if s.conversation == selected), None)
    if chosen is None and summaries:
        chosen = summaries[0]
    requests = sum(s.requests for s in summaries)
    before = sum(s.tokens_before for s in summaries)
    after = sum(s.tokens_after for s in summaries)
    refits = sum(s.refits for s in summaries)
    errors = sum(s.errors for s in summaries)
    cleared = "—" if before <= 0 else f"{1 - after / before:.0%}"
    head = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
    ]
    if refresh_seconds is not None and refresh_seconds > 0:
        head.append(f'<meta http-equiv="refresh" content="{int(refresh_seconds)}">')
    head += [f"<title>{esc(title)}</title>", f"<style>{_CSS}</style></head><body>"]
    body = [
        f"<h1>{esc(title)}</h1>",
        f'<p class="totals" id="totals"><span id="n-conversations">{len(summaries)}</span> '
        f'conversations · <span id="n-requests">{requests}</span> requests · '
        f"{_tokens(after)} tokens sent of {_tokens(before)} in history ({cleared} cleared) · "
        f"{refits} re-fits · {errors} errors</p>",
    ]
    if chosen is None:
        body.append('<p class="empty">No requests yet.</p>')
    else:
        body += [
            '<section id="selected">',
            f"<h2>Request sizes of <code>{esc(chosen.conversation)}</code> against the budget</h2>",
            '<p class="legend">'
            f'<span><i class="sw" style="background:{_HISTORY}"></i>history (as sent by '
            "the client)</span>"
            f'<span><i class="sw" style="background:{_SENT}"></i>forwarded</span>'
            f'<span><i class="sw" style="background:{_BUDGET}"></i>budget; dots: re-fits '
            "and errors</span></p>",
            _chart(chosen, 760, 200, labels=True),
            "</section>",
            "<h2>Recent conversations</h2>",
            '<table id="conversations"><thead><tr><th>Conversation</th><th>Model</th>'
            "<th>Requests</th><th>Tokens sent / history</th><th>Stages</th>"
            "<th>Cache read</th><th>Re-fits</th><th>Last error</th><th>Sizes</th>"
            "<th>Last seen</th></tr></thead><tbody>",
            *(_row(s, now, s is chosen) for s in summaries),
            "</tbody></table>",
        ]
        if log.forgotten:
            body.append(
                f'<p class="muted">{log.forgotten} older conversations are no longer kept.</p>'
            )
    body.append("</body></html>")
    return "\n".join(head + body) + "\n"

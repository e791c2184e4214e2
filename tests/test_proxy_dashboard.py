"""The proxy's live page: the conversation log behind it, the HTML, and the page as headless
Chromium renders it (a screenshot is saved under the test's tmp dir)."""

from __future__ import annotations

import http.server
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from windowfit.proxy._dashboard import (
    MAX_ERROR_CHARS,
    MAX_ID_CHARS,
    ConversationLog,
    RequestRecord,
    render_page,
)

NOW = 1_800_000_000.0
BUDGET = 136_000  # a 200k window less a 64k output limit
HOSTILE = '<script>alert("x")</script>&<img src=x onerror=1>'


def _record(
    at: float,
    before: int,
    *,
    after: int | None = None,
    stage: int | None = 0,
    status: int = 200,
    error: str | None = None,
    refit: bool = False,
    input_tokens: int | None = None,
    cache_read: int | None = None,
    model: str | None = "claude-sonnet-4-5",
    budget: int | None = BUDGET,
) -> RequestRecord:
    return RequestRecord(
        at=at,
        route="anthropic.messages",
        model=model,
        stage=stage,
        tokens_before=before,
        tokens_after=before if after is None else after,
        budget=budget,
        input_tokens=input_tokens,
        cache_read_tokens=cache_read,
        refit=refit,
        status=status,
        error=error,
    )


def _agent_turn(log: ConversationLog, conversation: str, start: float, steps: int) -> None:
    """A long agent turn: history grows by a tool result per step, fitting starts once it
    passes the budget, the prompt cache serves most of each request."""
    history = 12_000
    for i in range(steps):
        history += 9_000 + (i % 4) * 2_500
        if history <= BUDGET:
            after, stage = history, 0
        else:
            after, stage = BUDGET - 8_000 - (i % 3) * 3_000, 1 if i % 5 else 2
        refit = i == steps - 3
        log.record(
            conversation,
            _record(
                start + 4 * i,
                history,
                after=after,
                stage=stage,
                refit=refit,
                input_tokens=after + 40,
                cache_read=int(after * 0.85) if i else 0,
            ),
        )


def _filled_log() -> ConversationLog:
    log = ConversationLog()
    _agent_turn(log, "codex/session-19", NOW - 900, 12)
    log.record(
        "codex/session-19",
        _record(NOW - 850, 600_000, stage=None, status=400, error=HOSTILE, model="gpt-5-codex"),
    )
    _agent_turn(log, "claude-code/7f3a9c", NOW - 300, 40)
    log.record(HOSTILE, _record(NOW - 60, 3_000, input_tokens=None, cache_read=None))
    return log


# --------------------------------------------------------------------------- the log


def test_summaries_total_every_request_and_put_the_latest_first():
    log = _filled_log()
    summaries = log.summaries()
    assert [s.conversation for s in summaries] == [
        HOSTILE,
        "claude-code/7f3a9c",
        "codex/session-19",
    ]
    claude = summaries[1]
    assert claude.requests == 40
    assert claude.refits == 1
    assert claude.errors == 0 and claude.last_error is None
    assert claude.tokens_after < claude.tokens_before
    assert all(r.tokens_after <= BUDGET for r in claude.recent)
    assert dict(claude.stages).keys() <= {0, 1, 2}
    share = claude.cache_read_share
    assert share is not None and 0.75 < share < 0.85
    codex = summaries[2]
    assert codex.errors == 1 and codex.last_error == HOSTILE and codex.last_status == 400
    assert codex.model == "gpt-5-codex"
    assert summaries[0].cache_read_share is None  # no usage came back


def test_the_log_forgets_the_least_recently_active_conversation_first():
    log = ConversationLog(max_conversations=3, max_requests=4)
    for i, name in enumerate("abcd"):
        log.record(name, _record(NOW + i, 1000))
        if name == "b":
            log.record("a", _record(NOW + i, 1000))  # a becomes active again
    assert [s.conversation for s in log.summaries()] == ["d", "c", "a"]  # b went
    assert log.forgotten == 1
    for i in range(10):
        log.record("a", _record(NOW + 10 + i, 1000 + i))
    a = next(s for s in log.summaries() if s.conversation == "a")
    assert a.requests == 12  # totals count every request
    assert [r.tokens_before for r in a.recent] == [1006, 1007, 1008, 1009]


def test_client_chosen_ids_and_upstream_errors_are_kept_cut():
    log = ConversationLog()
    log.record("x" * 10_000, _record(NOW, 1, status=500, error="e" * 100_000))
    (summary,) = log.summaries()
    assert len(summary.conversation) == MAX_ID_CHARS
    assert summary.last_error is not None and len(summary.last_error) == MAX_ERROR_CHARS


@pytest.mark.parametrize("bad", [(0, 1), (1, 0)])
def test_the_log_needs_room(bad):
    with pytest.raises(ValueError):
        ConversationLog(*bad)


def test_records_from_many_threads_are_all_kept():
    log = ConversationLog(max_conversations=50, max_requests=10)

    def work(n: int) -> None:
        for i in range(500):
            log.record(f"c{i % 20}", _record(NOW + i, 100 + n))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    summaries = log.summaries()
    assert len(summaries) == 20
    assert sum(s.requests for s in summaries) == 3000
    assert all(len(s.recent) == 10 for s in summaries)


# --------------------------------------------------------------------------- the HTML


def test_the_page_needs_nothing_from_outside():
    page = render_page(_filled_log(), now=NOW)
    assert "<script" not in page
    assert not re.search(r"\b(src|href)=\"(https?:)?//", page)
    assert "<link" not in page and "url(" not in page and "@import" not in page
    assert page.count("<svg") == 4  # the selected conversation's chart and one per row


#: Every element the page's own template writes; client text must never add another.
PAGE_TAGS = {
    *("html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "span", "section"),
    *("code", "i", "table", "thead", "tbody", "tr", "th", "td", "a"),
    *("svg", "rect", "g", "line", "text", "circle"),
}


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


@given(text=st.text(max_size=60))
def test_any_client_text_comes_out_as_text_not_markup(text):
    log = ConversationLog()
    log.record(text, _record(NOW, 5, status=429, error=text or None, model=text or None))
    page = render_page(log, title=text, now=NOW)
    parsed = _Tags()
    parsed.feed(page)
    parsed.close()
    assert parsed.tags <= PAGE_TAGS
    shown = "".join(parsed.text)
    assert text in shown


def test_the_hostile_id_and_error_are_shown_as_text():
    page = render_page(_filled_log(), now=NOW)
    assert HOSTILE not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&lt;img" in page
    assert "?conversation=%3Cscript%3E" in page  # the row's link to select it


def test_an_empty_log_says_so():
    page = render_page(ConversationLog(), now=NOW)
    assert "No requests yet." in page and "<svg" not in page


def test_refresh_is_optional():
    log = _filled_log()
    assert 'http-equiv="refresh" content="5"' in render_page(log, now=NOW)
    assert "http-equiv" not in render_page(log, refresh_seconds=None, now=NOW)


def test_the_selected_conversation_gets_the_large_chart():
    log = _filled_log()
    page = render_page(log, selected="codex/session-19", now=NOW)
    section = page.split('<section id="selected">', 1)[1].split("</section>", 1)[0]
    assert "<code>codex/session-19</code>" in section
    assert section.count('class="req"') == 13
    default = render_page(log, selected="no such conversation", now=NOW)
    assert f"<code>{HOSTILE}</code>" not in default  # escaped, and the latest one chosen
    assert "<code>&lt;script&gt;" in default


# --------------------------------------------------------------------------- Chromium

CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
CHROME_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
]


class _DomSummary(HTMLParser):
    """What the assertions read from Chromium's rendered DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict[str, str]] = []
        self.svgs = 0
        self.bars = 0
        self.budget_lines = 0
        self.scripts = 0
        self.ids: dict[str, str] = {}
        self._cell: str | None = None
        self._id: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "tr" and "data-conversation" in a:
            self.rows.append({"conversation": a["data-conversation"] or ""})
        elif tag == "td" and self.rows and classes:
            self._cell = classes[-1]
            self.rows[-1][self._cell] = ""
        elif tag == "svg":
            self.svgs += 1
        elif tag == "rect" and "sent" in classes:
            self.bars += 1
        elif tag == "line" and "budget" in classes:
            self.budget_lines += 1
        elif tag == "script":
            self.scripts += 1
        if a.get("id"):
            self._id = a["id"]
            self.ids[self._id] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._cell = None
        if tag == "span":
            self._id = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None and self.rows:
            self.rows[-1][self._cell] += data
        if self._id is not None:
            self.ids[self._id] += data


@pytest.fixture
def served_page(tmp_path: Path) -> Iterator[str]:
    """The page of a filled log, served on loopback by a plain HTTP server; its URL."""
    log = _filled_log()
    page = render_page(log, title="windowfit proxy", selected="claude-code/7f3a9c", now=NOW)
    body = page.encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/_windowfit/"
    finally:
        server.shutdown()
        server.server_close()


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    profile = tmp_path / "chromium-profile"
    return subprocess.run(
        [CHROMIUM, *CHROME_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.slow
def test_headless_chromium_renders_the_rows_numbers_and_charts(served_page, tmp_path):
    if CHROMIUM is None:
        pytest.skip("needs chromium (make setup installs the Debian package where apt-get runs)")
    dumped = _chromium(tmp_path, "--dump-dom", served_page)
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    dom = _DomSummary()
    dom.feed(dumped.stdout)
    assert dom.scripts == 0
    assert [r["conversation"] for r in dom.rows] == [
        HOSTILE,
        "claude-code/7f3a9c",
        "codex/session-19",
    ]
    hostile, claude, codex = dom.rows
    assert hostile["id"] == HOSTILE  # shown as text, not run as markup
    assert claude["requests"] == "40" and codex["requests"] == "13"
    assert claude["refits"] == "1" and codex["refits"] == "1"
    assert claude["cache"].endswith("%") and hostile["cache"] == "—"
    sent, history = re.match(r"([\d,]+) / ([\d,]+)", claude["tokens"]).groups()  # type: ignore[union-attr]
    assert int(sent.replace(",", "")) < int(history.replace(",", ""))
    assert codex["err"] == HOSTILE
    assert "0×" in claude["stages"] and "1×" in claude["stages"]
    assert dom.ids["n-conversations"] == "3" and dom.ids["n-requests"] == "54"
    assert dom.svgs == 4 and dom.budget_lines == 4
    # the large chart is the selected conversation's, then one per row
    assert dom.bars == 40 + (1 + 40 + 13)

    shot = tmp_path / "windowfit-proxy-page.png"
    taken = _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,1000", served_page)
    assert taken.returncode == 0, taken.stderr[-2000:]
    assert shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    print(f"\nscreenshot of the live page: {shot}")

"""The proxy's /metrics exposition: what it counts, and that Prometheus' own parser reads it."""

from __future__ import annotations

import gc
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from windowfit.proxy._metrics import ADDED_BUCKETS, MAX_SERIES, UPSTREAM_BUCKETS, Metrics


def _samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(metrics.render()):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def _families(metrics: Metrics) -> dict[str, str]:
    return {f.name: f.type for f in text_string_to_metric_families(metrics.render())}


def test_an_empty_exposition_declares_every_family():
    families = _families(Metrics())
    assert families == {
        "windowfit_proxy_requests": "counter",
        "windowfit_proxy_unparsed": "counter",
        "windowfit_proxy_tokens_before": "counter",
        "windowfit_proxy_tokens_after": "counter",
        "windowfit_proxy_refits": "counter",
        "windowfit_proxy_early": "counter",
        "windowfit_proxy_early_body_bytes": "counter",
        "windowfit_proxy_upstream_seconds": "histogram",
        "windowfit_proxy_added_seconds": "histogram",
        "python_gc_collections": "counter",
        "python_gc_objects_collected": "counter",
    }


def test_requests_are_counted_by_route_stage_and_status():
    m = Metrics()
    m.observe("anthropic.messages", 0, 200, 1000, 1000, False, 0.5, 0.001)
    m.observe("anthropic.messages", 2, 200, 90_000, 40_000, False, 1.5, 0.004)
    m.observe("anthropic.messages", 2, 200, 95_000, 41_000, True, 2.0, 0.006)
    m.observe("openai.chat", None, 400, 500_000, 500_000, False, 0.0, 0.002)
    m.observe_passthrough("other", 404, 0.01)
    m.observe_unparsed("openai.chat")
    s = _samples(m)
    req = "windowfit_proxy_requests_total"
    assert s[(req, (("route", "anthropic.messages"), ("stage", "0"), ("status", "200")))] == 1
    assert s[(req, (("route", "anthropic.messages"), ("stage", "2"), ("status", "200")))] == 2
    assert s[(req, (("route", "openai.chat"), ("stage", "none"), ("status", "400")))] == 1
    assert s[(req, (("route", "other"), ("stage", "passthrough"), ("status", "404")))] == 1
    assert s[("windowfit_proxy_unparsed_total", (("route", "openai.chat"),))] == 1
    route = (("route", "anthropic.messages"),)
    assert s[("windowfit_proxy_tokens_before_total", route)] == 186_000
    assert s[("windowfit_proxy_tokens_after_total", route)] == 82_000
    assert s[("windowfit_proxy_refits_total", route)] == 1
    assert ("windowfit_proxy_refits_total", (("route", "openai.chat"),)) not in s
    assert s[("windowfit_proxy_upstream_seconds_count", route)] == 3
    assert s[("windowfit_proxy_upstream_seconds_sum", route)] == pytest.approx(4.0)
    assert s[("windowfit_proxy_added_seconds_sum", route)] == pytest.approx(0.011)
    # a passed-through request has upstream time but adds no fitting time
    other = (("route", "other"),)
    assert s[("windowfit_proxy_upstream_seconds_count", other)] == 1
    assert ("windowfit_proxy_added_seconds_count", other) not in s


@pytest.mark.parametrize(
    ("seconds", "first_bucket"),
    [(0.0, 0.0005), (0.0005, 0.0005), (0.0006, 0.001), (0.015, 0.02), (2.0, float("inf"))],
)
def test_added_latency_lands_in_the_right_bucket(seconds, first_bucket):
    m = Metrics()
    m.observe("r", 0, 200, 1, 1, False, 0.1, seconds)
    s = _samples(m)
    for bound in (*ADDED_BUCKETS, float("inf")):
        le = "+Inf" if bound == float("inf") else repr(bound)
        labels = (("le", le), ("route", "r"))
        expected = 1 if bound >= first_bucket else 0
        assert s[("windowfit_proxy_added_seconds_bucket", labels)] == expected, le


def test_buckets_are_increasing_and_fine_below_the_goal():
    for buckets in (UPSTREAM_BUCKETS, ADDED_BUCKETS):
        assert list(buckets) == sorted(set(buckets))
    # the goals are 5 ms (p50) and 20 ms (p99) added: both are bucket bounds
    assert 0.005 in ADDED_BUCKETS and 0.02 in ADDED_BUCKETS


@given(route=st.text(max_size=40))
def test_any_route_text_is_escaped_so_the_parser_gets_it_back(route):
    m = Metrics()
    m.observe_passthrough(route, 200, 0.01)
    s = _samples(m)
    labels = (("route", route), ("stage", "passthrough"), ("status", "200"))
    assert s[("windowfit_proxy_requests_total", labels)] == 1


def test_bad_latencies_count_as_zero_not_as_broken_output():
    m = Metrics()
    m.observe("r", 1, 200, -5, 3, False, float("nan"), -1.0)
    s = _samples(m)
    assert s[("windowfit_proxy_upstream_seconds_sum", (("route", "r"),))] == 0
    assert s[("windowfit_proxy_tokens_before_total", (("route", "r"),))] == 0


def test_label_sets_are_bounded_against_clients_inventing_routes():
    m = Metrics()
    for i in range(MAX_SERIES + 300):
        m.observe_passthrough(f"/unknown/{i}", 404, 0.001)
    s = _samples(m)
    kept = [k for k in s if k[0] == "windowfit_proxy_requests_total"]
    assert len(kept) == MAX_SERIES + 1
    other = (("route", "other"), ("stage", "passthrough"), ("status", "404"))
    assert s[("windowfit_proxy_requests_total", other)] == 300


def test_observations_from_many_threads_are_all_counted():
    m = Metrics()

    def work() -> None:
        for _ in range(2000):
            m.observe("anthropic.messages", 1, 200, 10, 5, True, 0.01, 0.001)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    s = _samples(m)
    route = (("route", "anthropic.messages"),)
    assert s[("windowfit_proxy_refits_total", route)] == 16_000
    assert s[("windowfit_proxy_tokens_before_total", route)] == 160_000
    assert s[("windowfit_proxy_added_seconds_count", route)] == 16_000


def test_content_type_is_the_text_format():
    assert Metrics.content_type.startswith("text/plain; version=0.0.4")


def test_the_collectors_passes_are_counted_by_generation():
    """Read from gc.get_stats() when scraped: a full pass shows as one more of
    generation 2 (what benchmarks/proxy.py divides by the requests)."""
    metrics = Metrics()
    before = _samples(metrics)
    gc.collect(2)
    after = _samples(metrics)
    key = ("python_gc_collections_total", (("generation", "2"),))
    assert after[key] >= before[key] + 1
    assert {labels for name, labels in after if name == "python_gc_collections_total"} == {
        (("generation", str(g)),) for g in range(3)
    }

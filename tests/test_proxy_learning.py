"""What the proxy learns per conversation, and how replicas share it through a store."""

from __future__ import annotations

from windowfit.formats import DIALECTS
from windowfit.proxy._learning import ConversationLearning


class _DictStore:
    def __init__(self) -> None:
        self.data: dict[str, str] = {}

    def get(self, key: str) -> str | None:
        return self.data.get(key)

    def set(self, key: str, value: str) -> None:
        self.data[key] = value


def test_usage_lowers_the_budget_of_a_conversation_the_provider_counts_higher() -> None:
    learning = ConversationLearning()
    assert learning.budget_for("c", 10_000) == 10_000 and learning.correction("c") is None
    for estimate in (1_000, 3_000, 5_000):
        learning.observe("c", estimate, int(estimate * 1.3) + 500)
    assert learning.budget_for("c", 10_000) < 10_000 / 1.25
    assert learning.budget_for("other", 10_000) == 10_000


def test_replicas_share_what_was_learned_through_the_store() -> None:
    store = _DictStore()
    first, second = ConversationLearning(store=store), ConversationLearning(store=store)
    for estimate in (1_000, 3_000, 5_000):
        first.observe("c", estimate, estimate + 2_000)
    assert second.budget_for("c", 10_000) == first.budget_for("c", 10_000) < 8_100
    store.data["windowfit:learned:bad"] = "not json"
    assert second.budget_for("bad", 10_000) == 10_000


def test_an_overflow_teaches_its_count_and_its_window() -> None:
    learning = ConversationLearning()
    status, body = DIALECTS["anthropic"].overflow_error(25_000, 20_000)
    assert learning.observe_overflow("c", 24_000, status, body) == (True, 20_000)
    assert learning.budget_for("c", 20_000) < 20_000
    taught, window = learning.observe_overflow("d", 1_000, 400, {"error": {"message": "?"}})
    assert not taught and window is None


def test_what_is_kept_is_bounded() -> None:
    learning = ConversationLearning(max_conversations=3)
    for k in range(10):
        learning.observe(f"c{k}", 100, 200)
    assert len(learning) == 3 and learning.correction("c9") is not None

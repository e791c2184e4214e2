from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

sys.path.insert(0, str(Path(__file__).resolve().parent))

# LiteLLM fetches its model price list from GitHub when imported, retrying for seconds
# where there is no internet; its wheel carries a copy, which this makes it use.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

settings.register_profile(
    "default",
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("ci" if os.environ.get("CI") else "default")


#: The one wording of every skip for missing real data, so that ``make test`` (which
#: lists skip reasons) says the same thing, and how to fix it, everywhere.
NEEDS_DATA = "needs ../shared/data (set WINDOWFIT_DATA)"


def data_dir() -> Path | None:
    """The shared real data (texts and trajectories), or None where it is absent."""
    env = os.environ.get("WINDOWFIT_DATA")
    candidates = [Path(env)] if env else []
    candidates.append(Path(__file__).resolve().parents[1].parent / "shared" / "data")
    for path in candidates:
        if (path / "trajectories").is_dir():
            return path
    return None


def windows_of(data: bytes) -> list[tuple[bytes, float, int]]:
    """A long text's windows as windowfit.vocabulary._strata gives them (bytes, a weight,
    an estimate), made up from data: every 37 bytes, weights and estimates that vary."""
    return [(data[k : k + 37], 0.5 + k / 7, 1 + k % 5) for k in range(0, len(data) + 1, 37)]


def counts_in_threads(
    count: Callable[[str], int], texts: list[str], workers: int = 4, rounds: int = 5
) -> list[list[int]]:
    """Each of ``workers`` threads counts every text ``rounds`` times at once with the same
    ``count``; what each thread got for each text (its first round). A counter that
    shares state between threads (the vocabulary, its caches) must give every thread the
    counts it gives one."""
    results: dict[int, list[int]] = {}

    def work(k: int) -> None:
        results[k] = [count(t) for t in texts for _ in range(rounds)][::rounds]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [results[k] for k in range(workers)]


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = data_dir()
    if path is None:
        pytest.skip(NEEDS_DATA)
    return path


@pytest.fixture(autouse=True)
def _windowfit_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Keep the agent runtime's default history store out of the real home directory.

    ``Runtime()`` without a store writes to ``$WINDOWFIT_HOME/history.sqlite3``; every
    test gets its own empty ``WINDOWFIT_HOME`` (inherited by the processes tests start).
    """
    home = tmp_path_factory.mktemp("windowfit-home")
    monkeypatch.setenv("WINDOWFIT_HOME", str(home))
    return home

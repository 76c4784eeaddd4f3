"""Checks every test gets for free."""
from __future__ import annotations

import threading

import pytest


def _serving_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.endswith("(serve_forever)")}


@pytest.fixture(autouse=True)
def no_leaked_servers():
    """A test must stop the HTTP servers it starts: a leaked serving loop keeps polling for the
    rest of the session (after `server_close`, in a busy loop that takes a core)."""
    before = _serving_threads()
    yield
    left = [t for t in _serving_threads() - before if t.is_alive()]
    for t in left:
        t.join(timeout=2)
    left = [t.name for t in left if t.is_alive()]
    assert not left, f"the test left HTTP serving threads running: {left}"

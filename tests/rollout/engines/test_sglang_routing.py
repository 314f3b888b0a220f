"""Least-loaded routing, sticky sessions and benching in `ServerPool` (a fake clock; no HTTP)."""

import pytest

from rollout.engines.servers import ServerPool


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def pool(n: int = 3, clock: Clock | None = None) -> ServerPool:
    return ServerPool([f"http://h{i}" for i in range(n)], "v0", cooldown_s=10.0, clock=clock or Clock())


def test_new_sessions_go_to_the_server_with_fewest_in_flight():
    p = pool()
    first, second = p.acquire("a"), p.acquire("b")
    p.release(first)  # h0 idle again, h1 busy, h2 never used
    assert [first.url, second.url] == ["http://h0", "http://h1"]
    assert p.acquire("c").url == "http://h2"  # h0 and h2 idle: h2 has been given fewer requests
    assert p.acquire("d").url == "http://h0"


def test_sessions_stick_even_when_their_server_is_busier():
    p = pool(2)
    a = p.acquire("a")
    assert p.acquire("a") is a and p.acquire("a") is a  # three in flight on h0, none on h1
    assert p.acquire("b").url == "http://h1"


def test_benched_server_is_skipped_until_its_cooldown_ends():
    clock = Clock()
    p = pool(2, clock)
    a = p.acquire("a")
    p.release(a)
    p.bench(a, "connection refused")
    moved = p.acquire("a")
    assert moved.url == "http://h1" and p.acquire("a") is moved  # the session moved and sticks there
    clock.now = 11.0
    assert p.acquire("fresh").url == "http://h0"  # back in rotation


def test_all_benched_tries_the_one_back_soonest_but_not_the_one_that_just_failed():
    clock = Clock()
    p = pool(2, clock)
    h0, h1 = p.servers
    p.bench(h0, "down")
    clock.now = 1.0
    p.bench(h1, "down")
    assert p.acquire(None) is h0
    assert p.acquire(None, avoid=h0) is h1


def test_rejects_empty_and_duplicate_urls():
    with pytest.raises(ValueError, match="at least one server"):
        ServerPool([], "v", 1.0)
    with pytest.raises(ValueError, match="duplicate"):
        ServerPool(["http://a", "http://a/"], "v", 1.0)

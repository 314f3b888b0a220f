"""Which server gets a request: least-loaded routing, sticky episodes, and health marks.

An episode's turns share a growing prefix, so keeping them on one server lets its radix cache reuse the
prefix (the `cached_tokens` a response reports). New episodes go to the server with the fewest requests in
flight; ties go to the server that has been given the fewest requests so far, then to list order, so that a
quiet pool still spreads episodes evenly and routing is reproducible. A server that fails is benched for a
cool-down and its episodes move; when every server is benched, the one that comes back soonest is tried
anyway, because a retry against a possibly-restarted server beats failing without trying.
"""

from __future__ import annotations

import dataclasses
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence


@dataclasses.dataclass
class Server:
    """One SGLang server and what this client knows about it."""

    url: str
    weight_version: str
    in_flight: int = 0
    assigned: int = 0  # requests ever routed here (tie-break)
    failures: int = 0
    benched_until: float = 0.0  # monotonic time; 0: healthy
    last_error: str = ""

    def available(self, now: float) -> bool:
        return self.benched_until <= now


class ServerPool:
    """Routes requests among servers. Not thread-safe: use from one event loop."""

    def __init__(self, urls: Sequence[str], weight_version: str, cooldown_s: float,
                 max_sessions: int = 100_000, clock: Callable[[], float] = time.monotonic) -> None:
        if not urls:
            raise ValueError("SGLangEngine needs at least one server URL (e.g. http://127.0.0.1:30000)")
        normalised = [url.rstrip("/") for url in urls]
        if len(set(normalised)) != len(normalised):
            raise ValueError(f"duplicate server URLs in {list(urls)}")
        self.servers = [Server(url, weight_version) for url in normalised]
        self._cooldown_s = cooldown_s
        self._clock = clock
        # LRU, bounded: an episode ends with `forget`, but a client that never tells must not grow it forever
        self._sessions: OrderedDict[str, Server] = OrderedDict()
        self._max_sessions = max_sessions

    def acquire(self, session_id: str | None, avoid: Server | None = None) -> Server:
        """Pick a server for one request and count it in flight; pair with `release`. `avoid` is the
        server that just failed this request, skipped when any other server is available."""
        now = self._clock()
        server = self._sessions.get(session_id) if session_id is not None else None
        if server is None or not server.available(now) or server is avoid:
            server = self._least_loaded(now, avoid)
        if session_id is not None:
            self._sessions[session_id] = server
            self._sessions.move_to_end(session_id)
            if len(self._sessions) > self._max_sessions:
                self._sessions.popitem(last=False)
        server.in_flight += 1
        server.assigned += 1
        return server

    def forget(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def release(self, server: Server) -> None:
        server.in_flight -= 1

    def bench(self, server: Server, error: str) -> None:
        """Take a failing server out of rotation for the cool-down; its sticky episodes move on their next
        turn."""
        server.failures += 1
        server.last_error = error
        server.benched_until = self._clock() + self._cooldown_s

    def benched(self, server: Server) -> bool:
        return not server.available(self._clock())

    def mark_healthy(self, server: Server) -> None:
        server.benched_until = 0.0

    def _least_loaded(self, now: float, avoid: Server | None) -> Server:
        candidates = [s for s in self.servers if s.available(now) and s is not avoid]
        if not candidates:
            return min(self.servers, key=lambda s: (s is avoid, s.benched_until))
        return min(candidates, key=lambda s: (s.in_flight, s.assigned, self.servers.index(s)))

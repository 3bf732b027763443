"""The `[http]` settings as every HTTP client takes them, with their defaults declared once.

The shared client (scrapers/http.py) and the backfill take an `HttpSettings`; the
configuration's `[http]` section (tracker/config/sections.py `HttpSection`) takes its defaults from
here and checks the values a file or a variable gives. Light on purpose (no imports), so the
configuration can read it without loading httpx or the sources.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class HttpSettings:
    """The `[http]` section as the client takes it (tracker/collect/refresh.py builds it)."""

    connect_timeout: float = 10.0
    read_timeout: float = 60.0
    # The whole request, retries and backoff included: connect, headers and every read of
    # the body. A peer sending a byte a second never trips the read timeout; this ends it
    # (within one read timeout of the deadline).
    total_timeout: float = 300.0
    retries: int = 3  # connection errors, timeouts, 5xx and 429
    backoff: float = 1.0  # first wait in seconds; doubles each retry
    max_backoff: float = 60.0
    max_bytes: int = 64 * 1024 * 1024
    # URL prefixes a key may be sent to over plain http:// (with a warning); keys go only over
    # https:// otherwise.
    trusted_urls: tuple[str, ...] = ()

"""The one HTTP client every source uses: timeouts, retries with backoff, a size cap, a UA.

Retries cover connection errors, timeouts, 5xx and 429; `Retry-After` (seconds or an HTTP
date) is honoured, capped by `max_backoff`. Responses larger than `max_bytes` are refused
while streaming, so a runaway response never fills memory. Every request has a total deadline
(`total_timeout`: connect, headers, every read of the body, retries and backoff), so a peer
that trickles a byte a second cannot hold a refresh: each read's timeout is the smaller of
`read_timeout` and the time left, and the deadline is checked between reads.

A request that carries a key (an Authorization header, or a parameter whose value is a
configured secret) goes only to an https:// URL, unless the URL matches one of
`[http] trusted_urls` (scheme, host and port exactly, see `trusted_match`), which gets it
over plain http:// with a warning. Redirects are followed within a policy (`check_redirect`):
a keyed request stays on its origin, and nothing is redirected from a public host to an
internal address. Error messages pass the secret scrubber, so a key never rides out in one.
"""

from __future__ import annotations

import email.utils
import json
import logging
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import httpx

from tracker import __version__
from tracker.core.errors import SourceError
from tracker.core.http_settings import HttpSettings

log = logging.getLogger(__name__)
# What a caller names in its signatures (a test's MockTransport, a response to inspect)
# without importing httpx itself: the sources' client is its one owner.
Transport = httpx.BaseTransport
Response = httpx.Response
USER_AGENT = f"gpu-tracker/{__version__} (+https://github.com/gpu-tracker/gpu-tracker)"
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


class HttpStatusError(SourceError):
    """The server answered with an error status (after retries, for retryable ones)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class HttpClient:
    """Thin wrapper over one `httpx.Client` shared by all sources of a run (thread-safe)."""

    def __init__(
        self, settings: HttpSettings | None = None, *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.settings = settings or HttpSettings()
        timeout = httpx.Timeout(
            self.settings.read_timeout, connect=self.settings.connect_timeout)
        self._client = httpx.Client(
            timeout=timeout, headers={"User-Agent": USER_AGENT}, follow_redirects=True,
            transport=transport,
            event_hooks={"response": [_check_redirect]},
        )
        self._sleep = sleep
        self._clock = time.monotonic
        self.requests_made = 0
        self._warned: set[str] = set()

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- public helpers ------------------------------------------------------------------
    def get_bytes(
        self, url: str, *, params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None, max_bytes: int | None = None,
    ) -> bytes:
        return self.request("GET", url, params=params, headers=headers, max_bytes=max_bytes)

    def get_text(self, url: str, **kwargs: Any) -> str:
        return self.get_bytes(url, **kwargs).decode("utf-8-sig")

    def get_json(self, url: str, **kwargs: Any) -> Any:
        return parse_json(self.get_bytes(url, **kwargs), url)

    def post_json(
        self, url: str, payload: Any, *, headers: Mapping[str, str] | None = None,
        params: Mapping[str, Any] | None = None, max_bytes: int | None = None,
    ) -> Any:
        body = self.request(
            "POST", url, json_body=payload, headers=headers, params=params, max_bytes=max_bytes)
        return parse_json(body, url)

    def stream_lines(
        self, url: str, *, params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None, max_bytes: int | None = None,
    ) -> Iterator[str]:
        """Yield decoded text lines of a large response without holding it in memory.

        Retries apply until the first byte arrives; a failure mid-stream raises SourceError
        (the caller's transaction then rolls back). Chunks are taken as they arrive, so the
        deadline is checked between reads however slowly they come.
        """
        limit = max_bytes if max_bytes is not None else self.settings.max_bytes
        deadline = self._deadline()
        response = self._send("GET", url, params=params, headers=headers, stream=True,
                              deadline=deadline)
        try:
            total = 0
            pending: list[bytes] = []  # the current line's pieces (joined once: linear)
            for chunk in response.iter_bytes():
                total += len(chunk)
                if total > limit:
                    raise SourceError(f"{_short(url)}: response larger than {limit} bytes")
                self._check_deadline(deadline, url)
                pending.append(chunk)
                if b"\n" not in chunk:
                    continue
                *lines, rest = b"".join(pending).split(b"\n")
                pending = [rest] if rest else []
                for line in lines:
                    yield line.decode("utf-8-sig").rstrip("\r")
            if pending:
                yield b"".join(pending).decode("utf-8-sig").rstrip("\r")
        except httpx.HTTPError as exc:
            raise self._read_failure(exc, url, deadline, " while streaming") from exc
        finally:
            response.close()

    def get_response(
        self, url: str, *, params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None, max_bytes: int | None = None,
        retry_statuses: Collection[int] = frozenset({500, 502, 503, 504}),
    ) -> httpx.Response:
        """One GET whose status and headers the caller inspects (pagination links, rate-limit
        headers). Connection errors, timeouts and `retry_statuses` go through the same retry
        loop as every request; any other status (a 403 or 429 the caller has its own rules
        for, or the last 5xx) is returned unchecked. The body is read within the size cap."""
        limit = max_bytes if max_bytes is not None else self.settings.max_bytes
        deadline = self._deadline()
        response = self._send("GET", url, params=params, headers=headers, stream=True,
                              retry_statuses=frozenset(retry_statuses), check_status=False,
                              deadline=deadline)
        try:
            body = self._read_capped(response, limit, url, deadline)
        except httpx.HTTPError as exc:
            raise self._read_failure(exc, url, deadline, " while reading") from exc
        finally:
            response.close()
        response._content = body  # the body is read; .json() and .text work on it
        return response

    def request(
        self, method: str, url: str, *, params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None, json_body: Any = None,
        max_bytes: int | None = None,
    ) -> bytes:
        limit = max_bytes if max_bytes is not None else self.settings.max_bytes
        deadline = self._deadline()
        attempt = 0
        while True:
            response = self._send(
                method, url, params=params, headers=headers, json_body=json_body, stream=True,
                deadline=deadline)
            try:
                return self._read_capped(response, limit, url, deadline)
            except httpx.HTTPError as exc:
                # A failure in the body is retried like one before the headers.
                failure = self._read_failure(exc, url, deadline)
                if attempt >= self.settings.retries:
                    raise failure from exc
            finally:
                response.close()
            self._pause(self._backoff(attempt, None), deadline, url)
            attempt += 1

    # -- internals -----------------------------------------------------------------------
    def _read_failure(self, exc: httpx.HTTPError, url: str, deadline: float,
                      during: str = "") -> SourceError:
        """The one line for a failure while a body is read: a timeout past the total deadline
        raises the deadline's error here; otherwise a read timeout or the transport error."""
        if isinstance(exc, httpx.TimeoutException):
            self._check_deadline(deadline, url)
            return SourceError(f"{_short(url)}: read timed out{during}")
        return SourceError(f"{_short(url)}: {type(exc).__name__}{during}")

    def _send(
        self, method: str, url: str, *, params: Mapping[str, Any] | None,
        headers: Mapping[str, str] | None, json_body: Any = None, stream: bool,
        retry_statuses: frozenset[int] = RETRY_STATUSES, check_status: bool = True,
        deadline: float | None = None,
    ) -> httpx.Response:
        """The one retry loop: connection errors, timeouts and `retry_statuses`, with
        exponential backoff (or Retry-After) capped by max_backoff, all within `deadline`."""
        attempt = 0
        deadline = self._deadline() if deadline is None else deadline
        keyed = self._check_transport(url, params, headers)
        while True:
            self.requests_made += 1
            left = self._check_deadline(deadline, url)
            timeout = httpx.Timeout(min(self.settings.read_timeout, left),
                                    connect=min(self.settings.connect_timeout, left))
            try:
                request = self._client.build_request(
                    method, url, params=params, headers=headers, json=json_body,
                    timeout=timeout)
                # Redirects keep the request's extensions: the policy sees where it began.
                request.extensions[_ORIGIN] = (request.url, keyed)
                response = self._client.send(request, stream=stream)
            except httpx.TimeoutException as exc:
                self._check_deadline(deadline, url)
                if attempt >= self.settings.retries:
                    raise SourceError(f"{_short(url)}: timed out after {attempt + 1} tries") \
                        from exc
                self._pause(self._backoff(attempt, None), deadline, url)
                attempt += 1
                continue
            except httpx.TransportError as exc:
                if attempt >= self.settings.retries:
                    raise SourceError(
                        f"{_short(url)}: {type(exc).__name__} after {attempt + 1} tries") from exc
                self._pause(self._backoff(attempt, None), deadline, url)
                attempt += 1
                continue
            if response.status_code in retry_statuses and attempt < self.settings.retries:
                retry_after = response.headers.get("Retry-After")
                response.close()
                self._pause(self._backoff(attempt, retry_after), deadline, url)
                attempt += 1
                continue
            if check_status and response.status_code >= 400:
                response.close()
                raise HttpStatusError(
                    f"{_short(url)}: HTTP {response.status_code}"
                    + (f" after {attempt + 1} tries" if attempt else ""), response.status_code)
            return response

    def _check_transport(self, url: str, params: Mapping[str, Any] | None,
                         headers: Mapping[str, str] | None) -> bool:
        """Refuse to send a key over plain http unless the URL is trusted (then warn once);
        whether the request carries a key."""
        from tracker.core.secrets import is_secret

        carries_key = any(k.lower() in ("authorization", "x-api-key", "api-key")
                          for k in (headers or {})) or \
            any(is_secret(str(v)) for v in (params or {}).values())
        if url.lower().startswith("https://") or not carries_key:
            return carries_key
        trusted = next((p for p in self.settings.trusted_urls if p and trusted_match(p, url)),
                       None)
        if trusted is None:
            raise SourceError(
                f"{_short(url)}: refusing to send an API key over plain http; use https, or "
                "list the URL in [http] trusted_urls")
        if trusted not in self._warned:
            self._warned.add(trusted)
            log.warning("sending an API key over plain http to %s (listed in [http] "
                        "trusted_urls)", trusted)
        return carries_key

    def _deadline(self) -> float:
        return self._clock() + self.settings.total_timeout

    def _check_deadline(self, deadline: float, url: str) -> float:
        """The seconds left before `deadline`; SourceError once it has passed."""
        left = deadline - self._clock()
        if left <= 0:
            raise SourceError(f"{_short(url)}: no complete answer within "
                              f"{self.settings.total_timeout:g} s ([http] total_timeout)")
        return left

    def _pause(self, seconds: float, deadline: float, url: str) -> None:
        """Back off before a retry, unless the wait would end past the deadline."""
        if self._clock() + seconds >= deadline:
            self._check_deadline(float("-inf"), url)
        self._sleep(seconds)

    def _read_capped(self, response: httpx.Response, limit: int, url: str,
                     deadline: float) -> bytes:
        declared = response.headers.get("Content-Length")
        if declared and declared.isdigit() and int(declared) > limit:
            raise SourceError(f"{_short(url)}: response larger than {limit} bytes")
        parts: list[bytes] = []
        total = 0
        for chunk in response.iter_bytes():
            total += len(chunk)
            if total > limit:
                raise SourceError(f"{_short(url)}: response larger than {limit} bytes")
            parts.append(chunk)
            self._check_deadline(deadline, url)
        return b"".join(parts)

    def _backoff(self, attempt: int, retry_after: str | None) -> float:
        wait = self.settings.backoff * (2**attempt)
        if retry_after:
            parsed = parse_retry_after(retry_after)
            if parsed is not None:
                wait = parsed
        return min(max(wait, 0.0), self.settings.max_backoff)


# -- where a request may go ----------------------------------------------------------------
#
# `[http] trusted_urls` entries match a URL by scheme, host and port exactly (the port the
# scheme implies when none is written) and by path prefix at a segment boundary: the entry
# `http://prices.example/` trusts neither `http://prices.example.evil.com/` nor
# `http://prices.example:8080/`. Redirects are followed only within the policy: a request
# that carries a key only to the same scheme, host and port (or from http:// to https:// on
# the same host), so the key never lands on another host; and no request from a public host
# to a loopback, link-local, private or reserved address (a provider cannot point the client
# at the machine's own services or a cloud metadata endpoint).

_ORIGIN = "gpu_tracker_origin"
_NO_FOLLOW = "gpu_tracker_no_follow"  # a request whose redirect is answered, not followed
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    scheme = url.scheme.lower()
    return scheme, url.host.lower(), url.port or _DEFAULT_PORTS.get(scheme)


def trusted_match(entry: str, url: str) -> bool:
    """Whether `url` falls under the `[http] trusted_urls` entry (see above)."""
    try:
        allowed, wanted = httpx.URL(entry), httpx.URL(url)
    except (httpx.InvalidURL, ValueError):
        return False
    if not allowed.host or _origin(allowed) != _origin(wanted):
        return False
    prefix = allowed.path or "/"
    path = wanted.path or "/"
    if prefix.endswith("/"):
        return path.startswith(prefix)
    return path == prefix or path.startswith(prefix + "/")


def _internal(host: str) -> bool:
    """Whether `host` is (or resolves to) a loopback, link-local, private, reserved,
    multicast or unspecified address."""
    import ipaddress
    import socket

    try:
        addresses = [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        if host.lower() == "localhost" or host.lower().endswith(".localhost"):
            return True
        try:
            infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
        except OSError:
            return False  # unresolvable: the request fails on its own
        addresses = [ipaddress.ip_address(str(i[4][0]).split("%")[0]) for i in infos]
    return any(a.is_loopback or a.is_link_local or a.is_private or a.is_reserved
               or a.is_multicast or a.is_unspecified for a in addresses)


def check_redirect(origin: httpx.URL, target: httpx.URL, keyed: bool) -> None:
    """Refuse (SourceError) a redirect from `origin` to `target` the policy forbids."""
    if target.scheme.lower() not in ("http", "https"):
        raise SourceError(f"{_short(str(origin))}: refusing to follow a redirect to a "
                          f"{target.scheme}: URL")
    same_host = target.host.lower() == origin.host.lower()
    upgrade = same_host and (origin.scheme, target.scheme) == ("http", "https") and \
        target.port in (None, 443)
    if keyed and _origin(target) != _origin(origin) and not upgrade:
        raise SourceError(f"{_short(str(origin))}: refusing to follow a redirect to "
                          f"{target.host} with an API key (only the same scheme, host and "
                          "port)")
    if not same_host and _internal(target.host) and not _internal(origin.host):
        raise SourceError(f"{_short(str(origin))}: refusing to follow a redirect to the "
                          f"internal address {target.host}")


def _check_redirect(response: httpx.Response) -> None:
    """The client's response hook: each redirect against the first request's URL."""
    request = response.request
    if not response.has_redirect_location or request.extensions.get(_NO_FOLLOW):
        return
    origin, keyed = request.extensions.get(_ORIGIN, (request.url, False))
    try:
        target = request.url.join(response.headers["Location"])
    except (httpx.InvalidURL, ValueError):
        raise SourceError(f"{_short(str(origin))}: redirect to an invalid URL") from None
    check_redirect(origin, target, keyed)


# -- one POST within a deadline (alert webhooks) -----------------------------------------------

def post_once(url: str, payload: Any, *, timeout: float,
              headers: Mapping[str, str] | None = None,
              transport: httpx.BaseTransport | None = None,
              connect_to: Sequence[str] = ()) -> int:
    """POST `payload` as JSON once (no retry: the caller has its own schedule) and return the
    status, never following a redirect (a 3xx is the caller's to judge). `timeout` bounds
    connecting, sending and every read together: the request runs on a worker thread, and at
    the deadline the client is closed under the blocked read, so a peer trickling its answer
    is cut off. The URL is a secret (a webhook's carries its token): errors name its host
    only, and httpx's log of the request shows `scheme://host/***`.

    `connect_to`: IP addresses to connect to instead of resolving the URL's host (the
    addresses the caller checked), tried in their order until one accepts the connection,
    as a resolved name's are (`socket.create_connection`: "localhost" is ::1, then
    127.0.0.1); the request still names the host (its Host header, and over TLS the name
    sent and the certificate checked, httpcore's `sni_hostname`)."""
    import threading

    parsed = httpx.URL(url)
    host = parsed.host
    sent = dict(headers or {})
    extensions: dict[str, Any] = {}
    targets = [str(parsed.copy_with(host=address)) for address in connect_to] or [url]
    if connect_to:
        sent["Host"] = parsed.netloc.decode("ascii")
        if parsed.scheme == "https":
            extensions["sni_hostname"] = host
    settings = HttpSettings(connect_timeout=timeout, read_timeout=timeout,
                            total_timeout=timeout, retries=0)
    client = HttpClient(settings, transport=transport)
    redact = _RedactUrl(url, *targets)
    httpx_log = logging.getLogger("httpx")
    httpx_log.addFilter(redact)  # httpx logs each request's full URL at INFO
    outcome: dict[str, Any] = {}

    def post() -> None:
        try:
            keyed = client._check_transport(url, None, headers)
            for number, target in enumerate(targets):
                request = client._client.build_request("POST", target, json=payload,
                                                       headers=sent, extensions=extensions)
                request.extensions[_ORIGIN] = (request.url, keyed)
                request.extensions[_NO_FOLLOW] = True
                try:
                    response = client._client.send(request, stream=True,
                                                   follow_redirects=False)
                except httpx.ConnectError:
                    if number + 1 < len(targets):
                        continue  # nothing accepted the connection: nothing was sent
                    raise
                outcome["status"] = response.status_code  # the body is not read
                response.close()
                return
        except Exception as exc:  # reported by the caller's thread
            outcome["error"] = exc

    worker = threading.Thread(target=post, name="post-once", daemon=True)
    try:
        worker.start()
        worker.join(timeout)
        if worker.is_alive():
            client.close()  # closes the socket under the blocked read
            worker.join(1.0)
            raise SourceError(f"POST to {host} took longer than {timeout:g} s; cut off")
    finally:
        client.close()
        httpx_log.removeFilter(redact)
    error = outcome.get("error")
    if error is not None:
        raise SourceError(f"POST to {host} failed: {type(error).__name__}")
    return int(outcome.get("status", 0))


class _RedactUrl(logging.Filter):
    """Replace a secret URL in log records with its host, in the form it was given and the
    form httpx rewrites it to; anything else the scrubber masks."""

    def __init__(self, url: str, *also: str) -> None:
        super().__init__()
        parsed = httpx.URL(url)
        # Also the URL as sent to an address (`post_once`'s connect_to), in both forms.
        self.forms = sorted({url, str(parsed), *also, *(str(httpx.URL(u)) for u in also)},
                            key=len, reverse=True)
        self.shown = f"{parsed.scheme}://{parsed.host}/***"

    def filter(self, record: logging.LogRecord) -> bool:
        from tracker.core.secrets import scrub

        message = record.getMessage()
        cleaned = message
        for form in self.forms:
            cleaned = cleaned.replace(form, self.shown)
        cleaned = scrub(cleaned)
        if cleaned != message:
            record.msg = cleaned
            record.args = ()
        return True


def parse_retry_after(value: str, now: datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date)."""
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    now = now or datetime.now(UTC)
    return max((when - now).total_seconds(), 0.0)


def parse_json(body: bytes, url: str = "") -> Any:
    """JSON with every non-integer number as Decimal, so prices never pass through float."""
    try:
        return json.loads(body, parse_float=Decimal, parse_int=_json_int)
    except (ValueError, UnicodeDecodeError) as exc:
        raise SourceError(f"{_short(url)}: response is not valid JSON ({exc})") from None


def _json_int(text: str) -> int | Decimal:
    """An integer as Python reads it, or a Decimal when it is longer than Python converts
    (4300 digits): one hostile row must not make the whole response unreadable."""
    return int(text) if len(text) <= 100 else Decimal(text)


def _short(url: str) -> str:
    """The URL without its query string (which may carry an API key), scrubbed."""
    from tracker.core.secrets import scrub

    return scrub(url.split("?", 1)[0])

"""Real servers on 127.0.0.1 for end-to-end tests: an HTTP server with scripted replies per
request, a slow peer that answers a byte at a time (`TrickleServer`), an SMTP server that keeps
what it receives (`smtp_inbox`), and `free_port`."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit


@dataclass
class Reply:
    body: bytes = b""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before the headers are sent
    content_type: str = "application/json"

    @classmethod
    def file(cls, path: Path, **kwargs) -> Reply:
        content_type = "text/csv" if path.suffix == ".csv" else "application/json"
        if path.suffix == ".js":
            content_type = "application/javascript"
        return cls(path.read_bytes(), content_type=content_type, **kwargs)


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def json(self):
        return json.loads(self.body)


Handler = Callable[[Request], Reply]


class LoopbackServer:
    """`with LoopbackServer() as server: server.route("/path", handler)`; `server.url`.

    A route is a function of the request, or a list of replies served in order (the last
    one repeats), which is how faults like "500, 500, then 200" are scripted.
    """

    def __init__(self) -> None:
        self.routes: dict[str, Handler] = {}
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        server = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out as separate writes

            def log_message(self, *args) -> None:
                pass

            def _serve(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                request = Request(self.command, parts.path, parse_qs(parts.query),
                                  {k.lower(): v for k, v in self.headers.items()},
                                  self.rfile.read(length) if length else b"")
                with server._lock:
                    server.requests.append(request)
                    handler = server.routes.get(parts.path)
                reply = handler(request) if handler else Reply(b'{"error": "not found"}', 404)
                if reply.delay:
                    time.sleep(reply.delay)
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", reply.content_type)
                    self.send_header("Content-Length", str(len(reply.body)))
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(reply.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_GET = do_POST = do_PUT = _serve

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"  # bound to 127.0.0.1 above

    def route(self, path: str, handler: Handler | list[Reply] | Reply) -> None:
        if isinstance(handler, Reply):
            handler = [handler]
        if isinstance(handler, list):
            replies = list(handler)

            def scripted(_request: Request, replies=replies) -> Reply:
                return replies.pop(0) if len(replies) > 1 else replies[0]

            handler = scripted
        self.routes[path] = handler

    def hits(self, path: str) -> int:
        return sum(1 for r in self.requests if r.path == path)

    def __enter__(self) -> LoopbackServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()


class TrickleServer:
    """A slow peer: each connection gets `head` at once, then `drip` one byte per `interval`
    seconds (over and over with `forever`), so no read timeout ever fires."""

    def __init__(self, drip: bytes, *, head: bytes = b"", interval: float = 0.1,
                 forever: bool = False) -> None:
        self.drip, self.head, self.interval, self.forever = drip, head, interval, forever
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:  # the 0.2 s poll for `stop`, or the socket closed
                continue
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)
                conn.sendall(self.head)
                while True:
                    for byte in self.drip:
                        if self.stop.wait(self.interval):
                            return
                        conn.sendall(bytes([byte]))
                    if not self.forever:
                        return
            except OSError:
                return

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (at the time of asking)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Inbox:
    """An aiosmtpd handler that keeps every message it receives: (from, to, content)."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, list[str], bytes]] = []

    async def handle_DATA(self, server, session, envelope):
        self.messages.append((envelope.mail_from, list(envelope.rcpt_tos), envelope.content))
        return "250 OK"


@contextlib.contextmanager
def smtp_inbox(login: bytes, password: bytes) -> Iterator[tuple[Inbox, int]]:
    """An SMTP server (aiosmtpd) accepting AUTH with `login`/`password`; yields (inbox, port)."""
    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import AuthResult, LoginPassword

    def authenticate(server, session, envelope, mechanism, auth_data):
        ok = isinstance(auth_data, LoginPassword) and (
            auth_data.login, auth_data.password) == (login, password)
        return AuthResult(success=ok, handled=False)

    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port(),
                            authenticator=authenticate, auth_require_tls=False)
    controller.start()
    try:
        yield inbox, controller.port
    finally:
        controller.stop()

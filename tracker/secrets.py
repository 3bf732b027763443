"""The secret scrubber: one function every outgoing string passes, `scrub(text)`.

A provider that echoes the request's key in an error message ("bad key Bearer sk-..."), an
exception that prints a database URL with its password, an SMTP error quoting the login:
any of these would otherwise reach `ingest_run.error`, `job_run.summary`, a log line, the
terminal, the weekly report and its mail. Rather than trusting each call site to remember,
the process learns the values of its secrets once (`learn_environ`, `learn_config`, `learn`)
and every writer (storage, logging, stdout/stderr, report files, mail) passes its text
through `scrub`, which replaces each known value with `***`.

Besides exact values, `scrub` masks what is a credential by its shape wherever it appears:
`Bearer <token>` / `Basic <token>`, the password of a `scheme://user:password@host` URL,
and `key=`/`token=`/`password=` query parameters. Those catch a secret the process was
never told about (a key in a config file another process read, say).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "***"
# Environment variable names that carry secrets (GPU_TRACKER_LAMBDA_API_KEY, ..._SMTP_PASSWORD).
SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.IGNORECASE)
# Shorter values would mask ordinary words and digits ("1", "yes"); real keys are longer.
MIN_SECRET_LENGTH = 6

_SHAPES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=:-]{4,}", re.IGNORECASE),
     rf"\1 {MASK}"),
    (re.compile(r"([a-z][a-z0-9+.-]*://[^/\s:@]*:)[^@\s/]+@", re.IGNORECASE), rf"\1{MASK}@"),
    (re.compile(r"([?&;](?:api[_-]?key|key|token|access_token|password|secret)=)[^&\s\"']+",
                re.IGNORECASE), rf"\1{MASK}"),
)

_lock = threading.Lock()
_known: set[str] = set()
_pattern: re.Pattern[str] | None = None


def learn(values: Iterable[Any]) -> None:
    """Remember secret values to mask from now on (empty and very short ones are ignored)."""
    global _pattern
    fresh = {str(v) for v in values if v is not None and len(str(v)) >= MIN_SECRET_LENGTH}
    with _lock:
        if fresh <= _known:
            return
        _known.update(fresh)
        # Longest first, so a secret that contains another is masked whole.
        ordered = sorted(_known, key=len, reverse=True)
        _pattern = re.compile("|".join(re.escape(v) for v in ordered))


# Outside the project's own variables, only the standard libpq password variable is ours to
# mask; other programs' *_KEY variables (keyboard layouts, keyring paths) are not secrets here.
OTHER_SECRET_VARIABLES = ("PGPASSWORD",)


def learn_environ(environ: Mapping[str, str]) -> None:
    """Learn the values of GPU_TRACKER_* variables whose name says secret (API keys, the SMTP
    password, tokens), PGPASSWORD, and the password of any database URL among them."""
    ours = {name: value for name, value in environ.items()
            if name.startswith("GPU_TRACKER_") or name in OTHER_SECRET_VARIABLES}
    learn(value for name, value in ours.items()
          if SECRET_NAME.search(name) or name in OTHER_SECRET_VARIABLES)
    learn(url_password(value) for value in ours.values() if "://" in value)


def learn_config(data: Mapping[str, Any]) -> None:
    """Learn secret-looking values of a configuration tree (`[smtp] password`, tokens, ...)
    and the password of any URL in it (`[database] url`)."""

    def walk(node: Any, key: str = "") -> None:
        if isinstance(node, Mapping):
            for k, v in node.items():
                walk(v, str(k))
        elif isinstance(node, (list, tuple)):
            for v in node:
                walk(v, key)
        elif isinstance(node, str) and node:
            if SECRET_NAME.search(key):
                learn([node])
            if "://" in node:
                learn([url_password(node)])

    walk(data)


def is_secret(value: Any) -> bool:
    """Whether `value` is one of the learned secret values."""
    return isinstance(value, str) and value in _known


def url_password(url: str) -> str | None:
    """The password of `scheme://user:password@host/...`, or None."""
    match = re.match(r"^[a-z][a-z0-9+.-]*://[^/\s:@]*:([^@\s/]+)@", url, re.IGNORECASE)
    return match.group(1) if match else None


def scrub(text: Any) -> Any:
    """`text` with every known secret and every credential-shaped token replaced by `***`.

    Non-strings are returned unchanged, so callers can pass optional values straight through.
    """
    if not isinstance(text, str) or not text:
        return text
    pattern = _pattern
    if pattern is not None:
        text = pattern.sub(MASK, text)
    for shape, replacement in _SHAPES:
        text = shape.sub(replacement, text)
    return text


def scrub_tree(value: Any) -> Any:
    """`scrub` applied to every string inside dicts, lists and tuples (JSON-able data)."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, Mapping):
        return {k: scrub_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_tree(v) for v in value]
    if isinstance(value, tuple):
        return tuple(scrub_tree(v) for v in value)
    return value


def forget_all() -> None:
    """Forget every learned value (tests)."""
    global _pattern
    with _lock:
        _known.clear()
        _pattern = None


class ScrubbingFilter(logging.Filter):
    """A logging filter that scrubs the formatted message (and any traceback text) of a record.

    Installed on the CLI's log handler, so a library's log line cannot leak a key either.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = scrub(message)
        if record.name == "py.warnings" or record.name.startswith("apscheduler"):
            # Library warnings (APScheduler, tzlocal) as one line: "file:line: Category: text".
            cleaned = " ".join(part.strip() for part in cleaned.strip().splitlines()[:1])
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and record.exc_info[1] is not None:
            formatted = logging.Formatter().formatException(record.exc_info)
            record.exc_text = scrub(formatted)
        return True


__all__ = ["MASK", "ScrubbingFilter", "forget_all", "is_secret", "learn", "learn_config",
           "learn_environ", "scrub", "scrub_tree", "url_password"]

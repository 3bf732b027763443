"""The secret scrubber: one function every outgoing string passes, `scrub(text)`.

A provider that echoes the request's key in an error message ("bad key Bearer sk-..."), an
exception that prints a database URL with its password, an SMTP error quoting the login:
any of these would otherwise reach `ingest_run.error`, `job_run.summary`, a log line, the
terminal, the weekly report and its mail. Rather than trusting each call site to remember,
the process learns the values of its secrets once (`learn_environ`, `learn_config`, `learn`,
`learn_url`) and every writer (storage, logging, stdout/stderr, report files, mail, alert
payloads) passes its text through `scrub`, which replaces each known value with `***`.

A secret is masked in the forms it is echoed in, not only verbatim: in any letter case,
URL-encoded (`quote`, `quote_plus`), base64 (at any of the three byte alignments, so inside
`Basic user:password` too), JSON-, HTML- and repr-escaped (a `-vv` log of a bytes header),
and truncated (a prefix or suffix of at least `MIN_FRAGMENT` characters, or 40% of the
secret when that is longer, as "sk-live-abcd1234..." error messages show). Passwords as short as
`SHORT_SECRET_LENGTH` are masked where they stand as a whole token.

Besides learned values, `scrub` masks what is a credential by its shape wherever it appears:
`Bearer <token>` / `Basic <token>`, the password of a `scheme://user:password@host` URL,
and `key=`/`token=`/`password=` query parameters. Those catch a secret the process was
never told about (a key in a config file another process read, say).

Time is linear in the text on any input: learned forms are found with `str.find` (no
backtracking) and each shape is a regular expression that starts with a literal and uses
possessive quantifiers, so a 10 MB adversarial body scrubs in about a second
(bench/scrubber.py).
"""

from __future__ import annotations

import base64
import html
import json
import logging
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, quote_plus, unquote, urlsplit

MASK = "***"
# Environment variable names that carry secrets (GPU_TRACKER_LAMBDA_API_KEY, ..._SMTP_PASSWORD).
SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.IGNORECASE)
# A password-named value (SMTP, database) this short or longer is masked as a whole token;
# shorter ones would mask digits in every table.
PASSWORD_NAME = re.compile(r"(PASSWORD|PASSWD|SECRET)", re.IGNORECASE)
SHORT_SECRET_LENGTH = 3
# Other values shorter than this would mask ordinary words ("yes"); real keys are longer.
MIN_SECRET_LENGTH = 6
# A truncated echo of a secret (a prefix or a suffix) this long, or 40% of the secret when
# that is longer, is masked: long enough that a common word is not taken for a secret.
MIN_FRAGMENT = 8

# Each shape is searched in the ASCII-lowercased text; its `secret` group is what is masked.
# Each comes with the literals one of its matches must contain, a cheap test that skips it.
_SHAPES: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...] = (
    (("bearer", "basic"),
     re.compile(r"\b(?:bearer|basic)\s{1,8}+(?P<secret>[a-z0-9._~+/=:-]{4,}+)")),
    # The password of scheme://user:password@host (the scheme is not needed to know it).
    (("://",), re.compile(r"://[^/\s:@]*+:(?P<secret>[^@\s/]++)@")),
    (("=",), re.compile(r"[?&;](?:api[_-]?key|key|token|access_token|password|secret|sig|"
                        r"signature)=(?P<secret>[^&\s\"']++)")),
)

# Every literal of every shape, as one pattern: most texts hold none, and are passed over in
# one C-level search.
_SHAPE_LITERALS = re.compile("|".join(re.escape(literal) for needs, _shape in _SHAPES
                                      for literal in needs))

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


@dataclass(frozen=True)
class _Form:
    """One form of a secret as it is searched for: ASCII-lowercased text, how short a prefix
    or suffix of it still counts (its length when only the whole counts), and whether it
    must stand alone (short passwords)."""

    text: str
    fragment: int
    whole_token: bool = False


_lock = threading.Lock()
_known: set[str] = set()
_forms: tuple[_Form, ...] = ()
# Every head and tail the forms are searched by, as one pattern: a short text none of them
# occurs in (most output lines) is passed over in one C-level search instead of a loop.
_candidates: re.Pattern[str] | None = None
SHORT_TEXT = 4096


def _variants(secret: str) -> set[str]:
    """The forms a secret is echoed in (see the module docstring)."""
    forms = {secret, quote(secret, safe=""), quote(secret), quote_plus(secret),
             json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1],
             repr(secret)[1:-1], html.escape(secret)}
    raw = secret.encode("utf-8", "surrogatepass")
    forms.add(repr(raw)[2:-1])
    for pad in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            encoded = encode(b"\0" * pad + raw).decode("ascii").rstrip("=")
            # Drop the characters that also encode the neighbouring bytes.
            head = (pad * 4 + 2) // 3
            tail = (pad + len(raw)) % 3
            core = encoded[head:len(encoded) - (1 if tail else 0)]
            if len(core) >= MIN_FRAGMENT:
                forms.add(core)
    return {f for f in forms if f}


def _forms_of(secret: str, *, short: bool) -> list[_Form]:
    if len(secret) < MIN_SECRET_LENGTH:
        return [_Form(secret.translate(_ASCII_LOWER), len(secret), whole_token=True)] if short \
            else []
    result = []
    for form in _variants(secret):
        text = form.translate(_ASCII_LOWER)
        result.append(_Form(text, min(len(text), max(MIN_FRAGMENT, -(-len(text) * 2 // 5)))))
    return result


def learn(values: Iterable[Any], *, short: bool = False) -> None:
    """Remember secret values to mask from now on. Empty values and values shorter than
    `MIN_SECRET_LENGTH` are ignored, unless `short` (a password): then values from
    `SHORT_SECRET_LENGTH` characters on are masked where they stand as a whole token."""
    global _forms, _candidates
    floor = SHORT_SECRET_LENGTH if short else MIN_SECRET_LENGTH
    fresh = {str(v) for v in values if v is not None and len(str(v)) >= floor}
    with _lock:
        if fresh <= _known:
            return
        forms = {f for value in fresh - _known for f in _forms_of(value, short=short)}
        _known.update(fresh)
        # Longer forms first: a secret that contains another is masked whole.
        ordered = tuple(sorted(set(_forms) | forms, key=lambda f: (-len(f.text), f.text)))
        pieces = {f.text[:f.fragment] for f in ordered} | {f.text[-f.fragment:] for f in ordered}
        # The pattern first: a scrub running meanwhile may pair the old forms with the new
        # pattern (a superset), never new forms with an old pattern that lacks them.
        _candidates = re.compile("|".join(re.escape(p) for p in sorted(pieces)))
        _forms = ordered


def learn_url(url: str) -> None:
    """Learn a URL that is itself a secret (a Slack or Teams webhook carries its token in the
    path): the whole URL, its path and query, and those as an HTTP client rewrites them
    (percent-encoding normalized, as httpx logs the request)."""
    if not url:
        return
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL at all: the whole text is the secret
        learn([url])
        return
    tail = parts.path + (f"?{parts.query}" if parts.query else "")
    candidates = {url, tail, unquote(tail), quote(unquote(tail), safe="/?&=+:@!$'()*,;~")}
    if parts.password:
        candidates.add(parts.password)
    # A path of a single short segment ("/hook") is not a secret worth masking everywhere.
    learn(c for c in candidates if len(c.strip("/")) >= MIN_FRAGMENT)


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
    learn((value for name, value in ours.items()
           if PASSWORD_NAME.search(name) or name in OTHER_SECRET_VARIABLES), short=True)
    learn((url_password(value) for value in ours.values() if "://" in value), short=True)
    webhook = ours.get("GPU_TRACKER_ALERTS_WEBHOOK_URL")
    if webhook:
        learn_url(webhook)


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
                learn([node], short=PASSWORD_NAME.search(key) is not None)
            if "://" in node:
                learn([url_password(node)], short=True)

    walk(data)


def is_secret(value: Any) -> bool:
    """Whether `value` is one of the learned secret values."""
    return isinstance(value, str) and value in _known


def url_password(url: str) -> str | None:
    """The password of `scheme://user:password@host/...`, or None."""
    match = re.match(r"^[a-z][a-z0-9+.-]*://[^/\s:@]*:([^@\s/]+)@", url, re.IGNORECASE)
    return match.group(1) if match else None


def scrub(text: Any) -> Any:
    """`text` with every known secret (in each of its echoed forms) and every
    credential-shaped token replaced by `***`, in time linear in the text.

    Non-strings are returned unchanged, so callers can pass optional values straight through.
    """
    if not isinstance(text, str) or not text:
        return text
    low = text.translate(_ASCII_LOWER)  # same length: only A-Z change
    forms = _forms
    candidates = _candidates  # read after the forms (see learn)
    if forms and (len(low) > SHORT_TEXT or candidates is None or candidates.search(low)):
        spans = _find(low, forms)
    else:
        spans = []
    if _SHAPE_LITERALS.search(low) is not None:
        for needs, shape in _SHAPES:
            if any(literal in low for literal in needs):
                spans.extend(m.span("secret") for m in shape.finditer(low))
    return _mask(text, spans) if spans else text


def _find(low: str, forms: tuple[_Form, ...]) -> list[tuple[int, int]]:
    """Where the forms (or their long enough prefixes and suffixes) occur in the lowercased
    text: (start, end). Each search resumes after the span it found, so the work is linear."""
    size = len(low)
    spans: list[tuple[int, int]] = []
    for form in forms:
        needle, least = form.text, form.fragment
        head = needle[:least]
        at = low.find(head)
        while at >= 0:
            end = at + _longest(low, needle, at, least, prefix=True)
            if not form.whole_token or _alone(low, at, end):
                spans.append((at, end))
                at = low.find(head, end)
            else:
                at = low.find(head, at + 1)
        if least < len(needle):
            tail = needle[-least:]
            at = low.find(tail)
            while at >= 0:
                stop = at + least
                spans.append((stop - _longest(low, needle, stop, least, prefix=False), stop))
                at = low.find(tail, stop) if stop < size else -1
    return spans


def _longest(low: str, needle: str, at: int, least: int, *, prefix: bool) -> int:
    """The longest prefix of `needle` that starts at `at` (or suffix that ends there), given
    that its first (last) `least` characters match: a binary search, since a match of k
    characters implies one of every shorter length."""
    most = len(needle) if prefix else min(len(needle), at)

    def matches(k: int) -> bool:
        return low.startswith(needle[:k], at) if prefix else low.endswith(needle[-k:], 0, at)

    if matches(most):
        return most
    found, high = least, most - 1
    while found < high:
        middle = (found + high + 1) // 2
        if matches(middle):
            found = middle
        else:
            high = middle - 1
    return found


def _alone(text: str, start: int, end: int) -> bool:
    return ((start == 0 or not text[start - 1].isalnum())
            and (end >= len(text) or not text[end].isalnum()))


def _mask(text: str, spans: list[tuple[int, int]]) -> str:
    spans.sort()
    out: list[str] = []
    position = 0
    for start, end in spans:
        if end <= position:
            continue
        if start > position:
            out.append(text[position:start])
            out.append(MASK)
        elif not out or out[-1] != MASK:
            out.append(MASK)
        position = end
    out.append(text[position:])
    return "".join(out)


def scrubber() -> Callable[[str], str]:
    """`scrub` that keeps its answers, for one walk over data whose strings repeat (the
    same provider, region and timestamp in every row): each distinct string is scrubbed
    once. Keep it for one walk only: a secret learned after it was made is not in its
    answers."""
    import functools

    return functools.cache(scrub)


def scrub_tree(value: Any) -> Any:
    """`scrub` applied to every string inside dicts (their string keys too), lists and
    tuples (JSON-able data)."""
    return _scrub_tree(value, scrubber())


def _scrub_tree(value: Any, clean: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, Mapping):
        return {clean(k) if isinstance(k, str) else k: _scrub_tree(v, clean)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub_tree(v, clean) for v in value]
    if isinstance(value, tuple):
        return tuple(_scrub_tree(v, clean) for v in value)
    return value


def forget_all() -> None:
    """Forget every learned value (tests)."""
    global _forms, _candidates
    with _lock:
        _known.clear()
        _forms = ()
        _candidates = None


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
           "learn_environ", "learn_url", "scrub", "scrub_tree", "scrubber", "url_password"]

"""The secret scrubber on adversarial text: 10 MB in one process, linear in the size.

    python bench/scrubber.py            # 10 MB; --mb N for another size

The text is made of the runs that made the previous scrubber quadratic or that make any
backtracking pattern slow: letters with no separator (a scheme pattern `[a-z][a-z0-9+.-]*://`
scanned to the end from every start), `a://a://...` (a URL with no `@`), `Bearer Bearer ...`,
`?key=a&?key=a&...`, `://u:` runs with no `@`, the learned secret repeated with and without
its last characters (every occurrence is masked), its base64 and upper-case forms, and a
short password as a whole word. Four learned secrets.

It prints the time for 1/10 of the text and for all of it (linear: the ratio is ~10), the
throughput, and the ratio against a named baseline measured in the same process: one
`re.sub` of a single literal over the same text, the cheapest scrub there is. The scrubber
of 2026-12-01 (a `[a-z][a-z0-9+.-]*://` scan from every position) is timed on 40 KB of
letters for contrast: it took ~19 s in the issue's report.
"""

from __future__ import annotations

import argparse
import base64
import re
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tracker.core import secrets

KEY = "sk-Live-4fR9xQ2mZ7pL0vB8nT3k"
OTHER = ("hunter2-smtp-password", "rp_0123456789abcdefABCDEF", "pg-Secr3t")
SHORT_PASSWORD = "pw9"


def adversarial(size: int) -> str:
    runs = [
        "a" * 4096,
        "a://" * 512,
        "Bearer " * 512,
        "?key=a&" * 512,
        "://u:" * 512,
        (KEY + " ") * 64,
        (KEY[:-3] + "... ") * 64,
        base64.b64encode(f"user:{KEY}".encode()).decode() + " ",
        KEY.upper() + " ",
        f"{SHORT_PASSWORD} " * 128,
        "x" * 1000 + "://" + "y" * 1000 + ":" + "z" * 1000 + " ",
    ]
    block = "".join(runs)
    return (block * (size // len(block) + 1))[:size]


def old_scrub(text: str, known: list[str]) -> str:
    """The scrubber as of 2026-12-01, for the contrast line."""
    pattern = re.compile("|".join(re.escape(v) for v in sorted(known, key=len, reverse=True)))
    text = pattern.sub("***", text)
    for shape, replacement in (
        (re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=:-]{4,}", re.IGNORECASE), r"\1 ***"),
        (re.compile(r"([a-z][a-z0-9+.-]*://[^/\s:@]*:)[^@\s/]+@", re.IGNORECASE), r"\1***@"),
        (re.compile(r"([?&;](?:api[_-]?key|key|token|access_token|password|secret)=)"
                    r"[^&\s\"']+", re.IGNORECASE), r"\1***"),
    ):
        text = shape.sub(replacement, text)
    return text


def timed(function: Any, *args: Any) -> tuple[float, object]:
    start = time.perf_counter()
    result = function(*args)
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=10.0)
    args = parser.parse_args()
    size = int(args.mb * 1_000_000)
    secrets.forget_all()
    secrets.learn([KEY, *OTHER])
    secrets.learn([SHORT_PASSWORD], short=True)
    text = adversarial(size)
    tenth = text[: size // 10]

    small, _ = timed(secrets.scrub, tenth)
    full, cleaned = timed(secrets.scrub, text)
    literal = re.compile(re.escape(KEY))
    baseline, _ = timed(literal.sub, "***", text)
    assert isinstance(cleaned, str)
    assert KEY not in cleaned and KEY.upper() not in cleaned and KEY[:-3] not in cleaned

    letters = "a" * 40_000
    old, _ = timed(old_scrub, letters[:4_000], [KEY, *OTHER])
    old_full, _ = timed(old_scrub, letters, [KEY, *OTHER])
    new_letters, _ = timed(secrets.scrub, letters)

    print(f"scrub {size / 1e6:g} MB adversarial: {full:.2f} s ({size / 1e6 / full:.1f} MB/s); "
          f"1/10 of it: {small:.3f} s (ratio {full / small:.1f}, 10 is linear)")
    print(f"baseline re.sub of one literal over the same text: {baseline:.3f} s; "
          f"scrub / baseline = {full / baseline:.1f}x")
    print(f"40 KB of letters: {new_letters * 1000:.1f} ms; the 2026-12-01 scrubber "
          f"{old_full:.2f} s (4 KB: {old:.3f} s, ratio {old_full / max(old, 1e-9):.0f}, "
          "100 is quadratic)")


if __name__ == "__main__":
    main()

"""Reading the user's local files (configuration, quotes, FOCUS usage) with a size cap.

Only regular files are read: `--config /dev/zero` or `import /dev/zero` would otherwise read
forever, and a FIFO would block on open. The file is opened non-blocking (a FIFO's open
returns at once), checked with fstat, and read up to its cap: a larger file is refused in one
line before it fills memory. Large files are streamed as text lines (`text_lines`).
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from tracker.core.errors import InvalidInput

MAX_CONFIG_BYTES = 1 << 20  # 1 MiB: a configuration is a few KB
MAX_QUOTES_BYTES = 64 << 20  # the HTTP client's response cap
MAX_USAGE_BYTES = 4 << 30  # 4 GiB of FOCUS usage, streamed (only GPU lines are kept)
MAX_LINE_CHARS = 1 << 20  # one line of a streamed file


def _open_regular(path: Path, what: str) -> int:
    """A descriptor of `path` opened for reading; InvalidInput unless it is a regular file.
    OSError (missing, permission) is the caller's to word."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
                    else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                    else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
            raise InvalidInput(f"{what} {path} is {kind}, not a regular file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _too_large(path: Path, what: str, limit: int) -> InvalidInput:
    return InvalidInput(f"{what} {path} is larger than {_size(limit)}; refused")


def _size(limit: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if limit >= factor and limit % factor == 0:
            return f"{limit // factor} {unit}"
    return f"{limit} bytes"


def read_capped(path: str | os.PathLike[str], what: str, limit: int) -> bytes:
    """The bytes of a regular file of at most `limit` bytes."""
    file_path = Path(path)
    fd = _open_regular(file_path, what)
    with os.fdopen(fd, "rb") as handle:
        if os.fstat(handle.fileno()).st_size > limit:
            raise _too_large(file_path, what, limit)
        data = handle.read(limit + 1)  # a file growing while read is still capped
    if len(data) > limit:
        raise _too_large(file_path, what, limit)
    return data


@contextlib.contextmanager
def text_lines(path: str | os.PathLike[str], what: str, limit: int) -> Iterator[Iterator[str]]:
    """The lines of a regular UTF-8 file (a BOM dropped, line ends kept, as `csv` wants
    them), streamed; InvalidInput once more than `limit` bytes were read."""
    file_path = Path(path)
    fd = _open_regular(file_path, what)
    raw = os.fdopen(fd, "rb")
    with raw:
        if os.fstat(raw.fileno()).st_size > limit:
            raise _too_large(file_path, what, limit)
        text = io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")

        def lines() -> Iterator[str]:
            while True:
                line = text.readline(MAX_LINE_CHARS + 1)
                if not line:
                    return
                if len(line) > MAX_LINE_CHARS:
                    raise InvalidInput(f"{what} {file_path} has a line longer than "
                                       f"{MAX_LINE_CHARS} characters; refused")
                if raw.tell() > limit:
                    raise _too_large(file_path, what, limit)
                yield line

        yield lines()

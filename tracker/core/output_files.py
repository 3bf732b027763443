"""The one writer of output files (report archive, FOCUS export, anything `--out` names).

A file is written whole or not at all, and only where the user meant it:

- the content goes to a temporary file created with `mkstemp` (O_CREAT|O_EXCL, mode 0600, a
  random name) in the target's own directory, so a planted `.NAME.tmp` symlink is never
  followed and the final rename stays on one file system (atomic);
- the target must be a regular file or a new path: a device (`/dev/full`, `/dev/stdout`), a
  FIFO, a directory or a symlink is refused with one line before anything is written, and
  checked again (with `lstat`, not following links) right before the rename, since renaming
  over a device would replace it with a regular file when run as root;
- the data is flushed and fsynced before the rename, so a crash leaves the old file or the
  new one, never a torn one.

Staging and installing are separate steps (`stage`, `install`) for writers that publish
several files together (the weekly archive); `write_atomically` is both for one file.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from tracker.core.errors import InvalidInput

FILE_MODE = 0o644


def check_target(path: str | Path) -> Path:
    """`path` as a Path if it names a regular file or nothing yet (its directory is created
    when the file is staged); InvalidInput in one line otherwise."""
    if str(path).strip() == "":
        raise InvalidInput("output path is empty")
    target = Path(path)
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise InvalidInput(f"cannot write {target}: {exc.strerror}") from None
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise InvalidInput(f"refusing to write {target}: it is {_kind(info.st_mode)}, not a "
                           "regular file (name a new file or a regular one)")
    parent = target.parent
    if parent.exists() and not parent.is_dir():
        raise InvalidInput(f"cannot write {target}: {parent} is not a directory")
    return target


def _make_parent(target: Path) -> None:
    # An OSError (read-only file system, permission denied, disk full) goes up as it is: the
    # CLI describes each in one line (tracker.core.errors.describe_failure).
    target.parent.mkdir(parents=True, exist_ok=True)


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def stage(path: str | Path, content: bytes | Callable[[BinaryIO], None]) -> Path:
    """Write `content` (bytes, or a function writing to the open binary file) to a new
    temporary file next to `path`; returns its path. Nothing is left behind on failure."""
    target = check_target(path)
    _make_parent(target)
    handle, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.",
                                    suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            if isinstance(content, bytes):
                out.write(content)
            else:
                content(out)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(name, FILE_MODE)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    return Path(name)


def install(staged: Path, path: str | Path) -> None:
    """Move a staged file onto `path` (atomic), after checking the target again."""
    try:
        target = check_target(path)
    except BaseException:
        staged.unlink(missing_ok=True)
        raise
    os.replace(staged, target)


def set_aside(path: Path) -> Path | None:
    """Move an existing target out of the way under a new unique name (to restore it if a
    group publish fails); None if there is nothing there."""
    if not os.path.lexists(path):
        return None
    check_target(path)
    handle, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".previous")
    os.close(handle)
    os.replace(path, name)
    return Path(name)


def write_atomically(path: str | Path, content: bytes | Callable[[BinaryIO], None]) -> Path:
    """Write one output file whole (see the module docstring); returns its path."""
    target = check_target(path)
    install(stage(target, content), target)
    return target


__all__ = ["check_target", "install", "set_aside", "stage", "write_atomically"]

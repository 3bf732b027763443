"""Parts of the report computed while the rest of it is: on another core, with the same answer.

`in_background(db, read, *args)` (a read of the store) and `in_parallel(db, work, *args)`
(computing in Python) start the work and return a function that gives its answer (or raises
its error) when called. Where it runs:

- In a forked child process, when that is safe (`_can_fork`), on either database, with the
  answer sent back pickled. A thread would not help: the work is Python holding the GIL
  (SQLite runs inside this process too; on the 50,000-offer store, reads in a thread were no
  faster than inline). A process has its own interpreter and runs on the second core.
- Where no child can be forked (not Linux, one CPU, another thread running, an in-memory SQLite
  database, a connection checked out of the pool): a PostgreSQL read in a thread (the
  server does that work in its own process, the thread mostly waits); anything else inline,
  when the answer is asked for.

The forked child opens its own connections: the parent's idle ones are closed before the
fork (SQLite's documentation: a connection must not be carried across fork()), and forking
is refused while a connection is in use. It never returns into the caller's code: it
writes its answer to a temporary file and leaves with `os._exit`, so nothing of the parent
(buffered output, atexit handlers, open transactions) runs twice. If it fails in any way,
its work runs again inline in the parent, which then raises that work's own error, so the
report behaves exactly as without a child; a child whose answer is never asked for is
stopped and reaped.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import pickle
import signal
import sys
import tempfile
import threading
import weakref
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any, Generic, NoReturn, TypeVar

if TYPE_CHECKING:
    from tracker.store.db import Database

T = TypeVar("T")


def in_background(db: Database, work: Callable[..., T], /, *args: Any,
                  **kwargs: Any) -> Callable[[], T]:
    """`work(*args, **kwargs)` started now on another core where it can be (see the module
    docstring); the function returned gives its answer when called."""
    forked = _forked(db, work, args, kwargs)
    if forked is not None:
        return forked
    if db.dialect != "sqlite":
        return _thread(work, args, kwargs)
    return functools.partial(work, *args, **kwargs)


def in_parallel(db: Database, work: Callable[..., T], /, *args: Any,
                **kwargs: Any) -> Callable[[], T]:
    """`work(*args, **kwargs)`, computing in Python rather than waiting on a database: in a
    forked child where one can be (on either database), else inline when asked for (a
    thread would only wait for the GIL this one holds)."""
    forked = _forked(db, work, args, kwargs)
    return forked if forked is not None else functools.partial(work, *args, **kwargs)


def threaded_reads(db: Database) -> bool:
    """Whether `in_background` would read `db` in a thread now: on PostgreSQL when no child
    can be forked (the database does most of the work in its own process)."""
    return db.dialect != "sqlite" and not _can_fork(db)


def _can_fork(db: Database) -> bool:
    """Whether a child forked now can help and read `db` safely: on Linux with a second CPU,
    this the only thread (a lock another thread holds at the fork would stay held in the
    child forever), no connection in use (it could not be closed before the fork), and on
    SQLite a database file (an in-memory one is this process's alone)."""
    if not sys.platform.startswith("linux"):
        # fork() without exec is what Linux does well; macOS's system frameworks may crash
        # in a forked child (CPython's multiprocessing spawns there), Windows has none.
        return False
    if len(os.sched_getaffinity(0)) < 2:  # one CPU: a child would only take turns with this
        return False
    if db.dialect == "sqlite" and db.sqlite_path is None:
        return False
    if threading.active_count() != 1:
        return False
    checked_out = getattr(db.engine.pool, "checkedout", None)
    return checked_out is not None and checked_out() == 0


def _forked(db: Database, work: Callable[..., T], args: tuple[Any, ...],
            kwargs: dict[str, Any]) -> _ForkedWork[T] | None:
    """`work` started in a forked child, or None where none can be forked safely, or the
    system refuses one (no memory for the process, no room for its answer's file)."""
    if not _can_fork(db):
        return None
    try:
        return _ForkedWork(db, work, args, kwargs)
    except OSError:
        return None


class _ForkedWork(Generic[T]):
    """`work` run in a forked child; calling the object gives its answer."""

    def __init__(self, db: Database, work: Callable[..., T], args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> None:
        self._inline = functools.partial(work, *args, **kwargs)
        # Closed when the answer is taken, or by the reaper.
        self._answer_file: IO[bytes] = tempfile.TemporaryFile(  # noqa: SIM115
            prefix="gpu-tracker-report-")
        # Close the idle pooled connections: the child must open its own, and SQLite's
        # per-file lock bookkeeping is per process (a connection carried across fork() can
        # corrupt the database). The parent reopens one on its next read.
        db.engine.dispose()
        try:
            pid = os.fork()
        except OSError:
            self._answer_file.close()
            raise
        if pid == 0:  # the child: never returns
            _child(self._inline, self._answer_file)
        self._pid: int | None = pid
        # Reaped when called, or when dropped unasked (a build that failed before asking).
        self._reaper = weakref.finalize(self, _reap, pid, os.getpid(), self._answer_file)

    def __call__(self) -> T:
        if self._pid is None:
            raise RuntimeError("the background answer was already taken")
        pid, self._pid = self._pid, None
        self._reaper.detach()
        answer_file = self._answer_file
        try:
            _, status = os.waitpid(pid, 0)
            if os.waitstatus_to_exitcode(status) == 0:
                answer_file.seek(0)
                answer: T = pickle.load(answer_file)
                return answer
        except (OSError, pickle.UnpicklingError, EOFError):
            pass  # an answer this process cannot read back: as if the child had none
        finally:
            answer_file.close()
        # The child could not answer (its work raised, it ran out of memory, it was killed):
        # the work runs here, raising its own error if it has one.
        return self._inline()


def _child(work: Callable[[], Any], answer_file: IO[bytes]) -> NoReturn:
    status = 1
    try:
        # The objects inherited from the parent are never garbage: without this every
        # collection in the child walks them all, and touching them copies the parent's
        # memory page by page.
        gc.freeze()
        pickle.dump(work(), answer_file, protocol=pickle.HIGHEST_PROTOCOL)
        answer_file.flush()
        status = 0
    except BaseException:
        pass  # status 1: the parent runs the work again and raises its error
    finally:
        os._exit(status)


def _reap(pid: int, parent: int, answer_file: IO[bytes]) -> None:
    """Stop and reap a child whose answer nobody will ask for: only from its own parent (a
    later child inherits this object, and must not stop a sibling)."""
    answer_file.close()
    if os.getpid() != parent:
        return
    with contextlib.suppress(ProcessLookupError, ChildProcessError):
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def _thread(work: Callable[..., T], args: tuple[Any, ...],
            kwargs: dict[str, Any]) -> Callable[[], T]:
    answer: list[T] = []
    error: list[BaseException] = []

    def run() -> None:
        try:
            answer.append(work(*args, **kwargs))
        except BaseException as exc:  # raised in the caller's thread, by result()
            error.append(exc)

    # A daemon: a build that fails before taking the answer does not wait for the read.
    thread = threading.Thread(target=run, name=f"report-read-{work.__name__}", daemon=True)
    thread.start()

    def result() -> T:
        thread.join()
        if error:
            raise error[0]
        return answer[0]

    return result

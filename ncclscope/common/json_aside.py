"""One field's JSON made by a forked copy of this process while this one goes on with other work.

`analyze --format json` of a large log: once the workers have ended, the rules run on one core and then
the Case's JSON is made on the same core (tens of MB; together a quarter of a 100 MB log's run), while the
other core idles. The Case's JSON does not depend on the rules: a forked copy of the process makes its
pieces (output_files.field_pieces) into an unnamed temporary file while the rules run, and the output
copies them from there. The bytes are the same either way: where nothing is forked (no fork on this
system, other threads running, a small Case) or the copy fails in any way (a full disk, a signal), the
pieces are made in place, as before.
"""

from __future__ import annotations

import gc
import os
import signal
import tempfile
import threading
from collections.abc import Iterator
from typing import IO, Any

from pydantic import BaseModel

from ncclscope.common.output_files import field_pieces

ASIDE_MIN_ITEMS = 20_000  # records in a model's lists: below it, forking costs more than it saves
READ_BYTES = 1 << 20


def items_in(model: BaseModel) -> int:
    """How many records a model's list fields hold (a measure of its JSON's size)."""
    return sum(len(value) for value in model.__dict__.values() if isinstance(value, list))


class FieldAside:
    """The pieces of field `name` of a `holder` model, made by a forked process. Iterating waits for it and
    gives them; `discard` stops it. Iterate at most once."""

    def __init__(self, holder: type[BaseModel], name: str, value: BaseModel, pid: int, made: IO[bytes]) -> None:
        self._holder, self._name, self._value = holder, name, value
        self._pid: int | None = pid
        self._made = made

    def __iter__(self) -> Iterator[bytes]:
        if self._wait():
            made = self._made
            made.seek(0)
            while chunk := made.read(READ_BYTES):
                yield chunk
            made.close()
            return
        self._made.close()
        # the forked copy did not make them: made here, from the same model
        yield from field_pieces(_stand_in(self._holder, self._name, self._value), self._name)

    def discard(self) -> None:
        """Stops the forked process (the command ended another way) and forgets what it made."""
        if self._pid is not None:
            try:
                os.kill(self._pid, signal.SIGKILL)
            except OSError:
                pass
            self._wait()
        self._made.close()

    def _wait(self) -> bool:
        """Whether the forked process ended well, having made something; it is reaped either way."""
        pid, self._pid = self._pid, None
        if pid is None:
            return False
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            return False
        return os.waitstatus_to_exitcode(status) == 0 and os.fstat(self._made.fileno()).st_size > 0


def field_aside(holder: type[BaseModel], name: str, value: BaseModel) -> FieldAside | None:
    """Field `name` (holding `value`) of a `holder` model to come, its JSON pieces made by a forked process
    from now on; None where nothing is forked (see above): the caller makes them itself."""
    fork = getattr(os, "fork", None)
    if fork is None or threading.active_count() > 1 or items_in(value) < ASIDE_MIN_ITEMS:
        return None  # forking a process with other threads may leave a lock held forever in the copy
    try:
        made = tempfile.TemporaryFile()
    except OSError:
        return None
    try:
        pid = fork()
    except OSError:
        made.close()
        return None
    if pid == 0:
        _make(holder, name, value, made)  # never returns
    return FieldAside(holder, name, value, pid, made)


def _make(holder: type[BaseModel], name: str, value: BaseModel, made: IO[bytes]) -> None:
    """In the forked process: the pieces into `made`, then the process ends (exit status 0 when all were
    written). Nothing else runs here: no exit handlers, no flush of the parent's buffered output."""
    status = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it stops this one
        gc.disable()  # the parent's objects are read only: nothing here makes garbage worth collecting
        stand_in = _stand_in(holder, name, value)  # the other fields are not written
        with open(made.fileno(), "wb", closefd=False) as out:
            for piece in field_pieces(stand_in, name):
                out.write(piece)
        status = 0
    finally:
        os._exit(status)


def _stand_in(holder: type[BaseModel], name: str, value: BaseModel) -> BaseModel:
    """A `holder` with field `name` alone set: the pieces of that field are those of the whole model."""
    values: dict[str, Any] = {name: value}
    return holder.model_construct(**values)

"""Where a file the user named is written: atomically beside a regular file, in place on anything else.

Every output (-o, reports, plots, bundles, redacted copies) is written to a temporary name and renamed,
so no half-written file is left. A rename must not reach a device, a pipe or a socket: renaming over
`-o /dev/null` (as root) would replace the device with a regular file. A symbolic link is followed, so
the file it points to is replaced and the link stays.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import BaseModel


def written_in_place(path: Path) -> bool:
    """The path names something that is not a regular file (a device, FIFO or socket): write into it."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False  # absent (or unreadable): a new file is made by rename
    return not stat.S_ISREG(mode)


def rename_target(path: Path) -> Path:
    """The path a temporary file is renamed to: the file a symbolic link points to, else the path."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def write_in_place(path: Path, data: bytes | Iterable[bytes]) -> None:
    with open(path, "wb") as handle:
        _write_all(handle, data)


def _write_all(handle: IO[bytes], data: bytes | Iterable[bytes]) -> None:
    for chunk in [data] if isinstance(data, bytes) else data:
        handle.write(chunk)


def json_chunks(model: BaseModel, made: Mapping[str, Iterable[bytes]] | None = None) -> Iterator[bytes]:
    """`model` as indented JSON (the bytes of `to_json(model, indent=2)` and a final newline), one
    top-level field at a time, and a field that is itself a model (an Analysis's Case) one of its fields
    at a time: a large Case's JSON is tens of MB, and a serializer's buffer grows to twice that before it
    is copied out, the peak of a run's memory. Each piece is cut from what the serializer itself writes
    when asked for that field only, so the bytes are its own. `made`: the pieces of some fields, made
    already (json_aside.py), as field_pieces gives them."""
    first = True
    for name in type(model).model_fields:
        pieces = iter(made[name] if made and name in made else field_pieces(model, name))
        head = next(pieces, None)
        if head is None:  # excluded from the output
            continue
        yield b"{\n" if first else b",\n"  # apart: a field's lines are tens of MB, not copied to be joined
        yield head
        yield from pieces
        first = False
    yield b"\n}\n" if not first else b"{}\n"


def field_pieces(model: BaseModel, name: str) -> Iterator[bytes]:
    """The lines of one top-level field of `model` in its indented JSON (none when it is excluded), a field
    that is itself a model one of its own fields at a time (json_chunks)."""
    from pydantic import BaseModel

    serializer = model.__pydantic_serializer__
    value = getattr(model, name, None)
    if isinstance(value, BaseModel):
        opened = False
        for sub in type(value).model_fields:
            # {\n  "name": {\n    "sub": ...\n  }\n}: the lines of "sub" end where "\n  }\n}" begins
            part = serializer.to_json(model, indent=2, include={name: {sub}})
            if not part.endswith(b"\n  }\n}"):  # the field or the sub-field is excluded
                continue
            second = part.index(b"\n", 2)
            yield (part[2:second] if not opened else b",") + part[second : -len(b"\n  }\n}")]
            opened = True
        if opened:
            yield b"\n  }"
            return
    piece = serializer.to_json(model, indent=2, include={name})
    if piece != b"{}":
        yield piece[2:-2]  # the field's lines between "{\n" and "\n}"


class Replacement:
    """A file written under a temporary name beside its target, then renamed over it (`commit`) or removed
    (`discard`): a reader never sees half of it. `mode`: the new file's permission bits (else mkstemp's)."""

    def __init__(self, path: Path, mode: int | None = None) -> None:
        self.target = rename_target(path)
        directory = self.target.parent if str(self.target.parent) else Path(".")
        fd, self.temporary = tempfile.mkstemp(prefix=f".{self.target.name}.", suffix=".tmp", dir=directory)
        self.handle: IO[bytes] = os.fdopen(fd, "wb")
        self.mode = mode

    def commit(self) -> None:
        self.handle.close()
        if self.mode is not None:
            os.chmod(self.temporary, self.mode)
        os.replace(self.temporary, self.target)

    def discard(self) -> None:
        self.handle.close()
        Path(self.temporary).unlink(missing_ok=True)


@contextmanager
def replacing(path: Path, mode: int | None = None) -> Iterator[IO[bytes]]:
    """A handle whose bytes replace `path` whole when the block ends, and are dropped if it raises."""
    replacement = Replacement(path, mode)
    try:
        yield replacement.handle
        replacement.commit()
    except BaseException:
        replacement.discard()
        raise


def permissions(bits: int = 0o666) -> int:
    """`bits` less the process's umask: what `open` would give a new file."""
    mask = os.umask(0)
    os.umask(mask)
    return bits & ~mask


def write_file(path: Path, data: bytes | Iterable[bytes]) -> None:
    """`data` (bytes, or chunks of them) into `path`: into a device or pipe in place, else a temporary
    file beside it, renamed."""
    if written_in_place(path):
        write_in_place(path, data)
        return
    with replacing(path) as handle:
        _write_all(handle, data)


def write_output(text: str | bytes | Iterable[bytes], output: Path | None) -> None:
    """Print, or write atomically (temporary file then rename) so no half-written file is left.
    `text` may be UTF-8 bytes already, or chunks of them that end with a newline (json_chunks): a large
    Case's JSON is never copied whole."""
    if isinstance(text, str | bytes):
        data = text if isinstance(text, bytes) else text.encode("utf-8")
        chunks: Iterable[bytes] = [data] if data.endswith(b"\n") else [data, b"\n"]  # apart: no copy of data
    else:
        chunks = text
    if output is None:
        buffer = getattr(sys.stdout, "buffer", None)
        if buffer is None:  # a text-only stream (a test's capture)
            sys.stdout.write(b"".join(chunks).decode("utf-8"))
            return
        sys.stdout.flush()
        _write_all(buffer, chunks)
        buffer.flush()
        return
    write_file(output, chunks)  # never renamed over a device or pipe (common/output_files.py)


# ------------------------------------------------------------------------------------ a reader that leaves
class ReaderSafeStream:
    """A standard output whose reader may leave early (`ncclscope analyze job.log | head`). The first write
    that finds the pipe closed points the descriptor at /dev/null and goes on, so the command finishes and
    exits with its usual status (README, Exit status) instead of stopping mid-print with another one."""

    def __init__(self, stream: IO, fd: int) -> None:
        self._stream = stream
        self._fd = fd

    def _call(self, name: str, *args: object) -> object:
        try:
            return getattr(self._stream, name)(*args)
        except BrokenPipeError:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._fd)
            os.close(devnull)
            return getattr(self._stream, name)(*args)  # what was pending now goes nowhere, without error

    def write(self, data: object) -> object:
        return self._call("write", data)

    def writelines(self, lines: object) -> object:
        return self._call("writelines", lines)

    def flush(self) -> object:
        return self._call("flush")

    @property
    def buffer(self) -> ReaderSafeStream:
        return ReaderSafeStream(self._stream.buffer, self._fd)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


def guard_stdout() -> None:
    """sys.stdout as a ReaderSafeStream (once; a stream without a descriptor, as under a test runner, stays)."""
    if isinstance(sys.stdout, ReaderSafeStream):
        return
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return
    sys.stdout = ReaderSafeStream(sys.stdout, fd)  # type: ignore[assignment]

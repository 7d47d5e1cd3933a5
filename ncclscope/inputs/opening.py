"""Opening inputs and reading them as blocks of whole lines, with line numbers.

An input is a file, `-` (stdin, streamed as it arrives), a `.gz` file, or a directory (read
recursively; of a run directory of `ncclscope run`, the evidence files its manifest lists).
Problems never raise out of here: they are returned as `InputProblem`s naming the input, and
whatever was read before the problem is still used.
"""

from __future__ import annotations

import atexit
import gzip
import json
import os
import shutil
import stat
import sys
import tarfile
import tempfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from ncclscope.inputs import interrupts

BLOCK_BYTES = (
    8 * 1024 * 1024
)  # whole lines per step: large groups of same-shape lines, and memory under 300 MB a process
STDIN_READ_BYTES = 64 * 1024  # small reads: a piped job's output is analysed as it arrives
MAX_LINE_BYTES = 64 * 1024  # longer lines are cut here (the rest is dropped and reported)
SNIFF_BYTES = 8192


@dataclass
class InputFile:
    """One readable input: a path, or '-' for stdin."""

    path: str
    display: str
    span: tuple[int, int] | None = None  # a byte range of the file (whole lines), read by one of several workers
    pipe: bool = False  # a path that is no regular file: a named pipe, `<(command)` (/dev/fd/N), a device

    @property
    def is_stdin(self) -> bool:
        return self.path == "-"

    @property
    def is_stream(self) -> bool:
        """Read once, in order, as it comes (stdin or a pipe): what is read is gone from it, so it is
        neither sniffed before reading nor split nor opened twice."""
        return self.path == "-" or self.pipe


@dataclass
class ReadStats:
    lines: int = 0
    bytes: int = 0
    overlong_lines: list[tuple[int, int]] = field(default_factory=list)  # (line, bytes)
    problems: list[str] = field(default_factory=list)
    binary: bool = False
    damaged: bool = False  # reading stopped early (cut .gz, read error)
    stopped_by: int | None = None  # a signal (Ctrl-C, SIGTERM) ended reading: the rest was never read
    unterminated: bool = False  # the last line has no newline: whoever wrote it stopped mid-line


def expand_inputs(paths: list[str]) -> tuple[list[InputFile], list[str]]:
    """Files to read, in a stable order, and one message per path that cannot be used."""
    files: list[InputFile] = []
    problems: list[str] = []
    for raw in paths:
        if raw == "-":
            files.append(InputFile("-", "-"))
            continue
        path = Path(raw)
        if path.is_dir() and run_manifest(path) is not None:
            unpacked, problem = run_inputs(path, raw)
            files.extend(unpacked)
            if problem:
                problems.append(problem)
        elif path.is_dir():
            members = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
            if not members:
                problems.append(f"{raw}: directory holds no files")
            files.extend(InputFile(str(p), str(p)) for p in members)
        elif path.is_file() and path.name.endswith(BUNDLE_SUFFIXES) and is_bundle(path):
            unpacked, problem = bundle_inputs(path, raw)
            files.extend(unpacked)
            if problem:
                problems.append(problem)
        elif path.exists():
            files.append(InputFile(str(path), raw, pipe=is_pipe(raw)))
        else:
            problems.append(f"{raw}: no such file or directory")
    return files, problems


def is_pipe(path: str) -> bool:
    """A path that names a pipe (`<(command)` gives /dev/fd/63, mkfifo makes one), a socket or a device:
    what is read from it is gone from it."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


BUNDLE_SUFFIXES = (".tar.gz", ".tgz")
BUNDLE_MANIFEST = "manifest.json"
BUNDLE_INPUTS = "inputs/"


def is_bundle(path: Path) -> bool:
    """A .tar.gz written by `ncclscope bundle`: its manifest.json says so."""
    try:
        with tarfile.open(path, "r:gz") as tar:
            member = tar.getmember(BUNDLE_MANIFEST)
            handle = tar.extractfile(member)
            manifest = json.loads(handle.read(1024 * 1024)) if handle else {}
    except (OSError, KeyError, ValueError, tarfile.TarError, EOFError, zlib.error):
        return False
    return isinstance(manifest, dict) and manifest.get("format") == "ncclscope-bundle"


def bundle_inputs(path: Path, raw: str) -> tuple[list[InputFile], str | None]:
    """The inputs/ members of a bundle, unpacked to a private temporary directory (removed at exit),
    shown as 'ticket.tar.gz:inputs/job.log'. Only regular files with plain relative names are taken."""
    workdir = Path(tempfile.mkdtemp(prefix="ncclscope-bundle-"))
    atexit.register(shutil.rmtree, workdir, True)
    files: list[InputFile] = []
    try:
        with tarfile.open(path, "r:gz") as tar:
            for member in tar:
                name = member.name
                parts = Path(name).parts
                if not member.isfile() or not name.startswith(BUNDLE_INPUTS) or ".." in parts or name.startswith("/"):
                    continue
                target = workdir.joinpath(*parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                source = tar.extractfile(member)
                if source is None:
                    continue
                with source, open(target, "wb") as out:
                    shutil.copyfileobj(source, out)
                files.append(InputFile(str(target), f"{raw}:{name}"))
    except (OSError, tarfile.TarError, EOFError, zlib.error) as exc:
        return files, f"{raw}: bundle is damaged ({exc}); read {len(files)} of its inputs"
    if not files:
        return files, f"{raw}: bundle holds no inputs"
    return files, None


RUN_MANIFEST = "manifest.json"
RUN_FORMAT = "ncclscope-run"


def run_manifest(path: Path) -> dict[str, object] | None:
    """The manifest of a run directory written by `ncclscope run`, or None for any other directory."""
    try:
        manifest = json.loads((path / RUN_MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and manifest.get("format") == RUN_FORMAT else None


def run_inputs(path: Path, raw: str) -> tuple[list[InputFile], str | None]:
    """The evidence files a run manifest lists (never its reports, findings.json or the manifest itself,
    which would otherwise be read back as inputs). Only plain relative names inside the directory are taken."""
    manifest = run_manifest(path) or {}
    names = manifest.get("inputs")
    if not isinstance(names, list):
        return [], f"{raw}: the run manifest lists no evidence files"
    files: list[InputFile] = []
    for name in names:
        if not isinstance(name, str) or Path(name).is_absolute() or ".." in Path(name).parts:
            continue
        member = path / name
        if member.is_file():
            files.append(InputFile(str(member), str(Path(raw) / name)))
    return files, None if files else f"{raw}: the run directory holds no evidence files yet"


def open_binary(item: InputFile) -> BinaryIO:
    if item.is_stdin:
        return sys.stdin.buffer
    if item.path.endswith(".gz"):
        return gzip.open(item.path, "rb")  # type: ignore[return-value]
    return open(item.path, "rb")  # noqa: SIM115 - closed by the caller


def read_head(item: InputFile, size: int = SNIFF_BYTES) -> bytes:
    """The first bytes of a file input (not a stream), for sniffing; b'' on any error."""
    if item.is_stream:
        return b""
    try:
        with open_binary(item) as handle:
            return handle.read(size)
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile):
        return b""


def iter_blocks(
    item: InputFile, stats: ReadStats, progress: Callable[[int], None] | None = None
) -> Iterator[tuple[bytes, int]]:
    """Blocks of whole lines (joined by b'\\n', no trailing newline) and the first line's number.
    `progress` is called with the size of every chunk read (decompressed bytes for a .gz)."""
    try:
        with interrupts.waiting_for_input() if item.is_stream else nullcontext():
            handle = open_binary(item)  # a named pipe opens when its writer does
    except interrupts.ReadingStopped:
        stats.stopped_by = interrupts.requested()
        return
    except OSError as exc:
        stats.problems.append(f"cannot open: {exc.strerror or exc}")
        return
    reader = _reader(handle, item.is_stream, item.span)
    pending = b""
    overlong = 0  # bytes of the current line beyond MAX_LINE_BYTES
    line_no = 1
    first = True
    try:
        while True:
            if interrupts.requested() is not None:  # Ctrl-C: keep what was read, read no more
                stats.stopped_by = interrupts.requested()
                break
            try:
                with interrupts.waiting_for_input() if item.is_stream else nullcontext():
                    chunk = reader()
            except interrupts.ReadingStopped:
                stats.stopped_by = interrupts.requested()
                break
            except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
                stats.problems.append(f"compressed data ends early or is damaged ({exc}); read {stats.lines} lines")
                stats.damaged = True
                break
            except OSError as exc:
                stats.problems.append(f"read error after {stats.lines} lines: {exc.strerror or exc}")
                stats.damaged = True
                break
            if not chunk:
                break
            if first:
                first = False
                if b"\x00" in chunk[:SNIFF_BYTES] and not (item.span and item.span[0]):
                    stats.binary = True
                    if chunk[:2] in (b"\xff\xfe", b"\xfe\xff"):  # Windows PowerShell writes `>` files so
                        stats.problems.append("UTF-16 text; convert it first: iconv -f UTF-16 -t UTF-8 FILE")
                    else:
                        stats.problems.append("binary data (NUL bytes), not a text log; skipped")
                    return
            stats.bytes += len(chunk)
            if progress is not None:
                progress(len(chunk))
            cut = chunk.rfind(b"\n")
            if cut < 0:
                pending, overlong = _grow(pending, chunk, overlong)
                continue
            tail = chunk[cut + 1 :]
            if pending:
                first_nl = chunk.find(b"\n", 0, cut)
                if first_nl < 0:
                    pending, overlong = _grow(pending, chunk[:cut], overlong)
                    block = pending
                else:
                    pending, overlong = _grow(pending, chunk[:first_nl], overlong)
                    block = pending + memoryview(chunk)[first_nl:cut]  # one copy of the block, not two
            else:
                block = chunk[:cut]
            # the chunk is not kept while the reader works on the block: 8 MB less in every reading process
            chunk = b""
            if overlong:
                stats.overlong_lines.append((line_no, MAX_LINE_BYTES + overlong))
            count = block.count(b"\n") + 1
            stats.lines += count
            yield block, line_no
            line_no += count
            pending, overlong = b"", 0
            pending, overlong = _grow(pending, tail, overlong)
        if pending or overlong:
            if overlong:
                stats.overlong_lines.append((line_no, MAX_LINE_BYTES + overlong))
            stats.lines += 1
            stats.unterminated = bool(pending.strip())
            yield pending, line_no
    finally:
        if not item.is_stdin:
            handle.close()


def _grow(pending: bytes, more: bytes, overlong: int) -> tuple[bytes, int]:
    """Append to the line being assembled, keeping at most MAX_LINE_BYTES of it."""
    room = MAX_LINE_BYTES - len(pending)
    if len(more) <= room:
        return pending + more, overlong
    return pending + more[: max(room, 0)], overlong + len(more) - max(room, 0)


def _reader(handle: BinaryIO, streaming: bool, span: tuple[int, int] | None = None):  # type: ignore[no-untyped-def]
    """A function returning the next chunk (b'' at the end)."""
    if span is not None:
        handle.seek(span[0])
        left = [span[1] - span[0]]

        def read_span() -> bytes:
            chunk = handle.read(min(BLOCK_BYTES, left[0])) if left[0] > 0 else b""
            left[0] -= len(chunk)
            return chunk

        return read_span
    if streaming and hasattr(handle, "read1"):
        return lambda: handle.read1(STDIN_READ_BYTES)  # type: ignore[attr-defined]
    if isinstance(handle, gzip.GzipFile):
        return _GzipChunks(handle)
    return lambda: handle.read(BLOCK_BYTES)


class _GzipChunks:
    """Decompressed data in big chunks; a damaged or cut stream first yields what came before it."""

    def __init__(self, handle: gzip.GzipFile) -> None:
        self.handle = handle
        self.error: BaseException | None = None

    def __call__(self) -> bytes:
        if self.error is not None:
            raise self.error
        parts: list[bytes] = []
        size = 0
        while size < BLOCK_BYTES:
            try:
                piece = self.handle.read1(1024 * 1024)
            except (EOFError, zlib.error, gzip.BadGzipFile, OSError) as exc:
                self.error = exc
                break
            if not piece:
                break
            parts.append(piece)
            size += len(piece)
        if not parts and self.error is not None:
            raise self.error
        return b"".join(parts)

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
from pathlib import Path


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


def write_in_place(path: Path, data: bytes) -> None:
    with open(path, "wb") as handle:
        handle.write(data)


def write_file(path: Path, data: bytes) -> None:
    """`data` into `path`: into a device or pipe in place, else a temporary file beside it, renamed."""
    if written_in_place(path):
        write_in_place(path, data)
        return
    path = rename_target(path)
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_output(text: str | bytes, output: Path | None) -> None:
    """Print, or write atomically (temporary file then rename) so no half-written file is left.
    `text` may be UTF-8 bytes already (a large Case's JSON: one copy of it, not two)."""
    data = text if isinstance(text, bytes) else text.encode("utf-8")
    end = b"" if data.endswith(b"\n") else b"\n"  # written apart: `data + end` would copy tens of MB
    if output is None:
        buffer = getattr(sys.stdout, "buffer", None)
        if buffer is None:  # a text-only stream (a test's capture)
            sys.stdout.write((data + end).decode("utf-8"))
            return
        sys.stdout.flush()
        buffer.write(data)
        buffer.write(end)
        buffer.flush()
        return
    write_file(output, data + end if end else data)  # never renamed over a device or pipe (output_files.py)

"""The support-ticket bundle: one .tar.gz with the inputs, the reports, the findings and a manifest.

    inputs/...       the inputs as read (redacted when asked), under their own names
    report.html      self-contained report (when ncclscope.render.report is available)
    report.md        Markdown report, with its PNG plots beside it
    ticket.md        the answers NVIDIA's NCCL issue form asks for (impact, the first failure, versions per host,
                     platform and scale, the logs), ready to paste into a ticket
    findings.json    the Analysis as JSON
    manifest.json    ncclscope version, command, creation time, sha256 of every other member,
                     whether the inputs were redacted, and that a redaction map exists outside
                     the bundle (never its content)

`ncclscope analyze ticket.tar.gz` reads the bundle's inputs back (sources.expand_inputs knows a
bundle by its manifest). The archive is written to a temporary file in the target directory and
renamed into place, so a failure leaves no half-written bundle.
"""

from __future__ import annotations

import datetime
import hashlib
import io
import json
import os
import tarfile
import tempfile
from pathlib import Path

from ncclscope import __version__
from ncclscope.case.read import ReadOutcome, read_files
from ncclscope.common.output_files import json_chunks, permissions, replacing, write_in_place, written_in_place
from ncclscope.diagnose.engine import analyze
from ncclscope.inputs.opening import BUNDLE_INPUTS, BUNDLE_MANIFEST, InputFile, expand_inputs
from ncclscope.inputs.redact import Redactor, read_input_bytes, redact_inputs
from ncclscope.model import Analysis
from ncclscope.render.ticket import ticket_summary

BUNDLE_FORMAT = "ncclscope-bundle"


class BundleError(OSError):
    """The bundle cannot be written; str() is one line naming the path and the reason."""


def write_bundle(
    paths: list[str],
    output: str | os.PathLike[str],
    redact: bool = False,
    command: str = "",
    *,
    map_output: str | os.PathLike[str] | None = None,
    jobs: int | None = None,
    select: list[str] | None = None,
    ignore: list[str] | None = None,
) -> ReadOutcome:
    """Write the bundle of `paths` to `output` and return how the inputs were read (its messages and
    exit code are those of `analyze`). With `redact`, the inputs and everything drawn from them carry
    pseudonyms only; `map_output` (optional) receives the redaction map, outside the bundle.
    Raises BundleError when the output cannot be written."""
    out = Path(output)
    directory = out.parent if str(out.parent) else Path(".")
    if not directory.is_dir():
        raise BundleError(f"{out}: cannot write the bundle: directory {directory} does not exist")
    if out.is_dir():
        raise BundleError(f"{out}: cannot write the bundle: it is a directory")
    files, problems = expand_inputs(paths)
    redactor: Redactor | None = None
    with tempfile.TemporaryDirectory(prefix="ncclscope-bundle-") as tmp:
        staging = Path(tmp)
        members = _member_names(files)
        if redact:
            staged, redactor = redact_inputs(files, staging / "redacted")
            members = _member_names(staged)
            problems = [redactor.redact_line(p) for p in problems]
        else:
            staged = [_stage_stream(f, staging, index) for index, f in enumerate(files)]
        shown = [InputFile(s.path, f"{out.name}:{m}") for s, m in zip(staged, members, strict=True)]
        outcome = read_files(shown, problems, paths, jobs)
        if redactor is not None:
            outcome.messages = [redactor.redact_line(m) for m in outcome.messages]
        analysis = analyze(outcome.case, select, ignore)
        contents = {m: Path(s.path) for s, m in zip(staged, members, strict=True)}
        report_dir = staging / "report"
        report_dir.mkdir()
        notes = _write_reports(analysis, report_dir)
        (report_dir / "ticket.md").write_text(ticket_summary(analysis, sorted(members)), encoding="utf-8")
        for produced in sorted(report_dir.rglob("*")):
            if produced.is_file():
                contents[produced.relative_to(report_dir).as_posix()] = produced
        manifest = _manifest(contents, redact, command if redactor is None else redactor.redact_line(command), notes)
        manifest["redaction_map"] = "kept outside the bundle" if redact and map_output else None
        if manifest["redaction_map"] is None:
            del manifest["redaction_map"]
        _write_archive(out, contents, manifest)
    if redactor is not None and map_output is not None:
        redactor.write_map(Path(map_output))
    return outcome


def _member_names(files: list[InputFile]) -> list[str]:
    """inputs/<name>: a file by its base name, a directory member under the directory's name."""
    names: list[str] = []
    seen: set[str] = set()
    for item in files:
        display = item.display  # redacted already when redacting
        if item.is_stdin or display == "-":
            base = "stdin.log"
        else:
            base = Path(display).name
        base = base.replace(":", "_").replace("\\", "_") or "input"
        name = f"{BUNDLE_INPUTS}{base}"
        counter = 2
        while name in seen:
            stem = Path(base)
            name = f"{BUNDLE_INPUTS}{stem.stem}-{counter}{stem.suffix}"
            counter += 1
        seen.add(name)
        names.append(name)
    return names


def _stage_stream(item: InputFile, staging: Path, index: int) -> InputFile:
    """stdin or a pipe, copied once: the bundle holds what the analysis read."""
    if not item.is_stream:
        return item
    target = staging / ("stdin.log" if item.is_stdin else f"{index}-{Path(item.path).name}.log")
    target.write_bytes(read_input_bytes(item))
    return InputFile(str(target), item.display)


def _write_reports(analysis: Analysis, report_dir: Path) -> list[str]:
    """report.html and report.md (with plots) when ncclscope.render.report is there, else Markdown findings."""
    notes: list[str] = []
    try:
        from ncclscope.render import report
    except ImportError:
        report = None  # type: ignore[assignment]
    if report is not None and hasattr(report, "write_html_report"):
        report.write_html_report(analysis, report_dir / "report.html")
        report.write_markdown_report(analysis, report_dir / "report.md")
    else:
        from ncclscope.render.findings import to_markdown

        (report_dir / "report.md").write_text(to_markdown(analysis) + "\n", encoding="utf-8")
        notes.append("report.html not included: this ncclscope has no HTML report")
    write_in_place(report_dir / "findings.json", json_chunks(analysis))  # `analyze --format json`'s bytes
    return notes


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1024 * 1024), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _manifest(contents: dict[str, Path], redact: bool, command: str, notes: list[str]) -> dict[str, object]:
    manifest: dict[str, object] = {
        "format": BUNDLE_FORMAT,
        "ncclscope_version": __version__,
        "command": command,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "redacted": redact,
        "files": {name: {"sha256": _sha256(path), "bytes": path.stat().st_size} for name, path in contents.items()},
    }
    if notes:
        manifest["notes"] = notes
    return manifest


def _write_archive(out: Path, contents: dict[str, Path], manifest: dict[str, object]) -> None:
    if written_in_place(out):  # /dev/null, a pipe: written into, never renamed over (common/output_files.py)
        try:
            with open(out, "wb") as raw, tarfile.open(fileobj=raw, mode="w|gz") as tar:
                _fill_archive(tar, contents, manifest)
        except OSError as exc:
            raise BundleError(f"{out}: cannot write the bundle: {exc.strerror or exc}") from exc
        return
    try:
        with replacing(out, permissions(0o644)) as handle, tarfile.open(fileobj=handle, mode="w:gz") as tar:
            _fill_archive(tar, contents, manifest)
    except OSError as exc:
        raise BundleError(f"{out}: cannot write the bundle: {exc.strerror or exc}") from exc


def _fill_archive(tar: tarfile.TarFile, contents: dict[str, Path], manifest: dict[str, object]) -> None:
    data = json.dumps(manifest, indent=2).encode() + b"\n"
    _add(tar, BUNDLE_MANIFEST, io.BytesIO(data), len(data))
    for name, path in contents.items():
        with open(path, "rb") as handle:
            _add(tar, name, handle, path.stat().st_size)


def _add(tar: tarfile.TarFile, name: str, handle: io.BufferedIOBase | io.BytesIO, size: int) -> None:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mode = 0o644
    info.mtime = int(datetime.datetime.now().timestamp())
    tar.addfile(info, handle)


def read_manifest(path: str | os.PathLike[str]) -> dict[str, object]:
    """The manifest of a bundle (for tests and tools)."""
    with tarfile.open(path, "r:gz") as tar:
        handle = tar.extractfile(BUNDLE_MANIFEST)
        if handle is None:
            raise BundleError(f"{path}: not an ncclscope bundle")
        return json.loads(handle.read())

"""The census of NCCL's messages, release by release (issue 43): every message NCCL's source can print at
INFO, WARN, TRACE or VERSION level, at every release tag from 2.3 on, written as format facts in our own
notation. Nothing of NCCL's code is kept: per message its level, subsystems, the constant words and named,
typed fields of its format, its source file and the releases that print it.

Usage::

    python tools/census/nccl_census.py PATH/TO/nccl.git > tools/census/nccl.json
    python tools/census/nccl_census.py --project rccl PATH/TO/rccl.git > tools/census/rccl.json
    python tools/census/nccl_census.py --project aws-ofi-nccl PATH/TO/aws-ofi-nccl.git > tools/census/aws-ofi-nccl.json
    python tools/census/nccl_census.py --project nccl-fastsocket PATH/TO/nccl-fastsocket.git > ...

RCCL (ROCm/rccl, AMD's fork of NCCL, printing through the same macros) is read at its ROCm release tags from
5.0 on and at the checkout's newest commit (named ``develop-<its date>``); the network plugins aws-ofi-nccl
(its own macros, which put "NET/OFI " first) at its release tags from 1.7, Google's nccl-fastsocket at its
newest commit (it has no release tags). See PROJECTS.

Notation: the format's constant text with each conversion written ``{name:type}``, where type is int,
uint, hex, float, text, ptr or char, and name the word before the field (``rank %d`` -> ``rank {rank:int}``)
or ``v<N>``; literal braces are doubled. A format that is no string literal (a buffer built elsewhere) is
``{dynamic:text}``; a macro in the middle of one (``%" PRIx64 "``) is read as its conversion.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CALLS = {"INFO": 1, "TRACE": 1, "INFO_LOC": 1, "TRACE_LOC": 1, "WARN": 0, "VERSION": 0}  # -> the format's argument
LEVEL_OF = {"INFO_LOC": "INFO", "TRACE_LOC": "TRACE", **{name: name for name in ("INFO", "TRACE", "WARN", "VERSION")}}
# aws-ofi-nccl logs through its own macros, which put "NET/OFI " before the format (include/nccl_ofi_log.h)
OFI_CALLS = {"NCCL_OFI_INFO": 1, "NCCL_OFI_TRACE": 1, "NCCL_OFI_WARN": 0}
OFI_LEVEL_OF = {"NCCL_OFI_INFO": "INFO", "NCCL_OFI_TRACE": "TRACE", "NCCL_OFI_WARN": "WARN"}
SUFFIXES = (".cc", ".cu", ".h", ".c", ".cpp", ".hpp")
TAG_RE = re.compile(r"^v(\d+)\.(\d+)\.(\d+)-(\d+)$")
RCCL_TAG_RE = re.compile(r"^rocm-(\d+)\.(\d+)\.(\d+)$")
OFI_TAG_RE = re.compile(r"^v(\d+)\.(\d+)\.(\d+)$")


@dataclass(frozen=True)
class Project:
    """Where a project's messages are and how it prints them."""

    source: str  # said in the census file
    tags: re.Pattern[str] | None  # its release tags (None: the newest commit only)
    first: tuple[int, int]  # the first release read
    folders: tuple[str, ...]  # where its sources are ("" : the top)
    calls: dict[str, int]  # logging macro -> the index of its format argument
    level_of: dict[str, str]
    lead: str = ""  # what the macro puts before the format
    newest_commit: bool = False  # also read the newest commit (develop-<date>)


PROJECTS = {
    "nccl": Project("NVIDIA/nccl release tags", TAG_RE, (2, 3), ("src",), CALLS, LEVEL_OF),
    "rccl": Project(
        "ROCm/rccl ROCm release tags and its newest commit", RCCL_TAG_RE, (5, 0), ("src",), CALLS, LEVEL_OF,
        newest_commit=True,
    ),
    "aws-ofi-nccl": Project(
        "aws/aws-ofi-nccl release tags", OFI_TAG_RE, (1, 7), ("src", "include"), OFI_CALLS, OFI_LEVEL_OF,
        lead="NET/OFI ",
    ),
    "nccl-fastsocket": Project(
        "google/nccl-fastsocket (no release tags: its newest commit)", None, (0, 0), ("",), CALLS, LEVEL_OF,
        newest_commit=True,
    ),
}  # fmt: skip


def call_re(calls: dict[str, int]) -> re.Pattern[str]:
    return re.compile(r"(?<![\w.>])(" + "|".join(sorted(calls, key=len, reverse=True)) + r")\s*\(")


PRI = {"PRIx64": "lx", "PRIX64": "lX", "PRIu64": "lu", "PRId64": "ld", "PRIi64": "ld", "PRIxPTR": "lx"}
CONVERSION_RE = re.compile(r"%([-+ #0]*)(\*|\d+)?(?:\.(\*|\d+))?(hh|h|ll|l|L|z|j|t)?([diouxXeEfFgGaAcspn%])")
TYPE_OF = {"d": "int", "i": "int", "u": "uint", "o": "uint", "x": "hex", "X": "hex", "c": "char", "s": "text"}
TYPE_OF.update({"p": "ptr", "n": "int", **dict.fromkeys("eEfFgGaA", "float")})
WORD_BEFORE_RE = re.compile(r"(?<![A-Za-z0-9_])([A-Za-z][A-Za-z0-9_]*)\W{0,3}$")


def release_tags(repo: str, project: Project) -> list[str]:
    """The release tags from the project's first on, oldest first, then its newest commit where it says so."""
    tags: list[str] = []
    if project.tags is not None:
        out = subprocess.run(["git", "-C", repo, "tag"], capture_output=True, text=True, check=True).stdout
        pattern = project.tags
        tags = [t for t in out.split() if (m := pattern.match(t)) and (int(m[1]), int(m[2])) >= project.first]
        tags.sort(key=lambda t: tuple(int(x) for x in pattern.match(t).groups()))  # type: ignore[union-attr]
    if project.newest_commit:
        date = subprocess.run(
            ["git", "-C", repo, "log", "-1", "--format=%cs", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        tags.append(f"develop-{date}")
    return tags


def _revision(tag: str) -> str:
    return "HEAD" if tag.startswith("develop-") else tag


def source_blobs(repo: str, tag: str, folders: tuple[str, ...] = ("src",)) -> list[tuple[str, str]]:
    """(path, blob id) of the C/C++ sources in `folders` at `tag` (tests left out)."""
    where = [f for f in folders if f] or []
    out = subprocess.run(
        ["git", "-C", repo, "ls-tree", "-r", _revision(tag), "--", *where], capture_output=True, text=True, check=True
    ).stdout
    blobs = []
    for line in out.splitlines():
        meta, _, path = line.partition("\t")
        if path.endswith(SUFFIXES) and not path.startswith("tests/"):
            blobs.append((path, meta.split()[2]))
    return blobs


def read_blobs(repo: str, ids: list[str]) -> dict[str, str]:
    """Blob id -> text, read in one `git cat-file --batch`."""
    batch = "\n".join(ids).encode() + b"\n"
    proc = subprocess.run(["git", "-C", repo, "cat-file", "--batch"], input=batch, capture_output=True, check=True)
    data, at, texts = proc.stdout, 0, {}
    for blob in ids:
        header_end = data.index(b"\n", at)
        size = int(data[at:header_end].split()[2])
        texts[blob] = data[header_end + 1 : header_end + 1 + size].decode("utf-8", "replace")
        at = header_end + 1 + size + 1
    return texts


def literal_end(text: str, i: int) -> int:
    """Where the string or character literal opening at `i` ends (the index after its closing quote)."""
    quote, j, n = text[i], i + 1, len(text)
    while j < n and text[j] != quote:
        j += 2 if text[j] == "\\" else 1
    return j + 1


def without_comments(text: str) -> str:
    """The source with comments blanked (string and character literals kept whole)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            end = literal_end(text, i)
            out.append(text[i:end])
            i = end
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            out.append(" ")
            i = n if j < 0 else j + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def call_arguments(text: str, start: int) -> list[str] | None:
    """The top-level arguments of the call whose '(' is at `start` (None when it does not close)."""
    args: list[str] = []
    depth, i, begin, n = 0, start + 1, start + 1, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            i = literal_end(text, i)
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                args.append(text[begin:i].strip())
                return args
            depth -= 1
        elif c == "," and depth == 0:
            args.append(text[begin:i].strip())
            begin = i + 1
        i += 1
    return None


LITERAL_RE = re.compile(r'"((?:[^"\\]|\\.)*)"|([A-Za-z_]\w*)')


def format_of(arg: str) -> str | None:
    """The format a call's argument holds: adjacent string literals and PRI macros joined (None: not one)."""
    parts, at = [], 0
    arg = arg.strip()
    while at < len(arg):
        while at < len(arg) and arg[at].isspace():
            at += 1
        if at >= len(arg):
            break
        m = LITERAL_RE.match(arg, at)
        if m is None:
            return None
        if m.group(1) is not None:
            parts.append(bytes(m.group(1), "utf-8").decode("unicode_escape", "replace"))
        elif m.group(2) in PRI:
            parts.append(PRI[m.group(2)])
        else:
            return None
        at = m.end()
    return "".join(parts) if parts else None


def notation(fmt: str) -> tuple[str, list[dict[str, str]]]:
    """A printf format in our notation, and its fields."""
    out: list[str] = []
    fields: list[dict[str, str]] = []
    at = 0
    for m in CONVERSION_RE.finditer(fmt):
        text = fmt[at : m.start()]
        out.append(text.replace("{", "{{").replace("}", "}}"))
        at = m.end()
        conv = m.group(5)
        if conv == "%":
            out.append("%")
            continue
        kind = TYPE_OF[conv]
        tail = CONVERSION_RE.sub(" ", fmt[max(0, m.start() - 40) : m.start()])  # the format's own words before it
        before = WORD_BEFORE_RE.search(tail[:-2] if tail.endswith("0x") else tail)
        name = before.group(1).lower() if before else f"v{len(fields)}"
        taken = sum(1 for f in fields if f["name"] == name or f["name"].startswith(name + "_"))
        name = f"{name}_{taken + 1}" if taken else name
        fields.append({"name": name, "type": kind})
        out.append("{" + f"{name}:{kind}" + "}")
    out.append(fmt[at:].replace("{", "{{").replace("}", "}}"))
    return "".join(out), fields


def messages_of(path: str, text: str, project: Project = PROJECTS["nccl"]) -> list[dict[str, Any]]:
    found = []
    code = without_comments(text)
    for m in call_re(project.calls).finditer(code):
        line_start = code.rfind("\n", 0, m.start()) + 1
        if code[line_start : m.start()].lstrip().startswith("#"):  # a macro's own definition
            continue
        args = call_arguments(code, m.end() - 1)
        name = m.group(1)
        index = project.calls[name]
        if args is None or len(args) <= index:
            continue
        fmt = format_of(args[index])
        if fmt is None:
            shape, fields = "{dynamic:text}", [{"name": "dynamic", "type": "text"}]
        else:
            shape, fields = notation(project.lead + fmt.rstrip("\n"))
        subsystems = sorted({s.removeprefix("NCCL_") for s in re.findall(r"NCCL_[A-Z_]+", args[0])}) if index else []
        level = project.level_of[name]
        entry = {"level": level, "subsystems": subsystems, "format": shape, "fields": fields, "file": path}
        if name.endswith("_LOC"):
            entry["located"] = True  # printed behind "file:line (function) " (INFO_LOC, 2.30.7)
        found.append(entry)
    return found


def census(repo: str, name: str = "nccl") -> dict[str, Any]:
    project = PROJECTS[name]
    tags = release_tags(repo, project)
    by_blob: dict[str, list[dict[str, Any]]] = {}
    seen_in: dict[tuple[str, str, str], set[int]] = defaultdict(set)
    first: dict[tuple[str, str, str], dict[str, Any]] = {}
    for index, tag in enumerate(tags):
        blobs = source_blobs(repo, tag, project.folders)
        new = [blob for _, blob in blobs if blob not in by_blob]
        texts = read_blobs(repo, new) if new else {}
        for path, blob in blobs:
            if blob not in by_blob:
                by_blob[blob] = messages_of(path, texts[blob], project)
            for msg in by_blob[blob]:
                key = (msg["level"], msg["format"], path)
                seen_in[key].add(index)
                first.setdefault(key, {**msg, "file": path})
    out = []
    for key, entry in first.items():
        spans: list[list[str]] = []
        for i in sorted(seen_in[key]):
            if spans and spans[-1][1] == tags[i - 1]:
                spans[-1][1] = tags[i]
            else:
                spans.append([tags[i], tags[i]])
        out.append({**entry, "releases": spans})
    out.sort(key=lambda e: (e["file"], e["level"], e["format"]))
    return {
        "source": f"{project.source}, read by tools/census/nccl_census.py (format facts only)",
        "releases": tags,
        "messages": out,
    }


def main(argv: list[str]) -> int:
    project = "nccl"
    if argv[:1] == ["--project"] and len(argv) > 1:
        project, argv = argv[1], argv[2:]
    if len(argv) != 1 or not Path(argv[0]).exists() or project not in PROJECTS:
        print(__doc__, file=sys.stderr)
        return 2
    found = census(argv[0], project)
    messages = found.pop("messages")
    # one message a line: a new release's census differs from the last by the lines it changes
    head = json.dumps(found, sort_keys=True)[:-1]
    sys.stdout.write(head + ', "messages": [\n')
    sys.stdout.write(",\n".join(json.dumps(m, sort_keys=True) for m in messages))
    sys.stdout.write("\n]}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

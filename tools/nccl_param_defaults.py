"""Write ncclscope/data/nccl_param_defaults.json: the default of every NCCL_* variable that NCCL defines with its
parameter macros (NCCL_PARAM(name, "ENV", default), 2.30's DEFINE_NCCL_PARAM(var, type, NCCL_ENV, default, ...)), at
each release tag of a clone of NVIDIA/nccl, kept as the releases where it changes. Only the facts are kept (the
variable, its default, the first release with it); no line of NCCL's code.

    python tools/nccl_param_defaults.py PATH/TO/nccl.git > ncclscope/data/nccl_param_defaults.json

Variables read with ncclGetEnv and a default in the code around it (NCCL_P2P_LEVEL, NCCL_SOCKET_IFNAME ...) are not
parameters and are not here.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys

TAG_RE = re.compile(r"^v(2\.\d+\.\d+)-\d+$")
PARAM_RE = re.compile(r'NCCL_PARAM\(\s*\w+\s*,\s*"([A-Z0-9_]+)"\s*,\s*(.+?)\s*\)\s*;?\s*$')
DEFINE_RE = re.compile(r"DEFINE_NCCL_PARAM\(\s*\w+\s*,\s*[\w:<> ]+?\s*,\s*(NCCL_[A-Z0-9_]+)\s*,\s*([^,]+?)\s*,")
COMMENT_RE = re.compile(r"/\*.*?\*/")
SUFFIX_RE = re.compile(r"(?<=\d)(?:[uU]?[lL]{1,2}|[uU])\b")


def _git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, check=True).stdout


def _number(node: ast.AST) -> int:
    """An integer expression of literals (1LL << 30, -2, 64*1024), evaluated without eval."""
    if isinstance(node, ast.Expression):
        return _number(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_number(node.operand)
    if isinstance(node, ast.BinOp):
        left, right = _number(node.left), _number(node.right)
        ops = {ast.Add: left + right, ast.Sub: left - right, ast.Mult: left * right}
        if isinstance(node.op, ast.LShift):
            return left << right
        if type(node.op) in ops:
            return ops[type(node.op)]
    raise ValueError("not an integer expression")


def normalise(text: str) -> str:
    """The default as a plain number where it is one (`1LL << 30` -> `1073741824`), else as written."""
    cleaned = SUFFIX_RE.sub("", COMMENT_RE.sub("", text).strip())
    if cleaned in ("true", "false"):  # 2.30's typed parameters; the same values as the 1 and 0 of before
        return "1" if cleaned == "true" else "0"
    try:
        return str(_number(ast.parse(cleaned, mode="eval")))
    except (SyntaxError, ValueError):
        return cleaned


def defaults_at(repo: str, tag: str) -> dict[str, str]:
    found: dict[str, str] = {}
    grep = _git(repo, "grep", "-h", "-E", r"NCCL_PARAM\(", tag, "--", "src")
    for line in grep.splitlines():
        if "#define" in line:
            continue
        match = PARAM_RE.search(line)
        if match:
            found.setdefault(f"NCCL_{match[1]}", normalise(match[2]))
            continue
        match = DEFINE_RE.search(line)
        if match:
            found.setdefault(match[1], normalise(match[2]))
    return found


def main(repo: str) -> None:
    tags = sorted(
        (t for t in _git(repo, "tag").split() if TAG_RE.match(t)),
        key=lambda t: tuple(int(x) for x in TAG_RE.match(t)[1].split(".")),  # type: ignore[index]
    )
    history: dict[str, list[dict[str, str | None]]] = {}
    releases = []
    for tag in tags:
        release = TAG_RE.match(tag)[1]  # type: ignore[index]
        releases.append(release)
        now = defaults_at(repo, tag)
        for name in sorted(set(now) | set(history)):
            value = now.get(name)
            changes = history.setdefault(name, [])
            if (changes[-1]["default"] if changes else None) != value and (changes or value is not None):
                changes.append({"since": release, "default": value})
    data = {
        "about": "The default of each NCCL_* parameter per NCCL release, as the releases where it changes; default"
        " null: the release no longer defines it. Written by tools/nccl_param_defaults.py.",
        "source": f"NVIDIA/nccl release tags v{releases[0]} to v{releases[-1]}: the NCCL_PARAM and"
        " DEFINE_NCCL_PARAM definitions under src/",
        "releases": releases,
        "variables": history,
    }
    json.dump(data, sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: nccl_param_defaults.py PATH/TO/nccl.git")
    main(sys.argv[1])

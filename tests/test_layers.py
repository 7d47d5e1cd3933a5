"""The layer contract: imports run one way, from the front doors down to the model, and never in a circle.

Each folder of the package is a layer (README, "How the code is laid out"). A module may import from its
own folder and from any layer below its own; the front doors of one row (the Python API, the TUI, the
runner, fleet mode) do not import each other. Imports under `if TYPE_CHECKING:` are for the type checker
only and are not counted; imports inside functions are, since they run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "ncclscope"

# top first; the names of one row are front doors side by side that must not import each other
LAYERS: list[tuple[str, ...]] = [
    ("__main__",),
    ("cli",),
    ("api", "tui", "runner", "fleet"),
    ("render",),
    ("diagnose",),
    ("case",),
    ("parse",),
    ("inputs",),
    ("model",),
    ("common",),
    ("",),  # ncclscope/__init__.py: the version, and the API loaded by name on first use
]


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, here: str, is_package: bool, modules: set[str]) -> set[str]:
    """The ncclscope modules a module imports at run time."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".") if is_package else here.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                found.add(candidate if candidate in modules else target)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {name for name in found if name == "ncclscope" or name.startswith("ncclscope.")}


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    files = {module_name(path, root): path for path in root.rglob("*.py")}
    modules = set(files)
    graph = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        graph[name] = _imports(tree, name, path.name == "__init__.py", modules) - {name}
    return graph


def layer_of(module: str) -> tuple[int, str]:
    parts = module.split(".")
    folder = parts[1] if len(parts) > 1 else ""
    for index, row in enumerate(LAYERS):
        if folder in row:
            return index, folder
    raise AssertionError(f"{module}: in no layer of the contract (add its folder to LAYERS)")


def violations(graph: dict[str, set[str]]) -> list[str]:
    wrong = []
    for importer, targets in sorted(graph.items()):
        mine, my_folder = layer_of(importer)
        for target in sorted(targets):
            theirs, their_folder = layer_of(target)
            if theirs < mine:
                wrong.append(f"{importer} imports {target}: from a lower layer up")
            elif theirs == mine and their_folder != my_folder:
                wrong.append(f"{importer} imports {target}: front doors side by side")
    return wrong


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in graph:
                continue
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def test_imports_run_from_the_front_doors_down() -> None:
    assert violations(import_graph()) == []


def test_no_module_imports_itself_in_a_circle() -> None:
    assert cycles(import_graph()) == []


def test_the_package_top_holds_at_most_eight_modules() -> None:
    assert len(list(PACKAGE.glob("*.py"))) <= 8


@pytest.mark.parametrize("init", sorted(PACKAGE.rglob("__init__.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_each_folder_says_in_its_first_line_what_lives_there(init: Path) -> None:
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
    assert doc and doc.splitlines()[0].strip(), f"{init}: no docstring"


def test_an_upward_import_and_a_circle_are_caught(tmp_path: Path) -> None:
    """The contract itself: a parser that imports a renderer, and two modules that import each other."""
    root = tmp_path / "ncclscope"
    for folder in ("parse", "render", "model"):
        (root / folder).mkdir(parents=True)
        (root / folder / "__init__.py").write_text('"""x"""\n')
    (root / "__init__.py").write_text('"""x"""\n')
    (root / "parse" / "reader.py").write_text("from ncclscope.render.html import page\n")
    (root / "render" / "html.py").write_text(
        "from ncclscope.model import base\nfrom typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from ncclscope.parse import reader\n"
    )
    (root / "model" / "base.py").write_text("def f():\n    from ncclscope.model import other\n")
    (root / "model" / "other.py").write_text("from . import base\n")
    graph = import_graph(root)
    assert violations(graph) == ["ncclscope.parse.reader imports ncclscope.render.html: from a lower layer up"]
    assert cycles(graph) == [["ncclscope.model.base", "ncclscope.model.other"]]

"""The layout's rules, checked on the source: import direction, no circles, no private imports, sizes.

docs/design/index.md: imports run ``app -> indexer -> retriever`` and ``app -> training ->
retriever``; nothing imports ``app``. Inside the packages no module imports
another that (directly or through others) imports it back, counting imports
inside functions too, and no module takes a private (``_name``) name from
another. Modules stay under ``MAX_MODULE_LINES`` and functions under
``MAX_FUNCTION_LINES`` lines of code (docstrings, comments and blank lines not
counted) unless listed below with the reason one concern needs it.
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("retriever", "indexer", "training", "app")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
# module -> why one concern needs more lines
LONG_MODULES: dict[str, str] = {}
# "module:function" -> why it is longer (declarative tables only)
LONG_FUNCTIONS: dict[str, str] = {}
# who may import whom: a package not listed for an importer is forbidden to it
ALLOWED = {
    "retriever": {"retriever"},
    "indexer": {"indexer", "retriever"},
    "training": {"training", "retriever"},
    "app": {"app", "indexer", "training", "retriever"},
    "benchmarks": {"benchmarks", "indexer", "training", "retriever"},
}


def _modules() -> dict[str, Path]:
    found = {}
    for package in (*PACKAGES, "benchmarks"):
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


MODULES = _modules()


def _imports(path: Path) -> list[tuple[str, str | None, int]]:
    """``(module, imported name or None, line)`` for every import in ``path``, inside functions too."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(alias.name, None, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out += [(node.module, alias.name, node.lineno) for alias in node.names]
    return out


def _targets(module: str, name: str | None) -> list[str]:
    """The project modules an import reaches: a submodule named by ``from P import m``, else the module."""
    if name is not None and f"{module}.{name}" in MODULES:
        return [f"{module}.{name}"]
    return [module] if module in MODULES else []


GRAPH = {
    name: {t for module, imported, _ in _imports(path) for t in _targets(module, imported)} - {name}
    for name, path in MODULES.items()
}


def test_imports_run_one_way():
    wrong = [
        f"{name} imports {target}"
        for name, targets in GRAPH.items()
        for target in targets
        if target.split(".")[0] not in ALLOWED[name.split(".")[0]]
    ]
    assert not wrong, wrong


def test_the_storage_room_imports_nothing_from_search():
    """docs/design/segments.md: storage writes and checks every segment file; search may import storage, never
    the reverse (what storage needs built, its callers hand in: ``retriever.storage.builders``)."""
    wrong = [
        f"{path.relative_to(ROOT)}:{line} imports {module}" + (f".{imported}" if imported else "")
        for name, path in MODULES.items()
        if name.startswith("retriever.storage.") or name == "retriever.storage"
        for module, imported, line in _imports(path)
        if module == "retriever.search"
        or module.startswith("retriever.search.")
        or (module == "retriever" and imported == "search")
    ]
    assert not wrong, wrong


def test_no_import_circle():
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(name: str) -> list[str] | None:
        state[name] = 1
        stack.append(name)
        for target in sorted(GRAPH[name]):
            if state.get(target) == 1:
                return stack[stack.index(target) :] + [target]
            if target not in state and (circle := visit(target)):
                return circle
        stack.pop()
        state[name] = 2
        return None

    for name in sorted(GRAPH):
        if name not in state:
            circle = visit(name)
            assert circle is None, " -> ".join(circle)


def test_no_private_name_is_imported_from_another_module():
    private = [
        f"{path.relative_to(ROOT)}:{line} takes {name} from {module}"
        for path in MODULES.values()
        for module, name, line in _imports(path)
        if name and name.startswith("_") and not name.startswith("__") and _targets(module, None)
    ]
    assert not private, private


_NOT_CODE = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENCODING,
    tokenize.ENDMARKER,
}


def _code_lines(source: str, tree: ast.Module) -> set[int]:
    """The numbers (1-based) of the lines of ``source`` that hold code.

    Blank lines, comment-only lines and docstrings (the leading string of the
    module, a class or a function, found with ``ast``) are not code; every line
    a code token spans is (a multi-line string that is no docstring counts).
    """
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in _NOT_CODE:
            lines.update(range(token.start[0], token.end[0] + 1))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                lines.difference_update(range(first.lineno, first.end_lineno + 1))
    return lines


def test_code_lines_leave_out_docstrings_comments_and_blank_lines():
    source = '"""Module.\n\nMore."""\n\n# a comment\nX = """not a\ndocstring"""\n\n\ndef f():\n    """Doc."""\n    return 1  # counted\n'
    assert sorted(_code_lines(source, ast.parse(source))) == [6, 7, 10, 12]


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_and_function_sizes(name):
    """Lines of code (``_code_lines``), not of text: docstrings, comments and blank lines are free."""
    path = MODULES[name]
    relative = str(path.relative_to(ROOT))
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    code = _code_lines(source, tree)
    if relative not in LONG_MODULES:
        assert len(code) <= MAX_MODULE_LINES, f"{relative} has {len(code)} lines of code"
    sizes = {
        node: len(code.intersection(range(node.lineno, node.end_lineno + 1)))
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    long = [
        f"{node.name} ({size} lines of code)"
        for node, size in sizes.items()
        if size > MAX_FUNCTION_LINES and f"{relative}:{node.name}" not in LONG_FUNCTIONS
    ]
    assert not long, f"{relative}: {', '.join(long)}"


def test_the_rules_see_real_imports():
    """The checks above read the tree they guard: the facade's own imports are found."""
    assert "retriever.storage.writer" in GRAPH["retriever.collection"]
    assert "retriever.search.searcher" in GRAPH["retriever.collection"]
    assert GRAPH["app.cli"] and all(name in MODULES for name in GRAPH["app.cli"])

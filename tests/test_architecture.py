"""Facts about the code's shape that the design depends on: every provider-specific fact
lives in that provider's dialect (no branching on a provider's name elsewhere), and the
package imports without cycles."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "windowfit"

#: The names a branch would compare with: the four wire formats and their providers.
PROVIDER_NAMES = frozenset(
    {"anthropic", "openai", "openai-responses", "openai_responses", "gemini"}
)

#: Where provider facts belong: the dialects, and the server doors each of which speaks
#: exactly one API (their names say which).
DIALECT_HOMES = ("formats/",)

#: Files not yet moved onto their dialect (shrink this list; never grow it).
NOT_YET: frozenset[str] = frozenset()


def _names_in(node: ast.AST) -> set[str]:
    """Provider names written as string literals directly in ``node`` (a constant, or a
    tuple/list/set of constants)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} & PROVIDER_NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_names_in(e) for e in node.elts)) if node.elts else set()
    return set()


def provider_branches(tree: ast.AST) -> list[tuple[int, str]]:
    """Every comparison with a provider's name (``x == "anthropic"``, ``x in ("openai",
    ...)``, ``case "gemini":``), as (line, source)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            ops = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)
            if any(isinstance(op, ops) for op in node.ops) and any(
                _names_in(side) for side in (node.left, *node.comparators)
            ):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.match_case):
            pattern = node.pattern
            if isinstance(pattern, ast.MatchValue) and _names_in(pattern.value):
                found.append((pattern.lineno, ast.unparse(pattern)))
    return found


def _sources() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def test_the_branch_finder_finds_branches() -> None:
    code = (
        'if provider == "anthropic": pass\n'
        'x = "openai" != kind\n'
        'y = fmt in ("gemini", "other")\n'
        'match name:\n    case "openai-responses": pass\n'
        'z = DIALECTS["anthropic"]\n'  # a lookup by name is not a branch
        'w = kind == "text"\n'
    )
    assert [line for line, _ in provider_branches(ast.parse(code))] == [1, 2, 3, 5]


def test_no_provider_name_branches_outside_the_dialects() -> None:
    offenders = []
    for path in _sources():
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith(DIALECT_HOMES) or rel in NOT_YET:
            continue
        for line, source in provider_branches(ast.parse(path.read_text(encoding="utf-8"))):
            offenders.append(f"{rel}:{line}: {source}")
    assert not offenders, "ask the dialect instead:\n" + "\n".join(offenders)


def test_files_waiting_for_their_dialect_still_branch() -> None:
    for rel in NOT_YET:
        path = SRC / rel
        assert path.exists(), f"{rel} is gone: drop it from NOT_YET"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert provider_branches(tree), f"{rel} no longer branches: drop it from NOT_YET"


def _module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    package = parts[-1] == "__init__"
    return ".".join(parts[:-1] if package else parts), package


def _import_time_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """Statements Python runs when the module is imported: the top level and inside
    top-level ``if``/``try`` blocks, except ``if TYPE_CHECKING:``."""
    out: list[ast.stmt] = []
    for node in body:
        if isinstance(node, ast.If):
            if "TYPE_CHECKING" in ast.unparse(node.test):
                out.extend(_import_time_statements(node.orelse))
                continue
            out.extend(_import_time_statements(node.body + node.orelse))
        elif isinstance(node, ast.Try):
            handlers = [s for h in node.handlers for s in h.body]
            out.extend(_import_time_statements(node.body + handlers + node.orelse + node.finalbody))
        else:
            out.append(node)
    return out


def import_graph() -> dict[str, set[str]]:
    """windowfit module -> the windowfit modules it imports when it is imported."""
    modules = {_module_name(p)[0]: p for p in _sources()}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = _module_name(path)[1]
        here = name.split(".") if package else name.split(".")[:-1]
        deps: set[str] = set()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in _import_time_statements(tree.body):
            if isinstance(node, ast.ImportFrom):
                base = here[: len(here) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                if target in modules:
                    deps.add(target)
                deps.update(f"{target}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
        graph[name] = (deps & modules.keys()) - {name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def test_the_cycle_finder_finds_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_the_package_imports_without_cycles() -> None:
    graph = import_graph()
    assert len(graph) > 50 and graph["windowfit"]  # the walk saw the package
    assert _cycles(graph) == []

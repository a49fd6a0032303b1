"""The package's import graph: no import circle between beamcrawl modules, no private name of another.

Also: no public class name defined in two modules (``RobotsRules`` for the crawler's robots.txt
and for the audit's reading of it was one), so a name says which class it is.

Read statically with :mod:`ast`, so a circle hidden in a function body (an import made lazily
to dodge the cycle at load time) counts as much as one at module level. Imports under
``if TYPE_CHECKING:`` are left out: they never run, and name a type only. A private name is
one that starts with a single underscore; importing it (``from m import _f``) or reaching
for it through an imported module (``m._f``) couples a module to another's internals.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterable, Mapping
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

PACKAGE = Path(__file__).resolve().parents[1] / "beamcrawl"

# Circles and private-name uses allowed for now (none): each entry is the set of modules of one
# circle, or (importer, owner, name); the test fails on any other.
KNOWN_CIRCLES: list[frozenset[str]] = []
KNOWN_PRIVATE: set[tuple[str, str, str]] = set()


def module_files(root: Path = PACKAGE) -> dict[str, Path]:
    """Dotted module name → file, for every module and package under ``root``."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterable[ast.Import | ast.ImportFrom]:
    """Every import statement in ``tree``, at any depth, except under ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _source_module(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _owner(name: str, modules: Mapping[str, Path]) -> str | None:
    """The longest prefix of a dotted name that is one of ``modules``."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(modules: Mapping[str, Path]) -> tuple[dict[str, set[str]], list[tuple[str, str, str]]]:
    """The modules each module imports, and every use of another module's private name.

    Returns:
        ``(edges, private)``: ``edges[m]`` the modules ``m`` imports; ``private`` the
        ``(importer, owner, name)`` triples.
    """
    edges: dict[str, set[str]] = {m: set() for m in modules}
    private: list[tuple[str, str, str]] = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        is_package = path.name == "__init__.py"
        aliases: dict[str, str] = {}  # local name → module it is bound to
        for node in _imports(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    target = _owner(alias.name, modules)
                    if target is not None:
                        edges[module].add(target)
                        aliases[alias.asname or alias.name.split(".")[0]] = (
                            target if alias.asname else alias.name.split(".")[0]
                        )
                continue
            source = _source_module(module, is_package, node)
            if source not in modules:
                continue
            for alias in node.names:
                full = f"{source}.{alias.name}"
                if full in modules:  # a submodule
                    edges[module].add(full)
                    aliases[alias.asname or alias.name] = full
                    continue
                edges[module].add(source)
                if alias.name.startswith("_") and not alias.name.startswith("__") and source != module:
                    private.append((module, source, alias.name))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and aliases.get(node.value.id, module) != module
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                private.append((module, aliases[node.value.id], node.attr))
        edges[module].discard(module)
    return edges, private


def circles(edges: Mapping[str, Iterable[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[frozenset[str]] = []
    counter = itertools.count()
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = next(counter)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = next(counter)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def _describe(component: frozenset[str], edges: Mapping[str, set[str]]) -> str:
    return "; ".join(f"{m} imports {', '.join(sorted(edges[m] & component))}" for m in sorted(component))


def test_no_import_circle_between_modules() -> None:
    edges, _ = import_graph(module_files())
    unexpected = [c for c in circles(edges) if c not in KNOWN_CIRCLES]
    assert not unexpected, "import circles (move the shared code down):\n" + "\n".join(
        _describe(c, edges) for c in unexpected
    )


def test_no_module_imports_a_private_name_of_another() -> None:
    _, private = import_graph(module_files())
    unexpected = sorted(set(private) - KNOWN_PRIVATE)
    assert not unexpected, "private names used across modules (make them public or move them): " + ", ".join(
        f"{importer} uses {owner}.{name}" for importer, owner, name in unexpected
    )


def test_no_public_class_name_is_defined_in_two_modules() -> None:
    where: dict[str, list[str]] = {}
    for module, path in module_files().items():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                where.setdefault(node.name, []).append(module)
    twice = {name: modules for name, modules in where.items() if len(modules) > 1}
    assert not twice, f"class names defined in more than one module: {twice}"


def test_the_graph_sees_lazy_relative_and_attribute_imports(tmp_path: Path) -> None:
    """The reader finds what the tree test relies on: imports inside functions, relative
    imports, submodules imported from their package, and ``module._name`` uses."""
    pkg = tmp_path / "beamcrawl"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text("def f():\n    from beamcrawl.sub.b import g\n    return g\n")
    (pkg / "sub" / "b.py").write_text("from . import c\n\ndef g():\n    return c._hidden\n")
    (pkg / "sub" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from beamcrawl.sub.a import f\n"
        "from beamcrawl.sub.a import _private\nimport beamcrawl.sub.b as bee\n"
    )
    edges, private = import_graph(module_files(pkg))
    assert edges["beamcrawl.sub.a"] == {"beamcrawl.sub.b"}
    assert edges["beamcrawl.sub.b"] == {"beamcrawl.sub.c"}
    assert edges["beamcrawl.sub.c"] == {"beamcrawl.sub.a", "beamcrawl.sub.b"}
    assert circles(edges) == [frozenset({"beamcrawl.sub.a", "beamcrawl.sub.b", "beamcrawl.sub.c"})]
    assert sorted(private) == [
        ("beamcrawl.sub.b", "beamcrawl.sub.c", "_hidden"),
        ("beamcrawl.sub.c", "beamcrawl.sub.a", "_private"),
    ]


def _reachable(edges: Mapping[str, Iterable[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in edges.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from("abcdefgh"), st.sets(st.sampled_from("abcdefgh"), max_size=4), max_size=8))
def test_circles_are_the_mutually_reachable_groups(graph: dict[str, set[str]]) -> None:
    """On any graph, two nodes share a circle exactly when each reaches the other."""
    edges = {node: set(targets) - {node} for node, targets in graph.items()}
    reach = {node: _reachable(edges, node) for node in edges}
    expected = {frozenset({n} | {m for m in edges if m in reach[n] and n in reach.get(m, set())}) for n in edges}
    assert set(circles(edges)) == {group for group in expected if len(group) > 1}

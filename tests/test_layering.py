"""The package layering of docs/architecture.md (its table of packages), checked by walking every module's imports
with `ast` (a lazy import inside a function counts too; relative imports are resolved, so `from ..gateway import x`
cannot slip through):
- storage imports no trio/codecs/gateway; codecs import no trio/storage/gateway;
- the gateway imports none of the tooling (pipeline, bench, clients, cli);
- pipeline (a client of the gateway) imports no gateway, storage, bench or cli;
- clients import no storage, gateway, pipeline, bench or cli; bench imports no cli;
- bench and clients are leaves: nothing in gateway/storage/codecs/pipeline imports bench, and only cli, bench,
  pipeline (and tests) import clients;
- gateway's modules import one another without a circle, even through imports inside functions or for type checking;
- the protocol packages (gateway/protocols) import nothing of storage: handlers reach it through the steps.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("storage", "codecs", "gateway", "pipeline", "clients", "bench", "cli")
TOOLING = ("logway.clients", "logway.pipeline", "logway.bench", "logway.cli")
FORBIDDEN = {
    "storage": ("trio", "logway.codecs", "logway.gateway", *TOOLING),
    "codecs": ("trio", "logway.storage", "logway.gateway", *TOOLING),
    "gateway": TOOLING,
    "pipeline": ("logway.gateway", "logway.storage", "logway.bench", "logway.cli"),
    "clients": ("logway.storage", "logway.gateway", "logway.pipeline", "logway.bench", "logway.cli"),
    "bench": ("logway.cli",),
}
#: Who may import each leaf package (besides itself and the tests).
LEAVES = {
    "logway.bench": {"cli"},
    "logway.clients": {"cli", "bench", "pipeline"},
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(("logway", *parts))


def imported_modules(path: Path, *, at_import: bool = False) -> set[str]:
    """Every module `path` imports, relative imports made absolute (`from p import x`: both p and p.x, as x may be a
    module). `at_import`: only the imports that run when the module is imported (`_import_time`)."""
    tree = ast.parse(path.read_text(), str(path))
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    names = set()
    for node in _import_time(tree.body) if at_import else ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                module = node.module
            else:
                base = package[:len(package) - node.level + 1]
                module = ".".join((*base, node.module) if node.module else base)
            if node.module:
                names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def _import_time(body: list[ast.stmt]):
    """The import statements of `body` that run when its module is imported: at module level, in class bodies and in
    `if`/`try`/`with` blocks — not inside functions (run when called) nor under `if TYPE_CHECKING:` (never run)."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            test = node.test
            if not (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"
                    or isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"):
                yield from _import_time(node.body)
            yield from _import_time(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, *(handler.body for handler in node.handlers), node.orelse, node.finalbody):
                yield from _import_time(block)
        elif isinstance(node, (ast.ClassDef, ast.With)):
            yield from _import_time(node.body)


def _files(package: str) -> list[Path]:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"no modules found in {package}/"
    return files


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_respect_the_layers(package):
    offenders = []
    for path in _files(package):
        for name in imported_modules(path):
            if any(_within(name, bad) for bad in FORBIDDEN[package]):
                offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not offenders, offenders


def test_protocol_handlers_reach_storage_only_through_steps():
    """No module under gateway/protocols imports logway.storage — at import time, inside a function or under
    TYPE_CHECKING: what a handler needs of storage (appends, reads, positions, topic administration, committed
    offsets) is a step (`gateway/steps.py`, `gateway/topic_admin.py`), and storage's errors reach it as
    `errors.ErrorKind`s."""
    offenders = [f"{path.relative_to(ROOT)} imports {name}" for path in _files("gateway/protocols")
                 for name in imported_modules(path) if _within(name, "logway.storage")]
    assert not offenders, offenders


@pytest.mark.parametrize("leaf", sorted(LEAVES))
def test_tooling_packages_are_leaves(leaf):
    offenders = []
    for package in PACKAGES:
        if package == leaf.split(".")[1] or package in LEAVES[leaf]:
            continue
        for path in _files(package):
            offenders += [f"{path.relative_to(ROOT)} imports {name}" for name in imported_modules(path)
                          if _within(name, leaf)]
    assert not offenders, offenders


def test_no_module_imports_a_top_level_codecs_package():
    for path in ROOT.glob("*/**/*.py"):
        if ".venv" in path.parts:
            continue
        for name in imported_modules(path):
            assert name != "codecs" or path.parts[-2] == "tests", f"{path} imports the stdlib-shadowed 'codecs'"


def test_every_module_has_a_docstring():
    missing = []
    for package in PACKAGES:
        for path in _files(package):
            if not ast.get_docstring(ast.parse(path.read_text())):
                missing.append(str(path.relative_to(ROOT)))
    assert not missing, f"modules without a docstring: {missing}"


def test_only_the_postgres_backend_imports_its_driver():
    """psycopg is imported by logway.storage.pg (and the benchmarks, which run a database of their own) alone, and
    nothing else in storage imports that package: a gateway on local files never loads the driver."""
    offenders = []
    for package in PACKAGES:
        for path in _files(package):
            inside = path.is_relative_to(ROOT / "storage" / "pg") or package == "bench"
            for name in imported_modules(path):
                if _within(name, "psycopg") and not inside:
                    offenders.append(f"{path.relative_to(ROOT)} imports {name}")
                if _within(name, "logway.storage.pg") and package == "storage" and not inside:
                    offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not offenders, offenders


def import_cycle(package: str, *, at_import: bool = False) -> list[str] | None:
    """A cycle among `package`'s modules through their imports — every one, or (`at_import`) only those that run
    when they are imported (a module also depends on the packages above each module it imports: their `__init__`
    runs first) — as [a, b, …, a]; None if there is none."""
    modules = {_module_name(path): path for path in _files(package)}
    graph = {}
    for name, path in modules.items():
        deps = set()
        for imported in imported_modules(path, at_import=at_import):
            parts = imported.split(".")
            for end in range(2, len(parts) + 1):
                dep = ".".join(parts[:end])
                if dep in modules and dep != name and not _within(name, dep):  # (its own packages run first anyway)
                    deps.add(dep)
        graph[name] = sorted(deps)
    assert "logway.gateway.listeners" in graph.get("logway.gateway.server", ()), "the import graph is not resolved"
    done: set[str] = set()
    path: list[str] = []

    def visit(name: str) -> list[str] | None:
        if name in path:
            return path[path.index(name):] + [name]
        if name in done:
            return None
        path.append(name)
        for dep in graph[name]:
            cycle = visit(dep)
            if cycle:
                return cycle
        path.pop()
        done.add(name)
        return None

    for name in sorted(graph):
        cycle = visit(name)
        if cycle:
            return cycle
    return None


def test_gateway_has_no_import_cycle():
    """No gateway module imports one that (through others) imports it back while it is being imported — such a circle
    works or breaks depending on which module is imported first."""
    cycle = import_cycle("gateway", at_import=True)
    assert cycle is None, " -> ".join(cycle)


def test_gateway_has_no_import_circle_at_all():
    """Nor through imports inside functions or for type checking only: the protocols and the pump get a
    `context.Context`, the admin listener reads a `context.GatewayView`, the Kafka API modules a `BrokerState`, and
    the cluster package imports no protocol (docs/architecture.md)."""
    cycle = import_cycle("gateway")
    assert cycle is None, " -> ".join(cycle)

"""The package layering promised in design.md, checked by walking every module's imports with `ast` (a lazy import
inside a function counts too; relative imports are resolved, so `from ..gateway import x` cannot slip through):

- storage imports no trio/codecs/gateway; codecs import no trio/storage/gateway;
- the gateway imports none of the tooling (pipeline, bench, clients, cli);
- pipeline (a client of the gateway) imports no gateway, storage, bench or cli;
- clients import no storage, gateway, pipeline, bench or cli; bench imports no cli;
- bench and clients are leaves: nothing in gateway/storage/codecs/pipeline imports bench, and only cli, bench,
  pipeline (and tests) import clients.
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


def imported_modules(path: Path) -> set[str]:
    """Every module `path` imports, relative imports made absolute."""
    tree = ast.parse(path.read_text(), str(path))
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                if node.module:
                    names.add(node.module)
                continue
            base = package[:len(package) - node.level + 1]
            if node.module:
                names.add(".".join((*base, node.module)))
            else:  # `from . import x`: x may be a module
                names.update(".".join((*base, alias.name)) for alias in node.names)
    return names


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

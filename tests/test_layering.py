"""The package layering promised in design.md: storage imports no trio/codecs/gateway; codecs import no
trio/storage/gateway. Walks every module's imports with `ast`, so a lazy import inside a function counts too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {
    "storage": ("trio", "logway.codecs", "logway.gateway", "logway.bench"),
    "codecs": ("trio", "logway.storage", "logway.gateway", "logway.bench"),
}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_respect_the_layers(package):
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"no modules found in {package}/"
    offenders = []
    for path in files:
        for name in imported_modules(path):
            if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN[package]):
                offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not offenders, offenders


def test_no_module_imports_a_top_level_codecs_package():
    for path in ROOT.glob("*/**/*.py"):
        if ".venv" in path.parts:
            continue
        for name in imported_modules(path):
            assert name != "codecs" or path.parts[-2] == "tests", f"{path} imports the stdlib-shadowed 'codecs'"


def test_every_module_has_a_docstring():
    for package in ("storage", "codecs", "gateway", "pipeline", "bench"):
        for path in (ROOT / package).rglob("*.py"):
            tree = ast.parse(path.read_text())
            assert ast.get_docstring(tree), f"{path.relative_to(ROOT)} has no module docstring"

"""benchrunner's modules import one way: no module reaches itself through the others, lazy imports included."""

from __future__ import annotations

import ast
from importlib import resources


def modules(folder, prefix: str = "") -> dict[str, object]:
    """Every module by its dotted name under benchrunner: a subpackage's __init__ is the subpackage (launchers),
    its other files modules of their own (launchers.mpirun), so a plugin may import its registry."""
    found = {}
    for path in folder.iterdir():
        if path.is_dir() and path.joinpath("__init__.py").is_file():
            found.update(modules(path, f"{prefix}{path.name}."))
        elif path.name == "__init__.py" and prefix:
            found[prefix.rstrip(".")] = path
        elif path.name.endswith(".py") and path.name != "__init__.py":
            found[prefix + path.name.removesuffix(".py")] = path
    return found


def imports() -> dict[str, set[str]]:
    found_modules = modules(resources.files("benchrunner"))
    graph = {}
    for name, path in found_modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("benchrunner"):
                continue
            base = node.module.removeprefix("benchrunner").lstrip(".")
            for alias in node.names:
                target = f"{base}.{alias.name}".lstrip(".")
                found.add(target if target in found_modules else base)
        # A package running its own modules (a plugin's entry points) is not a dependency on them: they build on
        # what the package declares.
        graph[name] = {target for target in found - {"__version__", "", name} if not target.startswith(f"{name}.")}
    return graph


def test_no_module_imports_itself_through_others():
    graph = imports()
    assert {"cli", "job_document", "launchers", "launchers.torchrun", "frameworks", "workload"} <= set(graph)

    def reaches(start: str, seen: tuple[str, ...]) -> list[tuple[str, ...]]:
        loops = []
        for name in sorted(graph.get(start, ())):
            if name == seen[0]:
                loops.append((*seen, name))
            elif name not in seen:
                loops += reaches(name, (*seen, name))
        return loops

    assert [loop for module in graph for loop in reaches(module, (module,))] == []

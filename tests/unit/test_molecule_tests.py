"""Molecule's testinfra tests pass only by checking (issue 36, item 4). A test that cannot see what it checks on a
host skips there and says what it could not see; a `return` before its end reported a pass for a check that never
ran (the node-layer scenarios' tests once did, on the kind of node they had nothing to check on). The tests run only
in molecule's containers, so they are read here with ast: every path through a test asserts, or leaves it by skip,
fail or raise."""

from __future__ import annotations

import ast
from pathlib import Path

from unit_paths import PROJECT

MOLECULE = PROJECT / "molecule"
# Where the scenarios' conftest.py finds the helpers the tests import by name.
SHARED = "shared"
# pytest's calls that leave a test without a pass.
LEAVES = {"skip", "fail", "xfail"}

Function = ast.FunctionDef


class Scope:
    """The functions one file's code can call by name: its own, and those it imports from the shared helpers."""

    def __init__(self, path: Path, tree: ast.Module, shared: dict[str, Scope]) -> None:
        self.path, self.tree = path, tree
        self.functions: dict[str, tuple[Scope, Function]] = {
            node.name: (self, node) for node in tree.body if isinstance(node, Function)}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module in shared:
                source = shared[node.module]
                self.functions.update({alias.asname or alias.name: source.functions[alias.name]
                                       for alias in node.names if alias.name in source.functions})
        # Module constants a loop may iterate over: `for package in PACKAGES` runs when PACKAGES is not empty.
        self.constants = {target.id: node.value for node in tree.body if isinstance(node, ast.Assign)
                          for target in node.targets if isinstance(target, ast.Name)}


class Checker:
    """Reads every molecule/*/tests/test_*.py under a molecule folder and names each way one can pass unchecked."""

    def __init__(self, molecule: Path) -> None:
        self.root = molecule.parent
        shared: dict[str, Scope] = {}
        for path in sorted((molecule / SHARED).glob("*.py")):
            shared[path.stem] = Scope(path, ast.parse(path.read_text(), str(path)), {})
        self.shared = shared
        self.files = [Scope(path, ast.parse(path.read_text(), str(path)), shared)
                      for path in sorted(molecule.glob("*/tests/test_*.py"))]
        self.problems: list[str] = []
        self.tests = 0
        self._checks: dict[int, bool] = {}
        self._seen: set[int] = set()

    def run(self) -> Checker:
        for scope in self.files:
            for name, (owner, test) in scope.functions.items():
                if name.startswith("test_") and owner is scope:
                    self.tests += 1
                    self._look_inside(scope, test)
                    falls, returns = self._block(scope, test.body)
                    if falls:
                        self._say(scope, test, f"{test.name} can end without asserting anything (every path through "
                                               "a test asserts, or skips with the reason)")
                    for node in returns:
                        if node.value is not None:
                            self._say(scope, node, f"{test.name} returns before it asserted anything")
        return self

    def _say(self, scope: Scope, node: ast.AST, text: str) -> None:
        self.problems.append(f"{scope.path.relative_to(self.root)}:{node.lineno}: {text}")

    def _look_inside(self, scope: Scope, function: Function) -> None:
        """Returns without a value and skips without a reason, in the function and the helpers it calls."""
        if id(function) in self._seen:
            return
        self._seen.add(id(function))
        for node in _own_nodes(function):
            if isinstance(node, ast.Return) and (node.value is None or _constant(node.value, None)):
                self._say(scope, node, f"{function.name} returns without a value: where a test cannot see what it "
                                       "checks, pytest.skip with the reason")
            if isinstance(node, ast.Call) and _pytest_call(node) == "skip" and not _has_reason(node):
                self._say(scope, node, f"{function.name} skips without saying why")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in scope.functions:
                self._look_inside(*scope.functions[node.func.id])

    def _checks_always(self, scope: Scope, function: Function) -> bool:
        """Whether every path through a helper asserts (or leaves by skip, fail or raise) before it returns."""
        if id(function) not in self._checks:
            self._checks[id(function)] = False  # a helper that calls itself is not counted on
            falls, returns = self._block(scope, function.body)
            self._checks[id(function)] = not falls and not returns
        return self._checks[id(function)]

    def _block(self, scope: Scope, statements: list[ast.stmt]) -> tuple[bool, list[ast.Return]]:
        """Entered before any check: whether a path falls out of the block's end unchecked, and the returns reached
        unchecked."""
        returns: list[ast.Return] = []
        for statement in statements:
            falls, more = self._statement(scope, statement)
            returns += more
            if not falls:
                return False, returns
        return True, returns

    def _statement(self, scope: Scope, node: ast.stmt) -> tuple[bool, list[ast.Return]]:
        if isinstance(node, (ast.Assert, ast.Raise)):
            return False, []
        if isinstance(node, ast.Return):
            return False, [node]
        if isinstance(node, ast.If):
            (body, body_returns), (other, other_returns) = self._block(scope, node.body), self._block(scope, node.orelse)
            return body or other, body_returns + other_returns
        if isinstance(node, (ast.For, ast.While)):
            # A loop over what the host said may run no time at all: only a literal list of things is sure to be seen.
            body, returns = self._block(scope, node.body)
            runs = isinstance(node, ast.For) and _not_empty(node.iter, scope)
            return body or not runs, returns + self._block(scope, node.orelse)[1]
        if isinstance(node, ast.With):
            return self._block(scope, node.body)
        if isinstance(node, ast.Try):
            paths = [self._block(scope, node.body + node.orelse), *(self._block(scope, h.body) for h in node.handlers)]
            final, final_returns = self._block(scope, node.finalbody)
            return final and any(falls for falls, _ in paths), [r for _, rs in paths for r in rs] + final_returns
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return True, []
        for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
            if _pytest_call(call) in LEAVES:
                return False, []
            if isinstance(call.func, ast.Name) and call.func.id in scope.functions \
                    and self._checks_always(*scope.functions[call.func.id]):
                return False, []
        return True, []


def _own_nodes(function: Function) -> list[ast.AST]:
    """The function's nodes, without those of functions or lambdas defined in it."""
    found, todo = [], list(ast.iter_child_nodes(function))
    while todo:
        node = todo.pop()
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            found.append(node)
            todo += ast.iter_child_nodes(node)
    return found


def _constant(node: ast.expr, value: object) -> bool:
    return isinstance(node, ast.Constant) and node.value == value and type(node.value) is type(value)


def _pytest_call(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "pytest":
        return func.attr
    return None


def _has_reason(call: ast.Call) -> bool:
    reason = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "reason"), None)
    return reason is not None and not _constant(reason, "") and not _constant(reason, None)


def _not_empty(node: ast.expr, scope: Scope) -> bool:
    if isinstance(node, ast.Name) and node.id in scope.constants:
        node = scope.constants[node.id]
    return isinstance(node, (ast.List, ast.Tuple, ast.Set)) and any(not isinstance(e, ast.Starred) for e in node.elts)


def test_every_molecule_test_asserts_or_skips_with_the_reason():
    checked = Checker(MOLECULE).run()
    assert checked.problems == []
    # Every test of every scenario was read, and the shared helpers with them.
    written = sum(path.read_text().count("\ndef test_") for path in MOLECULE.glob("*/tests/test_*.py"))
    assert checked.tests == written and written > 50
    assert {"record", "held", "installed_version"} <= set(checked.shared["node_layer"].functions)


# Helpers of the kind the checker follows into: one that skips where it cannot see, one that asserts.
SHARED_HELPERS = '''import pytest


def is_image(host):
    return host.backend.get_hostname().endswith("-image")


def only_on_image(host, what):
    if not is_image(host):
        pytest.skip(f"{host} has no {what} to check")


def only_on_cpu(host, role):
    if is_image(host):
        pytest.skip(f"{host} runs the {role} role's steps: no skip to check")


def assert_skipped(host, name):
    assert host.file(f"/etc/ansible/facts.d/hpcml_{name}.fact").exists
'''

# What the node layer's tests once did (a return on the wrong kind of host), and the other ways to pass unchecked.
UNCHECKED = '''import pytest

from node_layer import is_image, only_on_image


def test_returns_on_the_wrong_host(host):
    if not is_image(host):
        return
    assert host.file("/x").exists


def test_asserts_on_one_kind_of_host(host):
    if is_image(host):
        assert host.file("/x").exists


def test_loops_over_what_the_host_says(host):
    for line in host.check_output("ls").splitlines():
        assert line


def test_skips_without_a_reason(host):
    pytest.skip()


def image_only(host):
    if not is_image(host):
        return None
    assert host.file("/x").exists


def test_through_a_helper_that_returns(host):
    image_only(host)


def test_returns_a_value_unchecked(host):
    return host.file("/x").exists
'''

CHECKED = '''import pytest

from node_layer import assert_skipped, is_image, only_on_cpu, only_on_image

PACKAGES = ["a", "b"]


def test_skips_with_the_reason(host):
    only_on_image(host, "packages")
    assert host.file("/x").exists


def test_checks_both_kinds_of_host(host):
    if is_image(host):
        assert host.file("/x").exists
    else:
        assert_skipped(host, "x")


def test_loops_over_named_things(host):
    only_on_cpu(host, "x")
    for package in [*PACKAGES, "c"]:
        assert host.package(package).is_installed


def test_skips_by_itself(host):
    if not is_image(host):
        pytest.skip(f"{host} has nothing to check")
    with host.sudo():
        assert host.file("/x").exists
'''


def line_of(text: str, fragment: str) -> int:
    return text[:text.index(fragment)].count("\n") + 1


def test_the_checker_names_each_way_to_pass_unchecked_by_file_and_line(tmp_path):
    molecule = tmp_path / "molecule"
    (molecule / SHARED).mkdir(parents=True)
    (molecule / SHARED / "node_layer.py").write_text(SHARED_HELPERS)
    (molecule / "lab" / "tests").mkdir(parents=True)
    (molecule / "lab" / "tests" / "test_unchecked.py").write_text(UNCHECKED)
    (molecule / "lab" / "tests" / "test_checked.py").write_text(CHECKED)
    checked = Checker(molecule).run()
    where = "molecule/lab/tests/test_unchecked.py"
    assert checked.tests == 10
    assert sorted(checked.problems) == sorted([
        f"{where}:{line_of(UNCHECKED, '        return')}: test_returns_on_the_wrong_host returns without "
        "a value: where a test cannot see what it checks, pytest.skip with the reason",
        f"{where}:{line_of(UNCHECKED, 'def test_asserts')}: test_asserts_on_one_kind_of_host can end without asserting "
        "anything (every path through a test asserts, or skips with the reason)",
        f"{where}:{line_of(UNCHECKED, 'def test_loops')}: test_loops_over_what_the_host_says can end without asserting "
        "anything (every path through a test asserts, or skips with the reason)",
        f"{where}:{line_of(UNCHECKED, 'pytest.skip()')}: test_skips_without_a_reason skips without saying why",
        f"{where}:{line_of(UNCHECKED, 'return None')}: image_only returns without a value: where a test cannot see "
        "what it checks, pytest.skip with the reason",
        f"{where}:{line_of(UNCHECKED, 'def test_through')}: test_through_a_helper_that_returns can end without "
        "asserting anything (every path through a test asserts, or skips with the reason)",
        f"{where}:{line_of(UNCHECKED, 'return host')}: test_returns_a_value_unchecked returns before it asserted "
        "anything",
    ])

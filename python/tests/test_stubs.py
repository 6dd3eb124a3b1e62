"""Each stub (_native.pyi for the engine, _kv.pyi, moe/_moe.pyi and _weights.pyi for the workload
bindings) names exactly what its module binds, with the same parameters and docstrings."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import pathlib
import re
from types import ModuleType
from typing import Any

import pytest

from fabric_lib import _native

PACKAGE = pathlib.Path(_native.__file__).parent


@dataclasses.dataclass
class Stub:
    import_name: str
    module: ModuleType
    path: pathlib.Path
    tree: ast.Module
    classes: dict[str, ast.ClassDef]
    functions: dict[str, ast.FunctionDef]
    variables: dict[str, ast.AnnAssign]

    @property
    def name(self) -> str:
        return self.path.relative_to(PACKAGE).as_posix()


def _load(module: str, stub: str) -> Stub:
    path = PACKAGE / stub
    tree = ast.parse(path.read_text())
    return Stub(
        module,
        importlib.import_module(module),
        path,
        tree,
        {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)},
        {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)},
        {
            n.target.id: n
            for n in tree.body
            if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
        },
    )


# (module, its stub beside the package): every native module the package imports.
STUBS = [
    _load("fabric_lib._native", "_native.pyi"),
    _load("fabric_lib._kv", "_kv.pyi"),
    _load("fabric_lib.moe._moe", "moe/_moe.pyi"),
    _load("fabric_lib._weights", "_weights.pyi"),
]
STUB_IDS = [s.name for s in STUBS]


def _public(name: str) -> bool:
    return not name.startswith("_")


def _norm(text: str | None) -> str:
    return " ".join((text or "").split())


def _stub_members(cls: ast.ClassDef) -> dict[str, ast.AST]:
    members: dict[str, ast.AST] = {}
    for node in cls.body:
        if isinstance(node, ast.FunctionDef):
            members[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            members[node.target.id] = node
    return members


def _stub_members_with_bases(stub: Stub, name: str) -> dict[str, ast.AST]:
    members: dict[str, ast.AST] = {}
    for base in stub.classes[name].bases:
        if isinstance(base, ast.Name) and base.id in stub.classes:
            members.update(_stub_members_with_bases(stub, base.id))
    members.update(_stub_members(stub.classes[name]))
    return members


def _native_members(cls: type) -> set[str]:
    foreign = set()
    for base in cls.__mro__[1:]:
        if not base.__module__.startswith("fabric_lib"):
            foreign |= set(dir(base))
    return {n for n in dir(cls) if _public(n) and n not in foreign}


@pytest.mark.parametrize("stub", STUBS, ids=STUB_IDS)
def test_module_names_match(stub: Stub) -> None:
    names = {n for n in [*stub.classes, *stub.functions, *stub.variables] if _public(n)}
    native = {n for n in dir(stub.module) if _public(n)}
    assert names == native, f"only in {stub.name}: {sorted(names - native)}; only in the module: {sorted(native - names)}"


def test_the_engine_stub_has_the_version() -> None:
    assert "__version__" in STUBS[0].variables and isinstance(_native.__version__, str)


def _public_classes() -> list[tuple[Stub, str]]:
    return [(s, name) for s in STUBS for name in sorted(s.classes) if _public(name)]


@pytest.mark.parametrize(
    "stub,name", _public_classes(), ids=[f"{s.name}:{n}" for s, n in _public_classes()]
)
def test_class_members_match(stub: Stub, name: str) -> None:
    cls = getattr(stub.module, name, None)
    assert cls is not None, f"{name} is in {stub.name} only"
    members = _stub_members_with_bases(stub, name)
    assert {n for n in members if _public(n)} == _native_members(cls)
    for dunder in (n for n in members if not _public(n)):
        assert hasattr(cls, dunder), f"{name}.{dunder} is in {stub.name} only"


def _docs() -> list[tuple[str, Any, str]]:
    out = []
    for stub in STUBS:
        out.append((f"{stub.name}:module", stub.module, ast.get_docstring(stub.tree) or ""))
        for name, node in stub.classes.items():
            cls = getattr(stub.module, name, None)
            if cls is None or not _public(name):
                continue  # test_module_names_match reports it; a private class is the stub's own
            out.append((f"{stub.name}:{name}", cls, ast.get_docstring(node) or ""))
            for member, m in _stub_members(node).items():
                if isinstance(m, ast.FunctionDef) and ast.get_docstring(m) and hasattr(cls, member):
                    out.append((f"{stub.name}:{name}.{member}", getattr(cls, member),
                                ast.get_docstring(m)))
        for name, f in stub.functions.items():
            if ast.get_docstring(f) and hasattr(stub.module, name):
                out.append((f"{stub.name}:{name}", getattr(stub.module, name), ast.get_docstring(f)))
    return out


@pytest.mark.parametrize("where,obj,doc", _docs(), ids=[d[0] for d in _docs()])
def test_docstrings_match(where: str, obj: Any, doc: str) -> None:
    assert doc, f"{where} has no docstring in the stub"
    assert _norm(doc) in _norm(obj.__doc__), f"{where}: stub and binding docstrings differ"


def _native_params(func: Any) -> list[str]:
    # pybind11 puts the signature on the docstring's first line:
    #   name(self: T, a: int = 0, *, b: ...) -> R
    first = (func.__doc__ or "").splitlines()[0]
    inner = first[first.index("(") + 1 : first.rindex(")")]
    params, depth, part = [], 0, ""
    for ch in inner + ",":
        if ch == "," and depth == 0:
            if part.strip():
                params.append(re.split(r"[:=]", part.strip())[0].strip())
            part = ""
            continue
        depth += ch in "([{"
        depth -= ch in ")]}"
        part += ch
    return params


def _stub_params(node: ast.FunctionDef) -> list[str]:
    a = node.args
    names = [p.arg for p in a.posonlyargs + a.args]
    if a.vararg:
        names.append("*" + a.vararg.arg)
    elif a.kwonlyargs:
        names.append("*")
    names += [p.arg for p in a.kwonlyargs]
    return names


def _signatures() -> list[tuple[str, Any, ast.FunctionDef]]:
    out = []
    for stub in STUBS:
        for name, node in stub.classes.items():
            cls = getattr(stub.module, name, None)
            for member, m in _stub_members(node).items():
                if not hasattr(cls, member):
                    continue  # test_class_members_match reports it
                is_property = isinstance(m, ast.FunctionDef) and any(
                    isinstance(d, ast.Name) and d.id == "property" for d in m.decorator_list
                )
                if (
                    isinstance(m, ast.FunctionDef)
                    and not is_property
                    and (_public(member) or member == "__init__")
                ):
                    if not inspect.isbuiltin(getattr(cls, member)) and name.endswith("Error"):
                        continue
                    out.append((f"{stub.name}:{name}.{member}", getattr(cls, member), m))
        for name, f in stub.functions.items():
            if hasattr(stub.module, name):
                out.append((f"{stub.name}:{name}", getattr(stub.module, name), f))
    return out


@pytest.mark.parametrize("where,func,node", _signatures(), ids=[s[0] for s in _signatures()])
def test_parameters_match(where: str, func: Any, node: ast.FunctionDef) -> None:
    assert _stub_params(node) == _native_params(func), where


def test_mypy_stubtest_agrees() -> None:
    """mypy's own stub checker, where installed (Debian: python3-mypy). pybind11 classes differ
    from any stub in two ways that say nothing about this one: their metaclass, and the
    catch-all __init__ of classes Python cannot construct."""
    pytest.importorskip("mypy.stubtest")
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", *(s.import_name for s in STUBS)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    noise = ("metaclass differs", 'stub does not have *args parameter "args"')
    errors = [
        line
        for line in result.stdout.splitlines()
        if line.startswith("error:") and not any(n in line for n in noise)
    ]
    assert not errors, result.stdout


def _pybind_signature_lines(doc: str | None) -> list[str]:
    # The signature pybind11 writes as a docstring's first line ("(self: T) -> R"
    # for a property), or, for an overloaded callable, each "N. name(...) -> R" line.
    lines = (doc or "").splitlines()
    sigs = [l for l in lines if re.match(r"^\s*(\d+\.\s+)?([A-Za-z_]\w*)?\(.*\)( -> .*)?$", l)]
    return sigs[:1] if sigs and not re.match(r"^\s*\d+\.", sigs[0]) else sigs


def _public_callables() -> list[tuple[str, Any]]:
    import fabric_lib

    modules = [fabric_lib, *(s.module for s in STUBS)]
    seen: set[int] = set()
    out: list[tuple[str, Any]] = []

    def add(where: str, obj: Any) -> None:
        if id(obj) not in seen:
            seen.add(id(obj))
            out.append((where, obj))

    for mod in modules:
        for name in dir(mod):
            if not _public(name):
                continue
            obj = getattr(mod, name)
            if inspect.isclass(obj) and obj.__module__.startswith("fabric_lib"):
                for member, attr in vars(obj).items():
                    if _public(member) or member == "__init__":
                        fn = attr.fget if isinstance(attr, property) else attr
                        if callable(fn) or isinstance(attr, property):
                            add(f"{mod.__name__}.{name}.{member}", fn)
            elif callable(obj) and getattr(obj, "__module__", "").startswith("fabric_lib"):
                add(f"{mod.__name__}.{name}", obj)
    return out


def test_no_signature_says_handle() -> None:
    """Every argument and result type in the binding's signatures is a real type (as in
    _native.pyi), never pybind11's placeholder `handle`."""
    typed_as_handle = re.compile(r"(?:->|[:|\[])\s*handle\b")
    checked, offenders = 0, []
    for where, fn in _public_callables():
        for line in _pybind_signature_lines(getattr(fn, "__doc__", None)):
            checked += 1
            if typed_as_handle.search(line):
                offenders.append(f"{where}: {line.strip()}")
    assert checked > 50, f"only {checked} signatures found: the scan is broken"
    assert not offenders, "\n".join(offenders)

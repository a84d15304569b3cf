"""The library's defaults and named constants, read from its source without importing it.

The command line shows each option's default as the library's signature
states it (one default for each setting, named once), but its ``--help``
must not import numba, scikit-learn or SciPy (a second or more). So the
signatures are read from the source files: a default that is a literal, a
tuple of them, or a name bound at module level to such a value, in that
module or imported from another of ours (``from .x import NAME``). Anything
else raises :class:`NotStatic`. ``tests/test_cli_first_hour.py`` checks
every value read here against :func:`inspect.signature`.
"""

from __future__ import annotations

import ast
import functools
import operator
from pathlib import Path
from typing import Any

__all__ = ["NotStatic", "constant", "default"]

_ROOT = Path(__file__).resolve().parent  # the restore package
_PACKAGE = "restore"
_MAX_HOPS = 8  # imports followed to find a name: a longer chain is a cycle or a mistake
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.LShift: operator.lshift,
           ast.Pow: operator.pow, ast.FloorDiv: operator.floordiv, ast.Div: operator.truediv}


class NotStatic(LookupError):
    """The value is not a literal (or a name bound to one) in our source: it cannot be read without importing."""


@functools.cache
def _module_body(module: str) -> tuple[ast.stmt, ...]:
    if module != _PACKAGE and not module.startswith(_PACKAGE + "."):
        raise NotStatic(f"{module} is not part of {_PACKAGE}")
    base = _ROOT.joinpath(*module.split(".")[1:])
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return tuple(ast.parse(path.read_text(encoding="utf-8"), str(path)).body)
    raise NotStatic(f"no source for {module}")


def _is_package(module: str) -> bool:
    return (_ROOT.joinpath(*module.split(".")[1:]) / "__init__.py").is_file()


def _absolute(module: str, node: ast.ImportFrom) -> str:
    """The module an import statement of ``module`` names."""
    if not node.level:
        return node.module or ""
    parts = module.split(".") if _is_package(module) else module.split(".")[:-1]
    parts = parts[:len(parts) - node.level + 1]
    return ".".join(parts + ([node.module] if node.module else []))


def _binding(module: str, name: str) -> tuple[str, ast.AST]:
    """The module and node that bind ``name`` at the top level of ``module`` (following our imports)."""
    for _ in range(_MAX_HOPS):
        found = None
        for node in _module_body(module):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                found = (module, node.value)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name \
                    and node.value is not None:
                found = (module, node.value)
            elif isinstance(node, ast.FunctionDef) and node.name == name:
                found = (module, node)
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        found = (_absolute(module, node), ast.Name(alias.name))
        if found is None:
            raise NotStatic(f"{name} is not bound at the top level of {module}")
        where, value = found
        if not (isinstance(value, ast.Name) and where != module):
            return where, value
        module, name = where, value.id
    raise NotStatic(f"{name}: more than {_MAX_HOPS} imports to follow")


def _value(module: str, node: ast.AST) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Tuple, ast.List)):
        items = tuple(_value(module, e) for e in node.elts)
        return items if isinstance(node, ast.Tuple) else list(items)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_value(module, node.operand)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_value(module, node.left), _value(module, node.right))
    if isinstance(node, ast.Name):
        return constant(module, node.id)
    raise NotStatic(f"{ast.unparse(node)} in {module} is not a literal")


def constant(module: str, name: str) -> Any:
    """The value of a module-level constant of ours, e.g. ``constant('restore.proximal', 'PENALTIES')``."""
    where, node = _binding(module, name)
    if isinstance(node, ast.FunctionDef):
        raise NotStatic(f"{name} in {where} is a function")
    return _value(where, node)


def default(module: str, function: str, parameter: str) -> Any:
    """The default of ``parameter`` in the signature of ``function``, a top-level function of ``module``."""
    where, node = _binding(module, function)
    if not isinstance(node, ast.FunctionDef):
        raise NotStatic(f"{function} in {where} is not a function")
    args = node.args
    positional = args.posonlyargs + args.args
    pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults, strict=True))
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
    for arg, value in pairs:
        if arg.arg == parameter:
            return _value(where, value)
    raise NotStatic(f"{function} in {where} has no parameter {parameter!r} with a default")

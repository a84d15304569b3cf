"""The layering of DESIGN.md and the numba hygiene rules, checked on the source."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# restore's modules from the bottom up; a module may import only modules of
# a lower rank (and anything outside the project).
RANK = {
    "_config": 0,
    "_io": 0,
    "_progress": 0,
    "_validation": 0,
    "_core": 1,
    "tree": 2,
    "proximal": 3,
    "wavelet": 4,
}
UPPER = 10  # jobs, solvers, cli and anything added later sit above the core


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    package = path.relative_to(ROOT).parts[0]  # relative imports resolve against the file's own package
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from . import x / from .x import y
                if node.module:
                    out.append(f"{package}." + node.module)
                else:
                    out += [f"{package}." + a.name for a in node.names]
            elif node.module:
                out.append(node.module)
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names]
    return out


def _rank(module: str) -> int:
    return RANK.get(module, UPPER)


def test_restore_imports_point_downwards():
    for path in sorted((ROOT / "restore").rglob("*.py")):
        me = path.stem if path.parent.name == "restore" else path.parent.name
        for imp in _imports(path):
            assert not imp.startswith("plugin"), f"{path.name} imports the plugin ({imp})"
            if imp.startswith("restore."):
                dep = imp.split(".")[1]
                if me == "__init__" or dep == me:
                    continue
                assert dep != "cli", f"{path.name} imports the command line"
                assert _rank(dep) < _rank(me) or _rank(me) == UPPER, (
                    f"restore/{path.name} ({me}) imports {imp}: dependencies must point downwards")


def test_core_depends_on_nothing_of_ours_but_config():
    imps = [i for i in _imports(ROOT / "restore" / "_core.py") if i.startswith("restore")]
    assert set(imps) <= {"restore._config"}


def test_plugin_uses_only_the_public_api():
    for path in sorted((ROOT / "plugin").rglob("*.py")):
        for imp in _imports(path):
            if imp.startswith("restore"):
                assert not any(part.startswith("_") for part in imp.split(".")[1:]), (
                    f"{path.name} imports private {imp}")


def _private_names_imported(path: Path) -> list[str]:
    """``from restore.x import _name``: names private to another module (private modules' public names are fine)."""
    tree = ast.parse(path.read_text())
    return [f"{node.module}.{a.name}" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
            for a in node.names if a.name.startswith("_") and (node.level or (node.module or "").startswith("restore"))]


def test_jobs_above_the_solvers_use_no_private_names_of_other_modules():
    upper = sorted((ROOT / "restore" / "evaluate").rglob("*.py")) + [ROOT / "restore" / "cli.py"]
    for path in upper:
        assert not _private_names_imported(path), f"{path.relative_to(ROOT)} imports private names"


def _jit_decorators(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for d in node.decorator_list:
                target = d.func if isinstance(d, ast.Call) else d
                name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                if name in {"jit", "njit", "vectorize", "guvectorize", "generated_jit"}:
                    yield node.name, d


def test_every_kernel_uses_the_shared_flags_and_lives_in_the_core():
    from restore._config import JIT

    assert JIT["cache"] and JIT["nogil"] and not JIT["fastmath"]
    for path in sorted(list((ROOT / "restore").rglob("*.py")) + list((ROOT / "plugin").rglob("*.py"))):
        for fname, dec in _jit_decorators(path):
            assert path.name.startswith("_core"), f"numba kernel {fname} outside the core ({path})"
            ok = (isinstance(dec, ast.Call) and not dec.args and len(dec.keywords) == 1
                  and dec.keywords[0].arg is None and getattr(dec.keywords[0].value, "id", "") == "JIT")
            assert ok, f"{path.name}:{fname} must be decorated with @njit(**JIT)"


def test_kernels_are_nopython_nogil_and_cached():
    import numba

    from restore import _core

    dispatcher = numba.core.registry.CPUDispatcher
    kernels = [getattr(_core, n) for n in dir(_core) if isinstance(getattr(_core, n), dispatcher)]
    assert len(kernels) >= 8
    for k in kernels:
        assert k.targetoptions["nopython"] and k.targetoptions["nogil"], k
        assert not k.targetoptions["fastmath"], k
        assert type(k._cache).__name__ == "FunctionCache", f"{k} is not cached on disk"

"""The layering of DESIGN.md and the numba hygiene rules, checked on the source."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# restore's modules from the bottom up; a module may import only modules of
# a lower rank (and anything outside the project). A package (denoise/,
# inpainting/, evaluate/) takes one rank; its own modules import each other freely.
RANK = {
    "_cache": 0,
    "_config": 0,
    "_io": 0,
    "_progress": 0,
    "_signatures": 0,
    "_validation": 0,
    "pyramid": 0,  # a result's lower levels (block means); the store code and the plugin use it
    "_core": 1,
    "_core_diffusion": 1,
    "_core_regular": 1,
    "_core_blockmatch": 1,  # block matching's kernels (numba, on arrays)
    "_blockmatch": 2,  # block matching's Python wrappers
    "_core_nonlocal": 2,  # the non-local method's kernels: transforms, groups, the core's prox, aggregation
    "_core_inpaint": 3,  # inpainting's group coding (numba): block matching and the core's prox
    "_files": 1,
    "_stores": 1,
    "noise": 1,
    "tree": 2,
    "proximal": 3,
    "wavelet": 4,
    "coding": 5,
    "_nonlocal": 5,  # the non-local method on one unit (tree, core, block matching); denoise/ drives it
    "denoise": 6,
    "_online": 6,  # online dictionary learning on arrays, without scikit-learn: the estimator and inpainting use it
    "learning": 7,
    "inpainting": 8,
    "evaluate": 9,
    "cli": 10,
}


# restore/denoise/'s own modules, from the bottom up, by the same rule: the driver's modules, shared by every
# denoising method, first; then each method's, which may use the driver's and not the other way round.
DENOISE_RANK = {
    "_layout": 0,
    "_noise_model": 1,
    "_units": 2,
    "_driver": 3,
    "_transform": 4,  # the wavelet-tree method from here
    "_lam": 5,
    "_stages": 5,
    "_wavelet_method": 6,
    "_nonlocal_method": 7,  # the non-local method (its pilot: the wavelet-tree method)
    "__init__": 8,
}


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    # the package a relative import starts from: restore, or restore.inpainting for its modules
    package = path.relative_to(ROOT).with_suffix("").parts[:-1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from . import x / from .x import y / from .. import x
                base = ".".join(package[:len(package) - node.level + 1])
                if node.module:
                    out.append(f"{base}.{node.module}")
                else:
                    out += [f"{base}.{a.name}" for a in node.names]
            elif node.module:
                out.append(node.module)
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names]
    return out


def _module(path: Path) -> str:
    """The layer a file belongs to: its module, or its package below restore/."""
    return path.relative_to(ROOT / "restore").parts[0].removesuffix(".py")


def test_every_module_has_a_rank():
    modules = {_module(p) for p in (ROOT / "restore").rglob("*.py")} - {"__init__"}
    assert modules <= set(RANK), f"give these modules a rank in the layering: {sorted(modules - set(RANK))}"


def test_restore_imports_point_downwards():
    for path in sorted((ROOT / "restore").rglob("*.py")):
        me = _module(path)
        if me == "__init__":  # the package's lazy front door names everything
            continue
        for imp in _imports(path):
            assert not imp.startswith(("plugin", "restore_napari")), f"{path.name} imports the plugin ({imp})"
            if imp != "restore" and not imp.startswith("restore."):
                continue
            dep = imp.split(".")[1] if "." in imp else "__init__"
            if dep == me:
                continue
            if dep not in RANK:  # `from restore import name`: the front door, which loads every layer
                assert me == "cli", f"{path.relative_to(ROOT)} imports {imp} through the package front door"
                continue
            assert RANK[dep] < RANK[me], (
                f"{path.relative_to(ROOT)} ({me}, rank {RANK[me]}) imports {imp} "
                f"(rank {RANK[dep]}): dependencies must point downwards")


def test_denoise_modules_import_downwards_the_driver_before_the_methods():
    package = ROOT / "restore" / "denoise"
    modules = {p.stem for p in package.glob("*.py")}
    assert modules <= set(DENOISE_RANK), f"give these a rank in DENOISE_RANK: {sorted(modules - set(DENOISE_RANK))}"
    for path in sorted(package.glob("*.py")):
        for imp in _imports(path):
            if not imp.startswith("restore.denoise."):
                continue
            dep = imp.split(".")[2]
            assert DENOISE_RANK[dep] < DENOISE_RANK[path.stem], (
                f"restore/denoise/{path.name} (rank {DENOISE_RANK[path.stem]}) imports {imp} "
                f"(rank {DENOISE_RANK[dep]}): the driver's modules must not depend on a method's")


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
    texts = {p: p.read_text() for p in (ROOT / "restore").rglob("*.py")}
    for path in sorted(list((ROOT / "restore").rglob("*.py")) + list((ROOT / "plugin").rglob("*.py"))):
        for fname, dec in _jit_decorators(path):
            assert path.name.startswith("_core"), f"numba kernel {fname} outside the core ({path})"
            flags = getattr(dec.keywords[0].value, "id", "") if isinstance(dec, ast.Call) and dec.keywords else ""
            ok = (isinstance(dec, ast.Call) and not dec.args and len(dec.keywords) == 1
                  and dec.keywords[0].arg is None and flags in ("JIT", "JIT_INLINE"))
            assert ok, f"{path.name}:{fname} must be decorated with @njit(**JIT) (or a private helper's JIT_INLINE)"
            assert flags != "JIT_INLINE" or fname.startswith("_"), f"{path.name}:{fname}: only private helpers inline"
            if flags == "JIT_INLINE":  # beside its callers: a caller's on-disk cache sees a change to its own file only
                others = [p.name for p, text in texts.items() if p != path and re.search(rf"\b{fname}\b", text)]
                assert not others, f"{path.name}:{fname} is inlined, but used in {others}"


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

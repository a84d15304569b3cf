"""Sphinx configuration of the documentation site of ``restore``.

Build (warnings are errors, the gallery is executed)::

    .venv/bin/python -m sphinx -W --keep-going -b html docs docs/_build/html

``tests/test_docs.py`` runs the same build in a temporary copy of ``docs/``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))
os.environ.setdefault("MPLBACKEND", "Agg")

import restore  # noqa: E402

project = "restore"
author = "the restore developers"
copyright = "the restore developers"  # noqa: A001 - Sphinx's name
version = release = restore.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "sphinxarg.ext",
    "myst_parser",  # only for the Markdown results files of benchmarks/results/ (pages are reStructuredText)
    "restore_docs",  # docs/_ext: the benchmark-results directive
]

source_suffix = {".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "examples", "**.ipynb_checkpoints", "auto_examples/*.ipynb", "auto_examples/*.py",
                    "auto_examples/*.zip", "auto_examples/*.md5", "auto_examples/*.json"]
templates_path = ["_templates"]
default_role = "literal"

# -- API reference -----------------------------------------------------------
autosummary_generate = True
autosummary_imported_members = False
autodoc_typehints = "none"  # the numpydoc Parameters sections carry the types
autodoc_default_options = {"inherited-members": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
# every parameter documented, none unknown, in the signature's order (the checks a reader of the API relies on)
numpydoc_validation_checks = {"PR01", "PR02", "PR03", "PR10"}
numpydoc_validation_exclude = {
    # results and a tree built by its classmethods: users read their fields (Attributes), never call the constructor
    r"^restore\.(LamChoice|NoiseEstimate|Tree)$",
}


def _skip_foreign_member(app, what, name, obj, skip, options):
    """Document only what restore defines: not the methods scikit-learn adds to its estimators."""
    module = getattr(obj, "__module__", None) or ""
    if what == "class" and callable(obj) and not module.startswith("restore"):
        return True
    return None


def _attribute_doc(app, what, name, obj, options, lines):
    """A constant's own documentation (``#:`` or a string after it where it is defined), not its type's."""
    def first_line(text_lines):
        return next((ln.strip() for ln in text_lines if ln.strip()), None)

    if what != "data" or first_line(lines) != first_line((type(obj).__doc__ or "").splitlines()):
        return
    import importlib
    import pkgutil

    from sphinx.pycode import ModuleAnalyzer

    attr = name.rsplit(".", 1)[1]
    lines.clear()
    for info in pkgutil.walk_packages(restore.__path__, "restore."):
        module = importlib.import_module(info.name)
        if getattr(module, attr, None) is obj and attr in vars(module):
            docs = ModuleAnalyzer.for_module(info.name).find_attr_docs().get(("", attr))
            if docs:
                lines.extend(docs)
                return


def setup(app):
    """Connect the two hooks above."""
    app.connect("autodoc-skip-member", _skip_foreign_member)
    app.connect("autodoc-process-docstring", _attribute_doc)

# -- gallery -----------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "doc_module": ("restore",),
    "backreferences_dir": "api/generated/backreferences",  # "Examples using ..." on each API page
    "filename_pattern": r"/plot_",  # the napari example is shown, not run (no Qt in the build)
    "ignore_pattern": r"__init__\.py",
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "show_memory": False,
    "reset_modules": ("matplotlib",),
    "matplotlib_animations": False,
    "image_scrapers": ("matplotlib",),
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
    "run_stale_examples": True,
    "write_computation_times": False,
}

# -- HTML --------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"restore {release}"
html_theme_options = {
    "navigation_depth": 2,
    "show_toc_level": 2,
    "navbar_align": "left",
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
html_sidebars = {"**": ["sidebar-nav-bs"]}
html_show_sourcelink = False
html_static_path: list[str] = []
html_last_updated_fmt = None

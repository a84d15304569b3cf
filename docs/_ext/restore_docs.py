"""Sphinx extension of the ``restore`` documentation: benchmark results included from their files.

``.. benchmark-results:: NAME`` includes ``benchmarks/results/NAME.md``,
the Markdown file that ``benchmarks/NAME.py`` writes at the end of a run
(through ``benchmarks/_report.py``: date, machine and command first, then
the tables), parsed by myst-parser. While the file does not exist the page
says so in one line. No figure on a page is typed by hand.

A results file that no page includes is reported as a warning, so that the
site shows every benchmark that was run.
"""

from __future__ import annotations

import os
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

_DEFAULT_RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def _results_dir(app: Sphinx) -> Path:
    return Path(app.config.restore_results_dir or _DEFAULT_RESULTS)


class BenchmarkResults(SphinxDirective):
    """Include ``benchmarks/results/<name>.md``, or say in one line that the benchmark has not been run."""

    required_arguments = 1
    has_content = False

    def run(self) -> list[nodes.Node]:
        """Insert the include of the results file, or the one line saying how to make it."""
        name = self.arguments[0]
        path = _results_dir(self.env.app) / f"{name}.md"
        if not hasattr(self.env, "restore_results_used"):
            self.env.restore_results_used = {}
        self.env.restore_results_used.setdefault(self.env.docname, set()).add(name)
        self.env.note_dependency(str(path))  # a new or rerun benchmark rebuilds the page
        if not path.is_file():
            para = nodes.paragraph()
            para += nodes.Text("Not run yet: ")
            para += nodes.literal(text=f"python benchmarks/{name}.py")
            para += nodes.Text(" writes ")
            para += nodes.literal(text=f"benchmarks/results/{name}.md")
            para += nodes.Text(", which this page then shows.")
            return [para]
        here = Path(self.env.doc2path(self.env.docname)).parent
        rel = Path(os.path.relpath(path, here)).as_posix()
        self.state_machine.insert_input([f".. include:: {rel}", "   :parser: myst_parser.sphinx_"],
                                        self.get_source_info()[0])
        return []


def _purge(app: Sphinx, env, docname: str) -> None:
    getattr(env, "restore_results_used", {}).pop(docname, None)


def _merge(app: Sphinx, env, docnames, other) -> None:
    env.restore_results_used = {**getattr(env, "restore_results_used", {}),
                                **getattr(other, "restore_results_used", {})}


def _check_all_shown(app: Sphinx, env) -> None:
    used = set().union(*getattr(env, "restore_results_used", {}).values())
    folder = _results_dir(app)
    for path in sorted(folder.glob("*.md")) if folder.is_dir() else []:
        if path.stem not in used:
            logger.warning("benchmarks/results/%s is included by no page: add "
                           "'.. benchmark-results:: %s' to docs/benchmarks.rst", path.name, path.stem)


def setup(app: Sphinx) -> dict:
    """Register the directive, its configuration value and the check that every results file is shown."""
    app.add_config_value("restore_results_dir", "", "env", types=[str])
    app.add_directive("benchmark-results", BenchmarkResults)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("env-check-consistency", _check_all_shown)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}

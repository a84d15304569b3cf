"""The Python code blocks of the documentation's pages run, so that they cannot drift from the library.

Each page's ``.. code-block:: python`` blocks run in order in one namespace,
in a scratch folder. What a page takes as given (a user's ``noisy`` image, a
``volume.zarr``) is made by a setup written in the page as an RST comment
that starts with ``Setup for tests/test_doc_snippets.py`` (not shown on the
site), on small data so that the blocks run in seconds. The gallery examples
run in the documentation build (``tests/test_docs.py``).
"""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SETUP_MARK = "Setup for tests/test_doc_snippets.py"
# pages whose Python blocks show code that is not ours to run: the benchmarks' own script structure
NOT_RUN = {"benchmarks.rst"}
PAGES = sorted(p for p in (ROOT / "docs").rglob("*.rst")
               if "_build" not in p.parts and "auto_examples" not in p.parts and p.name not in NOT_RUN)


def _blocks(text: str) -> list[tuple[str, str]]:
    """``(kind, code)`` in page order: kind 'setup' (the hidden comment) or 'python' (a code block)."""
    out = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        head = line.strip()
        kind = "python" if head == ".. code-block:: python" else "setup" if head == ".." else None
        if kind is None:
            i += 1
            continue
        j = i + 1
        body = []
        while j < len(lines) and (not lines[j].strip() or lines[j].startswith((" ", "\t"))):
            body.append(lines[j])
            j += 1
        code = textwrap.dedent("\n".join(body)).strip("\n")
        if kind == "setup":
            if not code.startswith(SETUP_MARK):
                i = j
                continue
            code = code[len(SETUP_MARK):].lstrip(":\n")
            code = textwrap.dedent(code)
        elif code.startswith(":"):  # options of the directive
            code = re.sub(r"^(:\w+:.*\n)+\n?", "", code)
        out.append((kind, code))
        i = j
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT / "docs")))
def test_the_pages_python_blocks_run(page, tmp_path, monkeypatch):
    blocks = _blocks(page.read_text(encoding="utf-8"))
    if not any(kind == "python" for kind, _ in blocks):
        pytest.skip("no Python block")
    for name in ("tests",):
        (tmp_path / name).symlink_to(ROOT / name, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    namespace: dict = {"__name__": "__doc__"}
    for n, (kind, code) in enumerate(blocks):
        try:
            exec(compile(code, f"{page.name}[{n}:{kind}]", "exec"), namespace)  # noqa: S102 - our own docs
        except Exception as exc:
            raise AssertionError(f"{page.name}, block {n} ({kind}) failed: {exc!r}\n{code}") from exc


def test_a_page_block_that_names_an_undefined_variable_fails(tmp_path):
    """The runner above is no formality: a tour that uses a name it never defines is caught."""
    page = tmp_path / "p.rst"
    page.write_text(".. code-block:: python\n\n   codes = est.transform(patches)\n")
    blocks = _blocks(page.read_text())
    with pytest.raises(NameError):
        exec(compile(blocks[0][1], "p", "exec"), {})  # noqa: S102
    assert os.path.exists(page)

"""README's two commands stay true: CI runs exactly the test command."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _commands():
    lines = (ROOT / "README.md").read_text().splitlines()
    return [ln.strip() for ln in lines[:12] if ln.startswith("    ")]


def test_readme_opens_with_two_commands():
    cmds = _commands()
    assert len(cmds) == 2
    assert cmds[0].startswith("bash .ci/setup && ") and "restore evaluate sample_images" in cmds[0]
    assert cmds[1].startswith("bash .ci/setup && ") and "pytest" in cmds[1]


def test_ci_runs_the_readme_test_command():
    ci = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()
          if ln.strip() and not ln.startswith("#")]
    assert ci[-1] == _commands()[1]


def test_readme_python_example_runs_and_keeps_its_promises():
    """The README's Python block runs as written on small inputs, and what it says of types holds."""
    import re

    import numpy as np

    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 1
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[:48, :48]
    clean = 128 + 60 * np.sin(xx / 5.0) * np.cos(yy / 7.0)
    photo = np.clip(np.stack([clean, clean[::-1], clean.T], axis=-1), 0, 255).astype(np.uint8)
    mask = np.zeros((48, 48), bool)
    mask[20:24, 10:40] = True
    names = {
        "noisy": (clean + rng.normal(0, 10, clean.shape)).astype(np.float32),
        "rgb": photo,
        "stack": rng.poisson(2 + 40 * np.exp(-((np.mgrid[:16, :32, :32] - 12.0) ** 2).sum(0) / 60)).astype(np.uint16),
        "photo": photo.copy(),
        "mask": mask.copy(),
    }
    given = {k: v.copy() for k, v in names.items()}
    exec(blocks[0], names)  # noqa: S102 - the README's own example
    for key, before in given.items():  # "Nothing you pass is modified."
        np.testing.assert_array_equal(names[key], before)
    # "integer images give floats in [0, 1]"
    for key, source in (("denoised", photo), ("volume", given["stack"]), ("filled", photo)):
        out = names[key]
        assert out.dtype == np.float64 and out.shape == source.shape, key
        assert 0 <= np.median(out) <= 1, key
    filled = names["filled"]
    np.testing.assert_allclose(filled[~mask], photo[~mask] / 255.0)  # known pixels kept

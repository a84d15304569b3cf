"""A job compiles each numba kernel it needs once: the first call in a fresh process pays for no duplicate.

numba compiles a kernel again for every new signature, and a constant
argument (``True``, ``0``) passed from another kernel is a signature of its
own. Each job runs in a fresh interpreter (other tests' calls would add
signatures) with an empty numba cache (a kernel loaded from the cache does
not load the kernels it calls), and its kernels' signatures are read
afterwards. ``benchmarks/bench_first_call.py`` times the first calls.
"""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_SCRIPT = """
import json, sys
import numpy as np
sys.path.insert(0, {tests!r})
import restore
from restore import _core, _core_blockmatch, _core_diffusion, _core_inpaint, _core_nonlocal, _core_regular

for job in sys.argv[1].split("+"):  # several jobs: one session (the plugin runs them all)
  if job == "inpaint":  # a colour photo with strokes: the start, the passes and the non-local passes
    from inpaint_cases import photo_crop, stroke_mask
    img, mask = photo_crop(), stroke_mask()
    restore.inpaint(img, mask, channel_axis=-1, rng=0)
    lost = np.random.default_rng(0).random(mask.shape) < 0.8  # random loss: the prior's kernels too
    restore.inpaint(img[:64, :64], lost[:64, :64], channel_axis=-1, rng=0)  # a crop as given: a view, not a copy
  elif job == "nonlocal":
    from skimage import data
    y = data.camera()[200:264, 200:264] / 255.0
    restore.denoise_nonlocal_tree(y + 0.1 * np.random.default_rng(0).standard_normal(y.shape))
  elif job == "prox":
    for penalty in restore.PENALTIES:
        tree = restore.Tree.balanced((3, 2))
        restore.prox(np.linspace(-2, 2, tree.n_vars * 5).reshape(tree.n_vars, 5), 0.3, penalty=penalty, tree=tree)
        restore.prox(np.linspace(-2, 2, tree.n_vars), 0.3, penalty=penalty, tree=tree)
many = {{}}
for mod in (_core, _core_blockmatch, _core_diffusion, _core_inpaint, _core_nonlocal, _core_regular):
    for name, obj in vars(mod).items():
        if hasattr(obj, "py_func") and len(obj.signatures) > 1 and obj.__module__ == mod.__name__:
            many[mod.__name__ + "." + name] = [str(s) for s in obj.signatures]
print(json.dumps(many))
"""


def test_a_session_of_every_job_compiles_each_kernel_once(tmp_path):
    # every job in one session, as the plugin runs them: a duplicate of one job alone shows here too, and so does a
    # kernel two jobs call with different signatures
    job = "inpaint+nonlocal+prox"
    script = _SCRIPT.format(tests=str(ROOT / "tests"))
    res = subprocess.run([sys.executable, "-c", script, job], cwd=ROOT, capture_output=True, text=True, timeout=600,
                         env={"PYTHONPATH": str(ROOT), "PATH": "", "RESTORE_NUM_THREADS": "2",
                              "NUMBA_CACHE_DIR": str(tmp_path)})
    assert res.returncode == 0, res.stderr[-3000:]
    many = json.loads(res.stdout.strip().splitlines()[-1])
    assert many == {}, f"kernels compiled for more than one signature by {job}: {many}"

"""Every SPAMS reference output (tests/data/spams_ref.npz) matches to 1e-9."""

from pathlib import Path

import numpy as np
import pytest

from restore import Tree, prox

REF = Path(__file__).resolve().parent / "data" / "spams_ref.npz"
FIELDS = ("penalty", "parents", "node_ptr", "node_vars", "weights", "lam", "U", "V")


def _cases() -> list[str]:
    with np.load(REF) as z:
        return sorted({k.split("/")[0] for k in z.files})


CASES = _cases()


@pytest.fixture(scope="module")
def ref():
    with np.load(REF) as z:
        yield {k: z[k] for k in z.files}


def test_reference_set_complete(ref):
    assert len(CASES) == 530
    assert all(f"{c}/{f}" in ref for c in CASES for f in FIELDS)


@pytest.mark.parametrize("case", CASES)
def test_matches_spams(case, ref):
    z = {f: ref[f"{case}/{f}"] for f in FIELDS}
    parents, ptr, nv = z["parents"], z["node_ptr"], z["node_vars"]
    groups = [nv[ptr[i]:ptr[i + 1]] for i in range(parents.shape[0])]
    tree = Tree.from_parents(parents, groups, z["weights"])
    U = z["U"]
    U_before = U.copy()
    penalty = str(z["penalty"]).replace("-", "_")
    V = prox(U, float(z["lam"]), penalty=penalty, tree=tree)
    assert V.shape == U.shape and V.dtype == np.float64
    np.testing.assert_array_equal(U, U_before)
    scale = max(1.0, float(np.max(np.abs(U)))) if U.size else 1.0
    assert np.max(np.abs(V - z["V"]), initial=0.0) <= 1e-9 * scale
    # Column by column (1-D input) gives the same.
    for j in range(U.shape[1]):
        np.testing.assert_array_equal(prox(U[:, j], float(z["lam"]), penalty=penalty, tree=tree), V[:, j])

"""
Learn a tree-structured dictionary
==================================

A dictionary of image patches whose atoms are the nodes of a tree
(Jenatton et al., JMLR 2011): a patch is coded with the ``tree_l2`` norm
over the atoms, so an atom can only be used together with all its
ancestors. Learning is online (Mairal et al., JMLR 2010): mini-batches of
patches are coded with FISTA, and each atom is updated by block-coordinate
descent on accumulated statistics.

:func:`restore.learn_dictionary` draws random complete patches from images
(and, when those are too few, patches with a quarter of their pixels known
or more), centres them and scales them to unit norm, and fits a
:class:`restore.TreeDictionaryLearning` (a scikit-learn estimator that can
also be used directly on any ``(n_samples, n_features)`` data).

The sizes here are small so that the example runs in seconds; the shipped
dictionary (:func:`restore.default_dictionary`) is a (10, 3, 3) tree of 131
atoms learned on more patches.
"""

# %%
# Learn a small tree dictionary
# -----------------------------
# A root with 6 children, each with 2 children, each with 2 more:
# 1 + 6 + 12 + 24 = 43 atoms of 8 x 8 pixels.
import matplotlib.pyplot as plt
import numpy as np
from skimage import color, data
from skimage.util import img_as_float

import restore

train = [img_as_float(data.camera()), img_as_float(data.coins()), img_as_float(data.brick())]
est = restore.learn_dictionary(train, branching=(6, 2, 2), n_patches=10000, rng=0)
print(est.tree_, "atoms:", est.components_.shape)


# %%
# The atoms, laid out as their tree
# ---------------------------------
# Each atom sits one row below its parent, centred above its descendants:
# the root (top) is a smooth ramp, and detail grows down the tree.
def tree_layout(tree):
    """(row, column) of each node: rows are depths, leaves evenly spaced."""
    pos, next_leaf = {}, [0]

    def visit(node, depth):
        kids = tree.children(node)
        for child in kids:
            visit(int(child), depth + 1)
        if len(kids):
            col = np.mean([pos[int(c)][1] for c in kids])
        else:
            col, next_leaf[0] = next_leaf[0], next_leaf[0] + 1
        pos[node] = (depth, col)

    for root in tree.roots:
        visit(int(root), 0)
    return pos


def show_atoms(est, ax, title):
    """Draw each atom at its node's place, with a line to its parent."""
    pos = tree_layout(est.tree_)
    for node, (row, col) in pos.items():
        atom = est.components_[node].reshape(8, 8)
        ax.imshow(atom, cmap="gray", extent=(col, col + 0.9, -row - 0.9, -row), interpolation="nearest")
        parent = est.tree_.parents[node]
        if parent >= 0:
            prow, pcol = pos[int(parent)]
            ax.plot([pcol + 0.45, col + 0.45], [-prow - 0.9, -row], color="0.6", lw=0.5)
    ax.set_xlim(-0.2, max(c for _, c in pos.values()) + 1.1)
    ax.set_ylim(-max(r for r, _ in pos.values()) - 1.1, 0.2)
    ax.set_title(title)
    ax.set_axis_off()


fig, ax = plt.subplots(figsize=(12, 3.2))
show_atoms(est, ax, "tree (6, 2, 2): 43 atoms")
fig.tight_layout()

# %%
# Codes are rooted subtrees
# -------------------------
# Held-out patches of another photograph, centred and scaled to unit norm
# as the training patches were, coded with :func:`restore.sparse_encode`.
# With ``tree_l2`` every atom in use has all its ancestors in use.
rng = np.random.default_rng(0)
test_image = color.rgb2gray(data.astronaut())
r, c = rng.integers(0, 504, 3000), rng.integers(0, 504, 3000)
X = np.stack([test_image[i:i + 8, j:j + 8].ravel() for i, j in zip(r, c, strict=True)])
X -= X.mean(axis=1, keepdims=True)
X = X[np.linalg.norm(X, axis=1) > 0.1]
X /= np.linalg.norm(X, axis=1, keepdims=True)

codes = restore.sparse_encode(X, est.components_, lam=0.1, tree=est.tree_)
active = codes != 0
parents = est.tree_.parents
rooted = np.all(~active[:, 1:] | active[:, parents[1:]], axis=1)  # node 0 is the root
print(f"{len(X)} patches, {active.sum(axis=1).mean():.1f} atoms each on average; "
      f"supports that are rooted subtrees: {rooted.mean():.0%}")

# %%
# Missing pixels: tree against flat
# ---------------------------------
# The experiment of Table 2 of Jenatton et al. in miniature: remove 70% of
# the pixels of each test patch at random, code the known ones only (a
# ``mask``), and measure the error on the missing ones. The flat dictionary
# has as many atoms, is learned from the same patches with the ``l1``
# penalty, and is coded with the same ``lam``.
flat = restore.learn_dictionary(train, penalty="l1", n_atoms=43, n_patches=10000, rng=0)
known = rng.random(X.shape) > 0.7
for name, d in (("tree (6, 2, 2)", est), ("flat, 43 atoms", flat)):
    A = restore.sparse_encode(X, d.components_, lam=0.02, penalty=d.penalty, tree=d.tree_, mask=known)
    err = 100 * np.mean(np.sum(((A @ d.components_ - X) * ~known) ** 2, axis=1))
    print(f"{name:>15}: squared error x 100 on the missing pixels per patch: {err:.2f}")

# %%
# The dictionary is a scikit-learn estimator: ``est.transform(X)`` gives
# the codes, ``est.save(path)`` and :meth:`restore.TreeDictionaryLearning.load`
# store it for :func:`restore.inpaint` and ``restore inpaint --dictionary``.
fig, ax = plt.subplots(figsize=(12, 3.2))
ax.imshow(np.block([[flat.components_[i * 11 + j].reshape(8, 8) if i * 11 + j < 43 else np.zeros((8, 8))
                     for j in range(11)] for i in range(4)]), cmap="gray")
ax.set_title("flat dictionary (l1): 43 atoms, no order")
ax.set_axis_off()
plt.show()

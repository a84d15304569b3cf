"""How much of the refinements' change inpaint keeps: decided on the held-out pixels, piece by piece."""

import numpy as np

from restore.inpainting.validation import choose_blend, holdout


def _pieces(n_pieces: int, size: int) -> np.ndarray:
    return np.repeat(np.arange(n_pieces), size)


def test_one_piece_that_disagrees_does_not_discard_the_refinements():
    # 39 pieces where the refinements' change is right, one where it is far off: least squares alone would keep
    # 0.72 of the change, losing it on every missing pixel like the 39 for what one piece says
    piece = _pieces(40, 50)
    gen = np.random.default_rng(0)
    start, first = np.zeros(piece.size), np.ones(piece.size)
    target = 1.0 + 0.05 * gen.standard_normal(piece.size)
    target[piece == 7] = -10.0
    blend = choose_blend(target, start, first, first, piece)
    assert blend.a == 1.0
    assert np.isclose(blend.mse, np.mean((target - first) ** 2))


def test_pieces_that_agree_damp_the_change():
    piece = _pieces(40, 50)
    gen = np.random.default_rng(1)
    start, first = np.zeros(piece.size), np.ones(piece.size)
    target = 0.4 + 0.1 * gen.standard_normal(piece.size)  # every piece: the change overshoots
    blend = choose_blend(target, start, first, first, piece)
    assert abs(blend.a - 0.4) < 0.02


def test_with_the_full_first_change_the_non_local_weight_is_the_one_that_fits_best():
    piece = _pieces(40, 50)
    gen = np.random.default_rng(2)
    start = np.zeros(piece.size)
    first = 1.0 + 0.3 * gen.standard_normal(piece.size)
    second = first + 0.5 + 0.3 * gen.standard_normal(piece.size)
    target = first + 0.6 * (second - first) + 0.05 * gen.standard_normal(piece.size)
    target[piece == 3] = -20.0
    blend = choose_blend(target, start, first, second, piece)
    d = second - first
    assert blend.a == 1.0
    assert np.isclose(blend.b, np.clip(d @ (target - first) / (d @ d), 0.0, 1.0))


def test_held_out_strokes_come_in_their_pieces_and_scattered_pixels_alone():
    from scipy import ndimage

    strokes = np.zeros((200, 200), dtype=bool)
    for r in range(10, 190, 12):
        strokes[r:r + 2, 20:180] = True
        strokes[r - 4:r + 6, 100] = True  # strokes that cross
    held, piece = holdout(strokes, np.random.default_rng(0), clustered=True)
    labels, _ = ndimage.label(np.isin(np.arange(strokes.size), held).reshape(strokes.shape), np.ones((3, 3)))
    own = labels.reshape(-1)[held]
    # the same piece exactly where the same 8-connected component of held-out pixels, numbered from 0
    assert len(np.unique(piece)) == len(np.unique(own)) > 1 and set(piece) == set(range(piece.max() + 1))
    assert all(len(np.unique(own[piece == k])) == 1 for k in range(piece.max() + 1))

    scattered = np.random.default_rng(1).random((200, 200)) < 0.7
    held, piece = holdout(scattered, np.random.default_rng(0), clustered=False)
    np.testing.assert_array_equal(piece, np.arange(len(held)))


def test_colour_pixels_and_a_single_piece():
    piece = _pieces(40, 50)
    start, first = np.zeros((piece.size, 3)), np.ones((piece.size, 3))
    target = np.full((piece.size, 3), 0.4)  # every piece, every channel: the change overshoots
    assert abs(choose_blend(target, start, first, first, piece).a - 0.4) < 1e-9
    one = np.zeros(piece.size, dtype=np.int64)  # one piece: no spread to measure, the full change
    assert choose_blend(target, start, first, first, one).a == 1.0

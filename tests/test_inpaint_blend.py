"""How much of the refinements' change inpaint keeps: decided on the held-out pixels, piece by piece."""

import numpy as np

from restore.inpainting.validation import choose_blend, held_pieces


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


def test_held_out_pixels_are_grouped_in_their_8_connected_pieces():
    shape = (6, 7)
    held = np.ravel_multi_index(([0, 1, 1, 4, 4, 5], [0, 1, 5, 2, 3, 6]), shape)
    piece = held_pieces(held, shape)
    assert len(set(piece[:2])) == 1 and len(set(piece[3:5])) == 1
    assert len(set(piece)) == 4

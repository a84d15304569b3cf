"""Photon noise: the generalized Anscombe transform, its exact unbiased inverse, noise estimation."""

import numpy as np
import pytest
from scipy import ndimage

from restore.noise import NoiseEstimate, anscombe, estimate_noise, inverse_anscombe


def smooth_volume(rng, shape=(8, 96, 96)):
    """A smooth volume in [0, 1] with dark and bright regions (many levels of the local mean)."""
    v = ndimage.gaussian_filter(rng.random(shape), (2, 10, 10))
    v = (v - v.min()) / (v.max() - v.min())
    return v


@pytest.mark.parametrize(("gain", "sigma"), [(0.1, 0.02), (0.05, 0.0), (0.02, 0.05), (1.0, 2.0)])
def test_anscombe_stabilises_variance(gain, sigma, rng):
    for photons in (5.0, 20.0, 80.0):
        z = gain * rng.poisson(photons, 200_000) + sigma * rng.standard_normal(200_000)
        assert np.var(anscombe(z, gain, sigma)) == pytest.approx(1.0, abs=0.06)


@pytest.mark.parametrize("u", [0.0, 0.2, 1.0])
def test_exact_inverse_is_unbiased(u, rng):
    """E[f(z)] mapped back gives the expected count, at low counts too, for a few read noises."""
    gain = 0.1
    for photons in (0.05, 0.3, 1.0, 3.0, 10.0, 50.0, 150.0):
        z = gain * rng.poisson(photons, 400_000) + u * gain * rng.standard_normal(400_000)
        d = np.mean(anscombe(z, gain, u * gain))
        back = inverse_anscombe(np.array([d]), gain, u * gain)[0] / gain
        assert back == pytest.approx(photons, rel=0.02, abs=0.02)


def test_inverses_agree_at_high_counts_and_floor_at_zero():
    d = np.array([-1.0, 0.0, 0.5, 12.0, 20.0, 40.0])
    exact = inverse_anscombe(d, 0.1, 0.02)
    closed = inverse_anscombe(d, 0.1, 0.02, method="closed-form")
    assert np.all(exact >= 0) and np.all(closed >= 0)
    assert exact[0] == exact[1] == exact[2] == 0.0  # below E[f] at zero photons
    np.testing.assert_allclose(exact[3:], closed[3:], rtol=2e-3)
    with pytest.raises(ValueError, match="supported methods are exact, closed-form"):
        inverse_anscombe(d, 0.1, 0.02, method="algebraic")


@pytest.mark.parametrize(("gain", "sigma"), [(0.1, 0.02), (0.03, 0.01), (0.01, 0.03)])
def test_estimate_recovers_gain_and_sigma(gain, sigma, rng):
    """The gain within 20%, and the noise-level function within 20% over the range of the image.

    The read noise alone is poorly determined where photon noise dominates
    (its variance is a few percent of the total), so it is checked through
    the noise-level function.
    """
    x = smooth_volume(rng)
    y = gain * rng.poisson(x / gain) + sigma * rng.standard_normal(x.shape)
    est = estimate_noise(y)
    assert est.noise == "poisson-gaussian"
    assert est.gain == pytest.approx(gain, rel=0.2)
    means = np.linspace(*np.percentile(x, [1, 99]), 10)  # the image's range (0.27 to 0.89 here), not beyond
    np.testing.assert_allclose(est.variance(means), gain * means + sigma**2, rtol=0.2)


def test_estimate_on_gaussian_noise(rng):
    x = smooth_volume(rng)
    y = x + 0.05 * rng.standard_normal(x.shape)
    assert estimate_noise(y, noise="gaussian").sigma == pytest.approx(0.05, rel=0.05)
    assert estimate_noise(y).noise == "gaussian"  # the default, 'auto', sees no photon noise
    pg = estimate_noise(y, noise="poisson-gaussian")
    assert pg.gain < 0.005 and pg.sigma == pytest.approx(0.05, rel=0.1)
    assert NoiseEstimate("poisson-gaussian", 0.02, 0.1).variance(0.5) == pytest.approx(0.0504)


def test_estimate_errors():
    with pytest.raises(ValueError, match="supported noise models"):
        estimate_noise(np.zeros((16, 16)), noise="poisson")
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        estimate_noise(np.zeros(16))


@pytest.mark.parametrize("sigma", [0.0, 0.02])
def test_anscombe_variance_matches_simulation_and_falls_at_low_counts(sigma):
    from restore.noise import _anscombe_variance

    rng = np.random.default_rng(0)
    gain = 0.1
    photons = np.array([0.0, 0.2, 1.0, 5.0, 50.0])
    z = gain * rng.poisson(photons, (200_000, photons.size)) + sigma * rng.standard_normal((200_000, photons.size))
    simulated = anscombe(z, gain, sigma).var(axis=0)
    np.testing.assert_allclose(_anscombe_variance(gain * photons, gain, sigma), simulated, atol=0.01)
    assert _anscombe_variance(0.0, gain, sigma) < 0.2 < 0.9 < _anscombe_variance(gain * 5, gain, sigma)


def test_estimate_reports_progress_often_and_stops_when_the_callback_raises(rng):
    """Cancel inside the photon-noise estimate (issue 27, item 15): it reports at least once per 2**20
    samples of work and stops at the report that raises, with the same estimate as without reports."""
    from restore import Cancelled

    x = smooth_volume(rng, (2, 1024, 1024))
    y = 0.1 * rng.poisson(x / 0.1) + 0.02 * rng.standard_normal(x.shape)
    seen = []
    est = estimate_noise(y, progress=lambda done, total: seen.append((done, total)))
    assert est == estimate_noise(y)
    assert len(seen) >= y.size // 2**20 and seen[-1][0] == seen[-1][1]
    assert all(a[0] <= b[0] and a[1] == b[1] for a, b in zip(seen, seen[1:], strict=False))  # never backwards

    calls = []

    def stop(done, total):
        calls.append(done)
        if len(calls) == 3:
            raise Cancelled

    with pytest.raises(Cancelled):
        estimate_noise(y, progress=stop)
    assert len(calls) == 3  # nothing after the report that raised

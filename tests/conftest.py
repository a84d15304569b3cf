import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

settings.register_profile("default", max_examples=150, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("default")


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture(autouse=True)
def _plugin_settings(request, monkeypatch):
    """Widget settings go to a fresh file: nothing a user or another test persisted leaks into a plugin test."""
    if request.module.__name__.rpartition(".")[2].startswith("test_plugin"):
        path = request.getfixturevalue("tmp_path") / "settings.ini"
        monkeypatch.setenv("RESTORE_PLUGIN_SETTINGS", str(path))


@pytest.fixture
def errors(monkeypatch):
    """Messages passed to napari's show_error, in order."""
    import napari.utils.notifications as notifications

    shown = []
    monkeypatch.setattr(notifications, "show_error", shown.append)
    return shown

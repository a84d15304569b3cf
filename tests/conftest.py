import os
import signal

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

# The Ctrl-C tests send SIGINT to the commands they start, as a terminal would. A shell without job control
# starts background jobs with SIGINT ignored, and an ignored signal stays ignored in every process they start (our
# commands rightly honour that, as nohup'ed work must): undo it here, so the tests see what a terminal gives.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

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

"""What the plugin tests share: the widgets' names, and docking, pressing and cancelling them as a user would."""

import threading
import time

PLUGIN = "restore-tree"
DENOISE, INPAINT, LEARN = "Denoise", "Inpaint", "Learn dictionary"
TIMEOUT = 30_000  # a widget's job on a test image, first-use compilation included
CANCEL_BOUND_S = 1.5  # "Cancel acts within about a second", with room for a busy test machine


def dock(viewer, qtbot, name, timeout=TIMEOUT):
    """Open the plugin's widget ``name`` in ``viewer``, once its first-use compilation is done."""
    _, widget = viewer.window.add_plugin_dock_widget(PLUGIN, name)
    qtbot.waitUntil(lambda: not widget.busy, timeout=timeout)
    return widget


def press(qtbot, viewer, widget, button, timeout=TIMEOUT):
    """Click ``button``, wait for the widget's job, and return the layers it added."""
    before = {layer.name for layer in viewer.layers}
    button.clicked.emit()
    qtbot.waitUntil(lambda: not widget.busy, timeout=timeout)
    return [layer for layer in viewer.layers if layer.name not in before]


def cancel(qtbot, widget, timeout=TIMEOUT):
    """Click Cancel on a busy widget and wait until it is idle; return the seconds that took."""
    t0 = time.perf_counter()
    widget.cancel_button.clicked.emit()
    qtbot.waitUntil(lambda: not widget.busy, timeout=timeout)
    return time.perf_counter() - t0


def library_threads():
    """The plugin's threads still running a library call (``Control.call``'s, and a noise estimate started ahead)."""
    return [t for t in threading.enumerate() if t.name in ("restore-call", "restore-ahead")]

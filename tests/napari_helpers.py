"""What the plugin tests share: the widgets' names, and docking and pressing them as a user would."""

PLUGIN = "restore-tree"
DENOISE, INPAINT, LEARN = "Denoise (wavelet tree)", "Inpaint", "Learn dictionary"
TIMEOUT = 30_000  # a widget's job on a test image, first-use compilation included


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

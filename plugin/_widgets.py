"""What the three widgets share in napari: layer boxes, an Advanced fold, settings, results, Compare, closing.

:class:`RestoreWidget` is the base of the Denoise, Inpaint and Learn
widgets. It owns

- the layer boxes: Image boxes start on the selected layer (or the first
  suitable one) and follow the selection; previews and dictionaries' atoms
  are never offered as inputs;
- the :class:`~restore_napari._runner.Runner` (Run, Cancel, progress, status);
- the results: running again on the same input replaces that widget's
  previous result, unless "keep each run" is ticked;
- Compare: the input and its result side by side in napari's grid mode,
  and back;
- the settings, remembered between sessions (:class:`Settings`);
- closing: when the viewer closes, jobs are cancelled and their threads
  waited for, and no callback touches a deleted widget.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from typing import Any

from magicgui.widgets import CheckBox, ComboBox, Container, PushButton

from ._common import RECORD_KEY, is_input_image, layer_kwargs
from ._runner import Runner, Task, notify_error

__all__ = ["SETTINGS_ENV", "Advanced", "RestoreWidget", "Settings"]

#: Path of the settings file (an INI file) instead of the user's default one: for tests.
SETTINGS_ENV = "RESTORE_PLUGIN_SETTINGS"


class Settings:
    """Widget values remembered between sessions, in Qt's per-user settings (``QSettings``).

    Values are stored as JSON, one key per widget value, in the group of the
    widget kind (``denoise/cycle_spins``...). ``RESTORE_PLUGIN_SETTINGS``
    names another file (tests use it).
    """

    def __init__(self, group: str) -> None:
        from qtpy.QtCore import QSettings

        path = os.environ.get(SETTINGS_ENV)
        if path:
            self._qs = QSettings(path, QSettings.Format.IniFormat)
        else:
            self._qs = QSettings(QSettings.Format.IniFormat, QSettings.Scope.UserScope, "restore-tree",
                                 "napari-plugin")
        self._group = group

    def value(self, name: str, default: Any = None) -> Any:
        """The value remembered under ``name`` (JSON), or ``default``."""
        raw = self._qs.value(f"{self._group}/{name}")
        if raw is None:
            return default
        try:
            return json.loads(raw)
        except (ValueError, TypeError):
            return default

    def store(self, name: str, value: Any) -> None:
        """Remember ``value`` (JSON) under ``name``."""
        self._store(name, value)

    def restore(self, widgets: Iterable[Any]) -> None:
        """Set each widget to its remembered value (values that no longer fit are skipped)."""
        for w in widgets:
            raw = self._qs.value(f"{self._group}/{w.name}")
            if raw is None:
                continue
            try:
                w.value = json.loads(raw)
            except (ValueError, TypeError):  # a choice that no longer exists, a changed type: keep the default
                continue

    def remember(self, widgets: Iterable[Any]) -> None:
        """Store each widget's value whenever it changes."""
        for w in widgets:
            w.changed.connect(lambda value, w=w: self._store(w.name, value))

    def _store(self, name: str, value: Any) -> None:
        self._qs.setValue(f"{self._group}/{name}", json.dumps(value))
        self._qs.sync()


class Advanced(Container):
    """Options folded under an "Advanced" button: hidden until the user opens them."""

    def __init__(self, widgets: list[Any], tooltip: str = "Show or hide the options changed less often") -> None:
        super().__init__(labels=False)
        self.margins = (0, 0, 0, 0)
        self.toggle = PushButton(text="\u25b8 Advanced", tooltip=tooltip)
        self.toggle.native.setFlat(True)
        self.toggle.native.setStyleSheet("text-align: left")
        self.body = Container(widgets=widgets, visible=False)
        self.body.margins = (12, 0, 0, 0)
        self.extend([self.toggle, self.body])
        self.toggle.changed.connect(lambda *_: self.expand(self.collapsed))

    @property
    def collapsed(self) -> bool:
        """Whether the options are hidden."""
        return not self.body.visible

    def expand(self, on: bool = True) -> None:
        """Show (or hide) the options."""
        self.body.visible = on
        self.toggle.text = ("\u25be" if on else "\u25b8") + " Advanced"


def _same(a: Any, b: Any) -> bool:
    """Whether two layer references are the same layer (napari hands plugins proxies: ``is`` does not work)."""
    return a is not None and b is not None and getattr(a, "unique_id", None) == getattr(b, "unique_id", object())


def _grid(viewer: Any) -> Any:
    canvas = getattr(viewer, "canvas", None)  # napari >= 0.9 keeps the grid in the canvas
    return canvas.grid if canvas is not None else viewer.grid


def _camera(viewer: Any) -> Any:
    scene = getattr(viewer, "scene", None)  # napari >= 0.9 keeps the camera in the scene
    return scene.camera if scene is not None else viewer.camera


class RestoreWidget(Container):
    """Base of the three widgets (see the module's docstring).

    Subclasses set ``KIND`` (names the settings group and the records),
    build their controls, call :meth:`_finish_layout` and implement
    :meth:`_task`.
    """

    KIND = "restore"
    RUN_TEXT = "Run"
    RUN_TOOLTIP = ""

    def __init__(self, napari_viewer: Any) -> None:
        super().__init__(labels=False)
        self._viewer = napari_viewer
        self._closed = False
        self._closing = False  # the window got a close event; whether it really closes is known a moment later
        self._close_filter: Any = None
        self._results: dict[Any, Any] = {}  # source layer's unique_id -> its latest result layer
        self._last_pair: tuple[Any, Any] | None = None  # (input, result) of the last run, for Compare
        self._compare_state: dict[str, Any] | None = None
        self._mask_boxes: list[ComboBox] = []
        self.image = ComboBox(label="image", choices=self._image_choices,
                              tooltip="The image layer to process (follows the layer selected in the layer list)")
        self.compare = PushButton(text="Compare", enabled=False,
                                  tooltip="Show the input and the result side by side (napari's grid mode), "
                                          "or go back")
        self.keep_each_run = CheckBox(text="keep each run", value=False,
                                      tooltip="Add a new layer at each run instead of replacing this widget's "
                                              "previous result for the same input")
        self.runner = Runner(self.RUN_TEXT, self.RUN_TOOLTIP, self.run, extra=[self.compare])
        self.status = self.runner.status
        self.progress = self.runner.progress
        self.cancel_button = self.runner.cancel_button
        self.compare.changed.connect(lambda *_: self.toggle_compare())
        layers = self._viewer.layers
        for event in (layers.events.inserted, layers.events.removed, layers.events.reordered):
            event.connect(self._on_layers_changed)
        layers.events.inserted.connect(self._watch_name)
        for layer in layers:
            layer.events.name.connect(self._on_layers_changed)
        layers.selection.events.active.connect(self._on_active)
        self._watch_closing()

    # -- layout and settings ----------------------------------------------

    def _finish_layout(self, main: list[Any], advanced: list[Any], after: list[Any] | None = None,
                       persisted: Iterable[Any] = ()) -> None:
        """Lay out the common controls, the Advanced fold and the runner; restore and remember ``persisted``."""
        self.form = Container(widgets=main, labels=True)
        self.form.margins = (0, 0, 0, 0)
        self.advanced = Advanced(advanced)
        self.extend([self.form, self.advanced, self.runner, *(after or [])])
        settings = self.settings = Settings(self.KIND)
        persisted = list(persisted)
        self._select_default()  # first: some choices (a volume) depend on the image
        settings.restore(persisted)
        settings.remember(persisted)

    # -- layer boxes -------------------------------------------------------

    def _image_choices(self, _widget: Any = None) -> list[tuple[str, Any]]:
        return [(layer.name, layer) for layer in self._viewer.layers if is_input_image(layer)]

    def _mask_choices(self, _widget: Any = None) -> list[tuple[str, Any]]:
        from napari.layers import Labels, Shapes

        return [(layer.name, layer) for layer in self._viewer.layers if isinstance(layer, (Labels, Shapes))]

    def _watch_name(self, event: Any) -> None:
        event.value.events.name.connect(self._on_layers_changed)

    def _on_layers_changed(self, *_: Any) -> None:
        if self._inactive:
            return
        boxes = [self.image, *self._mask_boxes]
        before = [box.value for box in boxes]
        self.reset_choices()
        for box, old in zip(boxes, before, strict=True):
            if old is not None and box.value is None:  # magicgui empties a box without its changed event
                box.changed.emit(None)
        if self._compare_state is not None and not all(self._present(x) for x in self._compare_state["pair"]):
            self._compare_state = None  # a layer of the comparison went away: leave things as they are
        self._update_compare()

    def _select_default(self) -> None:
        """Start on the selected layer, or the first suitable one (what the combo box picks by itself)."""
        self.reset_choices()
        self._on_active()

    def _on_active(self, *_: Any) -> None:
        """Follow the selection: an image goes to the image box, a Labels or Shapes layer to the mask boxes.

        Results of the widgets are not followed (napari selects each new
        layer): they are chosen in the box by hand.
        """
        if self._inactive:
            return
        layer = self._viewer.layers.selection.active
        if layer is None:
            return
        if is_input_image(layer) and RECORD_KEY not in layer.metadata:
            self._choose(self.image, layer)
        for box in self._mask_boxes:
            self._choose(box, layer)

    @staticmethod
    def _choose(box: ComboBox, layer: Any) -> None:
        box.reset_choices()
        match = [c for c in box.choices if _same(c, layer)]
        if match:
            box.value = match[0]

    def _present(self, layer: Any) -> bool:
        return layer is not None and any(_same(other, layer) for other in self._viewer.layers)

    def _inputs(self, batch: bool) -> list[Any]:
        """The image layers to process: every selected image with ``batch``, else the image box's."""
        if batch:
            selected = {layer.unique_id for layer in self._viewer.layers.selection}
            chosen = [layer for layer in self._viewer.layers if layer.unique_id in selected and is_input_image(layer)]
            if chosen:
                return chosen
        return [self.image.value] if self.image.value is not None else []

    # -- running -----------------------------------------------------------

    @property
    def busy(self) -> bool:
        """Whether a job of this widget is running."""
        return self.runner.busy

    def _task(self) -> Task:
        """Read the layers and settings (GUI thread) and build the job; raise ValueError with a message."""
        raise NotImplementedError

    def run(self) -> Any:
        """Start the widget's job on its inputs (what the Run button does); return the job, or None."""
        if self.runner.busy or self._inactive:
            return None
        try:
            task = self._task()
        except Exception as exc:  # noqa: BLE001 - bad input: a notification, never a traceback
            self.runner.show_error(exc)
            return None
        self._install_close_hook()
        return self.runner.start(task)

    def cancel(self) -> None:
        """Stop the running job now (what Cancel does)."""
        self.runner.cancel()

    # -- results -----------------------------------------------------------

    def add_result(self, source: Any, data: Any, name: str, record: dict[str, Any],
                   kwargs: dict[str, Any] | None = None) -> Any:
        """Show ``data`` as the result of ``source``: replace this widget's previous one, or add a layer.

        ``kwargs`` are the new layer's keyword arguments (default: those of
        ``source``, see :func:`restore_napari._common.layer_kwargs`).
        """
        record = {"widget": self.KIND, **record}
        kwargs = dict(kwargs) if kwargs is not None else layer_kwargs(source, name, record)
        kwargs["name"] = name
        kwargs.setdefault("metadata", {})[RECORD_KEY] = record
        old = self._results.get(source.unique_id) if source is not None else None
        multiscale = bool(kwargs.get("multiscale", False))
        if (old is not None and not self.keep_each_run.value and self._present(old)
                and bool(old.rgb) == bool(kwargs.get("rgb", False)) and bool(old.multiscale) == multiscale
                and (multiscale or old.data.ndim == data.ndim)):  # data's: an RGB layer's ndim has no colour axis
            layer = old  # replace the previous result in place: it keeps its place in the layer list
            layer.data = data
            for attr in ("scale", "translate", "contrast_limits", "gamma", "colormap"):
                if attr in kwargs:
                    setattr(layer, attr, kwargs[attr])
            layer.metadata = kwargs["metadata"]
            layer.name = name
        else:
            # made hidden, shown once in the viewer: a new layer is first drawn at its own default slice, not the
            # viewer's, and a lazy result (Dask) would compute that slice in the GUI thread
            visible = kwargs.pop("visible", True)
            layer = self._viewer.add_image(data, **kwargs, visible=False)
            layer.visible = visible
        if source is not None:
            self._results[source.unique_id] = layer
            self._last_pair = (source, layer)
        self._update_compare()
        return layer

    # -- Compare -----------------------------------------------------------

    def _update_compare(self) -> None:
        if self._inactive:
            return
        pair = self._compare_state["pair"] if self._compare_state else self._last_pair
        ok = pair is not None and all(self._present(x) for x in pair)
        self.compare.enabled = ok
        self.compare.text = "Back" if self._compare_state is not None else "Compare"

    def toggle_compare(self) -> None:
        """Show the last input and its result side by side, or go back to the view as it was.

        Side by side: napari's grid mode, nothing else visible, the view
        fitted to both images.
        """
        viewer = self._viewer
        if self._compare_state is not None:
            state, self._compare_state = self._compare_state, None
            for layer, visible in state["visible"]:
                if self._present(layer):
                    layer.visible = visible
            _grid(viewer).enabled = state["grid"]
            camera = _camera(viewer)
            camera.center, camera.zoom = state["camera"]
            self._update_compare()
            return
        pair = self._last_pair
        if pair is None or not all(self._present(x) for x in pair):
            self.runner.show_error("run the widget first: there is no result to compare")
            return
        camera = _camera(viewer)
        self._compare_state = {"pair": pair, "grid": _grid(viewer).enabled,
                               "visible": [(layer, layer.visible) for layer in viewer.layers],
                               "camera": (tuple(camera.center), float(camera.zoom))}
        for layer in viewer.layers:
            layer.visible = any(_same(layer, x) for x in pair)
        _grid(viewer).enabled = True
        viewer.reset_view()  # both images whole in their cells; Back restores the view
        self._update_compare()

    # -- closing -----------------------------------------------------------

    def _watch_closing(self) -> None:
        """Install the close hook when the widget is first shown, and stop everything if it is destroyed."""
        import weakref

        from qtpy.QtCore import QEvent, QObject

        ref = weakref.ref(self)

        class _OnShow(QObject):
            def eventFilter(self, obj: Any, event: Any) -> bool:  # noqa: N802 - Qt's name
                owner = ref()
                if event.type() == QEvent.Type.Show and owner is not None:
                    owner._install_close_hook()
                return False

        self._show_filter = _OnShow(self.native)
        self.native.installEventFilter(self._show_filter)
        self.native.destroyed.connect(lambda *_: (owner := ref()) is not None and owner.shutdown())

    def _install_close_hook(self) -> None:
        """Watch the window we are docked in: once it has closed, stop everything (see :meth:`shutdown`).

        Called when the widget is shown and before each job (a viewer that is
        never shown has no Show event). The check waits for the event loop, so
        a close that a confirmation dialog cancels changes nothing; a script
        that closes the viewer and exits is covered by the runner's exit hook.
        """
        window = self.native.window()
        if self._closed or self._close_filter is not None and self._close_filter.parent() is window:
            return
        import weakref

        from qtpy.QtCore import QEvent, QObject, QTimer

        ref, window_ref = weakref.ref(self), weakref.ref(window)  # no strong reference: the viewer can go

        def closed() -> None:
            owner, win = ref(), window_ref()
            if owner is None:
                return
            try:
                still_open = win is not None and win.isVisible()
            except RuntimeError:  # already deleted
                still_open = False
            if still_open:  # a dialog kept the window open
                owner._set_closing(False)
            else:
                owner.shutdown()

        class _OnClose(QObject):
            def eventFilter(self, obj: Any, event: Any) -> bool:  # noqa: N802 - Qt's name
                owner = ref()
                if event.type() == QEvent.Type.Close and owner is not None:
                    owner._set_closing(True)  # touch nothing from now on, until we know
                    QTimer.singleShot(0, closed)
                return False

        self._close_filter = _OnClose(window)
        window.installEventFilter(self._close_filter)

    @property
    def _inactive(self) -> bool:
        """Whether callbacks must leave the viewer and the widgets alone (closed, or closing)."""
        return self._closed or self._closing

    def _set_closing(self, closing: bool) -> None:
        self._closing = closing
        self.runner.closed = closing or self._closed
        if not closing and not self._closed:
            if not self.runner.busy:
                self.runner.reset()
            self._resumed()

    def _resumed(self) -> None:
        """The window stayed open after all: subclasses redo what they dropped meanwhile."""

    def shutdown(self) -> None:
        """The viewer is closing: cancel every job, wait briefly for its thread, and stop reacting to events."""
        if self._closed:
            return
        self._closed = True
        self._stop_jobs()
        self.runner.shutdown()
        for disconnect in self._disconnections():
            try:
                disconnect()
            except (RuntimeError, TypeError, ValueError):  # already gone
                pass

    def _stop_jobs(self) -> None:
        """Subclasses stop their own jobs (preview...) here."""

    def _disconnections(self) -> list[Callable[[], None]]:
        layers = self._viewer.layers
        out = [lambda ev=ev: ev.disconnect(self._on_layers_changed)
               for ev in (layers.events.inserted, layers.events.removed, layers.events.reordered)]
        out.append(lambda: layers.events.inserted.disconnect(self._watch_name))
        out.append(lambda: layers.selection.events.active.disconnect(self._on_active))
        return out

    def show_error(self, exc: BaseException | str) -> None:
        """A notification, repeated in the status line."""
        self.runner.show_error(exc)

    @staticmethod
    def notify(exc: BaseException | str) -> str:
        """A notification only."""
        return notify_error(exc)

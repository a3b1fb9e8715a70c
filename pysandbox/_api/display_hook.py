# SPDX-License-Identifier: MIT
"""The display hook: what a notebook would show, sent as MIME bundles on a pipe.

Never imported: its text is joined to the programs that run in a sandbox, which can
import nothing of pysandbox: the session's keeper (``session_plan.keeper_program``) and
a one-shot run that asks for displays (``one_shot_program``, given to ``python -c``,
then ``run_script`` runs the code's file).  So it imports only the standard library,
and what it defines is in the joined program's globals: ``Shows`` (``display()``, a
builtin once ``install`` ran), the inline matplotlib backend that its finder chooses
(``BackendChooser``), and their helpers.

A frame on the display pipe: one byte of kind (``DISPLAY``), four of length
(big-endian), the payload: the ``>I`` length of a JSON header ``{"parts": [[mime,
size], ...], "value": bool}``, then the parts' bytes.  Everything in it is the code's own
making (the code can write on the pipe itself): the host checks it all.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import struct
import sys
import time

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (a one-shot run pays for every
#: module imported here).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, NoReturn

#: A frame's header: kind, then length.
FRAME = struct.Struct(">BI")
#: A display's frame kind.
DISPLAY = ord("P")

#: Seconds a display waits for the output written before it, and itself, to be read
#: (so that it comes between them, in order).
ORDER_WAIT = 1.0
#: The rich representations a display carries, in the order a notebook prefers them.
RICH = (
    ("image/png", "_repr_png_"),
    ("image/jpeg", "_repr_jpeg_"),
    ("image/svg+xml", "_repr_svg_"),
    ("text/html", "_repr_html_"),
    ("text/markdown", "_repr_markdown_"),
    ("text/latex", "_repr_latex_"),
    ("application/json", "_repr_json_"),
)
RICH_METHODS = ("_repr_mimebundle_", *(method for _, method in RICH))
#: Characters of ``text/plain`` a display carries.
PLAIN_MAX = 64 * 1024
#: The inline matplotlib backend (``module://_pysandbox_inline``): figures are
#: drawn by Agg, and ``plt.show()`` shows each open figure as a display and closes it,
#: as a notebook's inline backend does.  ``_show_figure`` is put in by the loader.
INLINE_BACKEND = """
from matplotlib.backends.backend_agg import FigureCanvasAgg as FigureCanvas
from matplotlib.backend_bases import FigureManagerBase as FigureManager
from matplotlib import _pylab_helpers


def show(*args, **kwargs):
    for manager in _pylab_helpers.Gcf.get_all_fig_managers():
        _show_figure(manager.canvas.figure)
    _pylab_helpers.Gcf.destroy_all()
"""
INLINE = "_pysandbox_inline"


class Shows:
    """A process's displays: ``display()`` (a builtin), a rich final value, and
    figures, each sent on the display pipe as a MIME bundle, in order with the output
    written before and after it."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        #: Bytes one display may take (a larger one is left out).
        self.cap = 0
        self.lock: Any = None

    def display(self, *objects: object, raw: bool = False, **_options: object) -> None:
        """Show each of ``objects`` as a notebook would (``raw``: each is already a
        ``{mime: data}`` bundle); the options of IPython's ``display`` are accepted."""
        for shown in objects:
            parts = self.raw_parts(shown) if raw else self.parts_of(shown)
            if parts:
                self.send(parts)

    def parts_of(self, shown: object) -> list[tuple[str, bytes]]:
        """The MIME bundle of ``shown``: its rich representations (a figure's PNG),
        then its ``repr`` as ``text/plain``."""
        parts: list[tuple[str, bytes]] = []
        if is_figure(shown):
            parts.append(("image/png", figure_png(shown)))
        elif not isinstance(shown, type):
            bundle = representation(shown, "_repr_mimebundle_")
            if isinstance(bundle, tuple) and bundle:
                bundle = bundle[0]
            if isinstance(bundle, dict):
                parts += self.raw_parts(bundle)
            for mime, method in RICH:
                if all(mime != have for have, _ in parts):
                    data = as_bytes(mime, representation(shown, method))
                    if data is not None:
                        parts.append((mime, data))
        if all(mime != "text/plain" for mime, _ in parts):
            parts.append(("text/plain", plain(shown).encode("utf-8", "replace")))
        return parts

    @staticmethod
    def raw_parts(bundle: object) -> list[tuple[str, bytes]]:
        """The parts of a ``{mime: data}`` bundle whose data fits its type."""
        parts = []
        if isinstance(bundle, dict):
            for mime, value in bundle.items():
                data = as_bytes(mime, value) if isinstance(mime, str) else None
                if data is not None:
                    parts.append((mime, data))
        return parts

    def send(self, parts: list[tuple[str, bytes]], value: bool = False) -> None:
        """Send one display after the output written before it has been read, and
        wait until it has been read itself (so output written after it comes after it);
        one over ``cap`` goes as an empty frame (counted as left out)."""
        import json

        header = json.dumps({"parts": [[m, len(d)] for m, d in parts], "value": value})
        payload = b"".join(
            [struct.pack(">I", len(header)), header.encode(), *(data for _, data in parts)]
        )
        if len(payload) > self.cap:
            payload = b""
        self.send_frame(DISPLAY, payload)

    def send_frame(self, kind: int, payload: bytes) -> None:
        """Send one frame on the display pipe, in order with the output (``send``)."""
        if self.lock is None:
            import threading

            self.lock = threading.Lock()
            os.register_at_fork(after_in_child=self.new_lock)
        with self.lock:
            flush()
            read_by_reader((1, 2))
            write_frame(self.fd, kind, payload)
            read_by_reader((self.fd,))

    def new_lock(self) -> None:
        """In a child forked while a thread held the lock: a lock of its own."""
        import threading

        self.lock = threading.Lock()

    def open_figures(self) -> None:
        """Show the figures still open as a call (or a script) ends, as a notebook
        does, when the inline backend draws them."""
        backend = sys.modules.get(INLINE)
        if backend is not None:
            with contextlib.suppress(Exception):
                backend.show()


def representation(shown: object, method: str) -> object:
    """What ``shown``'s ``method`` (a ``_repr_*_``) returns, or None (no such method,
    or it raised); ``_repr_mimebundle_`` is asked as IPython asks it."""
    try:
        if method == "_repr_mimebundle_":
            return getattr(shown, method)(include=None, exclude=None)
        return getattr(shown, method)()
    except Exception:
        return None


def as_bytes(mime: str, data: object) -> bytes | None:
    """A representation's data as the bytes sent for ``mime``, or None when unfit:
    images as bytes (or base64 text), JSON as its text, the rest as UTF-8 text."""
    if isinstance(data, tuple) and data:
        data = data[0]
    try:
        if mime in ("image/png", "image/jpeg"):
            if isinstance(data, str):
                import base64

                return base64.b64decode(data, validate=False)
            return bytes(data) if isinstance(data, (bytes, bytearray)) else None
        if mime == "application/json" and not isinstance(data, (str, bytes, bytearray)):
            import json

            return json.dumps(data, allow_nan=False).encode() if data is not None else None
        if isinstance(data, (bytes, bytearray)):
            return bytes(data)
        return data.encode("utf-8", "replace") if isinstance(data, str) else None
    except Exception:
        return None


def plain(shown: object) -> str:
    """``shown``'s ``repr``, cut at ``PLAIN_MAX``, or a stand-in when it raises."""
    try:
        return repr(shown)[:PLAIN_MAX]
    except Exception:
        return f"<{type(shown).__name__} object>"


def is_rich(shown: object) -> bool:
    """Whether ``shown`` has a representation beyond its ``repr`` (looking it up runs
    the code's ``__getattr__``, whose failure means no)."""
    try:
        if isinstance(shown, type):
            return False
        return is_figure(shown) or any(hasattr(shown, method) for method in RICH_METHODS)
    except Exception:
        return False


def is_figure(shown: object) -> bool:
    """Whether ``shown`` is a matplotlib figure (matplotlib itself not imported)."""
    kind = type(shown)
    return kind.__module__ == "matplotlib.figure" and kind.__name__ == "Figure"


def figure_png(figure: Any) -> bytes:
    """The figure drawn as a PNG, cropped as a notebook's inline backend does."""
    import io

    buffer = io.BytesIO()
    figure.canvas.print_figure(buffer, format="png", bbox_inches="tight")
    return buffer.getvalue()


def read_by_reader(fds: tuple[int, ...]) -> None:
    """Wait until the pipes ``fds`` are empty (their reader read them), for at most
    ``ORDER_WAIT``; a descriptor that is no pipe (the code moved it) is not waited for."""
    import fcntl
    import termios

    deadline = time.monotonic() + ORDER_WAIT
    count = bytearray(4)
    for fd in fds:
        while time.monotonic() < deadline:
            try:
                fcntl.ioctl(fd, termios.FIONREAD, count)
            except OSError:
                break
            if not int.from_bytes(count, sys.byteorder):
                break
            time.sleep(0.0002)


class BackendChooser:
    """A finder on ``sys.meta_path``: matplotlib, once imported, draws with the inline
    backend (unless ``MPLBACKEND`` names one), and ``INLINE`` is that backend.  Nothing
    is set in the environment, which the code's own programs would inherit without the
    backend."""

    def __init__(self, shows: Shows) -> None:
        import importlib.machinery  # here: importing it in find_spec would ask find_spec

        self.shows = shows
        self.spec = importlib.machinery.ModuleSpec

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name == INLINE:
            return self.spec(name, InlineLoader(self.shows))  # type: ignore[arg-type]
        if name != "matplotlib":
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None) if finder is not self else None
            spec = find(name, path, target) if find is not None else None
            if spec is not None and spec.loader is not None:
                spec.loader = ChoosingLoader(spec.loader)
                return spec
        return None


class ChoosingLoader:
    """matplotlib's own loader, which then chooses the session's backend."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def __getattr__(self, name: str) -> Any:
        """The rest of the loader (resources, source) is matplotlib's own."""
        return getattr(self.loader, name)

    def exec_module(self, module: Any) -> None:
        self.loader.exec_module(module)
        if not os.environ.get("MPLBACKEND"):
            with contextlib.suppress(Exception):
                module.rcParams["backend"] = f"module://{INLINE}"


class InlineLoader:
    """The loader of ``INLINE``: the backend's text, with the session's way to show a
    figure put in."""

    def __init__(self, shows: Shows) -> None:
        self.shows = shows

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: Any) -> None:
        module._show_figure = self.shows.display
        exec(compile(INLINE_BACKEND, f"<{INLINE}>", "exec"), module.__dict__)


def write_frame(fd: int, kind: int, payload: bytes) -> None:
    """Write one frame whole to ``fd`` (blocking)."""
    write_all(fd, FRAME.pack(kind, len(payload)) + payload)


def write_all(fd: int, data: bytes) -> None:
    """Write ``data`` whole to ``fd`` (blocking)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def flush() -> None:
    """Flush the streams, so that what the code printed goes before a display."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()


def install(fd: int, cap: int) -> Shows:
    """Make ``display()`` a builtin and the inline backend matplotlib's, sending on
    ``fd`` displays of at most ``cap`` bytes."""
    shows = Shows(fd)
    shows.cap = cap
    builtins.display = shows.display  # type: ignore[attr-defined]
    sys.meta_path.insert(0, BackendChooser(shows))
    return shows


def run_script(argv: Sequence[str]) -> None:
    """A one-shot run's program (``python -c PROGRAM FD CAP PATH ARGS...``): the display
    hook installed, then the file ``PATH`` run as ``python PATH ARGS...`` runs it (the
    same ``sys.argv``, ``sys.path[0]``, a ``__main__`` of its own that stays, the exit
    status, atexit and threads), then the figures still open shown.  An uncaught
    exception's traceback has none of this program's frames."""
    import importlib.machinery
    import types

    fd, cap, path, *args = argv
    shows = install(int(fd), int(cap))
    sys.argv = [path, *args]
    if not getattr(sys.flags, "safe_path", False):
        sys.path[0] = os.path.dirname(path)  # where ``-c`` put ""
    main = types.ModuleType("__main__")
    main.__file__ = path
    main.__loader__ = importlib.machinery.SourceFileLoader("__main__", path)
    main.__builtins__ = builtins  # type: ignore[attr-defined]
    sys.modules["__main__"] = main
    try:
        with open(path, "rb") as source:
            code = compile(source.read(), path, "exec", dont_inherit=True)
        exec(code, main.__dict__)
    except SystemExit:
        shows.open_figures()
        raise
    except BaseException as exc:
        shows.open_figures()
        uncaught(exc, path)
    shows.open_figures()


def uncaught(exc: BaseException, path: str) -> NoReturn:
    """End as the interpreter ends on an uncaught exception: its traceback from the
    script's first frame on, then exit status 1 (atexit handlers run, threads are
    joined), or death by SIGINT for a ``KeyboardInterrupt``."""
    trace = exc.__traceback__
    while trace is not None and trace.tb_frame.f_code.co_filename != path:
        trace = trace.tb_next
    sys.excepthook(type(exc), exc.with_traceback(trace), trace)
    if isinstance(exc, KeyboardInterrupt):
        import signal

        flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    raise SystemExit(1) from None

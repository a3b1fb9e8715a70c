# SPDX-License-Identifier: MIT
"""Pure functions that find bubblewrap and the interpreter and build the bwrap command line.

Nothing here spawns a process; everything is unit-testable.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence

from .. import _sandbox
from .._host import tokens
from .._host.interpreter import (
    SYSTEM_DIRS,
    InterpreterView,
    is_within,
    python_mounts,
    shown_at,
    shown_link,
)
from .._host.programs import find_init
from .._model.errors import SandboxError
from .._model.record import record

__all__ = [
    "CACHE_DIR",
    "CACHE_SIZE",
    "CODE_DIR",
    "CODE_MODE",
    "CODE_PATH",
    "DEVICES",
    "DEVICE_LINKS",
    "EXTENSION_PATH",
    "FONT_CONFIG",
    "INIT_PATH",
    "KERNEL_DIRS",
    "MAIN_MODE",
    "MAIN_NAME",
    "MAIN_PATH",
    "MPLCONFIGDIR",
    "SANDBOX_ID_BASE",
    "SANDBOX_ID_SPAN",
    "SANDBOX_PATH",
    "SECCOMP_FD",
    "WORKDIR",
    "Identity",
    "base_options",
    "eval_options",
    "filesystem_options",
    "font_dirs",
    "font_mounts",
    "init_mount",
    "init_prefix",
    "namespace_options",
    "parent_dirs",
    "run_options",
    "sandbox_identity",
    "seccomp_program",
    "system_mounts",
    "template_namespace_options",
]

#: The syscall filter is always the first fd passed to bwrap (``_launch.FdLayout``).
SECCOMP_FD = 3
#: Where eval_in_sandbox's code lives (read-only), as in the reference implementation.
CODE_DIR = "/home"
CODE_PATH = "/home/code.py"
#: Writable by mode on a read-only mount: a write attempt fails with EROFS, as in the
#: reference, rather than with EACCES for the unprivileged code.
CODE_MODE = 0o666
#: run's working directory: a writable tmpfs of ``Limits.disk`` bytes.
WORKDIR = "/sandbox"
#: Where ``run_python`` puts the code, read-only, inside ``WORKDIR``.
MAIN_NAME = "main.py"
MAIN_PATH = f"{WORKDIR}/{MAIN_NAME}"
MAIN_MODE = 0o444
#: The PATH run's programs see, and where a bare ``argv[0]`` is looked up.
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
#: run's cache directory (``XDG_CACHE_HOME``), outside ``WORKDIR`` so that no cache
#: file comes back in ``Result.files``: a writable tmpfs of ``CACHE_SIZE`` bytes of its
#: own, counted in the sandbox's memory beside ``Limits.disk``, its inodes with the
#: working directory's (a plan's ``writable``).  Matplotlib's config and cache directory
#: (``MPLCONFIGDIR``) is in it, its font list prebuilt there (``_api/fontlist.py``).
CACHE_DIR = "/cache"
CACHE_SIZE = 8 * 2**20
MPLCONFIGDIR = f"{CACHE_DIR}/matplotlib"
#: The host's font configuration, shown read-only where it exists: fontconfig's files
#: and its system cache (the fonts themselves are in ``/usr``, already shown).
FONT_CONFIG = ("/etc/fonts", "/var/cache/fontconfig")

#: Where pysandbox's init executable is, inside the sandbox.
INIT_PATH = "/.pysandbox/init"
#: Where a template's sandbox shows the C core, which its interpreter loads to make
#: its copies (``copies.py``).
EXTENSION_PATH = "/.pysandbox/_sandbox.so"


#: The host's kernel interfaces: the sandbox has its own /proc and a few device nodes,
#: and must never see the host's.
KERNEL_DIRS = ("/proc", "/sys", "/dev")


def system_mounts(dirs: Sequence[str] = SYSTEM_DIRS) -> list[str]:
    """bwrap arguments that show the host's system directories read-only.

    A directory is bound; a symlink (``/lib -> usr/lib`` on merged-/usr systems) is
    recreated as the same symlink; a missing one is skipped.
    """
    args: list[str] = []
    for path in dirs:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


def _without_comments(text: str) -> str:
    """An XML text without its ``<!-- -->`` comments."""
    while True:
        start = text.find("<!--")
        end = text.find("-->", start + 4)
        if start < 0 or end < 0:
            return text
        text = text[:start] + text[end + 3 :]


def _named_paths(text: str) -> list[str]:
    """The absolute paths a fontconfig file names in ``<dir>`` and ``<cachedir>``
    elements (a ``prefix`` other than ``default``: relative to a home or the file,
    left out)."""
    text = _without_comments(text)
    paths = []
    for tag in ("dir", "cachedir"):
        at = text.find(f"<{tag}")
        while at >= 0:
            close, end = text.find(">", at), text.find(f"</{tag}>", at)
            if close < 0 or end < close:
                break
            attributes = text[at + len(tag) + 1 : close]
            path = text[close + 1 : end].strip()
            plain = attributes[:1] in ("", " ", "\t", "\n")
            prefixed = "prefix" in attributes and 'prefix="default"' not in attributes
            if plain and not prefixed and path.startswith("/"):
                paths.append(os.path.normpath(path))
            at = text.find(f"<{tag}", end)
    return paths


@functools.lru_cache(maxsize=1)
def font_dirs() -> tuple[str, ...]:
    """The directories of fonts and font caches the host's fontconfig files
    (``/etc/fonts/fonts.conf``, ``local.conf`` and ``conf.d``) name by an absolute path,
    read once per process."""
    files = ["/etc/fonts/fonts.conf", "/etc/fonts/local.conf"]
    try:
        names = sorted(os.listdir("/etc/fonts/conf.d"))
    except OSError:
        names = []
    files += [f"/etc/fonts/conf.d/{name}" for name in names if name.endswith(".conf")]
    paths: dict[str, None] = {}
    for path in files[:256]:
        try:
            with open(path, encoding="utf-8", errors="replace") as stream:
                paths.update(dict.fromkeys(_named_paths(stream.read(2**20))))
        except OSError:
            continue
    return tuple(paths)


@functools.lru_cache(maxsize=1)
def font_mounts() -> tuple[str, ...]:
    """bwrap arguments that show the host's font configuration read-only: ``FONT_CONFIG``
    and each directory of ``font_dirs`` the sandbox does not show yet, where it exists.
    Only font data: a named directory is shown when some component of its path names
    fonts (``/opt/fonts``, ``/var/cache/fontconfig``), it is no symlink, and it is
    neither a kernel interface nor the root; computed once per process."""
    shown: list[str] = []
    for path in (*FONT_CONFIG, *font_dirs()):
        visible = any(is_within(path, d) for d in (*SYSTEM_DIRS, *shown))
        fonts = path in FONT_CONFIG or "font" in path.lower()
        kernel = path == "/" or any(is_within(path, d) for d in KERNEL_DIRS)
        if visible or not fonts or kernel or os.path.realpath(path) != path:
            continue
        if os.path.isdir(path):
            shown.append(path)
    options: list[str] = []
    for path in parent_dirs(shown):
        options += ["--perms", "0755", "--dir", path]
    for path in shown:
        options += ["--ro-bind", path, path]
    return tuple(options)


@record
class Identity:
    """Who the sandboxed code is on the host when the caller is root.

    A root caller's bwrap would otherwise run the code as host uid 0: without
    capabilities, but still the owner of every root-owned file it can reach (it could
    chmod the host's ``/dev/null``).  pysandbox's init (``INIT_PATH``), run inside the
    sandbox after bwrap has built it, drops to ``uid``/``gid`` (one of the sandbox's
    own, see ``sandbox_identity``) with no supplementary groups and empty capability
    sets.
    """

    uid: int
    gid: int

    def init_options(self) -> list[str]:
        return ["--drop", f"{self.uid}:{self.gid}"]


#: Root callers' sandboxes run as a uid (and gid) of their own, drawn from this range:
#: no account uses it, and no two running sandboxes are likely to share one, so each
#: has its own RLIMIT_NPROC count and none can signal or trace another.
SANDBOX_ID_BASE = 0x70000000
SANDBOX_ID_SPAN = 2**24


def sandbox_identity() -> Identity | None:
    """A fresh identity for one sandbox, or None when the caller is not root (bwrap then
    maps the caller's own unprivileged uid in a user namespace)."""
    if os.geteuid() != 0:
        return None
    uid = SANDBOX_ID_BASE + tokens.randbelow(SANDBOX_ID_SPAN)
    return Identity(uid=uid, gid=uid)


def init_mount() -> list[str]:
    """bwrap options that put the init at ``INIT_PATH``, read-only."""
    return ["--ro-bind", find_init(), INIT_PATH]


def parent_dirs(mounts: Sequence[str]) -> list[str]:
    """Ancestors of the mount points that bwrap would have to create: created explicitly
    as 0755, since bwrap copies the host's mode (``/root`` is 0700) and the unprivileged
    code could not reach its interpreter."""
    parents: dict[str, None] = {}
    for path in mounts:
        parent = os.path.dirname(path)
        chain = []
        while parent not in ("/", "") and not any(is_within(parent, d) for d in SYSTEM_DIRS):
            chain.append(parent)
            parent = os.path.dirname(parent)
        parents.update(dict.fromkeys(reversed(chain)))
    return list(parents)


#: Device nodes the sandbox gets, bound from the host.  Their owner is root, so the
#: unprivileged code cannot change them; cheaper than bwrap's ``--dev``, which also
#: mounts a tmpfs, a devpts and a /dev/shm that the sandbox has no use for.
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
DEVICE_LINKS = (
    ("/proc/self/fd", "/dev/fd"),
    ("/proc/self/fd/0", "/dev/stdin"),
    ("/proc/self/fd/1", "/dev/stdout"),
    ("/proc/self/fd/2", "/dev/stderr"),
)


def namespace_options(root_caller: bool) -> list[str]:
    """Every namespace unshared (no network), every capability dropped.

    For a root caller there is no user namespace, since its root would map
    to host root; bwrap keeps the three capabilities the init needs to drop to the
    identity, and the init empties every capability set there.
    """
    if not root_caller:
        return ["--unshare-all", "--unshare-user", "--disable-userns", "--cap-drop", "ALL"]
    return [
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--cap-drop",
        "ALL",
        "--cap-add",
        "CAP_SETUID",
        "--cap-add",
        "CAP_SETGID",
        "--cap-add",
        "CAP_SETPCAP",
    ]


def template_namespace_options(root_caller: bool) -> list[str]:
    """A template's namespaces (``copies.py``): as a sandbox's, but its interpreter
    keeps, in its own user namespace (a root caller's made by ``copies.py``, whose ids
    map to unprivileged host ids), the capabilities that make its copies' namespaces,
    mounts and identities.  Every copy drops them all before it runs anything.  No
    ``--disable-userns``: its nested user namespace would own none of the sandbox's
    mounts, which a copy's mount namespace would then lock (its ``/proc`` could not be
    mounted); the template's syscall filter refuses a new user namespace instead."""
    keep = ["CAP_SYS_ADMIN", "CAP_SETPCAP", "CAP_NET_ADMIN"]
    if root_caller:
        keep += ["CAP_SETUID", "CAP_SETGID"]
        options = [*namespace_options(True)[:5], "--cap-drop", "ALL"]
    else:
        options = ["--unshare-all", "--unshare-user", "--cap-drop", "ALL"]
    for cap in keep:
        options += ["--cap-add", cap]
    return options


def filesystem_options(view: InterpreterView, moved: str | None = None) -> list[str]:
    """The system directories and the interpreter's ``view`` read-only (what of it lies
    within ``moved`` below ``MOVED_ROOT``, see ``shown_at``), a ``/proc`` of the
    sandbox's own pid namespace with ``/proc/sys`` read-only, and the usual device
    nodes."""
    options = system_mounts()
    binds = [(path, shown_at(path, moved)) for path in view.binds]
    links = [shown_link(where, target, moved) for where, target in view.links]
    for path in parent_dirs([*(inside for _, inside in binds), *(where for where, _ in links)]):
        options += ["--perms", "0755", "--dir", path]
    for path, inside in binds:
        options += ["--ro-bind", path, inside]
    for where, target in links:
        options += ["--symlink", target, where]
    # bwrap covers /proc/irq and /proc/bus but not these; a root caller's bwrap would
    # otherwise leave the host's sysctls (kernel.core_pattern...) writable.
    options += ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys"]
    options += ["--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger"]
    options += ["--perms", "0755", "--dir", "/dev"]
    for device in DEVICES:
        options += ["--dev-bind", device, device]
    for target, link in DEVICE_LINKS:
        options += ["--symlink", target, link]
    return options


@functools.lru_cache(maxsize=2)
def seccomp_program(template: bool = False) -> bytes:
    """The syscall filter's BPF program (built once per process by the C core).

    Every sandbox runs under it, from the init on; see ``src/seccomp_filter.c`` for
    what it refuses.  Served to bwrap on ``SECCOMP_FD``.  With ``template``, the filter
    of a template's sandbox, which may also unshare and mount (``copies.py``): each of
    its copies adds the whole filter before it runs anything.
    """
    try:
        return _sandbox.seccomp_program(template=template)
    except OSError as exc:
        raise SandboxError(
            f"cannot build the sandbox's syscall filter with libseccomp: {exc.strerror}"
        ) from exc


@functools.lru_cache(maxsize=16)
def base_options(
    python: str, euid: int, moved: str | None = None, template: bool = False
) -> tuple[str, ...]:
    """bwrap's options for running ``python`` as a caller with ``euid``, its files
    within ``moved`` shown below ``MOVED_ROOT``: everything that does not change from
    call to call, computed once.  With ``template``, those of a template's sandbox
    (``template_namespace_options``, and the C core shown at ``EXTENSION_PATH``)."""
    namespaces = template_namespace_options if template else namespace_options
    # A copy's init is executed by the copy's own unprivileged id, not by bwrap's root.
    extension = []
    if template:
        extension = ["--perms", "0755", "--dir", os.path.dirname(INIT_PATH)]
        extension += ["--ro-bind", _sandbox.__file__, EXTENSION_PATH]
    options = [
        "--new-session",
        "--die-with-parent",
        # pysandbox's init is pid 1: when bwrap's own pid 1 reports the program's exit,
        # bwrap returns before that pid 1 is gone, and it would outlive the call.  When
        # our init exits, the kernel has already ended every process of the namespace.
        "--as-pid-1",
        "--seccomp",
        str(SECCOMP_FD),
        *namespaces(euid == 0),
        "--clearenv",
        *filesystem_options(python_mounts(python), moved),
        *font_mounts(),
        *extension,
        *init_mount(),
    ]
    return tuple(options)


def init_prefix(identity: Identity | None) -> list[str]:
    """The start of the command: the init, told which identity to drop to."""
    return [INIT_PATH, *(identity.init_options() if identity else [])]


def eval_options(venv_config: tuple[str, int] | None = None) -> list[str]:
    """eval_in_sandbox's part of the command line: ``CODE_DIR`` as the working directory,
    as in the reference implementation (the code itself, at ``CODE_PATH`` with
    ``CODE_MODE``, is bound by ``_launch``).  The root is read-only.  ``venv_config`` is
    where the moved interpreter's ``pyvenv.cfg`` is shown and the fd of its moved text
    (``moved_venv_config``), served over the host's."""
    moved_config = []
    if venv_config is not None:
        path, fd = venv_config
        moved_config = ["--perms", "0444", "--ro-bind-data", str(fd), path]
    return [*moved_config, "--perms", "0755", "--dir", CODE_DIR, "--chdir", CODE_DIR]


def run_options(
    *,
    disk: int,
    readable: Sequence[tuple[int, str]],
    env: Sequence[str],
    fontlist: tuple[int, str] | None = None,
) -> list[str]:
    """run's part of the command line: the extra read-only paths, each ``(fd, path)``
    bound from the file open on ``fd`` inside bwrap (``_readable.open_readable``), a
    writable tmpfs of ``disk`` bytes as the working directory ``WORKDIR`` (also ``HOME``;
    run_python's code is bound at ``MAIN_PATH`` in it by ``_launch``), one of
    ``CACHE_SIZE`` bytes as ``CACHE_DIR`` with ``MPLCONFIGDIR`` in it, and in that the
    matplotlib font list ``fontlist`` when given (``(fd, name)``: its data served on
    ``fd``, copied in, 0444), ``PATH``, ``HOME``, ``XDG_CACHE_HOME`` and
    ``MPLCONFIGDIR``, then the ``--setenv`` options of ``env`` (which may replace them)."""
    options = []
    for path in parent_dirs([path for _, path in readable]):
        options += ["--perms", "0755", "--dir", path]
    for fd, path in readable:
        options += ["--ro-bind-fd", str(fd), path]
    options += ["--perms", "0777", "--size", str(disk), "--tmpfs", WORKDIR]
    options += ["--perms", "0777", "--size", str(CACHE_SIZE), "--tmpfs", CACHE_DIR]
    options += ["--perms", "0777", "--dir", MPLCONFIGDIR]
    if fontlist is not None:
        fd, name = fontlist
        options += ["--perms", "0444", "--file", str(fd), f"{MPLCONFIGDIR}/{name}"]
    options += ["--setenv", "PATH", SANDBOX_PATH, "--setenv", "HOME", WORKDIR]
    options += ["--setenv", "XDG_CACHE_HOME", CACHE_DIR, "--setenv", "MPLCONFIGDIR", MPLCONFIGDIR]
    return [*options, *env, "--chdir", WORKDIR]

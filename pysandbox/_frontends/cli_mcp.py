# SPDX-License-Identifier: MIT
"""``pysandbox mcp``: its options, and the server started with them.

``pysandbox mcp [--http [HOST:]PORT] [--allow-remote] [limit options] [--max-sessions N]
[--session-idle-timeout SECONDS] [--warm-sessions N] [--max-fresh N] [--env NAME=VALUE]
[--readable PATH]`` serves the Model Context Protocol over stdio, or over streamable
HTTP at ``http://HOST:PORT/mcp`` (HOST 127.0.0.1 by default; PORT 0: a free one; the
URL goes to stderr).  A HOST that is not a loopback address is refused without
``--allow-remote``: the server has no authentication, so whoever reaches the port runs
code.  The SDK (``pip install pysandbox[mcp]``, Python 3.10+) is imported only here, when
the command runs.
"""

from __future__ import annotations

import sys

from .._api.run import check_env
from .._launch.readable import check_readable
from .._model.units import parse_seconds
from .cli_batch import whole_number
from .mcp_state import DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_SESSIONS, ServerOptions
from .options import add_limit_options, argparse_type, limits_from, pairs

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (type checkers know the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

    from .options import Usage

__all__ = ["add_mcp_options", "http_address", "is_loopback", "mcp_command"]

#: The address ``--http PORT`` listens on.
DEFAULT_HOST = "127.0.0.1"


def http_address(text: str) -> tuple[str, int]:
    """``[HOST:]PORT`` as ``(host, port)``: ``8000``, ``localhost:0``, ``[::1]:8000``."""
    host, colon, port = text.rpartition(":")
    if not colon:
        host = DEFAULT_HOST
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host or not port.isascii() or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"expected [HOST:]PORT with PORT 0 to 65535, like 8000; got {text!r}")
    return host, int(port)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or a loopback address (127.0.0.0/8, ::1)."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def add_mcp_options(command: argparse.ArgumentParser) -> None:
    """``mcp``'s options: the transport, the sessions, what every sandbox gets, and the
    limits (the most a tool call may ask for, and its defaults)."""
    command.add_argument(
        "--http",
        type=argparse_type(http_address),
        metavar="[HOST:]PORT",
        help=f"serve streamable HTTP at http://HOST:PORT/mcp (HOST {DEFAULT_HOST} by "
        "default, PORT 0: a free one; the URL is printed on stderr) instead of stdio",
    )
    command.add_argument(
        "--allow-remote",
        action="store_true",
        help="let --http listen on an address that is not loopback: anyone who reaches "
        "it runs code in your sandboxes (there is no authentication)",
    )
    command.add_argument(
        "--max-sessions",
        type=whole_number(1),
        default=DEFAULT_MAX_SESSIONS,
        metavar="N",
        help=f"the most live sessions at once (default {DEFAULT_MAX_SESSIONS})",
    )
    command.add_argument(
        "--session-idle-timeout",
        type=argparse_type(parse_seconds),
        default=DEFAULT_IDLE_TIMEOUT,
        metavar="SECONDS",
        help=f"close a session after this long without a call (default {DEFAULT_IDLE_TIMEOUT:g} s)",
    )
    command.add_argument(
        "--warm-sessions",
        type=whole_number(0),
        default=1,
        metavar="N",
        help="sandboxes kept started ahead for run_python and create_session (default 1)",
    )
    command.add_argument(
        "--max-fresh",
        type=whole_number(1),
        default=4,
        metavar="N",
        help="the most run_python calls running at once; more wait (default 4)",
    )
    command.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set an environment variable in every sandbox; repeatable",
    )
    command.add_argument(
        "--readable",
        action="append",
        default=[],
        metavar="PATH",
        help="let every sandbox read host PATH, read-only at the same path; repeatable",
    )
    add_limit_options(command)


def mcp_command(parser: Usage, options: argparse.Namespace) -> int:
    """Check the options, then serve until the client, stdin's end or a signal stops it."""
    http: tuple[str, int] | None = options.http
    if http is not None and not is_loopback(http[0]) and not options.allow_remote:
        parser.error(
            f"--http {http[0]} is not a loopback address: anyone who reaches it could run "
            "code; add --allow-remote if that is what you want"
        )
    if sys.version_info < (3, 10):
        parser.error("mcp needs Python 3.10 or later (the MCP SDK does)")
    try:
        from .mcp_server import serve
    except ImportError as exc:
        parser.error(f"mcp needs the MCP SDK: pip install 'pysandbox[mcp]' ({exc})")
    server_options = ServerOptions(
        limits=limits_from(options),
        max_sessions=options.max_sessions,
        idle_timeout=options.session_idle_timeout,
        warm_sessions=options.warm_sessions,
        max_fresh=options.max_fresh,
        env=pairs(parser, "--env", options.env),
        readable=tuple(options.readable),
    )
    try:
        check_env(server_options.env)
        check_readable(server_options.readable)
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))
    serve(server_options, http)
    return 0

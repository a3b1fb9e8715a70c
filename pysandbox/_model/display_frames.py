# SPDX-License-Identifier: MIT
"""Displays as they come off a sandbox's display pipe (``_api/display_hook.py`` makes
them), parsed on the host as the hostile input they are: one frame's MIME parts
(``display_parts``), and a one-shot run's whole stream of frames (``stream_displays``),
each display then checked and sanitized (``rich.checked_bundle``), within the caps."""

from __future__ import annotations

import struct

from .rich import Bundle, checked_bundle
from .untrusted import UntrustedInputError, loads

__all__ = ["checked_display", "display_parts", "stream_displays"]

#: A frame's header: kind, then length (big-endian).
FRAME = struct.Struct(">BI")
#: A display's frame kind.
DISPLAY = ord("P")
#: MIME parts one display may carry, and characters of a MIME type.
PARTS_MAX = 16
MIME_MAX = 100
#: Bytes of a display's JSON header.
HEADER_MAX = 1 << 20


def display_parts(payload: bytes) -> tuple[dict[str, bytes | str], bool] | None:
    """A display frame's MIME parts (images as bytes, the rest as text) and whether it
    is the call's value, or None when it is malformed: a JSON header
    ``{"parts": [[mime, size], ...], "value": bool}`` after its ``>I`` length, then the
    parts' bytes, exactly."""
    if len(payload) < 4:
        return None
    size = int.from_bytes(payload[:4], "big")
    if size > min(len(payload) - 4, HEADER_MAX):
        return None
    try:
        header = loads(payload[4 : 4 + size], max_bytes=None)
    except (UntrustedInputError, UnicodeDecodeError, ValueError):
        return None
    listed = header.get("parts") if isinstance(header, dict) else None
    if not isinstance(listed, list) or len(listed) > PARTS_MAX:
        return None
    raw: dict[str, bytes | str] = {}
    offset = 4 + size
    for part in listed:
        if not (isinstance(part, list) and len(part) == 2 and isinstance(part[0], str)):
            return None
        mime, length = part
        if len(mime) > MIME_MAX or type(length) is not int or length < 0:
            return None
        data = payload[offset : offset + length]
        offset += length
        raw.setdefault(
            mime,
            data
            if mime.startswith("image/") and "svg" not in mime
            else data.decode("utf-8", "replace"),
        )
    if offset != len(payload):
        return None
    return raw, header.get("value") is True


def checked_display(raw: dict[str, bytes | str], max_bytes: int) -> Bundle | None:
    """``raw`` as a checked and sanitized ``Bundle``, or None when nothing of it is fit
    or it is refused whole (over ``max_bytes`` once made safe: escaping and replaced
    invalid UTF-8 make text grow)."""
    try:
        return checked_bundle(raw, max_bytes=max_bytes)
    except ValueError:
        return None


def stream_displays(
    data: bytes, cut_short: bool, max_bytes: int, max_count: int
) -> tuple[tuple[Bundle, ...], bool]:
    """The displays of a one-shot run's display stream ``data`` (frames as a session's
    display pipe carries them; ``cut_short``: the C core dropped bytes past the cap),
    at most ``max_count`` of them and ``max_bytes`` of frames, each checked: the kept
    ones, and whether any was left out (over a cap, empty, or malformed)."""
    kept: list[Bundle] = []
    left_out, offset, used = cut_short, 0, 0
    while offset + FRAME.size <= len(data):
        kind, length = FRAME.unpack_from(data, offset)
        payload = data[offset + FRAME.size : offset + FRAME.size + length]
        if kind != DISPLAY or len(payload) != length:
            return tuple(kept), True
        offset += FRAME.size + length
        used += length
        parts = display_parts(payload) if length else None
        if parts is None or used > max_bytes or len(kept) >= max_count:
            left_out = True
            continue
        bundle = checked_display(parts[0], max_bytes)
        if bundle is None:
            left_out = True
        else:
            kept.append(bundle)
    return tuple(kept), left_out or offset != len(data)

# SPDX-License-Identifier: MIT
"""The programs every sandbox starts (the init, and a copy's client) as the build makes
them: static, so no dynamic loader runs at each start, and built with musl where
``musl-gcc`` is installed (``scripts/setup.sh`` installs it), whose start-up is shorter
than glibc's."""

from __future__ import annotations

import shutil
import struct
from collections.abc import Callable

import pytest

from pysandbox._host import programs

pytestmark = pytest.mark.no_bwrap

#: ELF's program header type of the dynamic loader's path.
PT_INTERP = 3
#: A string only glibc's start-up code carries (its tunables' environment variable).
GLIBC_START_UP = b"GLIBC_TUNABLES"


def _program_header_types(image: bytes) -> list[int]:
    """The ``p_type`` of each program header of a 64-bit little-endian ELF ``image``."""
    assert image[:4] == b"\x7fELF" and image[4] == 2 and image[5] == 1, image[:6]
    (phoff,) = struct.unpack_from("<Q", image, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", image, 0x36)
    return [struct.unpack_from("<I", image, phoff + i * phentsize)[0] for i in range(phnum)]


@pytest.mark.parametrize("find", [programs.find_init, programs.find_copy_client])
def test_each_program_is_static_and_of_musl_where_it_is_installed(
    find: Callable[[], str],
) -> None:
    with open(find(), "rb") as file:
        image = file.read()
    assert PT_INTERP not in _program_header_types(image), "linked dynamically"
    if shutil.which("musl-gcc") is not None:
        assert GLIBC_START_UP not in image, "built with glibc although musl-gcc is installed"

"""Build the C core; all metadata lives in pyproject.toml."""

from __future__ import annotations

import os

from setuptools import Extension, setup

SOURCES = ["src/module.c", "src/spawn.c", "src/pump.c", "src/proctree.c"]
CFLAGS = ["-std=c11", "-Wall", "-Wextra", "-fvisibility=hidden"]
LDFLAGS: list[str] = []

if os.environ.get("PYSANDBOX_STRICT"):
    CFLAGS.append("-Werror")
if os.environ.get("PYSANDBOX_SANITIZE"):
    CFLAGS += ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-O1", "-g"]
    LDFLAGS += ["-fsanitize=address,undefined"]

setup(
    ext_modules=[
        Extension(
            "pysandbox._sandbox",
            sources=SOURCES,
            depends=["src/sandbox.h"],
            extra_compile_args=CFLAGS,
            extra_link_args=LDFLAGS,
        )
    ]
)

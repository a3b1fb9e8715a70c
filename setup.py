# SPDX-License-Identifier: MIT
"""Build the C core and the in-sandbox init; all metadata lives in pyproject.toml."""

from __future__ import annotations

import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import LinkError

SOURCES = [
    "src/module.c",
    "src/args.c",
    "src/sandbox_type.c",
    "src/hooks.c",
    "src/output.c",
    "src/spawn.c",
    "src/child.c",
    "src/clone.c",
    "src/pump.c",
    "src/streams.c",
    "src/buffer.c",
    "src/kill.c",
    "src/watchdog.c",
    "src/proctree.c",
    "src/disk.c",
    "src/unixgc.c",
    "src/seccomp_filter.c",
    "src/landlock.c",
]
INIT_SOURCES = ["src/init.c", "src/init_files.c", "src/landlock.c"]
CFLAGS = ["-std=c11", "-Wall", "-Wextra", "-fvisibility=hidden"]
# The watchdog is a POSIX thread (libpthread on C libraries before glibc 2.34).
LDFLAGS: list[str] = ["-pthread"]

if os.environ.get("PYSANDBOX_STRICT"):
    CFLAGS.append("-Werror")
if os.environ.get("PYSANDBOX_SANITIZE"):
    CFLAGS += ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-O1", "-g"]
    LDFLAGS += ["-fsanitize=address,undefined"]


class BuildExtAndInit(build_ext):
    """Also build ``pysandbox/_init``, the executable that runs first inside the sandbox.

    Linked statically where the C library allows it (no dynamic loader work on every
    sandbox start), dynamically otherwise.
    """

    def run(self) -> None:
        super().run()
        package_dir = "pysandbox" if self.inplace else os.path.join(self.build_lib, "pysandbox")
        os.makedirs(package_dir, exist_ok=True)
        flags = [f for f in CFLAGS if f != "-fvisibility=hidden" and not f.startswith("-fsan")]
        objects = self.compiler.compile(
            INIT_SOURCES,
            output_dir=os.path.join(self.build_temp, "init"),
            extra_postargs=[*flags, "-O2"],
        )
        try:
            self.compiler.link_executable(
                objects, "_init", output_dir=package_dir, extra_postargs=["-static", "-s"]
            )
        except LinkError:
            self.compiler.link_executable(
                objects, "_init", output_dir=package_dir, extra_postargs=["-s"]
            )


setup(
    cmdclass={"build_ext": BuildExtAndInit},
    ext_modules=[
        Extension(
            "pysandbox._sandbox",
            sources=SOURCES,
            depends=[
                "src/sandbox.h",
                "src/landlock.h",
                "src/spawn.h",
                "src/pump.h",
                "src/args.h",
                "src/hooks.h",
                "src/output.h",
                "src/sandbox_type.h",
            ],
            extra_compile_args=CFLAGS,
            extra_link_args=LDFLAGS,
            libraries=["seccomp"],
        )
    ],
)

# SPDX-License-Identifier: MIT
"""Build the C core and the in-sandbox init; all metadata lives in pyproject.toml."""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py
from setuptools.errors import CompileError, LinkError

if TYPE_CHECKING:
    from distutils.ccompiler import CCompiler

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
    "src/capabilities.c",
    "src/copy.c",
    "src/copy_request.c",
    "src/copy_serve.c",
    "src/copy_tree.c",
    "src/copy_memory.c",
    "src/copy_rseq.c",
    "src/fdpass.c",
    "src/userns.c",
]
INIT_SOURCES = [
    "src/init.c",
    "src/init_files.c",
    "src/file_filter.c",
    "src/landlock.c",
    "src/capabilities.c",
]
#: The host-side programs built beside the module: the init, and the copy client
#: (``src/copy_client.c``) the C core starts in bwrap's place for a template's copy.
COPY_SOURCES = ["src/copy_client.c", "src/copy_template.c", "src/fdpass.c"]
PROGRAMS = {"_init": INIT_SOURCES, "_copy": COPY_SOURCES}
CFLAGS = ["-std=c11", "-Wall", "-Wextra", "-fvisibility=hidden"]
# The watchdog is a POSIX thread (libpthread on C libraries before glibc 2.34).
LDFLAGS: list[str] = ["-pthread"]

if os.environ.get("PYSANDBOX_STRICT"):
    CFLAGS.append("-Werror")
# The wheels link libseccomp in (scripts/build-wheels.sh names the archive), so that
# users need no libseccomp.so.2 of a matching version.
LIBSECCOMP_A = os.environ.get("PYSANDBOX_LIBSECCOMP_A")
# A compiler for the programs alone (the init and the copy client), which every sandbox
# starts: PYSANDBOX_INIT_CC when set (the wheels' compiler targets an old glibc and
# cannot link statically), else musl's where it is installed (a static program of musl
# starts about 0.3 ms sooner than one of glibc, whose start-up code is larger), else the
# module's.  Each is linked statically where it can be, so it needs no C library.
INIT_CC = os.environ.get("PYSANDBOX_INIT_CC") or shutil.which("musl-gcc")
#: Each header the build needs, and the packages that install it.
HEADERS = {
    "Python.h": "python3-dev on Debian and Ubuntu, python3-devel on Fedora",
    "seccomp.h": "libseccomp-dev on Debian and Ubuntu, libseccomp-devel on Fedora",
}

if os.environ.get("PYSANDBOX_SANITIZE"):
    CFLAGS += ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-O1", "-g"]
    LDFLAGS += ["-fsanitize=address,undefined"]


class BuildPyFresh(build_py):
    """Empty the package under ``build/lib`` first: setuptools copies over what a
    previous build left there, and a module since deleted from ``pysandbox/`` shipped."""

    def run(self) -> None:
        shutil.rmtree(os.path.join(self.build_lib, "pysandbox"), ignore_errors=True)
        super().run()


class BuildExtAndInit(build_ext):
    """Also build ``pysandbox/_init``, the executable that runs first inside the sandbox,
    and ``pysandbox/_copy``, the client that asks a template for a copy.

    Linked statically where the C library allows it (no dynamic loader work on every
    sandbox start), dynamically otherwise.  Every object is compiled anew: setuptools
    would reuse one under ``build/`` older than its source, whatever flags made it.
    """

    def initialize_options(self) -> None:
        super().initialize_options()
        self.force = True

    def run(self) -> None:
        super().run()
        package_dir = "pysandbox" if self.inplace else os.path.join(self.build_lib, "pysandbox")
        os.makedirs(package_dir, exist_ok=True)
        flags = [f for f in CFLAGS if f != "-fvisibility=hidden" and not f.startswith("-fsan")]
        compiler = self._init_compiler()
        for name, sources in PROGRAMS.items():
            objects = compiler.compile(
                sources,
                output_dir=os.path.join(self.build_temp, name),
                extra_postargs=[*flags, "-O2"],
            )
            try:
                compiler.link_executable(
                    objects, name, output_dir=package_dir, extra_postargs=["-static", "-s"]
                )
            except LinkError:
                compiler.link_executable(
                    objects, name, output_dir=package_dir, extra_postargs=["-s"]
                )

    def build_extension(self, ext: Extension) -> None:
        self._check_headers(ext)
        super().build_extension(ext)

    def _check_headers(self, ext: Extension) -> None:
        """Fail with the package to install when a header is missing, not with a page
        of compiler errors."""
        temp = os.path.join(self.build_temp, "headers")
        os.makedirs(temp, exist_ok=True)
        # A compiler that fails on any file fails here, with its own words.
        self.compiler.compile([self._probe(temp, "empty", "")], output_dir=temp)
        for header, packages in HEADERS.items():
            probe = self._probe(temp, header.replace(".", "_"), f"#include <{header}>\n")
            try:
                self.compiler.compile([probe], output_dir=temp, include_dirs=ext.include_dirs)
            except CompileError:
                raise CompileError(
                    f"pysandbox cannot be built: {header} was not found; install {packages}"
                ) from None

    @staticmethod
    def _probe(temp: str, name: str, text: str) -> str:
        """A C file of ``text`` in ``temp``; its path."""
        path = os.path.join(temp, name + ".c")
        with open(path, "w") as file:
            file.write(text)
        return path

    def _init_compiler(self) -> CCompiler:
        """The compiler for the programs: ``INIT_CC`` when there is one, else the module's."""
        if not INIT_CC:
            return self.compiler
        compiler = type(self.compiler)()
        compiler.set_executables(compiler=INIT_CC, compiler_so=INIT_CC, linker_exe=INIT_CC)
        compiler.force = True
        return compiler


setup(
    cmdclass={"build_ext": BuildExtAndInit, "build_py": BuildPyFresh},
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
            # dlsym (src/copy_rseq.c) is libdl's on C libraries before glibc 2.34.
            libraries=["dl"] if LIBSECCOMP_A else ["seccomp", "dl"],
            extra_objects=[LIBSECCOMP_A] if LIBSECCOMP_A else [],
        )
    ],
)

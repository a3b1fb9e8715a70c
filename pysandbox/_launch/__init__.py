# SPDX-License-Identifier: MIT
"""Layer 4, the launch: one sandbox, a ``Plan`` in and its ``Facts`` out.

The bubblewrap command line, the choice of what confines a run (a cgroup or an
rlimit), the lifeline, the code file and the readable paths, and the one path that
starts a sandbox (``launcher``).  The only importer of the C core ``pysandbox._sandbox``.

Imports: ``_model``, ``_host``, ``_cgroups``, the C core and this package.
"""

# SPDX-License-Identifier: MIT
"""Layer 2, the host: facts read from this machine, starting nothing.

The one ``/proc/self/mountinfo`` parser, who owns a process and whether it is gone,
where bubblewrap, the interpreter and the init are, and what of the interpreter a
sandbox must show.

Imports: ``_model`` and this package.
"""

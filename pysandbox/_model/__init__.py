# SPDX-License-Identifier: MIT
"""Layer 1, the model: pysandbox's vocabulary and its pure rules.

The records a caller holds (``Limits``, ``File``, ``Result``, ``Status``,
``ProcessOutput``), the errors, the file record stream shared with the init, the rules
that turn facts into a verdict (``classify``, ``verdict``), how records look in
IPython and Jupyter (``display``), the parsing of hostile input (``untrusted``,
``escape``) and the rich outputs a sandbox sends, made safe (``rich``).  Nothing here
does I/O, starts a process or touches the C core.

Imports: the standard library only, and this package; ``rich_checks`` also imports
``nh3`` (the package's one runtime dependency), inside the check that uses it.
"""

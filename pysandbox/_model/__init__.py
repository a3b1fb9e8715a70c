# SPDX-License-Identifier: MIT
"""Layer 1, the model: pysandbox's vocabulary and its pure rules.

The records a caller holds (``Limits``, ``File``, ``Result``, ``Status``,
``ProcessOutput``), the errors, the file record stream shared with the init, the rules
that turn facts into a verdict (``classify``, ``verdict``), how records look in
IPython and Jupyter (``display``), the parsing of hostile input (``untrusted``,
``escape``), the values carried in and out of a sandbox without pickle
(``value_codec``) and the rich outputs a sandbox sends, made safe (``rich``).  Nothing
here does I/O, starts a process or touches the C core.

Imports: the standard library only, and this package; ``value_codec`` also imports numpy
and pandas, inside the functions that meet their values (neither is a dependency), and
``rich_checks`` imports ``nh3`` (the package's one runtime dependency), inside the check
that uses it.
"""

# SPDX-License-Identifier: MIT
"""Layer 6, many calls: the ``Runner``, its concurrency cap, warm pool, ``map`` and engines.

``Job`` and ``Outcome`` (a run as data and how it ended), the results file and the batch
runner.  ``runner`` imports ``dask`` lazily, when ``Runner.map(client=...)`` is called,
and ``dask`` makes the Runners of the workers: that one cycle is inside this package,
for an optional dependency.

Imports: the layers below and this package.
"""

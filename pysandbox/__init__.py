"""pysandbox: run untrusted Python code under bubblewrap with hard limits, from a C core.

>>> from pysandbox import eval_in_sandbox
>>> eval_in_sandbox("print(6 * 7)").stdout
'42'
"""

from __future__ import annotations

from ._api import eval_in_sandbox
from ._errors import SandboxError
from ._types import ProcessOutput

__all__ = ["ProcessOutput", "SandboxError", "__version__", "eval_in_sandbox"]

__version__ = "0.1.0"

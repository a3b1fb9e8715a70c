# SPDX-License-Identifier: MIT
"""Nothing to write here any more: pysandbox's pytest plugin grades.

``--submission DIR`` (default: ``sandbox_submission`` in pytest.ini) says what to grade,
``@pytest.mark.points(n)`` what each test is worth, ``--sandbox-gradescope PATH``
(default: ``sandbox_gradescope``) where Gradescope's results.json goes, and
``@pytest.mark.sandbox_session(...)`` how a module loads the submission once.
"""

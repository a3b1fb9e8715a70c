"""Layer 3, the control groups: one group per sandbox, on cgroup v1 and v2.

Glossary: a *hierarchy* is one mounted cgroup tree (v2 has one, v1 one per controller);
its *base* is the group the sandboxes' groups are made in (the caller's own group on v2,
``PARENT`` below the root on v1); a *node* is one sandbox's group in one hierarchy, and
a ``SandboxCgroup`` is the set of nodes of one sandbox.  ``mounts`` finds the
hierarchies, ``files`` names their control files, ``base`` readies the base, ``group``
makes, limits, reads and tears down the nodes, ``reaper`` removes what a call must not
wait for.

Imports: ``_model``, ``_host`` and this package.
"""

"""The trust model (docs/trust.md): what an untrusted program may reach, checked on the
parse tree before analysis. ``policy`` holds :class:`~flowc.trust.policy.TrustPolicy`
and the program's checks, ``lists`` the allowed settings, functions and options,
``paths`` the file paths' rules, ``text`` the text handed to Spark (``${``).

May import: the core modules, :mod:`flowc.flink`, :mod:`flowc.sql` and
:mod:`flowc.syntax`.
"""

"""Flink's rules and constants that flowc follows exactly: murmur hashing, key groups
and operator ranges (``murmur``, ``keygroups``), operator ids (``hashing``) and the
chaining rule (``chains``).

May import: nothing of flowc (every stage may use it).
"""

"""Flink's rules and constants that flowc follows exactly."""

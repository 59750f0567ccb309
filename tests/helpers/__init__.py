"""Code the test modules share; no test module imports another (tests/test_test_imports.py)."""

"""What the tests share, one module per concern. A test module imports from here (and gets its
fixtures from a conftest), never from another test module nor from a conftest: the lint check
tests/helpers/lint_test_imports.py, run by `make lint` and tests/unit/test_test_imports.py."""

"""ckptfs for test suites: ``pytest -p ckptfs`` runs the session over a ckptfs
mount and fails the test during which a write crossed job namespaces."""

from .plugin import (  # noqa: F401  pytest finds the hooks and fixtures here
    ckptfs_mount,
    ckptfs_session_mount,
    describe,
    pytest_addoption,
    pytest_configure,
    pytest_runtest_makereport,
    pytest_runtest_setup,
    pytest_sessionfinish,
    pytest_unconfigure,
)

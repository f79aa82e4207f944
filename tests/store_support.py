"""Helpers shared by the store tests (not a test module)."""

from __future__ import annotations

import pytest


def start_postgres_or_skip():
    """A throwaway PostgreSQL + pgvector on 127.0.0.1, or ``pytest.skip`` saying why it cannot start."""
    from medrank.store.pgtest import PostgresUnavailable, start_local_postgres

    try:
        return start_local_postgres()
    except PostgresUnavailable as exc:
        pytest.skip(f"local PostgreSQL + pgvector cannot start: {exc}")

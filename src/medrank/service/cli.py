"""``medrank serve``: the HTTP API and the web page in one process.

The server answers at once; the knowledge bases and indexes are built (first start) from ``--data``
(default ``../shared/data``) and the packaged vocabularies with the offline encoders, or loaded (later
starts) from ``--state`` (default ``$MEDRANK_CACHE/service``), in a background worker, smallest first,
each swapped in when done (``/health`` reports each one's progress and ETA; named bars on a terminal,
plain lines in a log). ``--build-only`` builds everything in the foreground and exits. Trained checkpoints are looked up under
``--models`` (default ``./runs``); see :mod:`medrank.service.settings`.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    """Add ``serve`` and ``train-service`` to the ``medrank`` app."""

    @app.command()
    def serve(
        host: Annotated[str, typer.Option(help="Interface to bind (default loopback only).")] = "127.0.0.1",
        port: Annotated[int, typer.Option(help="TCP port.", min=1, max=65535)] = 8000,
        store: Annotated[str | None, typer.Option(help="Knowledge-base store: embedded:DIR, a postgresql:// DSN, or 'none' "
                                                        "for plain medrank indexes (default: $MEDRANK_STORE, else the "
                                                        "embedded store in --state).")] = None,
        state: Annotated[Path | None, typer.Option(help="Where built indexes live (default $MEDRANK_CACHE/service).")] = None,
        models: Annotated[Path | None, typer.Option(help="Where trained runs are looked up (default $MEDRANK_MODELS or ./runs).")] = None,
        model: Annotated[list[str], typer.Option(help="NAME=PATH of a trained run (repeatable); NAME: symptoms-zh, symptoms-en, similar-zh, "
                                                      "similar-en, passages, normalize, next-questions.")] = [],  # noqa: B006
        data: Annotated[Path | None, typer.Option(help="Dataset root (default: the global --data, $MEDRANK_DATA or ../shared/data).")] = None,
        kb: Annotated[str, typer.Option(help="Comma-separated knowledge bases, each NAME or NAME:METHOD (bm25|dense|hybrid); "
                                             "default hpo,icd10cm,chip-cdn,dxy,procedures (ICD-10-CM: its signs and symptoms; dxy: the 41 DXY "
                                             "symptoms, decided by the self-report model).")] = "hpo,icd10cm,chip-cdn,dxy,procedures",
        pipelines: Annotated[str, typer.Option(help="Comma-separated pipelines to serve.")] = "symptoms,normalize,passages,next-questions,similar-questions",
        token: Annotated[str | None, typer.Option(help="Require this bearer token (default $MEDRANK_API_TOKEN).")] = None,
        timeout: Annotated[float | None, typer.Option(help="Seconds per request (504 after; default $MEDRANK_REQUEST_TIMEOUT, else 30).")] = None,
        max_concurrency: Annotated[int, typer.Option(help="Requests computed at once (others queue).", min=1)] = 32,
        build_only: Annotated[bool, typer.Option("--build-only", help="Build/load everything, then exit.")] = False,
        backend: Annotated[str, typer.Option(help="How encoders run: auto (the fastest ONNX Runtime form that agrees "
                                                  "with torch, else torch; entries encoded in bf16 on AMX CPUs) | torch | torch-bf16 | onnx | onnx-int8.")] = "auto",
        urgent_signs: Annotated[Path | None, typer.Option(help="A reviewed urgent-signs file (JSON, the shape of the one shipped "
                                                              "in medrank/pipelines/symptom/urgent_signs.json): which detected "
                                                              "symptoms raise a crisis or emergency notice, and its words "
                                                              "(default $MEDRANK_URGENT_SIGNS, else the shipped file, which no "
                                                              "clinician has reviewed).")] = None,
    ) -> None:
        """Serve the API and the web page (http://HOST:PORT/)."""
        from rich.console import Console
        from rich.markup import escape

        from medrank.service.build import build_services, start_services
        from medrank.service.settings import DEFAULT_MODEL_PATHS, ServiceSettings

        err = Console(stderr=True)
        overrides = {}
        for item in model:
            name, sep, path = item.partition("=")
            if not sep:
                err.print(f"[bold red]error:[/] --model expects NAME=PATH, got {escape(repr(item))}")
                raise typer.Exit(2)
            if name.strip() not in DEFAULT_MODEL_PATHS:
                err.print(f"[bold red]error:[/] --model: unknown pipeline {escape(repr(name))}; known: {', '.join(DEFAULT_MODEL_PATHS)}")
                raise typer.Exit(2)
            overrides[name.strip()] = Path(path)
        try:
            settings = ServiceSettings(model_paths=overrides, max_concurrency=max_concurrency, backend=backend,
                                       **({} if timeout is None else {"request_timeout_s": timeout}))
        except ValueError as exc:
            err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
            raise typer.Exit(2) from None
        if urgent_signs is not None:
            settings.urgent_signs = urgent_signs
        if settings.urgent_signs is not None:
            from medrank.pipelines.symptom.inference import UrgentSigns

            try:  # a wrong file is said at once, not when the first symptom list is built
                UrgentSigns.load(settings.urgent_signs)
            except (OSError, ValueError) as exc:
                err.print(f"[bold red]error:[/] --urgent-signs: {escape(str(exc))}", highlight=False)
                raise typer.Exit(2) from None
        if token:
            settings.api_token = token
        if state is not None:
            settings.state_dir = state
        if models is not None:
            settings.models_dir = models
        if store is not None:
            settings.store = None if store.strip().lower() == "none" else store
        elif settings.store is None and not os.environ.get("MEDRANK_STORE"):
            settings.store = "embedded:"  # the embedded default: faiss + bm25s + SQLite under --state/store
        if settings.store is not None and settings.store.strip().lower() == "none":
            settings.store = None

        if data is not None:
            settings.data_root = data.resolve()
            os.environ["MEDRANK_DATA"] = str(settings.data_root)  # loaders that read the environment agree
        elif os.environ.get("MEDRANK_DATA"):
            settings.data_root = Path(os.environ["MEDRANK_DATA"])
        names = []
        for item in (k.strip() for k in kb.split(",")):
            if item:
                name, _, method = item.partition(":")
                names.append(name)
                if method:
                    settings.kb_methods[name] = method
        settings.kbs = tuple(names)
        chosen = tuple(p.strip() for p in pipelines.split(",") if p.strip())
        try:
            if build_only:
                build_services(settings, chosen, console=err)
                return
            # answer at once: each knowledge base / index is built in a background worker and swapped in when done
            services, _ = start_services(settings, chosen, console=err)
        except (ValueError, OSError) as exc:
            err.print(f"[bold red]error:[/] {exc}")
            raise typer.Exit(2) from None
        import uvicorn

        from medrank.service.app import create_app

        access = logging.getLogger("medrank.service.access")
        access.setLevel(logging.INFO)
        access.addHandler(_stderr_handler())
        access.propagate = False  # one line per request, not a second copy through the root handler
        err.print(f"serving on http://{host}:{port}/ (API docs at /docs){' with a bearer token' if settings.api_token else ''}")
        uvicorn.run(create_app(settings, services), host=host, port=port, access_log=False, log_level="warning")


    @app.command("train-service")
    def train_service_cmd(
        only: Annotated[str, typer.Option(help="Comma-separated pipelines to train (default: every one the service uses).")] = "",
        runs: Annotated[Path, typer.Option(help="Where the runs go (serve them with `medrank serve --models DIR`); a step "
                                                "that reads earlier runs reads them there. Run from the repository root "
                                                "(the configs are read from configs/).")] = Path("runs"),
        dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would run, run nothing.")] = False,
    ) -> None:
        """Train the CPU recipe of every model the service uses (resumable: run it again to continue)."""
        from rich.console import Console
        from rich.markup import escape

        from medrank.service.training import train_service

        err = Console(stderr=True, soft_wrap=True)
        try:
            train_service(runs, tuple(p.strip() for p in only.split(",") if p.strip()),
                          say=lambda line: err.print(line, markup=False, highlight=False), dry_run=dry_run)
        except (FileNotFoundError, RuntimeError) as exc:
            err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
            raise typer.Exit(1) from None


def _stderr_handler() -> logging.Handler:
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    return handler

"""The FastAPI app: JSON endpoints over :class:`~medrank.service.adapters.Services` and the web page at ``/``.

Safety defaults:

* request bodies above ``max_body_bytes`` → 413 (checked on ``Content-Length`` and on the bytes read);
* every 4xx has one body shape, ``{"detail": message, "errors": [{"loc", "msg", "type"}]}``: invalid input → 422,
  a body that is no readable JSON (invalid UTF-8, nested too deeply) → 422 too (the offending input is never echoed);
* with ``api_token`` set, every API route needs ``Authorization: Bearer <token>`` (401 otherwise);
  ``/``, ``/static``, ``/health`` and the OpenAPI document stay open;
* the access log (logger ``medrank.service.access``) has method, path, status and time only — never query
  strings or bodies; a request refused before routing (413) is logged under its route, a path no route answers as
  ``(unmatched path)``, and control characters are
  escaped (no forged lines); uvicorn's own access log is switched off by ``medrank serve``;
* every response carries ``nosniff``, ``X-Frame-Options: DENY`` and ``Referrer-Policy: no-referrer``; the
  web page also a Content-Security-Policy that allows only its own files;
* each request waits at most ``request_timeout_s`` for a worker slot (503) and runs at most that long (504).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from medrank.service import schemas as S
from medrank.service.adapters import (
    PIPELINES,
    KnowledgeBaseLanguageError,
    Services,
    StillBuildingError,
    UnavailableError,
    UnsupportedLanguageError,
)
from medrank.service.settings import ServiceSettings

access_log = logging.getLogger("medrank.service.access")
log = logging.getLogger("medrank.service")


class BodyLimitMiddleware:
    """Reject bodies larger than ``max_bytes`` with 413, whether or not ``Content-Length`` is sent."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    too_big = int(value) > self.max_bytes
                except ValueError:
                    too_big = False
                if too_big:
                    await self._reject(scope, receive, send)
                    return
        if scope.get("method") not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        # Read the (bounded) body up front: a streamed body without Content-Length is cut off at the limit.
        chunks, seen, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # client went away
                return
            body = message.get("body", b"")
            seen += len(body)
            if seen > self.max_bytes:
                await self._reject(scope, receive, send)
                return
            chunks.append(body)
            more = message.get("more_body", False)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _reject(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = JSONResponse(error_body(f"request body larger than {self.max_bytes} bytes", "body_too_large", ["body"]),
                                status_code=413)
        await response(scope, receive, send)


def error_body(
    message: str, kind: str, loc: list[Any] | None = None, errors: list[dict[str, Any]] | None = None,
    ctx: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The one shape of every 4xx body: ``{"detail": message, "errors": [{"loc", "msg", "type"[, "ctx"]}]}``."""
    if errors is None:
        errors = [{"loc": loc or [], "msg": message, "type": kind, **({"ctx": ctx} if ctx else {})}]
    return {"detail": message, "errors": errors}


class TypedHTTPException(HTTPException):
    """An HTTP error whose body names its own error type (and context) instead of the status's."""

    def __init__(self, status_code: int, detail: str, kind: str, ctx: dict[str, Any] | None = None) -> None:
        super().__init__(status_code, detail)
        self.kind, self.ctx = kind, ctx


#: the one message for a body that could not be read as JSON at all (invalid UTF-8, nesting too deep …)
UNREADABLE_BODY = "the request body is not readable JSON (it must be UTF-8 JSON of reasonable nesting depth)"
_ERROR_TYPES = {401: "unauthorized", 404: "not_found", 405: "method_not_allowed", 422: "invalid_input", 413: "body_too_large",
                503: "unavailable", 504: "timeout"}


# every response: no MIME sniffing, no framing (click-jacking), no Referer carrying a page's URL elsewhere
SECURITY_HEADERS = [(b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"DENY"), (b"referrer-policy", b"no-referrer")]
# the web page loads only its own files; /docs (Swagger UI's inline script) does not get this policy
PAGE_CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
            "frame-ancestors 'none'; base-uri 'none'; form-action 'self'")


class SecurityHeadersMiddleware:
    """Adds :data:`SECURITY_HEADERS` to every HTTP response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                extra = [(n, v) for n, v in SECURITY_HEADERS if n not in present]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_wrapper)


class AccessLogMiddleware:
    """One log line per request: method, path (no query string), status, milliseconds."""

    def __init__(self, app: ASGIApp, log_text: bool = False, routes: list[Any] | None = None) -> None:
        self.app = app
        self.log_text = log_text
        #: the app's routes: a request answered before routing (413 on the body) is logged under the route it was for
        self.routes = routes if routes is not None else []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        status = {"code": 500}

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                # processing time up to the response, for clients and proxies (W3C Server-Timing)
                timing = f"app;dur={(time.perf_counter() - t0) * 1000:.1f}".encode()
                message = {**message, "headers": [*message.get("headers", []), (b"server-timing", timing)]}
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            access_log.info("%s %s %d %.1fms", _printable(scope.get("method", "-")), self._path(scope, status["code"]),
                            status["code"], (time.perf_counter() - t0) * 1000)

    def _path(self, scope: Scope, status: int) -> str:
        path = scope.get("path", "")
        if self.log_text:
            query = scope.get("query_string", b"")
            return _printable(path + ("?" + query.decode("latin-1") if query else ""))
        # a path no route answers is whatever the client typed (text included): only the route is logged
        route = scope.get("route")  # set by the router when a route matched
        if route is not None:
            return _printable(getattr(route, "path", path))
        if scope.get("endpoint") is not None:  # a mount (static files): its root_path is the mount's prefix
            return _printable(path) if status < 400 else f"{_printable(scope.get('root_path', ''))}/(unmatched path)"
        from starlette.routing import Match, Mount

        for candidate in self.routes:  # answered before the router ran (body too large): name the route it was for
            if isinstance(candidate, Mount):
                continue
            match, _ = candidate.matches(scope)
            if match is not Match.NONE:
                return _printable(getattr(candidate, "path", "(unmatched path)"))
        return "(unmatched path)"


def _printable(text: str, limit: int = 200) -> str:
    """``text`` with control characters escaped (no forged log lines) and cut to ``limit`` characters."""
    out = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text[:limit])
    return out + ("…" if len(text) > limit else "")


def _docs_assets() -> Path:
    import fastapi_offline

    return Path(fastapi_offline.__file__).parent / "static"


def _release_after(sem: asyncio.Semaphore) -> Callable[[asyncio.Future[Any]], None]:
    def done(work: asyncio.Future[Any]) -> None:
        if not work.cancelled():
            work.exception()  # retrieved: a timed-out call's error was already answered with 504
        sem.release()

    return done


def create_app(settings: ServiceSettings | None = None, services: Services | None = None) -> FastAPI:
    """The app serving ``services`` (built from ``settings`` by :func:`medrank.service.build.build_services` if omitted)."""
    settings = settings or ServiceSettings()
    if services is None:
        from medrank.service.build import build_services

        services = build_services(settings)
    started = time.time()
    app = FastAPI(
        title="medrank",
        version=_version(),
        description="Medical retrieval and ranking: symptoms, procedure codes, answer passages, next history-taking "
        "questions and similar solved questions. Every response names the model that served it.",
        docs_url=None,  # served below from local files
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.services = services
    limiter: dict[str, asyncio.Semaphore] = {}
    bearer = HTTPBearer(auto_error=False, description="Required when the server has an API token.")

    def require_token(credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:  # noqa: B008
        if settings.api_token is None:
            return
        if credentials is None or not hmac.compare_digest(credentials.credentials.encode(), settings.api_token.encode()):
            raise HTTPException(401, "missing or invalid bearer token", headers={"WWW-Authenticate": "Bearer"})

    auth = [Depends(require_token)]

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")} for e in exc.errors()]
        if any(e["type"] == "json_invalid" for e in errors):
            return JSONResponse(error_body(UNREADABLE_BODY, "json_invalid", ["body"]), status_code=422)
        message = "; ".join(f"{'.'.join(str(x) for x in e['loc'][1:]) or 'body'}: {e['msg']}" for e in errors)
        return JSONResponse(jsonable_encoder(error_body(message, "validation_error", errors=errors)), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # FastAPI answers a body it cannot decode (invalid UTF-8, JSON nested past Python's limits) with a bare
        # 400 "There was an error parsing the body": it gets the same shape and a message that says what to fix
        if exc.status_code == 400:  # answered as any other unreadable body (FastAPI's json_invalid is a 422)
            return JSONResponse(error_body(UNREADABLE_BODY, "json_invalid", ["body"]), status_code=422)
        kind = getattr(exc, "kind", None) or _ERROR_TYPES.get(exc.status_code, "error")
        return JSONResponse(error_body(str(exc.detail), kind, ctx=getattr(exc, "ctx", None)),
                            status_code=exc.status_code, headers=getattr(exc, "headers", None))

    def check_limits(texts: list[str], lists: dict[str, int], k: int | None = None) -> None:
        """The deployment's limits (``ServiceSettings``), which may be tighter than the schema's maximums."""
        problems = []
        if k is not None and k > settings.max_k:
            problems.append({"loc": ["body", "k"], "msg": f"k larger than {settings.max_k}", "type": "less_than_equal"})
        for t in texts:
            if len(t) > settings.max_text_chars:
                problems.append({"loc": ["body"], "msg": f"text longer than {settings.max_text_chars} characters",
                                 "type": "string_too_long"})
                break
        for name, n in lists.items():
            if n > settings.max_list_items:
                problems.append({"loc": ["body", name], "msg": f"more than {settings.max_list_items} items", "type": "too_long"})
        if problems:
            raise RequestValidationError(problems)

    def with_urgent(out: dict[str, Any], symptoms: list[str] | None, dialogue: list[dict[str, str]]) -> dict[str, Any]:
        """``out`` with the urgent notices of the symptoms confirmed (else those read from the first patient turn) and
        of the signs' own words in the patient's turns; null when no symptom list is served yet."""
        reader = services.symptoms
        names = symptoms if symptoms is not None else list(out.get("symptoms_read") or [])
        said = [t["text"] for t in dialogue if t["speaker"] == "patient"]
        out["urgent"] = (None if reader is None else
                         [n.as_dict() for n in reader.urgent_for_names(names, out["language"], said)])
        return out

    async def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn`` in a worker thread: 503 when no slot frees up in time, 504 when it runs too long."""
        sem = limiter.get("sem")
        if sem is None:
            sem = limiter["sem"] = asyncio.Semaphore(settings.max_concurrency)
        t0 = time.perf_counter()
        try:
            await asyncio.wait_for(sem.acquire(), timeout=settings.request_timeout_s)
        except TimeoutError:
            raise HTTPException(503, "server busy, try again", headers={"Retry-After": "1"}) from None
        work = asyncio.ensure_future(run_in_threadpool(fn, *args, **kwargs))
        try:
            remaining = max(0.001, settings.request_timeout_s - (time.perf_counter() - t0))
            return await asyncio.wait_for(asyncio.shield(work), timeout=remaining)
        except TimeoutError:
            raise HTTPException(504, f"request took longer than {settings.request_timeout_s:g}s") from None
        except StillBuildingError as exc:
            raise HTTPException(503, str(exc), headers={"Retry-After": str(exc.retry_after_s)}) from None
        except UnsupportedLanguageError as exc:
            raise TypedHTTPException(404, str(exc), "unsupported_language", {"read_as": exc.read_as}) from None
        except KnowledgeBaseLanguageError as exc:
            raise TypedHTTPException(404, str(exc), "knowledge_base_language",
                                     {"kb_reads": exc.kb_reads, "text_reads": exc.text_reads}) from None
        except UnavailableError as exc:
            raise HTTPException(404, str(exc)) from None
        except ValueError as exc:
            raise HTTPException(422, str(exc)) from None
        finally:
            # a worker thread cannot be stopped: a timed-out call keeps its slot until it ends, so
            # max_concurrency bounds the CPU work actually running, not just the requests waiting
            if work.done():
                sem.release()
            else:
                work.add_done_callback(_release_after(sem))

    def need(svc: Any, name: str) -> Any:
        if svc is not None:
            return svc
        steps = services.steps_of(name)
        if not steps:
            raise HTTPException(503, f"the {name} pipeline is not served by this deployment")
        waiting = [s for s in steps if s.state in ("waiting", "building")]
        if not waiting:
            raise HTTPException(503, f"the {name} pipeline could not be built ({services.state(name)})")
        # the soonest of its steps: a step that has not started yet has no ETA of its own
        step = min(waiting, key=lambda s: (s.state != "building", s.eta_s() if s.eta_s() is not None else float("inf")))
        exc = StillBuildingError(f"the {name} pipeline", step)
        raise HTTPException(503, str(exc), headers={"Retry-After": str(exc.retry_after_s)})

    responses: dict[int | str, dict[str, Any]] = {
        401: {"description": "Missing or invalid bearer token"},
        404: {"description": "Unknown knowledge base or unsupported language"},
        413: {"description": "Request body too large"},
        503: {"description": "Pipeline not served, still being built (Retry-After gives the ETA), or server busy"},
        504: {"description": "Request timed out"},
    }

    @app.post("/symptoms", response_model=S.SymptomsResponse, dependencies=auth, responses=responses, tags=["patient"])
    async def symptoms(req: S.SymptomsRequest) -> Any:
        """Patient complaint (English or Chinese, auto-detected) → top-k symptom / diagnosis terms with scores."""
        svc = need(services.symptoms, "symptoms")
        check_limits([req.query], {}, req.k)
        return await call(svc.detect, req.query, req.language, req.kb, req.k)

    @app.post("/normalize", response_model=S.NormalizeResponse, dependencies=auth, responses=responses, tags=["coder"])
    async def normalize(req: S.NormalizeRequest) -> Any:
        """Procedure mention → standard procedure names with their codes and scores."""
        svc = need(services.normalize, "normalize")
        check_limits([req.mention], {}, req.k)
        return await call(svc.normalize, req.mention, req.k)

    @app.post("/passages", response_model=S.PassagesResponse, dependencies=auth, responses=responses, tags=["clinician"])
    async def passages(req: S.PassagesRequest) -> Any:
        """(entity, aspect) → answer passages with per-sentence scores and the best document's score curve."""
        svc = need(services.passages, "passages")
        check_limits([req.entity, req.aspect], {}, req.k)
        return await call(svc.search, req.entity, req.aspect, req.k)

    @app.post("/next-questions", response_model=S.NextQuestionsResponse, dependencies=auth, responses=responses,
              tags=["patient"])
    async def next_questions(req: S.NextQuestionsRequest) -> Any:
        """Dialogue so far + established findings → the next questions, each about a finding not yet established
        (the inquiry engine of the language; the question bank where no finding of its knowledge base is found)."""
        svc = need(services.next_questions, "next-questions")
        texts = [t.text for t in req.dialogue] + list(req.candidates or [])
        check_limits(texts, {"dialogue": len(req.dialogue), "symptoms": len(req.symptoms or []),
                             "candidates": len(req.candidates or [])}, req.k)
        dialogue = [{"speaker": t.speaker, "text": t.text} for t in req.dialogue]
        symptoms = list(req.symptoms) if req.symptoms is not None else None
        return await call(lambda: with_urgent(svc.rank(dialogue, symptoms, req.candidates, req.language, req.k,
                                                       findings=_findings(req.findings)), symptoms, dialogue))

    @app.post("/similar-questions", response_model=S.SimilarResponse, dependencies=auth, responses=responses,
              tags=["patient"])
    async def similar_questions(req: S.SimilarRequest) -> Any:
        """New question → similar solved questions (BM25 recall, matcher re-ranking when trained)."""
        svc = need(services.similar, "similar-questions")
        check_limits([req.question], {}, req.k)
        return await call(svc.search, req.question, req.language, req.k)

    @app.post("/differential", response_model=S.DifferentialResponse, dependencies=auth, responses=responses,
              tags=["patient"])
    async def differential(req: S.DifferentialRequest) -> Any:
        """Findings so far (and the dialogue) → ranked conditions with probabilities, the findings that support each,
        and whether the inquiry can stop. Not a diagnosis."""
        svc = need(services.differential, "differential")
        check_limits([f.name for f in req.findings] + [t.text for t in req.dialogue] + list(req.symptoms or []),
                     {"dialogue": len(req.dialogue)}, req.k)
        dialogue = [{"speaker": t.speaker, "text": t.text} for t in req.dialogue]
        symptoms = list(req.symptoms) if req.symptoms is not None else None
        return await call(lambda: with_urgent(svc.rank(_findings(req.findings), req.language, req.k, dialogue=dialogue,
                                                       symptoms=symptoms), symptoms, dialogue))

    @app.get("/health", response_model=S.HealthResponse, tags=["service"])
    async def health() -> Any:
        """Liveness, and each pipeline's state: ``ready``, ``building 45 %`` (with the ETA under ``builds``),
        ``waiting`` or ``failed: reason``. ``pipelines`` says which answer now."""
        return {"status": "ok", "ready": all(s.state in ("ready", "failed") for s in services.steps.values()),
                "pipelines": services.available(),
                "states": {name: services.state(name) for name in PIPELINES if services.state(name) != "not served"},
                "builds": {name: step.snapshot() for name, step in services.steps.items()},
                "uptime_s": round(time.time() - started, 1)}

    @app.head("/health", include_in_schema=False)
    async def health_head() -> None:
        """HEAD-based health checks (load balancers): 200, no body."""

    @app.get("/models", response_model=S.ModelsResponse, dependencies=auth, responses={401: responses[401]}, tags=["service"])
    async def models() -> Any:
        """Which model and version serves each pipeline, its state, whether it is trained or zero-shot /
        first-stage, and the command that trains it."""
        return {"pipelines": services.models()}

    static = resources.files("medrank.service") / "static"
    app.mount("/static", StaticFiles(directory=str(static)), name="static")
    # Swagger UI from a PyPI package (fastapi-offline ships its files), not a CDN: the service runs offline
    app.mount("/docs-assets", StaticFiles(directory=str(_docs_assets())), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def docs(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}", title=f"{app.title} - API",
            swagger_js_url=f"{root}/docs-assets/swagger-ui-bundle.js", swagger_css_url=f"{root}/docs-assets/swagger-ui.css",
            swagger_favicon_url=f"{root}/docs-assets/favicon.png",
        )

    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(str(static / "index.html"), media_type="text/html", headers={"Content-Security-Policy": PAGE_CSP})

    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(SecurityHeadersMiddleware)
    app.add_middleware(AccessLogMiddleware, log_text=settings.log_request_text, routes=app.router.routes)
    return app


def _findings(findings: list[S.FindingIn]) -> list[dict[str, str]]:
    return [{"name": f.name, "value": f.value, "source": f.source} for f in findings]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("medrank")
    except PackageNotFoundError:  # pragma: no cover
        return "0"

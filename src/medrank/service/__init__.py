"""The medrank service: one HTTP API and a web page over every pipeline.

* :mod:`.settings` — :class:`~.settings.ServiceSettings` (limits, token, paths; env ``MEDRANK_*``);
* :mod:`.backends` — :class:`~.backends.KnowledgeBase`: a concept vocabulary behind a
  ``medrank.index`` index or a ``medrank.store`` store;
* :mod:`.adapters` — one adapter per endpoint (symptoms, normalize, passages, next questions,
  similar questions), each saying which model serves it;
* :mod:`.build` — builds every component from ``../shared/data`` + the packaged knowledge
  bases on first start and loads it from the state directory later;
* :mod:`.app` — ``create_app(settings, services)``: the FastAPI app and the static web page;
* :mod:`.cli` — ``medrank serve``.
"""

from medrank.service.settings import ServiceSettings

__all__ = ["ServiceSettings", "create_app"]


def create_app(*args, **kwargs):  # noqa: ANN002, ANN003, ANN201 - lazy: FastAPI is only imported when serving
    """See :func:`medrank.service.app.create_app`."""
    from medrank.service.app import create_app as _create

    return _create(*args, **kwargs)

"""File names and formats that mark saved passage-pipeline artefacts (read by :func:`medrank.load`)."""

#: the configuration file of a trained CDV model (in the run folder or its ``model/``)
CDV_MODEL_MARKER = "cdv.json"
#: the ``format`` field of a CDV sentence index's ``manifest.json``
CDV_INDEX_FORMAT = "medrank-cdv-index"

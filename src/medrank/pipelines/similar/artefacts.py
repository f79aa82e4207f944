"""File names that mark a saved similar-question matcher (read by :func:`medrank.load`)."""

#: the matcher's configuration (in the matcher folder, or under a run's ``matcher/``)
MATCHER_MARKER = "matcher.json"

"""A condition prior from the patient's own words (the first turn of the dialogue).

A self-report says more than the symptoms normalised out of it (age, duration, course, the words
parents use), so the DXY engine may start from P(disease | self-report) of a character n-gram
TF-IDF logistic regression fitted on the training self-reports, in place of the class prior and of
the likelihoods of the symptoms taken from that same text (which the text already carries). Its
weight is tuned with the stopping rule (0 turns it off).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class TextPrior:
    def __init__(self, conditions: Sequence[str], c: float = 3.0) -> None:
        self.conditions = list(conditions)
        self.c = c
        self._vectorizer = None
        self._model = None
        self._order: list[int] = []

    def fit(self, texts: Sequence[str], labels: Sequence[str]) -> TextPrior:
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression

        if len(set(labels)) < 2:
            raise ValueError("a text prior needs training texts of at least two conditions")
        vec = TfidfVectorizer(analyzer="char", ngram_range=(1, 3), sublinear_tf=True, min_df=2)
        x = vec.fit_transform(list(texts))
        model = LogisticRegression(C=self.c, max_iter=3000).fit(x, list(labels))
        classes = list(model.classes_)
        self._order = [classes.index(c) if c in classes else -1 for c in self.conditions]
        self._vectorizer, self._model = vec, model
        return self

    def log_proba(self, text: str) -> np.ndarray:
        """log P(condition | text) for every condition (a condition unseen in training gets a floor)."""
        if self._vectorizer is None or self._model is None:
            raise RuntimeError("TextPrior.fit was not called")
        row = self._model.predict_log_proba(self._vectorizer.transform([text]))[0]
        out = np.array([row[i] if i >= 0 else -20.0 for i in self._order])
        return out - np.logaddexp.reduce(out)

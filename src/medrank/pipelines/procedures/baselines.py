"""String-similarity baselines of the paper's Table 2: TF-IDF and edit distance (top-1 standard name).

Both output one name per mention (they have no count model), scored with the same exact-set
accuracy as the full system; multi-term mentions are therefore always wrong for them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from medrank.pipelines.procedures.data import TermBase


def tfidf_top(mentions: Sequence[str], terms: TermBase, k: int = 1) -> list[list[str]]:
    """The ``k`` names with the highest character 1-2-gram TF-IDF cosine per mention."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    vec = TfidfVectorizer(analyzer="char", ngram_range=(1, 2), sublinear_tf=True)
    term_m = vec.fit_transform(terms.names)
    ment_m = vec.transform(list(mentions))
    out: list[list[str]] = []
    for start in range(0, len(mentions), 512):
        sims = (ment_m[start : start + 512] @ term_m.T).toarray()
        top = np.argsort(-sims, axis=1, kind="stable")[:, :k]
        out += [[terms.names[i] for i in row] for row in top]
    return out


def edit_distance_top(mentions: Sequence[str], terms: TermBase, k: int = 1) -> list[list[str]]:
    """The ``k`` names with the smallest Levenshtein distance per mention (``rapidfuzz``; ties → KB order)."""
    from rapidfuzz import process
    from rapidfuzz.distance import Levenshtein

    out = []
    for m in mentions:
        hits = process.extract(m, terms.names, scorer=Levenshtein.distance, limit=k)
        out.append([h[0] for h in hits])
    return out

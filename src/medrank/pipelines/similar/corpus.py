"""Question corpora for retrieval: every question of the pair datasets of a language (+ MedQuAD for English,
whose answers :func:`load_medquad_answers` reads for the service's "similar solved questions").

* Chinese: the distinct questions of CHIP-STS and KUAKE-QQR (35,491).
* English: the distinct questions of medical-question-pairs and RQE plus the
  ``<Question>`` elements of the MedQuAD XML files (52,915 in all).
"""

from __future__ import annotations

import logging
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from medrank.config import dataset_dir
from medrank.data.questions import PAIR_DATASETS, clean_question, load_question_pairs, unique_questions
from medrank.text import has_han

log = logging.getLogger(__name__)

PathLike = str | os.PathLike[str]


def load_medquad_questions(root: PathLike | None = None) -> list[str]:
    """Distinct ``<Question>`` texts of every MedQuAD XML file (sorted file order; unparsable files skipped)."""
    folder = dataset_dir("medquad", root)
    out: dict[str, None] = {}
    skipped = 0
    for path in sorted(folder.glob("*/*.xml")):
        try:
            tree = ET.parse(path)
        except ET.ParseError:
            skipped += 1
            continue
        for q in tree.getroot().iter("Question"):
            text = clean_question("".join(q.itertext()))
            if text:
                out.setdefault(text, None)
    if skipped:
        log.warning("medquad: skipped %d unparsable XML file(s)", skipped)
    return list(out)


#: the longest answer text :func:`load_medquad_answers` keeps (cut at a word boundary, then "…")
MAX_ANSWER_CHARS = 1200
#: bumped whenever :func:`load_medquad_answers` changes what it keeps (the service rebuilds its answers)
ANSWERS_VERSION = 2
# a template question whose topic slot stayed empty ("What is (are)  ?", "Who is at risk for ? ?"): it
# happens in documents without a <Focus>, and such a text would match any question of its template
EMPTY_SLOT = re.compile(r"\s{2,}\?|\?\s+\?")


def load_medquad_answers(root: PathLike | None = None, max_chars: int = MAX_ANSWER_CHARS) -> dict[str, dict[str, str]]:
    """Question text (as :func:`load_medquad_questions` cleans it) → ``{"answer", "url"}`` of its first non-empty answer.

    MedQuAD ships answers for about 12.6k of its 43.6k question-answer pairs (the MedlinePlus
    subsets had theirs removed for copyright); questions without one are left out, and so are
    template questions whose topic is missing in a document without ``<Focus>`` (see :data:`EMPTY_SLOT`). ``url`` is the
    source page named by the ``<Document>``.
    """
    folder = dataset_dir("medquad", root)
    out: dict[str, dict[str, str]] = {}
    for path in sorted(folder.glob("*/*.xml")):
        try:
            tree = ET.parse(path)
        except ET.ParseError:
            continue
        url = tree.getroot().get("url", "")
        focus = tree.getroot().find("Focus")
        has_topic = focus is not None and "".join(focus.itertext()).strip()
        for pair in tree.getroot().iter("QAPair"):
            question, answer = pair.find("Question"), pair.find("Answer")
            raw = "".join(question.itertext()) if question is not None else ""
            if not has_topic and EMPTY_SLOT.search(raw):
                continue
            text = clean_question(raw)
            body = " ".join("".join(answer.itertext()).split()) if answer is not None else ""
            if text and body and text not in out:
                out[text] = {"answer": shorten(body, max_chars), "url": url}
    return out


def shorten(text: str, max_chars: int) -> str:
    """``text`` cut to at most ``max_chars`` characters at a word boundary, with "…" when cut."""
    if len(text) <= max_chars:
        return text
    cut = text[: max_chars - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > max_chars // 2 else cut).rstrip(" ,;:") + "…"


def language_corpus(language: str, root: PathLike | None = None, include_medquad: bool = True) -> list[str]:
    """Distinct questions of all pair datasets of ``language`` (and MedQuAD for ``en``)."""
    if language not in ("zh", "en"):
        raise ValueError(f"language must be 'zh' or 'en', got {language!r}")
    texts: dict[str, None] = {}
    for name, info in PAIR_DATASETS.items():
        if info.language == language:
            texts.update(dict.fromkeys(unique_questions(load_question_pairs(name, root))))
    if language == "en" and include_medquad:
        texts.update(dict.fromkeys(load_medquad_questions(root)))
    return list(texts)


def read_question_file(path: PathLike) -> list[str]:
    """Questions from a text file (one per line) or JSON lines (``text`` / ``question`` field, or pairs)."""
    import json

    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"question file {path} is a folder; give a .txt or .jsonl file")
    if not path.is_file():
        raise FileNotFoundError(f"question file {path} not found")
    out: list[str] = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            if path.suffix == ".jsonl":
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{n}: invalid JSON ({exc.msg})") from exc
                if isinstance(rec, str):
                    out.append(rec)
                elif isinstance(rec, dict) and any(k in rec for k in ("text", "question", "text1")):
                    for key in ("text", "question", "text1", "text2"):
                        if isinstance(rec.get(key), str):
                            out.append(rec[key])
                else:
                    raise ValueError(f"{path}:{n}: expected a string or an object with 'text' or 'question'")
            else:
                out.append(line)
    texts = [t for t in (clean_question(x) for x in out) if t]
    if not texts:
        raise ValueError(f"{path}: no questions")
    return list(dict.fromkeys(texts))


def guess_language(texts: list[str]) -> str:
    """``zh`` when most texts contain CJK characters, else ``en``."""
    sample = texts[:1000]
    return "zh" if sum(has_han(t) for t in sample) * 2 >= len(sample) else "en"

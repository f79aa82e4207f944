"""Lexical tokenisation for BM25 in English and Chinese.

* English: lower-case ``\\w+`` words, English stop words removed, Snowball
  stemming (PyStemmer), as bm25s does by default.
* Chinese: either ``jieba`` search-mode segmentation (words plus their
  sub-words, good recall for compounds such as 冠状动脉粥样硬化) or character
  n-grams (unigrams + bigrams by default; no dictionary, robust to
  abbreviations and typos in clinical text).
* ``auto`` tokenises each text by script: runs of CJK characters go through the
  Chinese tokenizer, everything else through the English one.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from functools import cached_property
from typing import Any, Literal

from medrank.text import HAN_RUN

Language = Literal["en", "zh", "auto"]
ZhMode = Literal["jieba", "char"]

_CJK = HAN_RUN
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


@dataclass
class TokenizerConfig:
    language: Language = "auto"
    zh_mode: ZhMode = "char"
    ngram: tuple[int, ...] = (1, 2)
    stem: bool = True
    stopwords: bool = True

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ngram"] = list(self.ngram)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TokenizerConfig:
        d = dict(d)
        d["ngram"] = tuple(d.get("ngram", (1, 2)))
        return cls(**d)


class LexicalTokenizer:
    """Turns text into BM25 tokens according to a :class:`TokenizerConfig`."""

    def __init__(self, config: TokenizerConfig | None = None) -> None:
        self.config = config or TokenizerConfig()
        if self.config.language not in ("en", "zh", "auto"):
            raise ValueError(f"language must be 'en', 'zh' or 'auto', got {self.config.language!r}")
        if self.config.zh_mode not in ("jieba", "char"):
            raise ValueError(f"zh_mode must be 'jieba' or 'char', got {self.config.zh_mode!r}")
        if not self.config.ngram or min(self.config.ngram) < 1:
            raise ValueError(f"ngram sizes must be positive, got {self.config.ngram!r}")

    @cached_property
    def _stemmer(self) -> Any:
        import Stemmer

        return Stemmer.Stemmer("english")

    @cached_property
    def _stopwords(self) -> frozenset[str]:
        from bm25s.stopwords import STOPWORDS_EN

        return frozenset(STOPWORDS_EN)

    @cached_property
    def _jieba(self) -> Any:
        import logging

        import jieba

        jieba.setLogLevel(logging.WARNING)
        return jieba

    def _english(self, text: str) -> list[str]:
        words = [w for w in _WORD.findall(text.lower()) if not _CJK.fullmatch(w)]
        if self.config.stopwords:
            words = [w for w in words if w not in self._stopwords]
        if self.config.stem and words:
            words = self._stemmer.stemWords(words)
        return words

    def adjective_bases(self, text: str) -> dict[str, tuple[str, ...]]:
        """For each English adjective of ``text`` made with -y after a consonant or with -ish ("thirsty", "itchy",
        "runny", "feverish", "reddish"), its stem and the stems of the words it may be made from ("thirsti": thirst;
        "runni": runn, run; "feverish": fever): Snowball stems such an adjective apart from its word
        (:meth:`BM25Index.query_tokens <medrank.index.bm25.BM25Index.query_tokens>`); empty without stemming."""
        if not self.config.stem:
            return {}
        out: dict[str, tuple[str, ...]] = {}
        for w in _WORD.findall(text.lower()):
            if len(w) > 3 and w.endswith("y") and w[-2] not in "aeiouy":
                base = w[:-1]
            elif len(w) > 5 and w.endswith("ish"):
                base = w[:-3]
            else:
                continue
            bases = [base] + ([base[:-1]] if len(base) > 3 and base[-1] == base[-2] else [])
            out[self._stemmer.stemWord(w)] = tuple(dict.fromkeys(self._stemmer.stemWords(bases)))
        return out

    def _chinese(self, text: str) -> list[str]:
        if self.config.zh_mode == "jieba":
            return [w for w in self._jieba.lcut_for_search(text) if w.strip()]
        tokens: list[str] = []
        for n in self.config.ngram:
            tokens.extend(text[i : i + n] for i in range(len(text) - n + 1))
        return tokens

    def __call__(self, text: str) -> list[str]:
        lang = self.config.language
        if lang == "en":
            return self._english(text)
        if lang == "zh":
            # Chinese clinical strings mix in Latin letters and digits (IV期, CT): keep those as words.
            tokens: list[str] = []
            for run in _CJK.findall(text):
                tokens.extend(self._chinese(run))
            tokens.extend(w.lower() for w in _WORD.findall(_CJK.sub(" ", text)))
            return tokens
        tokens = []
        for run in _CJK.findall(text):
            tokens.extend(self._chinese(run))
        tokens.extend(self._english(_CJK.sub(" ", text)))
        return tokens

    def batch(self, texts: list[str]) -> list[list[str]]:
        return [self(t) for t in texts]

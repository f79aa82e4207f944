"""Colloquial symptom words → normalised symptom names, mined from the DXY self-reports.

Every DXY record pairs the symptom words as the parent wrote them (``origin_inform_slots``:
发烧, 拉肚子, 鼻涕 …) with the normalised symptoms of the same self-report
(``explicit_inform_slots``: 发烧, 稀便, 流涕 …). The two lists are not aligned, so the pairing
is learnt over the whole corpus:

1. in each record a written word identical to a normalised name explains that name;
2. the remaining names of a record are aligned to its remaining written words by EM (as in word
   alignment for translation): a word that merely sits beside common symptoms (咳嗽 beside 发烧)
   is explained away by the records where those symptoms have their own word, while 鼻涕 ends up
   aligned to 流涕 in record after record.

The result is a :class:`SurfaceLexicon`: surface form → normalised name, plus each name's
cluster of surface forms (for query expansion: 发烧 is searched as 发热 and 高烧 too), saved
as JSON.
"""

from __future__ import annotations

import ast
import json
import os
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from medrank.utils.io import atomic_write_json

PathLike = str | os.PathLike[str]

_SPLIT_PREFIX = re.compile(r"^\s*([A-Za-z_][\w-]*)@")


class DxyFormatError(ValueError):
    """A DXY dialogue folder or file that does not have the documented layout."""


@dataclass(frozen=True)
class DxyRecord:
    """One self-report with its written symptom words and its normalised (explicit) symptoms."""

    report: str
    origin: tuple[str, ...]
    explicit: tuple[str, ...]
    consult_id: str = ""


def _dialogue_payload(path: Path) -> list[dict]:
    text = path.read_text(encoding="utf-8")
    m = _SPLIT_PREFIX.match(text)
    if m is None:
        raise DxyFormatError(f"{path}: expected '<split>@[...]' (a split name, '@', then a Python list literal)")
    try:
        records = ast.literal_eval(text[m.end():].strip())  # a Python literal, not JSON; literal_eval runs no code
    except (ValueError, SyntaxError) as exc:
        raise DxyFormatError(f"{path}: the payload after '{m.group(1)}@' is not a Python list literal ({exc})") from exc
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise DxyFormatError(f"{path}: the payload must be a list of records")
    return records


def read_dxy_folder(folder: PathLike) -> list[DxyRecord]:
    """Records of a folder laid out like ``dxy-dialog``: a ``<split>@[...]`` dialogue file (``*dialog*.txt``)
    and, when present, a ``*_goal_dict_dxy.txt`` goal file (JSON, same order) whose explicit symptoms win."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DxyFormatError(f"{folder} is not a folder (expected a folder laid out like dxy-dialog)")
    dialog_files = sorted(p for p in folder.glob("*dialog*.txt") if p.is_file())
    if not dialog_files:
        raise DxyFormatError(f"{folder}: no dialogue file (*dialog*.txt with a '<split>@' prefix)")
    raw = [r for p in dialog_files for r in _dialogue_payload(p)]
    goals: list[dict] | None = None
    goal_files = sorted(folder.glob("*_goal_dict_dxy.txt"))
    if goal_files:
        try:
            goals = json.loads(goal_files[0].read_text(encoding="utf-8"))
        except ValueError as exc:
            raise DxyFormatError(f"{goal_files[0]}: not a JSON list ({exc})") from exc
        if not isinstance(goals, list) or len(goals) != len(raw):
            raise DxyFormatError(f"{goal_files[0]}: {len(goals) if isinstance(goals, list) else 'no'} goals for "
                                 f"{len(raw)} dialogues (they must be aligned)")
    out = []
    for i, r in enumerate(raw):
        goal = r.get("goal") or {}
        if "self_repo" not in r:
            raise DxyFormatError(f"{dialog_files[0]}: record {i} has no 'self_repo' (the self-report)")
        explicit = (goals[i] if goals is not None else goal).get("explicit_inform_slots") or {}
        out.append(DxyRecord(
            report=str(r["self_repo"]).strip(),
            origin=tuple(str(o) for o in goal.get("origin_inform_slots") or ()),
            explicit=tuple(str(k) for k, v in explicit.items() if v is True),
            consult_id=str(r.get("consult_id", i)),
        ))
    return out


@dataclass
class SurfaceLexicon:
    """Surface form → normalised name (several forms per name), longest-match lookup in text."""

    forms: dict[str, str] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    #: per form, the share of the reports where it was found (not negated) whose annotation holds its name
    precision: dict[str, float] = field(default_factory=dict)
    #: character → the character the vocabulary writes for it (:func:`character_variants`: 疼 → 痛), see :meth:`vary`
    variants: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._lengths = sorted({len(f) for f in self.forms}, reverse=True)
        # each name's other forms, most frequent first: cluster() is asked for every word of every complaint
        others: dict[str, list[str]] = {}
        for form, name in self.forms.items():
            if form != name:
                others.setdefault(name, []).append(form)
        self._others = {n: sorted(fs, key=lambda f: (-self.counts.get(f, 0), f)) for n, fs in others.items()}

    def __len__(self) -> int:
        return len(self.forms)

    def names(self) -> list[str]:
        return sorted(set(self.forms.values()))

    def normalise(self, form: str) -> str | None:
        return self.forms.get(form)

    def cluster(self, name: str, limit: int = 8) -> list[str]:
        """Surface forms of ``name`` (the name first, then the most frequent forms)."""
        return [name, *self._others.get(name, ())][:limit]

    def find(self, text: str) -> list[tuple[int, int, str]]:
        """Non-overlapping ``(start, end, name)`` matches, longest form first, left to right."""
        out: list[tuple[int, int, str]] = []
        i, n = 0, len(text)
        while i < n:
            for length in self._lengths:
                if i + length <= n and text[i:i + length] in self.forms:
                    out.append((i, i + length, self.forms[text[i:i + length]]))
                    i += length
                    break
            else:
                i += 1
        return out

    def with_names(self, names: Iterable[str], own: Iterable[str] = ()) -> SurfaceLexicon:
        """This lexicon plus ``names`` as forms of themselves: a name written verbatim (恶心 in "胃疼恶心想吐") is a word
        of its own. The lexicon's own forms keep their names, but for those of ``own``, which name themselves."""
        forms = {**{n: n for n in names if n}, **self.forms, **{n: n for n in own if n}}
        return SurfaceLexicon(forms, dict(self.counts), dict(self.precision), dict(self.variants))

    def with_variants(self, variants: Mapping[str, str]) -> SurfaceLexicon:
        """This lexicon with ``variants`` (one character → one character) for :meth:`vary`."""
        if any(len(a) != 1 or len(b) != 1 for a, b in variants.items()):
            raise ValueError("variants map one character to one character (a text keeps its length and offsets)")
        return SurfaceLexicon(dict(self.forms), dict(self.counts), dict(self.precision), dict(variants))

    def vary(self, text: str) -> str:
        """``text`` with each character that has a variant written as the vocabulary writes it ("腰疼" → "腰痛"); the
        same length, so a span of the result is a span of ``text``."""
        return "".join(self.variants.get(ch, ch) for ch in text) if self.variants else text

    def to_json(self) -> dict:
        return {"format": "medrank-surface-lexicon", "version": 1, "forms": self.forms, "counts": self.counts,
                "precision": self.precision, "variants": self.variants}

    def save(self, path: PathLike) -> None:
        atomic_write_json(path, self.to_json())

    @classmethod
    def load(cls, path: PathLike) -> SurfaceLexicon:
        d = json.loads(Path(path).read_text(encoding="utf-8"))
        if d.get("format") != "medrank-surface-lexicon":
            raise ValueError(f"{path} is not a surface lexicon written by SurfaceLexicon.save")
        return cls(dict(d["forms"]), {k: int(v) for k, v in d.get("counts", {}).items()},
                   {k: float(v) for k, v in d.get("precision", {}).items()}, dict(d.get("variants", {})))


def mine_surface_lexicon(records: Iterable[DxyRecord], min_prob: float = 0.5, min_evidence: float = 1.0,
                         iterations: int = 20, min_form_chars: int = 2, min_single_char_count: int = 5,
                         min_precision: float = 0.0) -> SurfaceLexicon:
    """Pair written symptom words with normalised names (see the module docstring).

    A form maps to its most probable name when ``t(name | form) >= min_prob`` and the aligned count is at
    least ``min_evidence``; a form seen in a single record must also share a character with the name (one
    record cannot tell a synonym from a word that merely sat beside the symptom). Forms shorter than
    ``min_form_chars`` are kept when seen in at least ``min_single_char_count`` records (吐 → 呕吐). Each form's
    precision (how often a report where it is found, not negated, is annotated with its name) is measured on
    the same records; forms below ``min_precision`` are dropped."""
    records = list(records)
    if not records:
        raise ValueError("no records to mine a lexicon from")
    names: set[str] = set()
    form_freq: Counter[str] = Counter()
    pairs: list[tuple[list[str], list[str]]] = []  # (unexplained written words, unexplained names) per record
    for r in records:
        explicit = list(dict.fromkeys(r.explicit))
        names |= set(explicit)
        # words the parent did not actually write (annotation slips) say nothing about the text
        written = [o for o in dict.fromkeys(r.origin) if o and o in r.report]
        form_freq.update(written)
        rest_forms = [o for o in written if o not in explicit]
        rest_names = [e for e in explicit if e not in written]
        if rest_forms and rest_names:
            pairs.append((rest_forms, rest_names))
    # IBM-model-1 style EM: each unexplained name is generated by one of its record's unexplained words or by
    # a null word (names the annotator inferred rather than read); t(name | word) is re-estimated each round
    null = "\0"
    t: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(lambda: 1.0))
    aligned: dict[str, Counter[str]] = defaultdict(Counter)
    for _ in range(iterations):
        aligned = defaultdict(Counter)
        for forms, rest in pairs:
            for e in rest:
                weights = [t[o][e] for o in forms] + [t[null][e]]
                z = sum(weights)
                for o, w in zip([*forms, null], weights, strict=True):
                    aligned[o][e] += w / z
        t = defaultdict(lambda: defaultdict(float))
        for o, row in aligned.items():
            total = sum(row.values())
            for e, c in row.items():
                t[o][e] = c / total
    forms_out: dict[str, str] = {name: name for name in names}
    counts: dict[str, int] = {name: int(form_freq.get(name, 0)) for name in names}
    for o, row in aligned.items():
        if o == null or o in names or (len(o) < min_form_chars and form_freq[o] < min_single_char_count):
            continue
        e, c = max(row.items(), key=lambda x: (x[1], x[0]))
        if c < min_evidence or t[o][e] < min_prob:
            continue
        if form_freq[o] < 2 and not set(o) & set(e):
            continue
        forms_out[o] = e
        counts[o] = int(form_freq[o])
    lex = SurfaceLexicon(forms_out, counts)
    from medrank.pipelines.symptom.spans import find_spans

    found: Counter[str] = Counter()
    right: Counter[str] = Counter()
    for r in records:
        explicit = set(r.explicit)
        for form in {r.report[s.start:s.end] for s in find_spans(r.report, lex, "zh") if s.normalised and not s.negated}:
            found[form] += 1
            right[form] += lex.forms[form] in explicit
    lex.precision = {f: round(right[f] / found[f], 4) for f in found}
    if min_precision > 0:
        keep = {f: n for f, n in lex.forms.items() if lex.precision.get(f, 1.0) >= min_precision or f == n}
        lex = SurfaceLexicon(keep, {f: c for f, c in counts.items() if f in keep},
                             {f: p for f, p in lex.precision.items() if f in keep})
    return lex


def dxy_lexicon(root: PathLike | None = None, records: Sequence[DxyRecord] | None = None) -> SurfaceLexicon:
    """The lexicon mined from the visible DXY dialogues (or from ``records``, e.g. a training carve-out)."""
    if records is None:
        from medrank.config import dataset_dir

        records = read_dxy_folder(dataset_dir("dxy-dialog", root))
    return mine_surface_lexicon(records)


def character_variants(pairs: Iterable[tuple[str, str]], names: Iterable[str], min_pairs: int = 3, min_contexts: int = 3,
                       min_names: int = 20, ratio: float = 3.0) -> dict[str, str]:
    """Character → the character a vocabulary writes for it, from pairs of questions that ask the same thing and differ
    in that one character only (KUAKE-QQR's equivalent queries: 腰疼 / 腰痛, 胃疼 / 胃痛, 牙疼 / 牙痛, 乳头疼 / 乳头痛 give
    疼 → 痛; ICD-10 Beijing writes 痛 in 335 names, 疼 in 38).

    A swap is kept when it is seen in at least ``min_pairs`` pairs, after at least ``min_contexts`` different
    characters (孕妇 / 孕期, five times after 孕, is one word's variant, not a character's), between two Chinese
    characters each in at least ``min_names`` of the vocabulary ``names`` (question words, 吗 / 么, are in none), and
    towards the one the vocabulary writes at least ``ratio`` times as often."""
    swaps: Counter[tuple[str, str]] = Counter()
    before: dict[tuple[str, str], set[str]] = defaultdict(set)
    for a, b in pairs:
        if len(a) != len(b):
            continue
        diff = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
        if len(diff) != 1:
            continue
        i = diff[0]
        for x, y in ((a[i], b[i]), (b[i], a[i])):
            swaps[(x, y)] += 1
            before[(x, y)].add(a[i - 1] if i > 0 else "")
    in_names: Counter[str] = Counter(ch for name in names for ch in set(name))
    han = re.compile(r"[\u4e00-\u9fff]")
    out: dict[str, str] = {}
    for (x, y), n in sorted(swaps.items(), key=lambda kv: (-kv[1], kv[0])):
        if (n >= min_pairs and len(before[(x, y)] - {""}) >= min_contexts and han.fullmatch(x) and han.fullmatch(y)
                and in_names[x] >= min_names and in_names[y] >= ratio * in_names[x] and x not in out and y not in out):
            out[x] = y
    return out

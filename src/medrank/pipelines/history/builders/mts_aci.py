"""Parse MTS-Dialog and ACI-Bench transcripts into turns and doctor-question samples.

Raw formats (see each dataset's README):

* MTS-Dialog CSV (``ID,section_header,section_text,dialogue``): one turn per line, prefixed
  ``Doctor:``, ``Patient:``, ``Guest_family:``, ``Guest_clinician:``; a line without a known
  prefix continues the previous turn.
* ACI-Bench CSV (``dataset,encounter_id,dialogue,note`` or ``dataset,id,dialogue,note``): turns
  separated by newlines, prefixed ``[doctor]``, ``[patient]``, ``[patient_guest]`` ….

A *sample* is a doctor turn that asks at least one question (a sentence ending in ``?``
that is not a back-channel such as "okay?" / "is that right?"), with at least one turn
before it. The context is every turn before it; the questions are normalised by
:func:`normalize_question`. Any CSV with a ``dialogue`` column in either format is accepted,
so an independent split in the same raw format goes through the same code.
"""

from __future__ import annotations

import csv
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from medrank.pipelines.history.data import Turn

_MTS_PREFIX = re.compile(r"^\s*(doctor|patient|guest_family|guest_clinician|guest)\s*:\s*", re.IGNORECASE)
_ACI_PREFIX = re.compile(r"^\s*\[(doctor|patient|patient_guest|[a-z_]+)\]\s*", re.IGNORECASE)
_SPEAKER = {
    "doctor": "doctor",
    "patient": "patient",
    "guest_family": "family",
    "patient_guest": "family",
    "guest": "family",
    "guest_clinician": "clinician",
}
# discourse markers that open a doctor's sentence but carry no question content
_LEADING_FILLERS = re.compile(
    r"^(?:(?:ok(?:ay)?|so|and|well|alright|all right|now|um+|uh+|hm+|great|good|right|yeah|yes|oh|"
    r"perfect|got it|i see|sure|also|then|but|mm-?hmm)\b[\s,.!-]*)+",
    re.IGNORECASE,
)
# tag / back-channel questions that do not ask for history
_BACKCHANNEL = frozenset(
    ["okay", "ok", "right", "yeah", "correct", "really", "alright", "all right", "you know", "is that right",
       "is that correct", "does that sound good", "does that make sense", "sound good", "sounds good",
       "is that okay", "is that ok", "huh", "yes", "no", "sorry", "what", "pardon", "hmm", "mm-hmm", "and",
       "so", "anything else", "right now", "okay good", "any questions", "do you have any questions",
       "any other questions", "do you have any other questions", "does that sound okay", "how about that",
       "what do you think", "is that alright", "can you do that", "would that be okay", "sounds okay"]
)
_SENTENCE = re.compile(r"(?<=[.?!])\s+")
_NON_WORD = re.compile(r"[^a-z0-9' ]+")
_SPACES = re.compile(r"\s+")


@dataclass
class RawDialogue:
    id: str
    turns: list[Turn]
    source: str  # "mts" or "aci" (by transcript format)


@dataclass
class RawSample:
    id: str
    dialogue_id: str
    source: str
    context: list[Turn]
    asked: list[str]


def parse_transcript(text: str) -> list[Turn]:
    """Split a transcript into turns with normalised speakers (doctor / patient / family / clinician)."""
    turns: list[Turn] = []
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if not line.strip():
            continue
        m = _ACI_PREFIX.match(line) or _MTS_PREFIX.match(line)
        if m:
            speaker = _SPEAKER.get(m.group(1).lower(), "other")
            body = line[m.end():].strip()
            turns.append(Turn(speaker, body))
        elif turns:  # continuation of the previous turn
            turns[-1] = Turn(turns[-1].speaker, f"{turns[-1].text} {line.strip()}".strip())
    return [t for t in turns if t.text]


def normalize_question(sentence: str) -> str:
    """Lower-case, drop leading fillers and punctuation (keeping the final ``?``), collapse spaces."""
    s = sentence.lower().strip()
    s = _LEADING_FILLERS.sub("", s)
    s = _NON_WORD.sub(" ", s.replace("?", " "))
    s = _SPACES.sub(" ", s).strip()
    return f"{s}?" if s else ""


def questions_in(turn_text: str) -> list[str]:
    """Normalised history questions asked in one doctor turn (duplicates removed, order kept)."""
    out: list[str] = []
    for sent in _SENTENCE.split(turn_text):
        if not sent.rstrip().endswith("?"):
            continue
        q = normalize_question(sent)
        core = q.rstrip("?")
        if not core or core in _BACKCHANNEL or len(core.split()) < 2 or q in out:
            continue
        if core.startswith(("hey dragon", "dragon")):  # ACI: voice commands to the dictation assistant
            continue
        out.append(q)
    return out


def read_dialogues(paths: Sequence[Path], prefix: str) -> list[RawDialogue]:
    """Read every dialogue of the CSV files (any file with a ``dialogue`` column in MTS or ACI form)."""
    csv.field_size_limit(sys.maxsize)
    dialogues: list[RawDialogue] = []
    for path in paths:
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"raw dialogue file {path} not found")
        with open(path, encoding="utf-8", newline="") as fh:
            reader = csv.DictReader(fh)
            if not reader.fieldnames or "dialogue" not in reader.fieldnames:
                raise ValueError(f"{path}: expected a CSV with a 'dialogue' column, got {reader.fieldnames}")
            for n, row in enumerate(reader):
                key = row.get("encounter_id") or row.get("id") or row.get("ID") or str(n)
                text = row["dialogue"] or ""
                turns = parse_transcript(text)
                if turns:
                    source = "aci" if _ACI_PREFIX.match(text.lstrip()) else "mts"
                    dialogues.append(RawDialogue(f"{prefix}:{path.stem}:{key}", turns, source))
    return dialogues


def question_samples(dialogues: Iterable[RawDialogue]) -> list[RawSample]:
    """One :class:`RawSample` for every questioning doctor turn that has a context."""
    out = []
    for d in dialogues:
        for i, turn in enumerate(d.turns):
            if i == 0 or turn.speaker != "doctor":
                continue
            asked = questions_in(turn.text)
            if asked:
                out.append(RawSample(f"{d.id}:t{i}", d.id, d.source, list(d.turns[:i]), asked))
    return out


def carve(dialogues: Sequence[RawDialogue], fraction: float, seed: int) -> tuple[list[RawDialogue], list[RawDialogue]]:
    """Split dialogues (never turns of one dialogue) into ``(kept, carved)`` with a fixed seed."""
    import numpy as np

    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"valid_fraction must be in [0, 1), got {fraction}")
    order = np.random.default_rng(seed).permutation(len(dialogues))
    n = int(round(len(dialogues) * fraction))
    carved = set(order[:n].tolist())
    return ([d for i, d in enumerate(dialogues) if i not in carved], [d for i, d in enumerate(dialogues) if i in carved])


def default_files(root: str | Path | None = None) -> dict[str, list[Path]]:
    """The visible raw files: official train files for the bank and training, official validation for ours.

    The MTS back-translated augmentations (copies of training dialogues) and the ACI alternative
    transcripts of the same encounters are left out, so no encounter is on both sides.
    """
    from medrank.config import dataset_dir

    mts = dataset_dir("mts-dialog", root) / "Main-Dataset"
    aci = dataset_dir("aci-bench", root) / "data" / "challenge_data"
    return {
        "train": [mts / "MTS-Dialog-TrainingSet.csv", aci / "train.csv"],
        "valid": [mts / "MTS-Dialog-ValidationSet.csv", aci / "valid.csv"],
    }

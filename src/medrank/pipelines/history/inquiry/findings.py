"""Finding detection from free text (the patient's self-report), with simple negation handling.

* English: the DDXPlus binary evidences are the concept vocabulary. Each evidence is described by
  its question with the interrogative opening and asides removed ("Do you have a fever (either
  felt or measured ...)?" -> "a fever"), plus the HPO names and layperson synonyms of an HPO term
  it matches exactly (``medrank.data.hpo``). The text is cut into clauses; each
  clause is embedded with MiniLM (``medrank.encoders``) and matched to the nearest evidence
  descriptions, kept at cosine >= 0.6 (set by hand on a handful of complaints: no labelled English self-reports exist here); a negation cue in the clause ("no", "not",
  "without", "denies", ...) makes the finding absent. Pain is read apart, because DDXPlus asks it
  as one evidence ("pain somewhere") with the body locations as values of another: a clause with a
  pain word ("pain", "hurts", "sore", "-ache" as in "headache") makes the pain evidence present, and
  each location whose English label names the body part the clause names ("head" → "forehead",
  "top of the head"; a part followed by "of", as "back" in "back of head", does not count) is
  reported as a value of the location evidence; a pain clause that names no body part takes the parts of the
  clause before it ("my knee is swollen and hurts").
* Chinese: the 41 DXY symptoms and their surface forms learned from the training self-reports:
  every word of a record's ``origin_inform_slots`` is aligned to the explicit symptom it co-occurs
  with most often (ties and weak links resolved by shared characters), so "鼻涕" maps to "流涕".
  The longest surface forms are matched first; a negation word just before a form ("没有", "无",
  "不", "未", "否认") makes the finding absent.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from medrank.blood_pressure import reading_as
from medrank.pipelines.history.inquiry.kb import Evidence
from medrank.pipelines.history.inquiry.posterior import ABSENT, PRESENT, UNSURE
from medrank.temperature import searched_as
from medrank.text import (
    BLOOD_WORD,
    BREATH_WORD,
    EN_ALL_WELL,
    EN_INTENSIFIER,
    EN_MOVING_PARTICIPLE,
    EN_PERSON,
    LESS_SAID,
    LESS_WORD,
    MORE_SAID,
    ZH_LIST_GAP,
    as_attributive,
    as_part_adjective,
    beginnings,
    content_stems,
    plain_adjectives,
    singular,
)
from medrank.utils.vectors import unit_rows

# a contraction of not whose stem is no word ("can't", "won't") goes whole; of any other, the "n't" ("were(n't)")
EN_NEGATION = re.compile(r"\b(no|not|never|without|denies|deny|denied|don't|doesn't|didn't|haven't|hasn't|"
                         r"isn't|aren't|wasn't|none|nor|free of)\b|\b(?:can|won|couldn|wouldn|shouldn|mustn)'t\b|n't\b",
                         re.IGNORECASE)
#: a negation that says a finding goes on: "a cough that won't go away", "I can't stop coughing", "it's not getting
#: better" (each was read as no cough)
EN_PERSISTS = re.compile(
    r"\b(?:won't|wont|doesn't|does\s+not|don't|do\s+not|didn't|did\s+not|isn't|is\s+not|not|never|hasn't|has\s+not|"
    r"haven't|have\s+not)\s+(?:(?:seem\s+to|really|quite|completely|fully|ever)\s+)*(?:go(?:ne|ing|es)?\s+away|"
    r"stop(?:ped|ping|s)?|clear(?:ed|ing|s)?(?:\s+up)?|settl(?:e|ed|ing|es)(?:\s+down)?|get(?:ting|s)?\s+better|"
    r"improv(?:e|ed|ing|es)|heal(?:ed|ing|s)?|shift(?:ed|ing|s)?|budg(?:e|ed|ing|es)|(?:go(?:ne|ing|es)?|come|coming|"
    r"came)\s+down|let(?:ting|s)?\s+up|eas(?:e|ed|ing|es)(?:\s+(?:off|up))?|subsid(?:e|ed|ing|es)|wear(?:ing|s)?\s+off|"
    r"calm(?:ed|ing|s)?\s+down)\b"
    r"|\b(?:can't|cannot|can\s+not|couldn't|could\s+not)\s+(?:seem\s+to\s+)?(?:stop|get\s+rid\s+of|shake(?:\s+off)?)\b"
    r"|\bno\s+better\b", re.IGNORECASE)
# a point between two digits is part of a number ("38.5"), not the end of a sentence
EN_CLAUSE = re.compile(r"(?:(?!(?<=\d)\.(?=\d))[.;!?\n])+|,|\b(?:and|but|with|also|plus|or)\b", re.IGNORECASE)
#: how long a finding has lasted ("for three weeks", "since yesterday", "for the past 2 days", "for about 3 weeks now")
#: or how often: no finding of its own
EN_DURATION = re.compile(
    r"\b(?:for|over)\s+(?:the\s+(?:last|past)\s+)?(?:(?:about|around|roughly|nearly|almost|over|more\s+than|at\s+least)\s+)?"
    r"(?:a|an|one|two|three|four|five|six|seven|eight|nine|ten|a\s+few|"
    r"several|many|couple\s+of|a\s+couple\s+of|\d+)\s+(?:hours?|days?|nights?|weeks?|months?|years?)(?:\s+now)?\b"
    # ... or with no number ("heavy periods for months", "for ages", "for a while")
    r"|\b(?:for|over)\s+(?:the\s+(?:last|past)\s+)?(?:hours|days|weeks|months|years|ages|a\s+while|a\s+long\s+time|"
    r"some\s+time)(?:\s+now)?\b"
    r"|\bsince\s+(?:yesterday|last\s+(?:night|week|month|year)|this\s+morning|monday|tuesday|wednesday|thursday|friday|"
    r"saturday|sunday)\b"
    # and how often ("20 a day", "three times a week"): "I smoke 20 a day" was near "secondhand smoke on a daily basis"
    r"|\b(?:\d+|a\s+few|several|one|two|three|four|five|ten|twenty)?\s*(?:times\s+)?(?:a|per)\s+(?:day|week|month)\b",
    re.IGNORECASE)
#: a question's second opening of another time, after the first ("Did you previously, or do you currently, have …",
#: "Do you currently, or did you ever, have …")
EN_EITHER_TIME = re.compile(r"^(?:previously|currently|ever|recently),?\s+or\s+(?:do|did|have)\s+you\s+"
                            r"(?:currently|ever|previously|recently),?\s+(?:have\s+|had\s+)?", re.IGNORECASE)
#: what says a finding goes on, before it ("I can't stop coughing", "it keeps itching")
EN_KEEPS = re.compile(r"\b(?:can't|cannot|can\s+not|couldn't|won't)\s+stop\b|\bkeeps?\s+(?:on\s+)?(?=\w+ing\b)",
                      re.IGNORECASE)
EN_OPENING = re.compile(
    r"^(?:do|did|does|have|has|are|is|were|was|had|can)\s+(?:you|your)\s+(?:currently\s+|recently\s+|ever\s+)?"
    r"(?:have\s+|had\s+|feel\s+|felt\s+|been\s+|noticed\s+|experienced?\s+|experiencing\s+|suffer(?:ing)?\s+from\s+)?",
    re.IGNORECASE)
# who: "I", "she", or a person with a word or two before it ("my little girl", "our 3-year-old son")
EN_SUBJECT = re.compile(rf"^(?:i|he|she|we|they|(?:my|our|his|her|their|the)\s+(?:[\w-]+\s+){{0,2}}?(?:{EN_PERSON}))"
                        r"\s+(?:have|has|had|feel|feels|felt|am|is|was|'ve got|got|get|gets|'m|notice|"
                        r"noticed)\s+|^(?:i'm|i've|i|my)\s+", re.IGNORECASE)
#: the patient's age as the words give it: "a 45-year-old woman", "my 3 year old", "I'm 45", "I am 72 years old", "aged
#: 60", "my 8-month-old" (under a year: 0); not a duration ("for 3 years", "3 years ago") nor another number after
#: "I'm" ("I'm 6 weeks pregnant", "I'm 100% sure", "I'm 5 foot 2")
_EN_AGE_OLD = re.compile(r"\b(\d{1,3})[\s-]*(years?|yrs?|months?|weeks?)[\s-]*old\b", re.IGNORECASE)
_EN_AGE_SAID = re.compile(r"\b(?:i'?m|i\s+am|aged?)\s+(\d{1,3})\b(?!\s*(?:%|percent|weeks?|days?|months?|hours?|mins?|"
                          r"minutes?|times|kgs?|kilos?|lbs?|pounds?|stones?|st\b|cm|foot|feet|ft|inch\w*|degrees?|°|"
                          r"[.,]\d|/|:|am\b|pm\b|o'clock))", re.IGNORECASE)
#: a child's age where the one writing names the child as their own and says it after, as a parent writes ("my daughter is
#: 3", "our son's 18 months", "my baby is 10 weeks old"; the child is the patient, as :data:`_EN_SEX` reads the child's
#: sex); another person's ("my dad is 80") is not the patient's, nor a number that is no age ("my son is 5 foot 2")
_EN_AGE_OF_CHILD = re.compile(
    r"(?:^|[.!?]\s*)(?:my|our)\s+(?:(?:little|baby|young|teenage|eldest|oldest|youngest)\s+)*"
    r"(?:daughter|son|girl|boy|child|kid|baby|toddler|infant)(?:\s+is|\s*['’]s)\s+(?:only\s+|just\s+|nearly\s+|almost\s+)?"
    r"(\d{1,3})(?:[\s-]*(years?|yrs?|months?|weeks?))?(?:[\s-]*old)?\b"
    r"(?!\s*(?:%|percent|days?|hours?|mins?|minutes?|times|kgs?|kilos?|lbs?|pounds?|stones?|st\b|cm|foot|feet|ft|inch\w*|"
    r"degrees?|°|[.,]\d|/|:|am\b|pm\b|o'clock))", re.IGNORECASE)
#: the patient's sex where a word names the patient: "I'm a woman", "a 45-year-old man", "my 3 year old son", "my little
#: girl"; a person the patient only speaks of ("my wife says I snore") is not read
_EN_SEX = re.compile(r"\b(?:i'?m\s+an?|i\s+am\s+an?|(?:\d{1,3}[\s-]*(?:years?|yrs?|months?|weeks?)[\s-]*old)|(?:^|[.!?]\s*)my"
                     r"(?:\s+(?:little|baby|young|teenage|eldest|youngest|\d{1,3}[\s-]*(?:years?|yrs?|months?|weeks?)"
                     r"[\s-]*old))*)\s+(?:(?:\d{1,3}[\s-]*(?:years?|yrs?)[\s-]*old\s+)?)(?P<who>woman|lady|female|girl|"
                     r"daughter|man|guy|male|boy|son)\b", re.IGNORECASE)
_EN_FEMALE = frozenset({"woman", "lady", "female", "girl", "daughter"})


def read_age_sex(text: str) -> tuple[int | None, str | None]:
    """The patient's age in years and sex ("M" / "F") as an English text states them (:data:`_EN_AGE_OLD`,
    :data:`_EN_AGE_SAID`, :data:`_EN_AGE_OF_CHILD`, :data:`_EN_SEX`), each None where it says none; the first statement counts. An age over
    120 is no age."""
    age = None
    old = _EN_AGE_OLD.search(text)
    said = _EN_AGE_SAID.search(text)
    child = _EN_AGE_OF_CHILD.search(text)
    first = min((m for m in (old, said, child) if m is not None), key=lambda m: m.start(), default=None)
    if first is not None:
        years = int(first.group(1))
        unit = (first.group(2) or "years").lower() if first is not said else "years"
        age = years if unit.startswith(("year", "yr")) else 0
        age = age if age <= 120 else None
    sex = _EN_SEX.search(text)
    return age, (None if sex is None else "F" if sex.group("who").lower() in _EN_FEMALE else "M")


#: an inability to do something ("I can't breathe", "unable to swallow", "I struggle to breathe"); not "can't stop"
#: (:data:`EN_PERSISTS`) nor "can't remember … any fever"
_EN_CANNOT = re.compile(r"\b(?:can't|cant|cannot|can\s+not|couldn't|could\s+not|unable\s+to|not\s+able\s+to|"
                        r"struggl(?:e|ing)\s+to|hard\s+to|difficult\s+to)\s+(?:(?:really|properly|even|seem\s+to)\s+)*"
                        r"(?P<verb>breathe|swallow|sleep|hear|see|walk|speak|talk|eat|stand|move|focus|concentrate|"
                        r"pee|urinate|poop|catch)\b(?P<rest>.*)$", re.IGNORECASE)


def as_difficulty(clause: str) -> str | None:
    """An English clause that says the patient cannot do something, as the difficulty doing it ("I can't breathe
    properly": "difficulty breathing properly"), or None."""
    m = _EN_CANNOT.search(clause)
    if m is None:
        return None
    verb = m.group("verb").lower()
    doing = verb[:-1] + "ing" if verb.endswith("e") and not verb.endswith("ee") else verb + "ing"
    return f"difficulty {doing}{m.group('rest')}"


def is_negated(clause: str) -> bool:
    """Whether an English clause denies what it names: a negation cue (:data:`EN_NEGATION`) that is not one of a
    finding going on (:data:`EN_PERSISTS`: "a cough that won't go away" states a cough), or a statement that it is fine
    (:data:`~medrank.text.EN_ALL_WELL`: "my appetite is fine", "I can breathe fine")."""
    return EN_NEGATION.search(EN_PERSISTS.sub(" ", clause)) is not None or EN_ALL_WELL.search(clause) is not None


#: what a finding says is lost or lacking ("a loss of appetite"): a clause that denies that thing states the finding
_EN_LOSS_OF = re.compile(r"\b(?:(?:loss|lack|absence)\s+of|lost)\s+(?:your\s+)?(?:sense\s+of\s+)?([a-z]+)", re.IGNORECASE)


def says_the_loss(clause: str, description: str) -> bool:
    """Whether ``clause`` denies the very thing that ``description`` says is lost: "I have no appetite" states "a loss
    of appetite", it does not deny it; "I can't smell" states "lost your sense of smell"."""
    m = _EN_LOSS_OF.search(description)
    if m is None:
        return False
    lost = m.group(1).lower()
    return re.search(rf"\b(?:no|not\s+much|not\s+any|little|zero)\s+(?:\w+\s+)?{lost}\b"
                     rf"|\b(?:can't|cannot|can\s+not|couldn't|unable\s+to)\s+{lost}\b", clause, re.IGNORECASE) is not None


#: how much nearer a denied clause's words must be to what a finding says is lost than to its loss for the denial to
#: state the loss ("won't eat": appetite, not "loss of appetite"); MiniLM: "eat" 0.64 / 0.49, "hungry" 0.78 / 0.57,
#: "feel my feet" 0.54 / 0.37 (loss of sensation), but "numb" 0.52 / 0.47 and "pass out" 0.28 / 0.41
LOST_MARGIN = 0.1
#: a clause that itself speaks of a loss ("I haven't lost my appetite") denies the loss, not what is lost
_EN_SAYS_LOSS = re.compile(r"\b(?:los[est]\w*|lack\w*|absen\w*)\b", re.IGNORECASE)

EN_LEADING = re.compile(r"^(?:(?:have|has|had|feel|feels|felt|am|is|was|get|got|any|a|an|some)\s+)+", re.IGNORECASE)
# the circumstance an evidence is about ("vomit after coughing", "a wheezing sound when you exhale", "chest pain even
# at rest", "out of breath with minimal physical effort": "I get out of breath" is breathlessness, not that)
EN_CIRCUMSTANCE = re.compile(r"\b(?:after|when|while|during|before)\b\s+(?P<clause>.*)$|\bat\s+(?P<rest>rest)\b"
                             r"|\bwith\s+(?P<effort>(?:[a-z]+\s+){0,2}(?:effort|exertion))\b"
                             # "pain that is increased with movement", "… increased with coughing, with an effort …"
                             r"|\b(?:increased|worse|worsened|aggravated)\s+(?:with|by)\s+(?P<cause>[^,]*?)(?=\s+but\b|,|$)",
                             re.IGNORECASE)
ZH_NEGATION = ("没有", "否认", "无", "没", "不", "未")
ZH_CLAUSE = re.compile(r"[，。；,;！!？?\n、]")


#: a question asked for a yes or a no, past a filler word or two ("Do you have a cough?", "Any fever?"); an open one
#: ("Where does it hurt?") is not
EN_YES_NO_QUESTION = re.compile(
    r"^(?:(?:so|okay|ok|and|um|uh|hm|well|alright|right)[,.]?\s+)*(?:are|is|do|does|did|have|has|had|was|were|can|could|"
    r"any|anything)\b", re.IGNORECASE)
#: a Chinese question asked for a yes or a no: "有没有咳嗽？", "发烧吗", "是否呕吐"
ZH_YES_NO_QUESTION = re.compile(r"有没有|是否|是不是|吗[？?。]?\s*$")
#: a short answer and what it says (checked in this order), at the start of the patient's turn: words that answer
#: alone ("yes", "nope"), or a bare auxiliary that ends its clause ("I do.", "she hasn't"), not one that goes on
#: to state something else ("I have a headache")
_EN_ALONE = r"(?=\s*(?:[.,;:!?]|$))"
_EN_WHO = r"(?:i|he|she|we|they)\s+"
EN_ANSWERS = (
    (UNSURE, re.compile(r"^(?:i'?m\s+)?(?:not\s+(?:sure|certain)|unsure|no\s+idea|(?:i\s+)?(?:don'?t|do\s+not)\s+know|"
                        r"maybe|perhaps|possibly|hard\s+to\s+say|can'?t\s+say)\b", re.IGNORECASE)),
    (ABSENT, re.compile(rf"^(?:no|nope|nah|not\s+really|not\s+at\s+all|never|none|{_EN_WHO}(?:don'?t|do\s+not|doesn'?t|"
                        rf"didn'?t|haven'?t|hasn'?t|hadn'?t|am\s+not|'?m\s+not|isn'?t|wasn'?t|weren'?t){_EN_ALONE})\b",
                        re.IGNORECASE)),
    (PRESENT, re.compile(rf"^(?:yes|yeah|yep|yup|yea|sure|definitely|absolutely|indeed|correct|a\s+(?:little|bit)|"
                         rf"sometimes|{_EN_WHO}(?:do|does|did|have|has|had|am|'m|is|was|were){_EN_ALONE})\b",
                         re.IGNORECASE)),
)
#: Chinese: the answer word then a pause or the end ("没有，就是有点流鼻涕"; "有点咳嗽" states, it does not answer)
_ZH_ALONE = r"(?=[，,。.！!？?；;\s]|$)"
ZH_ANSWERS = (
    (UNSURE, re.compile(r"^(?:不清楚|不知道|不确定|说不清|不太清楚|不太确定)")),
    (ABSENT, re.compile(rf"^(?:没有|没|无|不是|否|不){_ZH_ALONE}")),
    (PRESENT, re.compile(rf"^(?:有的|有|是的|是|对|嗯|偶尔|有一点|有点){_ZH_ALONE}")),
)


#: words of an English question that name nothing (its opening, fillers, articles, prepositions)
_EN_QUESTION_FUNCTION = frozenset({
    "do", "does", "did", "have", "has", "had", "are", "is", "was", "were", "can", "could", "you", "your", "you're",
    "any", "anything", "a", "an", "the", "been", "ever", "currently", "recently", "so", "okay", "ok", "and", "or", "um",
    "uh", "hm", "well", "alright", "right", "at", "all", "some", "other", "experienced", "experiencing", "noticed", "got",
    "get", "there", "having", "feel", "feeling", "of", "in", "on", "to", "for", "with", "from", "by", "about", "when",
    "while", "after", "before", "during"})


def question_words(question: str) -> list[str]:
    """The words of an English question that name something (:data:`_EN_QUESTION_FUNCTION` and words of two letters
    left out)."""
    return [w for w in re.findall(r"[a-z']+", question.lower()) if w not in _EN_QUESTION_FUNCTION and len(w) > 2]


def asks_yes_or_no(question: str, language: str) -> bool:
    """Whether a doctor's question is asked for a yes or a no."""
    if language == "zh":
        return ZH_YES_NO_QUESTION.search(question.strip()) is not None
    return EN_YES_NO_QUESTION.match(question.strip()) is not None


def answer_value(text: str, language: str) -> str | None:
    """What a patient's turn answers to a yes / no question (present, absent or unsure), from its first words; None
    when it does not open with an answer."""
    text = text.strip()
    for value, pattern in ZH_ANSWERS if language == "zh" else EN_ANSWERS:
        if pattern.match(text):
            return value
    return None


def evidence_description(question: str) -> str:
    """The concept an evidence question asks about, without its interrogative opening (nor a second one of another
    time: "Did you previously, or do you currently, have …")."""
    text = EN_OPENING.sub("", question.strip()).rstrip("?").strip()
    text = EN_EITHER_TIME.sub("", text)
    text = re.sub(r"\s*\([^)]*\)", "", text).strip()  # asides such as "(either felt or measured ...)"
    return text or question


#: an aside in a question: the parenthesis and its words (group 1)
_ASIDE = re.compile(r"\s*\(([^()]*)\)")
#: where an item of a list of findings ends: a comma, or a second question joined by "or"
_ITEM_END = re.compile(r",|\bor (?:do|does|did|have|has|are|is|were|was) you\b", re.IGNORECASE)


def gloss_asides(question: str, max_words: int = 3) -> list[tuple[str, str]]:
    """(gloss, description) for each aside of a question that glosses the word that ends an item of its list of
    findings: a few words that are no second alternative ("(or were)") nor a qualification ("(either felt or measured
    …)"); the description has the gloss in place of that word ("your heart is beating fast (racing), irregularly
    (missing a beat) …": racing, "your heart is beating racing"; missing a beat, "your heart is beating fast, missing a
    beat"). :func:`evidence_description` drops the asides; a patient says "my heart is racing". A gloss of a word
    inside a phrase ("diffuse (widespread) muscle pain") says how, not what: MiniLM reads "widespread muscle pain" as
    any muscle pain ("back pain")."""
    text = EN_OPENING.sub("", question.strip()).rstrip("?").strip()
    out: list[tuple[str, str]] = []
    for m in _ASIDE.finditer(text):
        gloss = " ".join(m.group(1).split())
        words = gloss.split()
        if not words or len(words) > max_words or words[0].lower() in {"or", "either", "such", "any", "e.g."}:
            continue
        before = _ASIDE.sub("", text[:m.start()]).split()
        after = _ASIDE.sub("", text[m.end():])
        end = _ITEM_END.search(after)
        if (after[:end.start()] if end else after).strip():
            continue  # inside a phrase
        out.append((gloss, " ".join([*before[:-1], gloss])))
    return out


# a second question joined by "or" ("… or have you made several efforts to vomit"): its own opening goes
EN_OR_OPENING = re.compile(r"\bor (?:do|does|did|have|has|are|is|were|was) you\s+", re.IGNORECASE)
# what every DDXPlus finding is anyway ("… related to your reason for consulting")
EN_RELATED = re.compile(r",?\s*(?:that you believe (?:are|is) )?related to (?:the condition you are consulting for|your "
                        r"reason for consulting|your consultation today)\s*$", re.IGNORECASE)


#: a question of where a finding is ("Where is the swelling located?"): the finding's words in group 1
EN_WHERE_LOCATED = re.compile(r"where is (?:the )?(.+?) located\??", re.IGNORECASE)


def finding_phrase(question: str) -> str:
    """A finding as a list shows it: :func:`evidence_description` without the opening of a second question joined by
    "or" ("vomited several times or made several efforts to vomit") and without saying that it concerns the
    consultation ("pain somewhere"); a question of where lists as the place of its finding ("Where is the swelling
    located?": "swelling location"). Display only: the detector matches the descriptions as they are."""
    where = EN_WHERE_LOCATED.fullmatch(question.strip())
    if where is not None:
        return f"{where.group(1)} location"
    text = EN_OR_OPENING.sub("or ", evidence_description(question))
    # "Characterize your pain:" is listed with its answer after a colon of its own
    return EN_RELATED.sub("", text).strip().rstrip(":").strip() or evidence_description(question)


def follow_up_questions(evidences: Mapping[str, Evidence]) -> dict[str, tuple[str, str]]:
    """Multi-choice questions that say only what their group's main question says ("Do you feel pain somewhere?"
    under "Do you have pain somewhere, related to your reason for consulting?"): once the main finding is present,
    asked as they read, they ask again what the patient has said; they ask where. ``{question: (main finding, the
    question as asked then)}``, worded as the knowledge base words its other location questions ("Where is the
    swelling located?"). Only a phrase that ends in "somewhere" names a place to ask for."""
    out = {}
    for name, ev in evidences.items():
        main = evidences.get(ev.group)
        if ev.kind != "M" or main is None or main.name == name or main.kind != "B":
            continue
        phrase = finding_phrase(ev.question)
        if phrase.lower() != finding_phrase(main.question).lower():
            continue
        m = re.fullmatch(r"(.+?)\s+somewhere", phrase, re.IGNORECASE)
        if m is not None:
            out[name] = (main.name, f"Where is the {m.group(1)} located?")
    return out


def member_descriptions(evidences: Mapping[str, Evidence]) -> dict[str, list[str]]:
    """Yes / no finding -> the things the questions of its group take as given, the word after "the" / "your" ("What
    color is the rash?", "How severe is the itching?", "Do your lesions peel off?", "Where is the swelling located?":
    rash, itching, lesions, swelling; a participle before it is passed over, and a word of place names no thing: "the
    affected region" gives nothing). Questions about pain are left out (pain is the pain reader's), and so is the
    rest of each question: "Is the rash swollen?" whole is nearer "Swollen lip" than the swelling finding is."""
    out: dict[str, list[str]] = defaultdict(list)
    for name, member in evidences.items():
        main = evidences.get(member.group)
        if member.kind not in ("C", "M") or main is None or main.kind != "B" or member.group == name:
            continue
        if EN_PAIN.search(member.question) is not None:
            continue
        for word in re.findall(r"\b(?:the|your)\s+(?:[a-z]+ed\s+)?([a-z]+)", member.question.lower()):
            if word not in out[member.group] and word not in _PLACE_WORDS:
                out[member.group].append(word)
    return dict(out)


#: words that say where, not what
_PLACE_WORDS = frozenset({"area", "location", "place", "region", "site", "side"})


class EnglishDetector:
    """Clause-level nearest-evidence matching with MiniLM, cosine >= ``threshold``.

    With ``hpo`` (default), an evidence whose description is the name or a synonym of an HPO term
    (exact, case and leading article ignored; e.g. "a sore throat" = Pharyngalgia; a symptom's first alternative too,
    :func:`first_alternatives`) is also described by that term's name and synonyms, layperson ones and MedQuAD's
    everyday wordings included ("Throat pain"; "Swollen glands" for "swollen or painful lymph nodes").

    ``detect(text, term=True)`` reads the name of a symptom term the patient confirmed (a vocabulary's word, not the
    patient's): an evidence is read from it only where one of its words begins like one of the matched description's
    (:func:`shares_a_word`) or the match is ``term_margin`` nearer than ``threshold``. A rare technical word is near
    the evidence whose words share its first word pieces, not its meaning ("Dysmenorrhea": "Dysphagia", difficulty
    swallowing; "Hematuria": "Hemoptysis"), though not as near as a name to its own finding's other wording
    ("Swollen lip": "swelling").

    With ``members`` (default), a yes / no finding is also described by the questions asked about it once present
    (the categorical members of its group, :func:`member_descriptions`): "Do you have any lesions, redness or
    problems on your skin …?" by the rash, the itching and the lesions its questions ask about ("What color is the
    rash?"); the patient who says "a rash" states the finding those questions take as present.
    """

    def __init__(self, evidences: Mapping[str, Evidence], threshold: float = 0.6, encoder: Any = None,
                 hpo: bool = True, members: bool = True, circumstance_margin: float = 0.1,
                 term_margin: float = 0.1, located_margin: float = 0.05, said_more: float = 0.3, asides: bool = True) -> None:
        from medrank.data.consumer import hpo_with_consumer_wordings
        from medrank.data.hpo import load_hpo
        from medrank.encoders import load_encoder

        binary = [n for n, e in evidences.items() if e.kind == "B"]
        own = {n: evidence_description(evidences[n].question) for n in binary}
        self.names = list(binary)
        self.descriptions = [own[n] for n in binary]
        # HPO's terms with MedQuAD's everyday wordings ("Swollen glands" for Lymphadenopathy), read once: the
        # synonyms below and the places of pain
        terms = hpo_with_consumer_wordings(concepts=load_hpo()) if hpo else []
        synonyms: dict[str, list[str]] = {}
        if hpo:
            # a symptom asked with an alternative takes the first one's HPO words too ("swollen or painful lymph nodes":
            # Lymphadenopathy's); not a history question, whose disease's words are a symptom's ("Migraine headache"
            # would read every headache as a history of migraine)
            symptoms = [n for n in binary if not evidences[n].antecedent]
            synonyms = hpo_synonyms(own, terms, alternatives=symptoms)
            for name, extra in synonyms.items():
                self.names += [name] * len(extra)
                self.descriptions += extra
        if asides:
            # a symptom's question glosses a word of its own in an aside, the word a patient uses ("fast (racing)": "my
            # heart is racing"), and a gloss that names an HPO term brings that term's other words ("(double vision)":
            # Diplopia). The gloss alone is no row: out of its question MiniLM puts "double vision" near "blurred vision"
            glossed = [(name, gloss, description) for name in binary if not evidences[name].antecedent
                       for gloss, description in gloss_asides(evidences[name].question)]
            linked = hpo_synonyms({str(i): gloss for i, (_, gloss, _) in enumerate(glossed)}, terms) if hpo else {}
            for i, (name, _, description) in enumerate(glossed):
                extra = [description, *linked.get(str(i), ())]
                self.names += [name] * len(extra)
                self.descriptions += extra
        if members:
            for name, extra in member_descriptions(evidences).items():
                self.names += [name] * len(extra)
                self.descriptions += extra
        aliases = pain_places(terms)
        self.pain = PainReader.from_evidences(evidences, aliases)
        #: binary evidence -> (its location evidence, that evidence's body locations): where a swelling or a skin
        #: lesion is, read in the clause that states it ("my knee is swollen": the knee)
        self.located = {main: (member, BodyLocations(BodyLocations.labels_of(evidences[member]), aliases))
                        for main, member in located_members(evidences).items()
                        if self.pain is None or main != self.pain.pain}
        self.encoder = encoder if encoder is not None else load_encoder("minilm")
        self.vectors = self.encoder.encode(self.descriptions, show_progress=False)
        self.threshold = threshold
        #: how much nearer than ``threshold`` an evidence about a circumstance the clause does not state must be to be
        #: read when no other evidence is near enough (:meth:`detect`)
        self.circumstance_margin = circumstance_margin
        #: how much nearer than ``threshold`` a description that shares no word with a term's name must be to be read
        #: from it (``detect(term=True)``)
        self.term_margin = term_margin
        #: how much nearer than a finding that can be where the clause says (a swelling, at the lips) another one must
        #: be to be read instead ("my lips are swollen" is nearest "Swollen glands")
        self.located_margin = located_margin
        #: how near a clause's words beyond those of the finding it reads must be to what a finding that says that one
        #: and more says beyond it, for the clause to read that one too (:attr:`refinements`)
        self.said_more = said_more
        #: per description, the stems of its circumstance's words (empty: none to check)
        self.circumstances = [_circumstance_stems(d) for d in self.descriptions]
        #: per description, whether its circumstance is a slight one ("out of breath with minimal physical effort"):
        #: a clause states it only where it says the effort was slight too (:data:`EN_SLIGHT_SAID`)
        self.slight = [EN_SLIGHT.search(_circumstance_of(d)[1]) is not None for d in self.descriptions]
        #: per description, whether the circumstance it names eases the finding ("pain that improves when you lean
        #: forward"; "chest pain even at rest" is brought on by it)
        self.eases = [bool(self.circumstances[j]) and EN_BETTER.search(_circumstance_of(d)[0]) is not None
                      for j, d in enumerate(self.descriptions)]
        #: the descriptions of symptoms in general or of pain under a circumstance ("symptoms that are increased with
        #: physical exertion but alleviated with rest", "pain that is increased with movement"), each with the Snowball
        #: stem of its circumstance's first word (physic; lie, not the "down" of "lying down"), read beside a symptom
        #: stated with that circumstance (:meth:`detect`), whether it is of pain alone, and whether the circumstance
        #: eases it ("pain that improves when you lean forward")
        self.under_circumstance = {j: (head, d.lower().startswith("pain"), self.eases[j])
                                   for j, d in enumerate(self.descriptions)
                                   if _OF_SYMPTOMS.match(d) and (head := _circumstance_head(d))}
        #: per description, whether it speaks of pain or discomfort (a clause about pain is matched to those only)
        self.of_pain = [EN_PAIN.search(d) is not None or "discomfort" in d.lower() for d in self.descriptions]
        #: per description, whether its question asks what the patient feels ("Do you feel lightheaded … or do you feel
        #: like you are about to faint?"; not "Did you lose consciousness?")
        self.felt = [EN_FEEL.search(evidences[n].question) is not None for n in self.names]
        #: per description, whether it is of something given up ("a former smoker"): read only from a clause that says
        #: it is past (:data:`EN_FORMERLY`)
        self.former = [re.search(r"\b(?:former|ex-)", d, re.IGNORECASE) is not None for d in self.descriptions]
        #: per description, the colours it names (a clause of another colour does not read it)
        self.colours = [_colours(re.findall(r"[a-z]+", d.lower())) for d in self.descriptions]
        #: per description, whether it is of both sides ("weakness in both arms and/or both legs"): not read from a clause
        #: of one ("my left arm is weak")
        self.both = [re.search(r"\bboth\b", d, re.IGNORECASE) is not None
                     and re.search(r"\bone\s+or\s+(?:both|more)\b|\beither\b", d, re.IGNORECASE) is None
                     for d in self.descriptions]
        #: per evidence, whether a description of it names breath or breathing (a clause that does reads only those: "out
        #: of breath" is near "Passing out", a loss of consciousness, by its "out")
        self.of_breath = {n for n, d in zip(self.names, self.descriptions, strict=True) if BREATH_WORD.search(d)}
        #: per description, whether it names blood or bleeding (matched only by a clause that does: "coughing up green
        #: phlegm" is nearest "coughing up blood"; and a clause that does matches only those)
        self.of_blood = [BLOOD_WORD.search(d) is not None for d in self.descriptions]
        #: per description, its words (a term's name is matched to a description that shares one)
        self.words = [re.findall(r"[a-z]+", d.lower()) for d in self.descriptions]
        #: an HPO wording (as :func:`_norm` writes it) -> the id of its term, and per description the HPO term it is a
        #: wording of (``None``: none): a term's name is not read as a finding another HPO term's wording describes,
        #: unless that term is one the name's is a kind of (:meth:`reads_as`)
        self.hpo_wordings: dict[str, str] = {}
        #: an HPO term's id -> its layperson synonyms: a term's name that reads nothing is read as them (:meth:`detect`:
        #: "Rhinorrhea" as "Runny nose")
        self.wordings_of: dict[str, tuple[str, ...]] = {}
        for concept in terms:
            self.wordings_of[concept.id] = tuple(concept.meta.get("layperson", ()))
            for label in (concept.name, *concept.synonyms):
                self.hpo_wordings.setdefault(_norm(label), concept.id)
        self.hpo_term = [self.hpo_wordings.get(_norm(d)) for d in self.descriptions]
        #: the evidences whose HPO wordings all say a thing is less or missing (:data:`~medrank.text.LESS_WORD`: a loss of
        #: appetite is "Poor appetite", "No appetite" …): read from a clause only where it says a lessening too
        #: (:data:`~medrank.text.LESS_SAID`), or denies the thing ("I'm not hungry"). "I'm hungry all the time" is as near
        #: "appetite" as a poor appetite is; DDXPlus' own compound descriptions ("numbness, loss of sensation or
        #: tingling") do not decide it
        hpo_rows: dict[str, list[str]] = defaultdict(list)
        for n, d, hpo in zip(self.names, self.descriptions, self.hpo_term, strict=True):
            if hpo is not None:
                hpo_rows[n].append(d)
        self.lessening = frozenset(n for n, ds in hpo_rows.items() if all(LESS_WORD.search(d) for d in ds))
        self._hpo_parents: Mapping[str, Sequence[str]] | None = None
        #: how near by meaning a word beside blood must be to a word of a finding of blood to say what the blood comes
        #: with (:meth:`blood_source`; MiniLM: "poop" and "stool" 0.72, "poop" and "vomit" 0.59)
        self.source_threshold = 0.65
        #: finding of blood -> the MiniLM vectors of its words, blood's own aside (:meth:`blood_source`)
        self._blood_words: dict[str, np.ndarray] | None = None
        #: per description, whether its evidence is an antecedent (a term's name must name each of its words)
        self.antecedent = [evidences[n].antecedent for n in self.names]
        #: finding -> (description index, the words it says beyond) of other symptoms that say it and more: "a cough
        #: that produces colored or more abundant sputum than usual" of "a cough" (:meth:`detect` reads one beside it
        #: where the clause is near it and says what more)
        self.refinements: dict[str, list[tuple[int, str]]] = defaultdict(list)
        for i, short in enumerate(self.descriptions):
            for k, long in enumerate(self.descriptions):
                if (self.names[k] != self.names[i] and not self.antecedent[k]
                        and long.lower().startswith(short.lower() + " ")):
                    self.refinements[self.names[i]].append((k, long[len(short) + 1:]))
        self._more_vectors: dict[str, np.ndarray] = {}  # what a refinement says more -> its unit vector
        self._words_of: dict[str, list[str]] | None = None  # evidence -> the words of all its descriptions
        self._vocabulary: list[str] | None = None  # every word of the descriptions, sorted (:meth:`plain_adjectives`)
        self._vocabulary_set: frozenset[str] | None = None  # the same words as a set (:meth:`vocabulary_words`)
        #: evidence -> the indices of its descriptions (rows of :attr:`vectors`)
        rows: dict[str, list[int]] = defaultdict(list)
        for j, n in enumerate(self.names):
            rows[n].append(j)
        self.rows_of = dict(rows)
        #: evidence -> the body locations its descriptions name ("a sore throat", "Pharyngalgia": the pharynx;
        #: "tingling in the feet"); a clause about another place is not it ("my neck hurts" is near "a sore throat",
        #: "my fingers are tingling" near the tingling feet)
        self.place_at: dict[str, frozenset[str]] = {}
        if self.pain is not None:
            for n, words in zip(self.names, self.words, strict=True):
                self.place_at[n] = self.place_at.get(n, frozenset()) | frozenset(self.pain.places(words))
        #: per description row, whether its evidence's own description (its first row; not an HPO synonym beside it:
        #: Nausea's "sick to the stomach") names a body location ("weakness in your facial muscles and/or eyes")
        self.named_place = [self.pain is not None and bool(self.pain.places(self.words[self.rows_of[n][0]]))
                            for n in self.names]
        #: yes / no evidence -> (the pain location evidence, the locations its own words name): one complaint coded
        #: twice ("a sore throat", Pharyngalgia: pain at the pharynx), read as one of them at least
        #: (:class:`.posterior.Observation`); not an antecedent, nor a finding of a circumstance ("chest pain even at
        #: rest" says more than pain in the chest)
        self.alternative_codings: dict[str, tuple[str, frozenset[str]]] = {}
        for name in binary:
            if self.pain is None or evidences[name].antecedent or _circumstance_stems(own[name]):
                continue
            places = {value for text in (own[name], *synonyms.get(name, ()))
                      for n, value in self.pain.detect([text]) if n == self.pain.location}
            if places:
                self.alternative_codings[name] = (self.pain.location, frozenset(places))

    def denies_what_is_lost(self, clause: str, descriptions: Sequence[str]) -> bool:
        """Whether a denied ``clause`` denies what one of ``descriptions`` says is lost, and so states the loss: "my child
        won't eat", "I'm not hungry" (a loss of appetite), "I can't feel my feet" (loss of sensation). The clause's
        words, negation aside (:meth:`concept`), must be nearer by meaning to the thing lost than to its loss by
        :data:`LOST_MARGIN` ("I'm not numb" and "I didn't pass out" name the loss itself), and the clause must not speak
        of a loss ("I haven't lost my appetite")."""
        if _EN_SAYS_LOSS.search(clause) or EN_ALL_WELL.search(clause) or not EN_NEGATION.search(EN_PERSISTS.sub(" ", clause)):
            return False  # a loss denied, a statement that all is well, or no denial at all
        parts = [(m.group(1), m.group(0)) for d in descriptions if (m := _EN_LOSS_OF.search(d))]
        if not parts:
            return False
        concept = self.concept(clause)
        vectors = self.encoder.encode([concept, *(t for pair in parts for t in pair)], show_progress=False)
        sims = vectors[1:] @ vectors[0]
        return any(float(sims[2 * i] - sims[2 * i + 1]) >= LOST_MARGIN for i in range(len(parts)))

    def blood_source(self, said: Sequence[str]) -> str | None:
        """The finding of blood whose words, blood's own aside, one of ``said`` (what a clause says beside blood) is
        nearest by meaning, where it is near enough (cosine of the two words >= :attr:`source_threshold`): "poop" is
        the stool's ("light red blood or blood clots in your stool"), "threw" and "up" the vomit's; ``None`` when no
        word is near enough ("pee": DDXPlus asks of no blood in the urine)."""
        if self._blood_words is None:
            # each finding of blood's words, blood's own aside, as MiniLM vectors (one matrix per finding), made once
            words = {n: sorted({w for w in self.words_of(n) if len(w) >= 3 and w not in _FUNCTION and w not in _HISTORY
                                and not BLOOD_WORD.search(w)})
                     for n in dict.fromkeys(n for n, blood in zip(self.names, self.of_blood, strict=True) if blood)}
            self._blood_words = {n: self.encoder.encode(ws, show_progress=False) for n, ws in words.items() if ws}
        mine = self.encoder.encode(list(said), show_progress=False)
        best, nearest = self.source_threshold, None
        for name, theirs in self._blood_words.items():
            near = float((mine @ np.asarray(theirs).T).max())
            if near >= best:
                best, nearest = near, name
        return nearest

    def reads_as(self, name: str, j: int) -> bool:
        """Whether a term's ``name`` may be read as description ``j`` for all HPO says: yes unless both are wordings of
        HPO terms and the description's is neither the name's term nor one of its ancestors ("Productive cough" is a
        Cough; "Hematuria" is no "Hematemesis", though the two begin alike)."""
        mine, theirs = self.hpo_wordings.get(_norm(name)), self.hpo_term[j]
        if mine is None or theirs is None or mine == theirs:
            return True
        if self._hpo_parents is None:
            from medrank.data.hpo import hpo_parents

            self._hpo_parents = hpo_parents()
        seen, todo = set(), [mine]
        while todo:
            for parent in self._hpo_parents.get(todo.pop(), ()):
                if parent == theirs:
                    return True
                if parent not in seen:
                    seen.add(parent)
                    todo.append(parent)
        return False

    def plain_adjectives(self, clause: str) -> str:
        """``clause`` with each adjective in -y that no description holds written as the description's word it comes
        from (:func:`medrank.text.plain_adjectives`: "wheezy": wheezing; MiniLM reads "wheezy" as nothing near a
        wheeze)."""
        if self._vocabulary is None:
            self._vocabulary = sorted(self.vocabulary_words())
        return plain_adjectives(clause, self._vocabulary)

    def _more_vector(self, rest: str) -> np.ndarray:
        """The unit vector of what a refinement says beyond the finding it refines (:attr:`refinements`), encoded once."""
        if rest not in self._more_vectors:
            self._more_vectors[rest] = unit_rows(self.encoder.encode([rest], show_progress=False))[0]
        return self._more_vectors[rest]

    def vocabulary_words(self) -> frozenset[str]:
        """Every word of the descriptions, read once."""
        if self._vocabulary_set is None:
            self._vocabulary_set = frozenset(w for words in self.words for w in words)
        return self._vocabulary_set

    def words_of(self, name: str) -> list[str]:
        """The words of every description of evidence ``name`` (its question's, its HPO wordings, its members')."""
        if self._words_of is None:
            self._words_of = defaultdict(list)
            for n, words in zip(self.names, self.words, strict=True):
                self._words_of[n] += words
        return self._words_of.get(name, [])

    @staticmethod
    def clauses(text: str) -> list[str]:
        # each clause with what parted it from the one before ("or", a comma, "and" …)
        parted, at, sep = [], 0, ""
        for m in EN_CLAUSE.finditer(text):
            parted.append((sep, text[at:m.start()]))
            sep, at = m.group(0).lower(), m.end()
        parted.append((sep, text[at:]))
        parts: list[str] = []
        seps: list[str] = []
        for sep, c in parted:
            if not c.strip():
                continue
            # "no fever or cough": a denial holds over what "or" adds to it, and over the items a comma lists before
            # that "or" ("no fever, cough or vomiting"); a clause with its own subject says its own
            if sep == "or" and parts and EN_SUBJECT.match(c.strip()) is None and not is_negated(c):
                k = len(parts) - 1
                while not is_negated(parts[k]) and k > 0 and seps[k] == ",":
                    k -= 1
                if is_negated(parts[k]):
                    parts[k + 1:] = [p if is_negated(p) else f"no {p.strip()}" for p in parts[k + 1:]]
                    c = f"no {c.strip()}"
            parts.append(c.strip())
            seps.append(sep)
        return [p for p in (EN_SUBJECT.sub("", c).strip() for c in parts) if len(p) > 2]

    @staticmethod
    def circumstance_head(clause: str) -> str | None:
        """What a clause states before the circumstance it opens ("out of breath" of "out of breath when I climb
        stairs"); ``None`` when it opens none or nothing of two letters or more comes before it."""
        m = _CIRCUMSTANCE_OPENER.search(clause)
        if m is None or not re.search(r"[a-z]{2,}", clause[:m.start()], re.IGNORECASE):
            return None
        return clause[:m.start()].strip()

    def _other_readings(self, clause: str, concept: str, term: bool = False) -> list[str]:
        """What a clause is also matched as (:meth:`detect`): what it states before its circumstance (not in a term's
        wording, whose circumstance is part of what it names: Menorrhagia's "heavy bleeding during menstruation" is no
        bleeding anywhere), its part's state as going on (:func:`as_going_on`), a part that does something with the
        descriptions' adjective of the verb ("my nose is running": runny nose; :func:`medrank.text.as_part_adjective`),
        and a thing said to be as an adjective says with the adjective before it ("my periods are heavy": heavy
        periods; :func:`medrank.text.as_attributive`)."""
        head = None if term else self.circumstance_head(clause)
        adjective = as_part_adjective(concept, self.vocabulary_words())
        if adjective is not None and not (self.pain is not None and self.pain.places([adjective.split()[-1]])):
            adjective = None  # no body part ("the tap runs")
        return [t for t in (self.concept(head) if head else None, as_going_on(concept), adjective,
                            as_attributive(concept)) if t]

    @staticmethod
    def concept(clause: str) -> str:
        """The clause without negation cues, leading verbs, casual intensifiers, what says it goes on ("can't stop
        coughing", "keeps coughing": coughing; a contraction's "ca" was left of "can't") and how long it has lasted ("a cough for three
        weeks": "a cough" is nearer "intense coughing fits" with it), as it is matched against the vocabulary."""
        text = EN_NEGATION.sub(" ", EN_KEEPS.sub(" ", EN_DURATION.sub(" ", EN_INTENSIFIER.sub(" ", clause))))
        text = EN_LEADING.sub("", " ".join(text.split()))
        return text or clause

    def detect(self, text: str, term: bool = False, question: bool = False,
               spoken: str | None = None) -> list[tuple[str, str]]:
        """(evidence, value) pairs read in ``text``; ``term``: ``text`` is a symptom term's name (see the class), or,
        with ``question``, a doctor's question read as one (whose caller checks its words against the findings').
        ``spoken``: the patient's words the term was decided on, where known; a past diagnosis or exposure (an
        antecedent) is then read from the term only where those words name one of its words, as it is from a
        patient's words ("heartburn", decided as Gastroesophageal reflux, is no diagnosis of it). A
        term's name that reads nothing is read as the term's HPO layperson synonyms, the first that reads something
        ("Rhinorrhea" shares no word with "a clear runny nose"; its synonym "Runny nose" does), and only a finding that
        says a lessening where the wording says one (:data:`~medrank.text.LESS_SAID`: Polyphagia's "Increased appetite"
        is no "lost your appetite"), and no more of what the wording says is less (Xerostomia's "Reduced salivation" is
        no "more saliva than usual")."""
        found = self._read(text, term, question, spoken)
        if found or not term or question:
            return found
        own = _norm(text)
        for wording in self.wordings_of.get(self.hpo_wordings.get(own, ""), ()):
            if _norm(wording) == own:
                continue
            less = LESS_SAID.search(wording) is not None
            found = [(n, v) for n, v in self._read(wording, True, False, spoken)
                     if less == any(LESS_SAID.search(self.descriptions[j]) for j in self.rows_of.get(n, ()))
                     and not (less and any(MORE_SAID.search(self.descriptions[j]) for j in self.rows_of.get(n, ())))]
            if found:
                return found
        return found

    def _read(self, text: str, term: bool = False, question: bool = False,
              spoken: str | None = None) -> list[tuple[str, str]]:
        # a thermometer's or a cuff's reading is read as what it says ("my temp was 102": a fever; "my blood pressure
        # was 160/100": high blood pressure); a normal one says nothing
        parts = [part if said is None else said for part, said in
                 ((part, reading_as(part, "en")) for part in self.clauses(text)) if said != ""]
        # what the patient cannot do is a difficulty doing it ("I can't breathe": difficulty breathing), not a denial
        parts = [as_difficulty(part) or part for part in parts]
        if not parts:
            return []
        parts = [self.plain_adjectives(part) for part in parts]
        if self.pain is not None:
            # a one-word clause after one that names a part is said of that part ("my eyes are itchy and watery":
            # watery eyes; "watery" alone is nearest "Watery stool")
            for i in range(1, len(parts)):
                if re.fullmatch(r"[a-z]+", parts[i], re.IGNORECASE) and not EN_PAIN.search(parts[i]):
                    place = next((w for w in re.findall(r"[a-z]+", parts[i - 1].lower()) if self.pain.places([w])), None)
                    if place is not None:
                        parts[i] = f"{parts[i]} {place}"
        pain = self.pain.detect(parts) if self.pain is not None else []
        # a symptom stated with its circumstance is also matched without it ("out of breath when I climb stairs" is
        # further from every wording of breathlessness than "out of breath"); the circumstance stays the clause's
        # ... and a part's state said in the simple present also as it is going on ("heart pounds": "heart is
        # pounding", which MiniLM puts near the racing heart; "heart pounds" near heart failure); the nearest counts
        concepts = [self.concept(p) for p in parts]
        others = [self._other_readings(p, c, term) for p, c in zip(parts, concepts, strict=True)]
        texts = [*concepts, *(t for ts in others for t in ts)]
        vectors = self.encoder.encode(texts, show_progress=False) @ self.vectors.T
        extra = iter(vectors[len(parts):])
        sims = np.stack([np.max([row, *(next(extra) for _ in ts)], axis=0)
                         for row, ts in zip(vectors[:len(parts)], others, strict=True)])
        feelings = {m.group(1).lower() for m in EN_FELT.finditer(text)}
        # the words a term was decided on, the places they name aside (read once: every clause's candidates ask)
        spoken_words = None if not term or question or spoken is None else [
            w for w in re.findall(r"[a-z]+", spoken.lower()) if not (self.pain is not None and self.pain.places([w]))]
        found: dict[str, str] = {}
        located: list[tuple[str, str]] = []
        before: list[str] = []  # the words of the clause before, unless negated: where "... and is swollen" is
        for clause, row in zip(parts, sims, strict=True):
            words = re.findall(r"[a-z]+", clause.lower())
            # a clause about pain is the pain reader's, or a finding's that speaks of pain too ("a sore throat"): its
            # body part alone brings other findings near it ("I get chest pain": a heart attack or angina; "my
            # stomach hurts": HPO's Stomach hernia, a hiatal hernia)
            of_pain = EN_PAIN.search(clause) is not None
            at = frozenset(self.pain.places(words)) if self.pain is not None else frozenset()
            # an evidence about a circumstance the clause does not state ("vomit after coughing" for "vomiting") is
            # passed over for the next nearest one, unless every evidence near enough is about a circumstance and the
            # nearest is much nearer than the threshold: then the clause states that one's finding ("I'm wheezing": "a
            # wheezing sound when you exhale", DDXPlus' only wheeze but one, which is heard after coughing spells).
            # Not for a clause about pain, whose evidences of circumstance ("chest pain even at rest") say more.
            stems = {w[:4] for w in words}
            unplaced = [w for w in words if not (self.pain is not None and self.pain.places([w]))]
            if EN_EXERTION.search(clause):
                stems |= _EXERTION_STEMS  # walking up a hill is a physical exertion
            slight = EN_SLIGHT_SAID.search(clause) is not None
            # the findings that can be where the clause says (a swelling or a skin lesion at a place it names), and how
            # near the clause each is
            placed = {main: max(row[j] for j in self.rows_of[main])
                      for main, (_, body) in self.located.items() if body.places(words)}
            blood = BLOOD_WORD.search(clause) is not None
            breath = BREATH_WORD.search(clause) is not None
            one_side = EN_ONE_SIDE.search(clause) is not None
            colours = _colours(words)
            formerly = EN_FORMERLY.search(clause) is not None
            says_less, denied = LESS_SAID.search(clause) is not None, is_negated(clause)
            # the words of a clause about blood but blood's own and the places it names: what the clause says is there
            what = [w for w in words if not BLOOD_WORD.search(w) and not (self.pain is not None and self.pain.places([w]))
                    ] if blood else []
            # what the clause says beside blood, the words of a history aside ("I've been peeing blood": peeing)
            said = [w for w in what if len(w) >= 3 and w not in _FUNCTION and w not in _HISTORY]
            # ... and the finding of blood those words are nearest by meaning
            source = self.blood_source(said) if said else None
            chosen = circumstantial = None
            eased = EN_BETTER.search(clause) is not None
            # the clause's words the patient says they feel ("I feel faint": faint; the subject and its verb are cut)
            felt = [w for w in words if w in feelings]
            # ... and whether a finding near enough that the question asks them to feel names one of those words
            feels_another = bool(felt) and any(self.felt[k] and shares_a_word(felt, self.words_of(self.names[k]))
                                               for k in np.nonzero(row >= self.threshold)[0])
            for j in np.argsort(-row, kind="stable"):
                if row[j] < self.threshold:
                    break
                if (of_pain and not self.of_pain[j]) or (self.of_blood[j] and not blood) or (
                        breath and self.names[j] not in self.of_breath):
                    continue
                if at and self.place_at.get(self.names[j]) and not at & self.place_at[self.names[j]]:
                    continue  # somewhere else
                if term and not question and not at and self.named_place[j]:
                    # a term's wording that names no place says nothing of one where the finding's own words name it:
                    # Asthenia's "Weakness" is no weakness of the face and eyes (its wording "Facial muscle weakness"
                    # would name the face)
                    continue
                if one_side and self.both[j]:
                    continue  # one arm is not both arms
                if colours and self.colours[j] and not colours & self.colours[j]:
                    continue  # yellow skin is not pale skin
                if self.former[j] and not formerly:
                    continue  # a smoker is no former smoker
                if self.names[j] in self.lessening and not says_less and not denied:
                    continue  # always hungry is no poor appetite
                if placed and self.names[j] not in placed and not at & self.place_at.get(self.names[j], frozenset()) and any(
                        near >= self.threshold and near >= row[j] - self.located_margin for near in placed.values()):
                    # the finding that can be at the place the clause names is about as near (one that names the
                    # place itself stays: "itchy eyes" are the eyes' itching, not a skin lesion at the eyes)
                    continue
                if blood and not self.of_blood[j] and not shares_a_word(what, self.words[j]):
                    # a bleeding is read as a finding of no blood only where a word of what it is meets one of the
                    # finding's ("bloody diarrhea": diarrhea); where it is does not ("my nose keeps bleeding" is nearest
                    # a blocked nose)
                    continue
                if blood and self.of_blood[j] and said and not shares_a_word(said, self.words_of(self.names[j])) and (
                        source != self.names[j]):
                    # nor as another finding of blood when what the blood comes with is not that one's: blood in the
                    # urine is not blood coughed up, though the two wordings are near (an everyday word for what
                    # it comes with is that one's by meaning: :meth:`blood_source`)
                    continue
                if not term and not question and self.antecedent[j] and not shares_a_word(unplaced, self.words[j]):
                    # nor do a patient's words that name none of a past diagnosis's ("my stomach is upset" is near
                    # "a hiatal hernia"), a place aside: the part a diagnosis is of ("Fluid in the chest") is no word of
                    # it ("my chest feels tight")
                    continue
                if spoken_words is not None and self.antecedent[j] and not shares_a_word(spoken_words, self.words[j]):
                    continue  # nor does a term decided on words that name none of it ("heartburn": a GERD diagnosis)
                if term and row[j] < self.threshold + self.term_margin and not (
                        names_every_word(words, self.words[j]) if self.antecedent[j] and not question
                        # a beginning shared with another HPO term's wording is no sign: "Hematuria" and "Hematemesis"
                        else shares_a_word(words, self.words[j]) and (question or self.reads_as(text, j))):
                    # an antecedent is a past diagnosis or exposure: a vaguer symptom's name that shares a word with it
                    # does not say the patient has it ("Sleep abnormality": diagnosed with obstructive sleep apnea)
                    continue
                if self.circumstances[j] & stems and self.eases[j] != eased:
                    continue  # the clause's circumstance brings on what the finding's eases, or the other way round
                if feels_another and not self.felt[j]:
                    # what the patient feels is a finding its question asks them to feel, where one names it: "I feel
                    # faint" is about to faint, not the loss of consciousness HPO's "Fainting" names
                    continue
                if not self.circumstances[j] or (self.circumstances[j] & stems and (slight or not self.slight[j])):
                    # "out of breath when I climb stairs" states an exertion, not a minimal one (DDXPlus asks of that
                    # apart, and of breathlessness, and of symptoms increased with exertion)
                    chosen = j
                    break
                if circumstantial is None:
                    circumstantial = j
            if (chosen is None and circumstantial is not None and not of_pain
                    and row[circumstantial] >= self.threshold + self.circumstance_margin):
                chosen = circumstantial
            if chosen is not None:
                rows = self.rows_of[self.names[chosen]]
                negated = is_negated(clause) and not any(says_the_loss(clause, self.descriptions[j]) for j in rows) \
                    and not self.denies_what_is_lost(clause, [self.descriptions[j] for j in rows])
                value = ABSENT if negated else PRESENT
                found.setdefault(self.names[chosen], value)
                # a symptom that says the chosen one and more is said as well where the clause is near it and its
                # words beyond the chosen one's are near what more it says: "coughing up green phlegm" is nearest "a
                # cough", and is a cough that produces colored sputum; "I have a dry cough", as near that, says no more
                # of sputum; one of blood only where the clause names blood
                if not negated and (more := [(k, rest) for k, rest in self.refinements.get(self.names[chosen], ())
                                             if row[k] >= self.threshold and (blood or not self.of_blood[k])]):
                    own = {w[:4] for w in self.words[chosen]}
                    beyond = [w for w in words if len(w) >= 3 and w not in _FUNCTION and w[:4] not in own]
                    if beyond:
                        said = unit_rows(self.encoder.encode([" ".join(beyond)], show_progress=False))[0]
                        for (k, rest) in more:
                            if float(self._more_vector(rest) @ said) >= self.said_more:
                                found.setdefault(self.names[k], PRESENT)
                if value == PRESENT and self.names[chosen] in self.located:
                    member, body = self.located[self.names[chosen]]
                    located += [(member, c) for c in body.places(words) or body.places(before)]
            if (chosen is not None or of_pain) and not is_negated(clause):
                # a finding of symptoms under a circumstance ("symptoms that are increased with physical exertion …")
                # is read beside the symptom of a clause that states that circumstance after "when", "after" … ("chest
                # pain when I walk up hills", "my head hurts when I cough"; not "I have a cough"): the clause's nearest
                # finding is its symptom, and the pain reader takes a clause of pain
                opener = _CIRCUMSTANCE_OPENER.search(clause)
                after = re.findall(r"[a-z]+", clause[opener.end():].lower()) if opener else []
                circumstance = {w[:4] for w in _word_stems(after)} | ({"phys"} if EN_EXERTION.search(clause) else set())
                # a circumstance the clause's own finding names (not as a circumstance of its own) is what that finding
                # is, not what makes it worse: "there's blood when I cough" is coughing up blood, not symptoms increased
                # with coughing; "out of breath with minimal physical effort" keeps the exertion's
                own = {w[:4] for w in _word_stems(re.findall(r"[a-z]+", _circumstance_of(
                    self.descriptions[chosen])[0].lower()))} if chosen is not None else set()
                for j, (head, of_pain_alone, eases) in self.under_circumstance.items():
                    # pain under a circumstance only beside a pain, a circumstance that eases only where the clause
                    # says it does ("better when I lean forward"; one that brings a symptom on is the rule); stems alike
                    # over their first four letters (movement, move)
                    if head[:4] in circumstance - own and (of_pain or not of_pain_alone) and eased == eases:
                        found.setdefault(self.names[j], PRESENT)
            before = [] if is_negated(clause) else words
        if pain:
            for name in {n for n, _ in pain}:
                found.pop(name, None)  # the pain reader knows the location the nearest-question match does not
        return list(found.items()) + pain + list(dict.fromkeys(located))


#: words that say nothing about a circumstance or a finding (the three-letter ones matter to :func:`shares_a_word`
#: only: :func:`_circumstance_stems` reads words of four letters or more)
_FUNCTION = frozenset({"your", "you're", "they", "them", "that", "this", "with", "from", "have", "into", "when", "while",
                       "the", "and", "you", "any", "are", "for", "one", "has", "had", "not", "all", "its", "her", "his",
                       "was", "but", "out", "off", "there"})


#: subjects that name no part (with :data:`_FUNCTION`'s "this", "that" …): :func:`as_going_on` leaves them
_PRONOUNS = frozenset({"it", "he", "she", "one", "everything", "something", "nothing"})


def as_going_on(clause: str) -> str | None:
    """A clause that opens on a noun and a verb in the simple present written as going on ("heart pounds": heart is
    pounding; "ear rings all day": ear is ringing all day), as lemminflect's lexicon inflects the verb; ``None`` for
    any other clause ("heart is pounding", "eyes water": a plural, "it hurts": no noun)."""
    from lemminflect import getAllLemmas, getInflection, getLemma

    m = re.match(r"^([a-z]+)\s+([a-z]+s)\b(.*)$", clause.strip(), re.IGNORECASE)
    if m is None:
        return None
    subject, verb, rest = m.group(1).lower(), m.group(2).lower(), m.group(3)
    if subject in _FUNCTION or subject in _PRONOUNS or "NOUN" not in getAllLemmas(subject) or subject.endswith("s"):
        return None
    for lemma in getLemma(verb, upos="VERB", lemmatize_oov=False):
        if verb in getInflection(lemma, tag="VBZ") and lemma not in ("be", "have", "do", "feel", "get", "keep", "seem",
                                                                        "look"):
            going = next((g for g in getInflection(lemma, tag="VBG") if g.endswith("ing") and g != lemma), None)
            if going is not None:
                return f"{subject} is {going}{rest}"
    return None


def shares_a_word(words: Sequence[str], others: Sequence[str]) -> bool:
    """Whether a word of ``words`` and one of ``others`` (lower case, no function words) begin alike: over their first
    four letters, or the whole of the shorter one of three letters or more ("red" in "redness", "eye" in "eyes"); an
    irregular inflection as the word it is of (:func:`~medrank.text.base_form`: "threw" as throw, like "thrown")."""
    mine = beginnings([w for w in words if w not in _FUNCTION])
    theirs = beginnings([w for w in others if w not in _FUNCTION])
    return bool(mine & theirs) or any(len(a) == 3 and b.startswith(a) or len(b) == 3 and a.startswith(b)
                                      for a in mine for b in theirs)


#: words of an antecedent's question that say it is a history, not what it is of ("diagnosed with", "chronic")
_HISTORY = frozenset({"diagnosed", "diagnosis", "chronic", "history", "ever", "been", "previously", "past", "known",
                      "suffer", "suffering", "suffered", "from", "currently", "have", "had"})


def names_every_word(words: Sequence[str], others: Sequence[str]) -> bool:
    """Whether each word of ``others`` but function and history words begins like a word of ``words`` (as in
    :func:`shares_a_word`): "Obstructive sleep apnea" names each word of "diagnosed with obstructive sleep apnea",
    "Sleep abnormality" does not."""
    needed = [w for w in others if len(w) >= 3 and w not in _FUNCTION and w not in _HISTORY]
    return bool(needed) and all(shares_a_word(words, [w]) for w in needed)


def _circumstance_of(description: str) -> tuple[str, str]:
    """(what a description says before the circumstance it names, the circumstance's words; "" when none): "out of
    breath with minimal physical effort": ("out of breath", "minimal physical effort")."""
    m = EN_CIRCUMSTANCE.search(description)
    if m is None:
        return description, ""
    return description[:m.start()], m.group("clause") or m.group("rest") or m.group("effort") or m.group("cause")


def _circumstance_head(description: str) -> str | None:
    """The Snowball stem of the first word of the circumstance a description names ("… with physical exertion":
    physic; "… when lying down": lie), ``None`` when it names none."""
    words = _word_stems(re.findall(r"[a-z]+", _circumstance_of(description)[1].lower()))
    return words[0] if words else None


#: Snowball stems of words, those that name nothing aside, an irregular inflection as its word's
_word_stems = content_stems


def _circumstance_stems(description: str) -> frozenset[str]:
    """The first four letters of the words (four letters or more) of the circumstance a description names."""
    words = _circumstance_of(description)[1]
    return frozenset(w[:4] for w in re.findall(r"[a-z]+", words.lower()) if len(w) >= 4 and w not in _FUNCTION)


#: a word of pain (a cramp is one: DDXPlus characterises pain as "a cramp"); group 1: the part a compound names
#: ("headache": head; HPO's "Pharyngalgia": pharyng). "Sore" is pain as an adjective ("a sore throat", "my back is
#: sore"), not as the noun of a lesion ("a cold sore", "bed sores", "a sore on my lip", "Pressure sore")
EN_PAIN = re.compile(r"\b(?:pain|pains|painful|hurts?|hurting|aches?|aching|cramps?|cramping)\b"
                     r"|\b(?<!\bcold )(?<!\bbed )(?<!\bcanker )(?<!\bpressure )(?<!\bopen )"
                     r"(?!(?<=\ba )sore\s*(?:$|[.;!?]|(?:on|in|at|near|under|inside|by|that|which)\b))sore\b"
                     r"|\b([a-z]+?)(?:aches?|algias?)\b"
                     # a head that pounds or throbs aches ("a pounding head": MiniLM's nearest is a head trauma); a
                     # pounding heart does not
                     r"|\b(?:pounding|throbbing|splitting)(?=\s+head\b)|(?<=\bhead )(?:is |keeps )?(?:pounding|throbbing)\b",
                     re.IGNORECASE)
#: a clause that says the patient exerts themself ("when I walk up hills", "after climbing stairs", "when I
#: exercise"), and the stems that say physical exertion (:func:`_circumstance_stems` of a finding's "with physical
#: exertion", "with minimal physical effort"); a clause of exertion states that circumstance
EN_EXERTION = re.compile(rf"(?:\b(?:when|whenever|after|while|during|if|on)\b.*|{EN_MOVING_PARTICIPLE})"
                         r"\b(?:walk\w*|climb\w*|stairs|hills?|uphill|exercis\w*|running|run|ran|jog\w*|exert\w*|hurry\w*|"
                         r"gym|sports?|cycling)\b", re.IGNORECASE)
_EXERTION_STEMS = frozenset({"phys", "exer"})
#: a circumstance that says its effort or exposure is slight ("with minimal physical effort") ...
EN_SLIGHT = re.compile(r"\b(?:minimal|minimum|slight(?:est)?|little|mild|least)\b", re.IGNORECASE)
#: ... and a clause that says the effort was slight ("just walking to the car", "even a few steps", "the slightest
#: effort", "across the room")
EN_SLIGHT_SAID = re.compile(r"\b(?:just|even|only|barely|minimal|minimum|slight(?:est)?|little|least|a\s+few\s+"
                            r"(?:steps|stairs|yards|metres|meters)|across\s+the\s+room)\b", re.IGNORECASE)
#: a circumstance that eases a finding ("pain that improves when you lean forward", "better when I sit up")
EN_BETTER = re.compile(r"\b(?:improves?|improved|better|alleviated|relieved|relieves|eases?|eased|helps?|goes\s+away)\b",
                       re.IGNORECASE)
#: what opens a circumstance in a patient's clause: a conjunction, or a participle of moving ("out of breath walking up
#: stairs", :data:`~medrank.text.EN_MOVING_PARTICIPLE`)
_CIRCUMSTANCE_OPENER = re.compile(rf"\b(?:when|whenever|after|while|during|if|every\s+time)\b|{EN_MOVING_PARTICIPLE}",
                                  re.IGNORECASE)
#: a description of symptoms in general or of pain ("symptoms that are increased with …", "pain that is increased
#: with movement")
_OF_SYMPTOMS = re.compile(r"^(?:are\s+)?(?:the\s+)?(?:symptoms|pain)\b", re.IGNORECASE)
#: a verb of feeling, and the word felt after it ("I feel faint", "feeling really sick")
EN_FEEL = re.compile(r"\b(?:feel|feels|feeling|felt)\b", re.IGNORECASE)
EN_FELT = re.compile(r"\b(?:feel|feels|feeling|felt)\s+(?:(?:so|very|really|quite|a\s+bit|a\s+little|kind\s+of|like)\s+)*"
                     r"([a-z]+)", re.IGNORECASE)
#: a clause that says something is given up or past ("I used to smoke", "I quit", "an ex-smoker")
EN_FORMERLY = re.compile(r"\b(?:used\s+to|former(?:ly)?|ex-?\w+|quit|stopped|gave\s+up|given\s+up|no\s+longer|"
                         r"previously)\b", re.IGNORECASE)
#: colours a finding may be of; a word that begins with one names it ("redness", "paler", "yellowish")
COLOURS = ("yellow", "red", "pink", "blue", "purple", "black", "white", "green", "pale", "dark", "brown", "grey", "gray")


def _colours(words: Sequence[str]) -> frozenset[str]:
    """The colours ``words`` (lower case) name."""
    return frozenset(c for w in words for c in COLOURS if w.startswith(c) and not (c == "red" and w.startswith("redu")))


#: a clause of one side of the body ("my left arm", "on one side")
EN_ONE_SIDE = re.compile(r"\b(?:left|right|one)\b", re.IGNORECASE)
EN_SIDE = re.compile(r"\((?:R|L)\)")
#: words of a location label that name nothing ("side of the chest")
_LABEL_FUNCTION_WORDS = frozenset({"a", "an", "of", "the"})
#: English words that place a body part ("lower chest", "upper lip", "big toe"): grammar, not anatomy; none names a
#: place alone
POSITION_WORDS = frozenset({"above", "below", "big", "bottom", "inner", "internal", "lateral", "little", "lower",
                            "outer", "posterior", "under", "upper"})


class BodyLocations:
    """The body locations of a multi-choice location evidence (its value labels) a clause's words name."""

    def __init__(self, labels: Mapping[str, str], aliases: Mapping[str, frozenset[str]] | None = None) -> None:
        #: part -> other words for the same place (:func:`pain_places`: "stomach" -> "belly"), read where the part
        #: itself names no label
        self.aliases = dict(aliases or {})
        #: value code -> the words of its English label, sides removed ("temple(R)" -> ["temple"])
        self.words = {code: EN_SIDE.sub("", label).lower().split() for code, label in labels.items()}
        #: value code -> those words in the singular ("teeth" -> "tooth"), read once
        self.singulars = {code: [singular(w) for w in words] for code, words in self.words.items()}
        #: value code -> the position word its label opens with ("lower" of "lower chest"), or None
        self.positions = {code: words[0] if len(words) > 1 and words[0] in POSITION_WORDS else None
                          for code, words in self.words.items()}
        #: (part, position word) -> :meth:`locations` (a clause's every word is looked up, request after request)
        self._memo: dict[tuple[str, str | None], list[str]] = {}

    @staticmethod
    def labels_of(member: Evidence) -> dict[str, str]:
        """A location evidence's value labels, its default ("nowhere") left out."""
        return {c: t for c, t in member.meanings.items() if c != member.default}

    def locations(self, part: str, position: str | None = None) -> list[str]:
        """Value codes whose label names ``part`` (see :meth:`_locations`), read once per part and position word."""
        key = (part, position)
        found = self._memo.get(key)
        if found is None:
            if len(self._memo) >= 100_000:  # words a long-running service was sent: kept bounded
                self._memo.clear()
            found = self._memo[key] = self._locations(part, position)
        return list(found)

    def _locations(self, part: str, position: str | None = None) -> list[str]:
        """Value codes whose label names ``part`` (or its singular: "knees", "teeth"): a label word equal to it or
        a compound ending with it ("forehead" for "head"), unless that word is followed by "of" ("back of head" is not the
        back). A position word names no place alone ("lower" is not the lower chest); given the ``position`` word
        said before the part, a label that opens with another one is passed over ("bottom lip" for "upper lip"),
        and one that opens with none too when a label opens with that one ("toe (2)" for "big toe")."""
        if part in POSITION_WORDS or part in _LABEL_FUNCTION_WORDS:
            return []
        forms = {part, singular(part)}
        out = []
        for code, words in self.words.items():
            if position is not None and self.positions[code] not in (None, position):
                continue
            for i, (word, one) in enumerate(zip(words, self.singulars[code], strict=True)):
                named = any(one == p or word == p or _compound_of(word, p) or _derived_alike(word, p) for p in forms)
                if named and (i + 1 == len(words) or words[i + 1] != "of"):
                    out.append(code)
                    break
        placed = [code for code in out if self.positions[code] == position]
        return placed if position is not None and placed else out

    def places(self, words: Sequence[str]) -> list[str]:
        """The value codes the words name, each part read with the position word just before it; a part that names
        no label is read as its :attr:`aliases` ("my stomach hurts": the belly), unless "of" follows it ("the side
        of my chest" is no side)."""
        codes: set[str] = set()
        for i, word in enumerate(words):
            before = words[i - 1] if i > 0 and words[i - 1] in POSITION_WORDS else None
            found = self.locations(word, before)
            if not found and (i + 1 == len(words) or words[i + 1] != "of"):
                for alias in sorted(self.aliases.get(singular(word), ())):
                    found += self.locations(alias, before)
            codes.update(found)
        return sorted(codes)


def _derived_alike(word: str, part: str) -> bool:
    """Whether a label word and a part are forms of one word, the first six letters alike ("testicle" and
    "testicular", "tonsil" and "tonsillar", "pharynx" and the "pharyng" of Pharyngalgia); fewer letters say too
    little ("scrotum" and "scrotal" are not read as one), and one that is the other and four letters more is a
    compound of it, another part ("breastbone", the sternum, is no breast; "fingernail")."""
    short, long = sorted((word, part), key=len)
    if long.startswith(short) and len(long) - len(short) >= 4:
        return False
    return len(word) >= 6 and len(part) >= 6 and word[:6] == part[:6]


def _compound_of(word: str, part: str) -> bool:
    """Whether a label word is a compound ending with a part ("forehead": head); a letter or two before it make
    another word ("thigh" is no "high")."""
    return len(part) >= 4 and word.endswith(part) and len(word) - len(part) >= 3


def located_members(evidences: Mapping[str, Evidence]) -> dict[str, str]:
    """Binary evidence -> the multi-choice evidence of its group that asks where it is ("Do you have swelling in one
    or more areas of your body?" -> "Where is the swelling located?"; "lesions, redness or problems on your skin" ->
    "Where is the affected region located?")."""
    out = {}
    for name, member in evidences.items():
        main = evidences.get(member.group)
        if (member.kind == "M" and main is not None and main.kind == "B" and member.group != name
                and EN_WHERE_LOCATED.fullmatch(member.question.strip()) is not None):
            out.setdefault(member.group, name)
    return out


class PainReader(BodyLocations):
    """Pain and where it is: the binary pain evidence and the values of its multi-choice location evidence."""

    def __init__(self, pain: str, location: str, labels: Mapping[str, str],
                 aliases: Mapping[str, frozenset[str]] | None = None) -> None:
        super().__init__(labels, aliases)
        self.pain = pain
        self.location = location

    @classmethod
    def from_evidences(cls, evidences: Mapping[str, Evidence],
                       aliases: Mapping[str, frozenset[str]] | None = None) -> PainReader | None:
        """The knowledge base's pain evidence (a binary question about pain somewhere) and the multi-choice
        evidence of its group that lists body locations; None when the knowledge base has no such pair.
        ``aliases``: other words for a place (:func:`pain_places`)."""
        for name, ev in evidences.items():
            if ev.kind != "B" or not re.search(r"\bpain somewhere\b", ev.question, re.IGNORECASE):
                continue
            for other, member in evidences.items():
                if member.group == name and member.kind == "M" and re.search(r"\bpain somewhere\b", member.question,
                                                                               re.IGNORECASE):
                    return cls(name, other, cls.labels_of(member), aliases)
        return None

    def detect(self, clauses: Sequence[str]) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []
        before: list[str] = []  # the locations the clause before names (a swollen knee "and hurts")
        for clause in clauses:
            match = EN_PAIN.search(clause)
            words = re.findall(r"[a-z]+", clause.lower())
            if match is None:
                before = [] if is_negated(clause) else self.places(words)
                continue
            if is_negated(clause):
                found.append((self.pain, ABSENT))
                before = []
                continue
            parts = [match.group(1).lower()] if match.group(1) else words
            codes = self.places(parts) or before
            before = []
            found.append((self.pain, PRESENT))
            found += [(self.location, c) for c in codes if (self.location, c) not in found]
        if any(v == PRESENT for n, v in found if n == self.pain):
            found = [(n, v) for n, v in found if not (n == self.pain and v == ABSENT)]
        return list(dict.fromkeys(found))


#: an HPO pain wording that names its place: "<part> pain", "pain in (the) <part>", "<part>ache", "<part> ache(s)"
_PAIN_WORDING = re.compile(r"(?:([a-z]+) pain|pain in (?:the )?([a-z]+)|([a-z]+?) ?aches?)")


def pain_places(concepts: Sequence[Any]) -> dict[str, frozenset[str]]:
    """Part -> the other parts that the pain wordings of one vocabulary term name ("Abdominal pain", "Stomach pain",
    "Belly ache": abdominal, stomach and belly are one place; "Flank pain", "Kidney pain"): words for a place that
    the location labels may not use. ``concepts``: anything with ``name`` and ``synonyms`` (HPO's terms, with the
    everyday wordings of :func:`medrank.data.consumer.hpo_with_consumer_wordings`)."""
    out: dict[str, set[str]] = defaultdict(set)
    for concept in concepts:
        parts = {singular(part) for wording in (concept.name, *concept.synonyms)
                 if (m := _PAIN_WORDING.fullmatch(wording.lower().strip())) for part in m.groups() if part}
        for part in parts if len(parts) > 1 else ():
            out[part] |= parts - {part}
    return {part: frozenset(others) for part, others in out.items()}


#: a degree before what a finding names ("significantly increased sweating", "more irritable")
_DEGREE = re.compile(r"^(?:(?:a|an)\s+)?(?:significantly|very|much|more|slightly|unusually|severely|extremely|really)\s+",
                     re.IGNORECASE)


def _norm(text: str) -> str:
    return re.sub(r"^(?:a|an|the)\s+", "", " ".join(text.lower().split()))


def hpo_synonyms(descriptions: Mapping[str, str], concepts: Sequence[Any] | None = None,
                 alternatives: Iterable[str] = ()) -> dict[str, list[str]]:
    """Evidence name -> the names and synonyms of the HPO term its description matches (``concepts``: HPO's terms, read
    when not given): word for word, else word stem for word stem, function words aside ("a decrease in appetite":
    "Decreased appetite"), else, for a wording of two stems or more, stem for stem but the first, which need only begin
    alike (its first three letters): a verb or noun where the term has the noun or adjective of it ("lose
    consciousness": "Loss of consciousness"; "your abdomen is bloated": "Abdominal bloating"), and one word of five
    letters or more, a verb of feeling before it aside, to a one-word term that begins alike over five ("feeling
    nauseous": Nausea; a symptom's only); for the evidences named
    in ``alternatives``, or the first of its "X or Y" alternatives (:func:`first_alternatives`). A degree before the
    finding and a number of times after it are passed over."""
    from medrank.data.hpo import load_hpo

    index: dict[str, Any] = {}
    by_stems: dict[tuple[str, ...], Any] = {}
    #: term (its ``id()``) -> the stems of each of its wordings (what a part of a description that one of them names may be
    #: written as instead)
    wordings: dict[int, list[tuple[str, ...]]] = defaultdict(list)
    #: (the first stem's first three letters, the other stems) -> concept, for wordings of two stems or more
    by_derivation: dict[tuple[str, tuple[str, ...]], Any] = {}
    for concept in load_hpo() if concepts is None else concepts:
        for label in (concept.name, *concept.synonyms):
            index.setdefault(_norm(label), concept)
            stems = _stems(label)
            by_stems.setdefault(stems, concept)
            if stems:
                wordings[id(concept)].append(stems)
            if len(stems) >= 2:
                by_derivation.setdefault((stems[0][:3], stems[1:]), concept)
            elif len(stems) == 1 and len(stems[0]) >= 5:
                by_derivation.setdefault((stems[0][:5], ()), concept)
    out: dict[str, list[str]] = {}
    with_alternatives = frozenset(alternatives)
    for name, description in descriptions.items():
        forms = (description, *first_alternatives(description)) if name in with_alternatives else (description,)
        # a fragment that opens on "that" is no name of a finding ("that muscle spasms or soreness in your neck …")
        forms = tuple(f for f in forms if not _CLAUSE_OPENER.match(f))
        # a degree said before the finding names no other one ("significantly increased sweating": Hyperhidrosis's
        # "Increased sweating"; "more irritable": "Irritable"), nor a number of times or a when after it ("vomited
        # several times", "confused lately")
        forms = (*forms, *(_DEGREE.sub("", f) for f in forms if _DEGREE.match(f)),
                 *(_TIMES.sub("", f) for f in forms if _TIMES.search(f)))
        concept = next((index[_norm(d)] for d in forms if _norm(d) in index), None)
        if concept is None:
            concept = next((by_stems[_stems(d)] for d in forms if _stems(d) and _stems(d) in by_stems), None)
        if concept is None:
            stemmed = [_stems(_FEELING.sub("", f)) for f in forms]
            # one word only for a symptom: a diagnosis of one word is named as it is ("fibromyalgia" is no Fibroma)
            derived = [(st[0][:3], st[1:]) if len(st) >= 2 else (st[0][:5], ()) for st in stemmed
                       if len(st) >= 2 or (len(st) == 1 and len(st[0]) >= 5 and name in with_alternatives)]
            concept = next((by_derivation[key] for key in derived if key in by_derivation), None)
        if concept is None:
            concept = next((c for st in stemmed if (c := _composed(st, by_stems, wordings)) is not None), None)
        if concept is not None:
            labels = {concept.name, *concept.synonyms} - {description}
            out[name] = sorted(t for t in labels if _norm(t) != _norm(description))
    return out


def _composed(stems: tuple[str, ...], by_stems: Mapping[tuple[str, ...], Any],
              wordings: Mapping[int, Sequence[tuple[str, ...]]]) -> Any:
    """The term a wording's stems name once a part of them that is another term's wording is written as another of
    that term's wordings ("thrown up blood": "throw up" is Vomiting's "Throwing up", and "Vomiting blood" is
    Hematemesis'), ``None`` when no such writing is a term's wording. Parts are tried longest first, the whole
    wording aside, and a writing must name a term other than the part's."""
    n = len(stems)
    for size in range(n - 1, 0, -1):
        for i in range(n - size + 1):
            part = by_stems.get(stems[i:i + size])
            if part is None:
                continue
            for other in wordings[id(part)]:
                written = (*stems[:i], *other, *stems[i + size:])
                found = by_stems.get(written)
                if found is not None and found is not part:
                    return found
    return None


#: a verb of feeling before a finding ("feeling nauseous")
_FEELING = re.compile(r"^(?:feeling|feel|feels|felt)\s+", re.IGNORECASE)
#: a number of times or a when after a finding ("vomited several times", "confused lately") and an opener of a
#: clause, not of a name
_TIMES = re.compile(r"\s+(?:(?:several|many|multiple|a\s+few)\s+times|lately|recently)$", re.IGNORECASE)
_CLAUSE_OPENER = re.compile(r"^(?:that|if|whether)\b", re.IGNORECASE)


def _stems(text: str) -> tuple[str, ...]:
    """A wording's words as Snowball stems, those that name nothing aside ("Decreased appetite": decreas, appetit)."""
    return tuple(_word_stems(re.findall(r"[a-z]+", text.lower())))


#: what opens a second alternative that stands on its own: an article or a verb ("diarrhea or an increase in stool
#: frequency", "a loss of appetite or do you get full more quickly")
_OWN_ALTERNATIVE = frozenset({"a", "an", "the", "any", "do", "does", "did", "have", "has", "is", "are", "you"})


def first_alternatives(description: str) -> list[str]:
    """What the first of an evidence description's "X or Y" alternatives asks on its own: X itself when X is several
    words ("shortness of breath or difficulty breathing …": shortness of breath), Y one word ("chills or shivers") or Y
    opens on its own (an article or a verb); a one-word X shares Y's words after Y's first ("swollen or painful lymph
    nodes": swollen lymph nodes; "weakness or paralysis on one side of the face": weakness on one side of the face,
    not weakness alone). The second alternative is read only where it asks the patient again, of a finding it names
    ("your heart is beating fast … or do you feel palpitations": palpitations too; not "… or do you feel like
    vomiting", an urge); else not: "any close family members who suffer from allergies, hay fever or eczema" is no
    eczema of the patient's."""
    m = re.match(r"^(?P<x>.+?),? or (?P<y>.+)$", description.strip(), re.IGNORECASE)
    if m is None:
        return []
    x, y = m.group("x").strip(), m.group("y").split()
    asked = _ASKED_AGAIN.match(m.group("y"))
    again = [asked.group(1)] if asked else []
    if " " in x or len(y) == 1 or y[0].lower() in _OWN_ALTERNATIVE:
        return [x, *again]
    return [" ".join([x, *y[1:]]), *again]


#: a second alternative that asks the patient again, of one finding it names ("do you feel palpitations")
_ASKED_AGAIN = re.compile(r"^do\s+you\s+(?:feel|have)\s+(?!like\b|that\b|as\b)(?:an?\s+)?([a-z]+(?:\s+[a-z]+)?)$",
                          re.IGNORECASE)


def learn_surface_forms(symptoms: Sequence[str], pairs: Sequence[tuple[Sequence[str], Sequence[str]]],
                        min_share: float = 0.5, min_reports_unlike: int = 3) -> dict[str, str]:
    """Surface form -> symptom from (self-report words, explicit symptoms) pairs, plus each symptom's own name.

    A word that shares no character with the symptom it goes with most is kept only when it is seen in
    ``min_reports_unlike`` reports or more: a word seen once or twice goes with whatever its reports' annotators listed,
    most often the commonest symptom (无法入睡, 沙哑, 痘痘 and 溃疡 each went with 发烧), while 哭闹 → 烦躁不安 or
    拉肚子 → 稀便 recur."""
    known = set(symptoms)
    word_count: Counter[str] = Counter()
    co: dict[str, Counter[str]] = defaultdict(Counter)
    for words, explicit in pairs:
        for w in set(words):
            word_count[w] += 1
            for s in set(explicit) & known:
                co[w][s] += 1
    forms = {s: s for s in symptoms}
    for w, n in word_count.items():
        if w in forms or not co[w]:
            continue

        def strength(s: str, w: str = w, n: int = n) -> tuple[float, int]:
            return co[w][s] / n + 0.5 * len(set(w) & set(s)) / len(set(s)), co[w][s]

        # a tie goes to the first name in sorted order: in the counter's order it went with the process's string
        # hashing (the sets above), and the lexicon, with it every Chinese figure, changed from one run to the next
        best = max(sorted(co[w]), key=strength)
        share = co[w][best] / n
        if set(w) & set(best) or (share >= min_share and n >= min_reports_unlike):
            forms[w] = best
    return forms


class ChineseDetector:
    """Longest-match of learned surface forms with negation words just before them."""

    def __init__(self, symptoms: Sequence[str], pairs: Sequence[tuple[Sequence[str], Sequence[str]]],
                 min_reports_unlike: int = 3) -> None:
        self.forms = learn_surface_forms(symptoms, pairs, min_reports_unlike=min_reports_unlike)
        self.ordered = sorted(self.forms, key=lambda f: (-len(f), f))

    def detect(self, text: str, term: bool = False, question: bool = False) -> list[tuple[str, str]]:
        """(symptom, value) pairs read in ``text``; a term's name or a question (``term``, ``question``) is read as any
        text: the forms match whole words."""
        found: dict[str, str] = {}
        denied_last = False  # whether the last form read was denied, and what parted its clause from this one
        sep = ""
        at = 0
        for m in [*ZH_CLAUSE.finditer(text), None]:
            clause = text[at:m.start()] if m is not None else text[at:]
            # a thermometer's reading is read as the word of what it says ("烧到39度": 发热)
            word = searched_as(clause, "zh")
            clause = f"{clause}，{word}" if word else clause
            taken = [False] * len(clause)
            matched: list[tuple[int, int, str]] = []
            for form in self.ordered:
                start = clause.find(form)
                while start >= 0:
                    end = start + len(form)
                    if not any(taken[start:end]):
                        for i in range(start, end):
                            taken[i] = True
                        matched.append((start, end, form))
                    start = clause.find(form, end)
            # a denial holds over the items 、 or a conjunction of a list adds to it ("没有发烧、咳嗽", "没有发烧或者咳嗽"),
            # not over a comma, nor over an item that affirms or says how often ("不发烧、偶尔咳嗽")
            prev_end = None
            denied_at: dict[int, bool] = {}
            for start, end, _ in sorted(matched):
                before = clause[max(0, start - 3):start]
                gap = clause[prev_end:start] if prev_end is not None else (sep + clause[:start])
                denied_at[start] = any(neg in before for neg in ZH_NEGATION) or (
                    denied_last and ZH_LIST_GAP.fullmatch(gap) is not None)
                denied_last, prev_end = denied_at[start], end
            # the longest forms first, as they were matched: a symptom said twice keeps its longest form's reading
            for start, _, form in matched:
                found.setdefault(self.forms[form], ABSENT if denied_at[start] else PRESENT)
            if not matched and clause.strip():
                denied_last = False  # a clause of its own between breaks the list
            if m is None:
                break
            sep, at = m.group(0), m.end()
        return list(found.items())

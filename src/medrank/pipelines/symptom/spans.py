"""Mention spans of a complaint: clauses split at punctuation and conjunctions, plus lexicon matches.

A complaint names several findings ("头痛发烧两天", "my knee is swollen and hurts when I walk").
Retrieving the whole text finds the finding that dominates it; retrieving each clause finds the
others. Clauses are cut at punctuation, at conjunctions (和 / 及 / 并 / 伴 / 且 / 或;
"and" / "with" / "but" / "or" / "plus") and, for English, before subordinate clauses ("when",
"while", "after" …). Chinese has no spaces between findings, so the words of a surface lexicon
(:mod:`~medrank.pipelines.symptom.lexicon`) found in a clause become spans of their own and
what lies between them becomes the remaining spans, less their lead-in (who and when: 孩子, 晚上,
还有点). A span preceded by a negation cue in its
clause (不 / 没 / 无 / 未 / 否认; "no" / "not" / "without" / "denies") is marked negated.
An English clause loses its lead-in, which says who ("I have", "my son has been"), and its trailing time, which says
when ("for two days", "since yesterday"); a clause that is only a time is no span. A subordinate clause says in what
circumstances the clause before it holds, not what the patient has: it is read together with that clause ("hurts
when I swallow", "low blood sugar after a meal"), never alone ("after a meal" alone finds Postprandial fullness); so
is a participle of a movement ("breathless walking up the stairs"), and "woke up" before "with" is no finding;
after one word of sensation ("burning when I pee") the two are one piece. "feel" stays when one word follows it
("feel sick"). A bare predicate or adjective after a clause ("... swollen and hurts", "my eyes are itchy and
watery") is read with that clause, and an adjective is searched with the body part it shares ("my eyes are watery").
A conjunction between two function words ("on and off", "now and then") or a word and itself ("worse and worse") joins
no two findings: the clause is not cut there. With ``part_pain`` (a calibration rule), a body part with a verb of pain
is searched as the vocabulary says it ("my knee hurts" as "knee pain").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Container, Mapping
from dataclasses import dataclass, replace

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from medrank.blood_pressure import blood_pressure_reading, reading_as
from medrank.text import (
    EN_ALL_WELL,
    EN_INTENSIFIER,
    EN_MOVED_OVER,
    EN_MOVING,
    EN_MOVING_PARTICIPLE,
    EN_PERSON,
    EN_PERSON_NOUNS,
    HANGUL,
    KANA,
    ZH_AFFIRMS,
    ZH_LIST_GAP,
    mostly_han,
    singular,
)

# punctuation (ASCII and full-width) that ends a clause
_PUNCT = r"[,.;:!?，。；：！？、\n\r\t/（）()\[\]【】\"“”]"
_ZH_CONJ = r"伴有|伴|并且|并|及|和|且|或者|或|以及|还有|同时"
_EN_CONJ = r"and|with|but|or|plus|also|then|as well as|along with"
_EN_SUB = r"when|whenever|while|after|before|during|since|because|if|especially"
# a relative clause of how long it lasts ("a tickly cough that won't go away", "spots that just won't clear up") says
# how long, like "for weeks", not what: read with the clause it qualifies, as "when ..." is
_EN_LASTING = (r"that\s+(?:just\s+)?(?:won't|will\s+not|wont|doesn't|does\s+not|isn't|is\s+not)\s+"
               r"(?:go\s+away|clear\s+up|clear|stop|settle|shift|get\s+better|improve|heal)\b")
_ZH_NEG = ("否认", "没有", "不是", "没", "不", "无", "未", "非")
# the cues of _ZH_NEG that deny what follows them inside a piece too: 非 and 不是 open names ("非霍奇金淋巴瘤",
# "非典型…"), not denials, in the texts of a clinic
_ZH_DENIAL = "否认|没有|没|无|未|不"
# a Chinese piece of nothing but a measure ("38度5", "39.2℃", "两天", "一天三四次", "20斤") says how much or how long,
# not what: searched alone it finds the vocabulary's terms that carry numbers (孕38周 for "发烧38度5")
_ZH_MEASURE = re.compile(
    r"(?:[\d.．,，~～\-－—到至]|[０-９]|[零一二两三四五六七八九十百几半多余]|左右|个|来"
    r"|度|℃|°[cC]?|摄氏|岁|周岁|天|日|晚|夜|次|回|遍|月|周|星期|年|小时|分钟|分|秒|斤|公斤|千克|kg|KG|克|g|ml|mL|毫升|"
    r"cm|厘米|mm|毫米|%|了|啦|的|以上|以下)+"
)
_EN_NEG = {"no", "not", "without", "denies", "deny", "never", "nor", "none", "neither", "n't"}
#: a piece whose subject is "nothing" denies what it says ("nothing makes me happy" decided Conspicuously happy
#: disposition, "nothing stays down" Insomnia), unless it says that nothing relieves a finding ("nothing helps the
#: pain", "nothing I take seems to help my cough": the finding is there)
_EN_NOTHING_DOES = re.compile(
    r"nothing\b(?!\s+(?:(?:really|much|else|at\s+all|seems\s+to|has|have|will|can|could|would|i(?:'ve)?\s+(?:do|take|try|"
    r"tried|have\s+tried|use|used))\s+)*(?:helps?|helped|helping|works?|worked|eases?|eased|relieves?|relieved|stops?|"
    r"stopped|shifts?|shifted|touches|touched|takes?\s+(?:it\s+)?away|gets?\s+rid|settles?|calms?|improves?|fix(?:es)?)\b)",
    re.I)
_EN_PREDICATES = {"hurts", "hurt", "aches", "ache", "itches", "itch", "burns", "burn", "swells", "swell", "bleeds",
                  "bleed", "throbs", "stings", "is", "are", "feels", "feel", "gets", "get"}
# an adjective alone after a clause says how that same part is ("my eyes are red and itchy"); before a noun it
# names its own part ("a rash and itchy eyes")
_EN_ADJECTIVES = {"itchy", "swollen", "sore", "painful", "stiff", "numb", "tender", "puffy", "watery", "tingly",
                  "burning", "throbbing", "achy"}
# ... and words that say how a part looks or feels to the touch, read so only after a clause ("my toe is red, hot and
# painful": "my toe is hot", "my toe is painful"; "hot" alone found Hot flashes); before a circumstance such a word
# stays a piece of its own ("cold when I go out"), where a word of sensation and its circumstance are one piece
_EN_PART_ADJECTIVES = _EN_ADJECTIVES | {"red", "hot", "warm", "cold", "sticky", "dry", "blocked", "stuffy", "runny",
                                        "bruised", "crusty", "weak", "heavy", "tight", "inflamed", "blistered",
                                        "bloodshot", "flaky", "scaly", "bumpy", "lumpy", "yellow", "pale", "blue",
                                        "purple", "white", "black", "grey", "gray", "dark", "cloudy", "thick", "thin",
                                        "brittle", "cracked", "peeling", "smelly", "bleeding", "aching", "itching",
                                        "tingling", "weeping", "oozing", "twitching", "shaking"}
# an English clause's lead-in ("I have", "my child has been", "now my little girl has") says who and when, not what;
# a body part stays ("my head hurts"): only a person, with up to two words before it ("my little girl", "our
# 3-year-old son"), is a subject. Whoever reports it says so too: "my daughter says her ear hurts", "he keeps
# telling me his tummy hurts", "she complains of a headache" read as what follows
_EN_REPORTED = (r"(?:says|said|say|saying|tells\s+me|told\s+me|telling\s+me|keeps\s+saying|kept\s+saying|complains|"
                r"complained|complaining|mentions|mentioned)(?:\s+(?:of|about|that))?")
_EN_LEAD = re.compile(
    r"^(?:(?:now|recently|lately|suddenly|today|yesterday|tonight|then|(?:this|last)\s+(?:morning|night|evening|week))"
    r",?\s+)*"
    rf"(?:(?:i|we|he|she|they|it|there|(?:my|our|his|her|their|the)\s+(?:[\w-]+\s+){{0,2}}?(?:{EN_PERSON}))"
    r"(?:'ve|'m|'s|'d)?\s+)?"
    rf"(?:(?:keep|keeps|kept|has|have|had)?\s*{_EN_REPORTED}\s+)?"
    r"(?:(?:keep|kept|have|has|had|got|get|am|is|are|was|were|been|feel|feels|felt|having|getting|suffer|suffers|"
    r"suffering|from|a|an|some|really|very|so|also|still|always|constantly|been|'ve|'m|'s|do|does|did|not|don't|"
    r"doesn't|didn't|haven't|hasn't|"
    # "running a temperature" is having one (the verb alone reads as running: Difficulty running)
    r"(?:run|runs|ran|running)(?=\s+(?:a\s+)?(?:[a-z]+\s+)?(?:temperature|temp|fever)\b))\s+)*",
    re.I,
)


@dataclass(frozen=True)
class Span:
    """``text[start:end]``, searched as ``text`` (those words, or a bare predicate with the subject it shares:
    "my eyes are watery" for "watery" in "my eyes are itchy and watery"); ``normalised`` is the lexicon's name when
    a lexicon word made the span. ``reading``: the
    span reads words that other spans hold once more, in a longer context (a bare predicate with the clause before it,
    a subordinate clause with the clause it qualifies); it is searched, but it is not one more piece of the complaint.
    ``circumstance``: for a subordinate clause read with its clause, the subordinate clause alone ("when I climb
    stairs"), which says when, not what. ``lay_of``: for a reading with everyday words written as the vocabulary's
    (the set detector's ``lay_words`` rule), the text it was read from. ``often``: the clause said how often ("a lot",
    "all the time"), which is left out of ``text`` as a time is ("I cough a lot": cough) but may be the finding itself
    ("I'm peeing a lot": the set detector's ``often_words`` rule). ``joined_of``: for a reading with two words written
    as the one word the vocabulary writes them as (the ``joined_words`` rule: "bed sores" as "bedsore"), the text it was
    read from."""

    start: int
    end: int
    text: str
    normalised: str | None = None
    negated: bool = False
    reading: bool = False
    circumstance: str | None = None
    lay_of: str | None = None
    often: bool = False
    joined_of: str | None = None


def is_chinese(text: str) -> bool:
    """True when Han characters carry the text (:func:`medrank.text.mostly_han`; kana or Hangul mean another language)."""
    return mostly_han(text) and not KANA.search(text) and not HANGUL.search(text)


def _pieces(text: str, pattern: re.Pattern[str], keep: Callable[[str, re.Match[str]], bool] | None = None
            ) -> list[tuple[int, int]]:
    """Maximal pieces of ``text`` between matches of ``pattern`` (those ``keep`` does not keep), trimmed of spaces."""
    out, pos = [], 0
    for m in pattern.finditer(text):
        if keep is not None and keep(text, m):
            continue
        out.append((pos, m.start()))
        pos = m.end()
    out.append((pos, len(text)))
    trimmed = []
    for a, b in out:
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if b > a:
            trimmed.append((a, b))
    return trimmed


# a point or comma between two digits is part of a number ("38.5", "1,000"), not the end of an English clause; in
# Chinese only a temperature's ("38.5度", "体温37.8"): clinical Chinese numbers its items "1.冠心病2.高血压3.2型糖尿病"
_EN_SPLIT_PUNCT = rf"(?:(?!(?<=\d)[.,](?=\d)){_PUNCT})+"
_ZH_SPLIT_PUNCT = (rf"(?:(?!(?<=\d\d)[.．](?=\d\s*(?:度|℃|°))|(?<=[温烧热]\d\d)[.．](?=\d)){_PUNCT})+")
_ZH_SPLIT = re.compile(f"{_ZH_SPLIT_PUNCT}|{_ZH_CONJ}")
# a relative clause of a sensation says a second finding of the same thing ("a rash on my legs that itches": the
# rash, and the itch), as "and it itches" does
_EN_SENSATION_VERB = r"(?:itch(?:es)?|hurts?|aches?|burns?|stings?|throbs?|bleeds?|swells?)"
_EN_SPLIT = re.compile(rf"{_EN_SPLIT_PUNCT}|\b(?:{_EN_CONJ})\b|\b(?:that|which)\b(?=\s+{_EN_SENSATION_VERB}\b)", re.I)
# "especially when I lie down" is one subordinate clause, not "especially" and "when I lie down"
_EN_SUB_SPLIT = re.compile(rf"\b(?<!especially )(?={_EN_SUB}\b)|{EN_MOVING_PARTICIPLE}|\b(?={_EN_LASTING})", re.I)
_EN_SUB_START = re.compile(rf"(?:{_EN_SUB})\b|(?:{EN_MOVING})\s+(?:{EN_MOVED_OVER})\b|{_EN_LASTING}", re.I)
# what may part a subordinate clause from the clause it qualifies: a space only (after a comma it may qualify the
# whole complaint: "a cough and a fever, especially at night")
_SUB_GAP = re.compile(r"^\s*$")
_EN_FEEL = re.compile(r"\bfe(?:el|els|lt)\b", re.I)
_EN_WOKE = re.compile(r"^(?:woke|woken|wake|wakes|waking)\s+up$", re.I)
_EN_WITH = re.compile(r"\s*with\b", re.I)
_EN_CONJ_WORD = re.compile(rf"\b(?:{_EN_CONJ})\b", re.I)
_EN_SUBJECT = re.compile(rf"\b(?:i|we|he|she|they|{EN_PERSON})\b", re.I)
#: verbs that link a subject to how it is ("my eyes are", "the skin feels", "it gets"): no word of a finding
EN_LINKING = frozenset({"is", "are", "was", "were", "feels", "feel", "looks", "look", "gets", "get", "seems", "seem"})
# a clause that opens with a body part and its verb: "my eyes are", "his left knee hurts", "the skin feels"
# ("my calf has been swollen": the verb with its auxiliary)
_EN_PART_SUBJECT = re.compile(
    rf"^((?:my|your|his|her|our|their|the)\s+(?:[\w-]+\s+){{0,2}}?[\w-]+)\s+"
    rf"((?:(?:has|have|had)\s+been)|{'|'.join(sorted(EN_LINKING | _EN_PREDICATES))})\b", re.I)


_EN_WORD_BEFORE = re.compile(r"([A-Za-z']+)\s*$")
_EN_WORD_AFTER = re.compile(r"\s*([A-Za-z']+)")
# function words that open a clause or a noun phrase: "... breathe in and I have a cough" is two clauses
_EN_OPENERS = frozenset({"i", "we", "you", "he", "she", "it", "they", "me", "us", "him", "them", "my", "your", "his",
                         "her", "our", "their", "its", "the", "a", "an", "this", "that", "these", "those", "there",
                         "some", "any", "no", "every", "each", "all", "both"})
_EN_PAIR_BEFORE = re.compile(r"\b([A-Za-z']+)\s+(?:and|or)\s+$", re.I)


def _binomial(text: str, m: re.Match[str]) -> bool:
    """True when the conjunction ``m`` joins two function words or a word with itself: a fixed pair that says how
    often or which way ("on and off", "now and then", "over and over", "worse and worse"), not two findings. Split,
    "off" alone finds Squared-off platyspondyly."""
    word = m.group(0).lower()
    pair = _EN_PAIR_BEFORE.search(text, 0, m.start())
    if word in ENGLISH_STOP_WORDS and pair is not None:  # the second word of the pair is a conjunction too: "now and then"
        first = pair.group(1).lower()
        # ... unless the word before is itself the second of a pair: "on and off and then I vomit"
        second_of_pair = _EN_PAIR_BEFORE.search(text, 0, pair.start(1)) is not None
        return first in ENGLISH_STOP_WORDS and first not in _EN_NEG | _EN_OPENERS and not second_of_pair
    if word not in ("and", "or"):
        return False
    before = _EN_WORD_BEFORE.search(text, 0, m.start())
    after = _EN_WORD_AFTER.match(text, m.end())
    if before is None or after is None:
        return False
    a, b = before.group(1).lower(), after.group(1).lower()
    if _EN_PAIR_BEFORE.search(text, 0, before.start(1)) is not None:  # "a" closes a pair already: "on and off and then"
        return False
    return a == b or (a in ENGLISH_STOP_WORDS and b in ENGLISH_STOP_WORDS and not {a, b} & (_EN_NEG | _EN_OPENERS))


def clauses(text: str, language: str | None = None) -> list[tuple[int, int]]:
    """Character ranges of the clauses of ``text`` (see the module docstring)."""
    zh = is_chinese(text) if language is None else language == "zh"
    if zh:
        return _with_pressures(text, _pieces(text, _ZH_SPLIT), "zh")
    out = []
    for a, b in _with_pressures(text, _pieces(text, _EN_SPLIT, _binomial), "en"):
        for c, d in _pieces(text[a:b], _EN_SUB_SPLIT):
            out.append((a + c, a + d))
    return out


def _with_pressures(text: str, ranges: list[tuple[int, int]], language: str) -> list[tuple[int, int]]:
    """``ranges`` with two pieces joined again where only a slash cut a blood-pressure reading in two ("my blood
    pressure was 160" / "100", "血压150" / "90mmHg": :mod:`medrank.blood_pressure`); any other slash still cuts."""
    out: list[tuple[int, int]] = []
    for a, b in ranges:
        if out and text[out[-1][1]:a].strip() == "/" and blood_pressure_reading(text[out[-1][0]:b], language):
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


# a Chinese piece's lead-in says who ("孩子", "我家宝宝") and when ("晚上", "最近两天"), not what: left in, "晚上咳得厉害"
# reads as 失眠 and "孩子嗓子疼" as 头痛
_ZH_LEAD = re.compile(
    r"^(?:我家|我们家|家里)?(?:(?:宝宝|孩子|小孩|小朋友|儿子|女儿|老人|老公|老婆|爸爸|妈妈|患者|病人|我)"
    r"|最近|近来|近期|这几天|这两天|今天|昨天|昨晚|前天|今早|晚上|夜里|夜间|早上|白天|上午|下午|一直|总是|老是|经常|"
    r"有时|偶尔|突然|还|也|又|有点|有些|一点|现在|目前|开始)+")
_ZH_LEAD_OR_CUE = re.compile(rf"(?:{_ZH_LEAD.pattern[1:]}|{_ZH_DENIAL}|并|都|的|了|就)+")


def _only_lead_zh(piece: str) -> bool:
    """Whether a Chinese piece beside a lexicon word is nothing but who, when and a negation cue ("孩子" in "孩子发烧",
    "开始有点" before 发烧, "没有" before 头疼, whose denial the lexicon word reads itself): searched alone it finds terms
    that share a character with it (痱子 for 孩子, 产程开始前子宫破裂 for 开始)."""
    piece = piece.strip(" ，,、")
    return bool(piece) and _ZH_LEAD_OR_CUE.fullmatch(piece) is not None


def _strip_lead_zh(clause: str, pos: int, end: int) -> int:
    """Where the piece ``clause[pos:end]`` starts without its lead-in (``pos`` when nothing is left after it)."""
    m = _ZH_LEAD.match(clause, pos, end)
    return m.end() if m and m.end() < end else pos


def _negated_zh(clause: str, offset: int) -> bool:
    before = clause[max(0, offset - 3):offset]
    return any(cue in before for cue in _ZH_NEG)


# a cue that opens a Chinese piece and denies what follows it ("没有胸疼"), with a word of degree after it at most
_ZH_OPENING_NEG = re.compile(rf"(?P<cue>并没有|也没有|{_ZH_DENIAL})(?:明显的?|什么|任何|太|怎么|再|出现|发生)?")
# a cue inside a piece, with an adverb before it ("头也不疼")
_ZH_INNER_NEG = re.compile(r"(?:也|都|还|并|就)?(?:没有|没|不)")


def denied_name_zh(piece: str, names: Container[str], longest: int = 12) -> int | None:
    """Where what a negation cue in ``piece`` denies begins, or ``None`` when it denies nothing.

    A cue that opens the piece denies the name after it (or after the cue and a word of degree: "没有明显胸痛"), when
    what follows begins with one of ``names`` of two characters or more: "没有胸痛" → 2. A cue inside the piece denies
    the name it splits: "头不痛" is 头痛 with 不 in it, "肚子不痛了" 肚子痛 → 0, the whole piece. A piece that holds a
    name across the cue (不安, 无尿, 无症状型鼠疫, 消化不良, 食欲不振) denies nothing, and neither does a cue before or
    inside words that are no name: "没精神", "没有食欲" and "没有大便" say what the patient lacks, "吃不下", "睡不着",
    "喘不上气" and "鼻子不通气" what the patient cannot do."""

    def named(text: str) -> bool:
        return any(text[:n] in names for n in range(2, min(len(text), longest) + 1))

    def across(text: str, at: int) -> bool:  # a name that starts before ``at`` and ends after it
        return any(text[a:b] in names for a in range(max(0, at - longest + 1), at)
                   for b in range(at + 1, min(len(text), a + longest) + 1))

    m = _ZH_OPENING_NEG.match(piece)
    if m is not None:
        if named(piece):
            return None
        return next((start for start in (m.end(), m.end("cue")) if named(piece[start:])), None)
    for m in _ZH_INNER_NEG.finditer(piece):
        if m.start() == 0 or across(piece, m.start() + 1) or across(piece, m.end() - 1):
            continue
        joined = piece[:m.start()] + piece[m.end():]
        if across(joined, m.start()):
            return 0
    return None


def _negated_en(clause: str, offset: int) -> bool:
    words = [w.lower() for w in re.findall(r"[A-Za-z']+", clause[:offset])][-3:]
    return any(w in _EN_NEG or w.endswith("n't") for w in words)


_EN_NUMBER = r"(?:a|an|one|two|three|four|five|six|seven|eight|nine|ten|a\s+few|few|several|couple\s+of|a\s+couple\s+of|\d+)"
_EN_UNIT = r"(?:minutes?|hours?|days?|nights?|weeks?|months?|years?)"
# how close a count is ("for about an hour", "in over a week")
_EN_ABOUT = r"(?:(?:about|around|nearly|almost|over|under|roughly|more\s+than|less\s+than|at\s+least)\s+)?"
# how long ("for two days", "over the past week") and since when ("since yesterday", "from Monday"): a time a clause
# opens or ends with
_EN_HOW_LONG = rf"(?:for|over|in|during)\s+(?:the\s+)?(?:(?:past|last)\s+)?{_EN_ABOUT}(?:{_EN_NUMBER}\s+)?{_EN_UNIT}"
_EN_SINCE = rf"(?:since|from)\s+(?:yesterday|last\s+\w+|this\s+\w+|\w+day|{_EN_NUMBER}\s+{_EN_UNIT}\s+ago)"
# a time that opens a clause ("Since Monday my calf has been swollen", "For the last three days I've had …"): when, not
# what, as a trailing time is; what follows it opens the clause (its subject, its lead-in)
_EN_LEADING_TIME = re.compile(
    rf"^(?:{_EN_HOW_LONG}|{_EN_SINCE}|{_EN_ABOUT}{_EN_NUMBER}\s+{_EN_UNIT}\s+ago)\s*,?\s+(?=\w)", re.I)
# a clause's trailing time ("for two days", "over the past week", "since yesterday", "last night") or how often ("a lot",
# "all the time") says when, not what: left in, it pulls the clause towards terms about timing or kind ("Quotidian
# fever" for "fever for two days", "Productive cough" for "cough a lot")
_EN_TIME = re.compile(
    rf"(?:\s+{_EN_HOW_LONG}"
    rf"|\s+(?:{_EN_ABOUT}{_EN_NUMBER}\s+{_EN_UNIT}\s+(?:ago|now))"
    rf"|\s+{_EN_SINCE}"
    rf"|\s+(?:today|yesterday|tonight|(?:last|this)\s+(?:night|morning|evening|week|month)|all\s+day"
    rf"|now|lately|recently|(?:every\s+)?now\s+and\s+then|on\s+and\s+off|off\s+and\s+on|from\s+time\s+to\s+time|a\s+lot|a\s+little|a\s+bit|all\s+the\s+time|constantly|frequently|often|sometimes"
    rf"|occasionally|(?:every|each)\s+(?:day|morning|evening|afternoon|week)|so\s+much|very\s+much|badly"
    # how many times ("thrown up twice": alone, "twice" finds Bifid antitragus and duplications)
    rf"|(?:once|twice|{_EN_NUMBER}\s+times)(?:\s+(?:a|an|per|every|each)\s+(?:day|night|week|hour|month))?)"
    # a time of day behind a qualifier ("especially at night", "mostly in the morning") says when the finding before
    # it is worst: alone it finds sleep terms (Maintenance insomnia). A bare "at night" stays ("I wake up at night")
    rf"|\s+(?:especially|mostly|mainly|particularly|usually|often|worse|worst)\s+(?:at|in|during|through)\s+"
    rf"(?:the\s+)?(?:night|nights|nighttime|night-time|morning|mornings|evening|evenings|afternoon|day|daytime)"
    # "first thing (in the morning)" is a time of day whatever stands before it
    rf"|\s+(?:(?:especially|mostly|mainly|particularly|usually|often|worse|worst)\s+)?first\s+thing"
    rf"(?:\s+in\s+the\s+morning)?)+\s*$",
    re.I,
)


# a clause that says when or where the one before it is worst ("…, especially in the cold", "…, worse when I climb
# stairs", "…, mostly on my arms"): no finding of its own (alone, "especially in the cold" decided Coldness)
_EN_QUALIFIED = re.compile(r"(?:especially|particularly|mostly|mainly|usually|often|worse|worst|even)\s+"
                           r"(?:when|whenever|after|before|in|at|on|during|with|if|while|around|first)\b", re.I)

# ... and one that says the finding before it goes ("…, and it goes when I rest", "it settles after a while"): alone,
# "goes when I rest" decided Resting tremor
_EN_RELIEF = re.compile(r"(?:goes|go|went|gone|stops|stopped|eases|eased|settles|settled|(?:gets|got)\s+better|improves|"
                        r"improved|disappears|disappeared|(?:wears|wore)\s+off|calms\s+down|passes|passed)"
                        r"(?:\s+(?:away|off|down))?(?=\s*(?:$|[,.;!?]|(?:when|whenever|after|if|once|with|by)\b))", re.I)


def _strip_time(text: str, a: int, b: int) -> tuple[int, int]:
    """``(a, b)`` without its trailing time; ``(a, a)`` when the clause is nothing but a time ("since yesterday")."""
    m = _EN_TIME.search(" " + text[a:b])
    if m is None:
        return a, b
    return a, a + max(0, m.start() - 1)


#: a piece of what the patient cannot do, and "or" alone between two pieces
_EN_CANT = re.compile(r"^(?:can't|can’t|cannot|can\s+not|couldn't)\s+(?:stop\s+)?(?=\w)", re.I)
_EN_BARE_OR = re.compile(r"^\s*,?\s*(?:or|nor)\s+$", re.I)
#: what is left of "I haven't been able to …" once its lead-in is stripped
_EN_ABLE_TO = re.compile(r"^able\s+to\s+(?=\w)", re.I)
#: how often, among a clause's trailing time (:data:`_EN_TIME`)
_EN_OFTEN = re.compile(r"\b(?:a\s+lot|all\s+the\s+time|constantly|frequently|often|so\s+much|very\s+much)\b", re.I)
#: a time of day at the end of a clause ("in the mornings"): no word of what is felt
_EN_TIME_OF_DAY = re.compile(r"\s+(?:in|at|during)\s+(?:the\s+)?(?:morning|evening|afternoon|night)s?\s*$", re.I)


def _strip_lead(text: str, a: int, b: int) -> tuple[int, int]:
    t = _EN_LEADING_TIME.match(text[a:b])
    if t is not None:
        a += t.end()
    m = _EN_LEAD.match(text[a:b])
    if m and m.end() < b - a:
        feel = list(_EN_FEEL.finditer(text, a, a + m.end()))
        if feel and len(_EN_TIME_OF_DAY.sub("", text[a + m.end():b]).split()) == 1:
            # "I feel sick": with one word left the verb is half of what is said ("sick" alone reads as ill), a time
            # of day after it apart ("I feel sick in the mornings")
            return feel[-1].start(), b
        return a + m.end(), b
    return a, b


def _with_shared_subject(clause: str, bare: str, part_pain: bool = False) -> str | None:
    """``bare`` (an adjective, or a linking verb with what follows) with the subject of ``clause`` before it: "my
    knee" and "is swollen" of "my knee hurts and is swollen" → "my knee is swollen"; an adjective takes the clause's
    linking verb too ("my eyes are" + "watery"). None when the clause opens with no body part and verb ("a rash and
    itchy"), and for a verb of pain ("hurts", below) unless ``part_pain`` searches the two as "<part> pain"."""
    m = _EN_PART_SUBJECT.match(clause)
    if m is None:
        return None
    subject, verb = m.group(1), m.group(2)
    first = bare.split(maxsplit=1)[0].lower()
    if first in EN_LINKING or (part_pain and _EN_PART_HURTS.match(f"{subject} {bare}") is not None):
        return f"{subject} {bare}"
    # a verb of pain ("hurts") stays alone: read with the whole clause it is already ("my knee is swollen and
    # hurts"), and "my knee hurts" alone reads as Knee dislocation to the zero-shot MiniLM
    if first not in _EN_PREDICATES and (verb.lower() in EN_LINKING or verb.lower().endswith("been")):
        return f"{subject} {verb} {bare}"
    return None


# "my knee hurts", "her ear is sore", "my shoulder's been aching": a body part and a verb of pain. The vocabulary says
# "Knee pain", "Ear pain": searched so, the piece finds them ("my knee hurts" found Knee dislocation, "my ear hurts"
# nothing); what follows the verb stays ("chest pain when I breathe in")
_EN_PART_WORD = r"(?!(?:is|are|was|were|been|has|have|had|feels|feel|keeps|keep|gets|get|got)\b)[\w-]+"
# without its determiner where a person's lead-in took it ("my son's tummy hurts" is searched from "tummy hurts"): one
# word that is no pronoun, no gerund ("walking hurts" says when) and no word of the lead
_EN_BARE_PART = r"(?!(?:it|this|that|everything|something|anything|all|what|which|there|here|he|she|they|i|we)\b)[a-z]+(?<!ing)"
_EN_PART_HURTS = re.compile(
    rf"^(?:(?:(?:both|all)\s+(?:of\s+)?)?(?:my|your|his|her|our|their|the)\s+((?:{_EN_PART_WORD}\s+){{0,2}}?"
    rf"{_EN_PART_WORD}?)|(?=[a-z]+\s+(?:hurts|hurt|aches|ache|is|are|feels)\b)({_EN_BARE_PART}))(?:'s)?\s+"
    r"(?:(?:is|are|was|were|has\s+been|have\s+been|been|feels|feel|keeps|keep)\s+)?"
    r"(?:(?:really|very|so|quite|pretty|extremely|too|a\s+bit|a\s+little)\s+)?"
    r"(?:hurts|hurt|hurting|aches|ache|aching|achy|sore|painful|killing\s+me)\b"
    # ... or a pain before its part ("a sore tummy" found Peptic ulcer, "a sore back" Oral ulcer: "sore" is an
    # ulcer's word too); a sore throat is worded so already, sore lips are chapped ones, and sore stools or periods
    # are no body part's pain; "painful <part>" is how the vocabulary words some terms ("Painful breast"), and stays
    rf"|^(?:(?:my|your|his|her|our|their|the|a)\s+)?(?:(?:really|very|bit\s+of\s+a)\s+)?(?:sore|aching|achy)\s+"
    rf"(?!(?:throat|lips?|stools?|periods?|sex|intercourse)\b)(?![a-z]+(?:tion|ment)\b)({_EN_BARE_PART})$",
    re.I)


def _as_pain(text: str, ache_words: Collection[str] = (), part_within: Mapping[str, str] | None = None) -> str:
    """``text`` searched as the vocabulary words it ("my knee hurts" → "knee pain", "my feet hurt" → "foot pain", "a
    sore back" → "back pain";
    anything else as it is); a part whose pain is one of ``ache_words`` is searched as that word ("my head hurts"
    → "headache", where "head pain" is nearer "Pain in head and neck region" than Headache), and a part of
    ``part_within`` (lower case → the part that holds it and has a pain of its own) as that part ("my heel hurts" →
    "foot pain": no term is worded "heel pain")."""
    m = _EN_PART_HURTS.match(text)
    if m is None:
        return text
    *before, part = (m.group(1) or m.group(2) or m.group(3)).split()
    part = singular(part)
    part = (part_within or {}).get(part.lower(), part)
    if not before and f"{part.lower()}ache" in ache_words:
        return f"{part}ache{text[m.end():]}"
    return " ".join([*before, part]) + f" pain{text[m.end():]}"


# a body part said swollen ("my knee is swollen", "my ankles are puffy", "swollen feet"): the vocabulary words it
# "<part> swelling" (Ankle swelling's "Leg swelling", Facial edema's nearest is "face swelling"), which the patient's
# words do not reach ("my legs are swollen" found no term, "my feet are swollen" Finger swelling)
_EN_SWOLLEN = r"(?:swollen|swelling|swelled(?:\s+up)?|swells?(?:\s+up)?|puffy|puffed\s+up|puffs?\s+up|puffing\s+up)"
_EN_PART_SWOLLEN = re.compile(
    rf"^(?:(?:(?:both|all)\s+(?:of\s+)?)?(?:my|your|his|her|our|their|the)\s+((?:{_EN_PART_WORD}\s+){{0,2}}?"
    rf"{_EN_PART_WORD}?)|(?=[a-z]+\s+(?:is|are|was|were|have|has|gets?|got|keeps?|{_EN_SWOLLEN})\b)"
    rf"(?!(?:a|an|the|my|your|his|her|our|their|its|some|any)\b)({_EN_BARE_PART}))"
    r"(?:'s)?\s+(?:(?:is|are|was|were|has\s+been|have\s+been|been|looks?|looked|feels?|felt|gets?|got|getting|keeps?"
    r"|has\s+gone|have\s+gone|went|seems?|seemed)\s+)?(?:(?:really|very|so|quite|pretty|extremely|too|a\s+bit|a\s+little|all|"
    rf"a\s+lot)\s+)?{_EN_SWOLLEN}\b|^(?:(?:my|your|his|her|our|their|the|a)\s+)?(?:swollen|puffy)\s+({_EN_BARE_PART})$",
    re.I)


# a piece that says only that something is swollen ("it's swollen" leaves "swollen"; "I'm all swollen"): the part is
# in the piece before it or nowhere
_EN_BARE_SWOLLEN = re.compile(
    rf"^(?:(?:really|very|so|quite|pretty|extremely|too|a\s+bit|a\s+little|all|a\s+lot|now|also|got|gotten|become|"
    rf"became)\s+)*{_EN_SWOLLEN}(?:\s+up)?$", re.I)


def is_bare_swelling(text: str) -> bool:
    """Whether ``text`` says that something is swollen and names nothing else ("swollen", "all swollen", "swelled
    up"): the piece of "it's swollen", "I'm all swollen"."""
    return _EN_BARE_SWOLLEN.match(" ".join(text.split())) is not None


def as_swelling(text: str) -> str | None:
    """``text`` as the vocabulary words a swollen body part ("my knees are swollen" → "knee swelling", "swollen feet"
    → "foot swelling", "my ankles puff up by the evening" → "ankle swelling by the evening"), or None when it says
    no such thing."""
    m = _EN_PART_SWOLLEN.match(text.strip())
    if m is None:
        return None
    words = (m.group(1) or m.group(2) or m.group(3)).split()
    *before, part = words
    rest = text.strip()[m.end():]
    return " ".join([*before, singular(part), "swelling"]) + rest


# a weight lost or gained said as its amount ("lost 10 pounds", "put on 5 kilos") or with a phrasal verb ("put on
# weight"): the vocabulary names the change (Weight loss, Increased body weight); searched as a number of pounds it
# finds nothing near enough, and "put on (a lot of) weight" was nearest Failure to thrive, whose wordings speak of
# poor weight gain
_EN_LOSE = r"lost|lose|losing|loses|dropped|dropping|shed"
_EN_GAIN = r"gained|gain|gaining|gains|put\s+on|putting\s+on|puts\s+on"
_EN_AMOUNT = (r"(?:(?:about|around|nearly|almost|over|under|more\s+than|less\s+than|at\s+least|like|just)\s+)*"
              r"(?:\d+(?:\.\d+)?|half\s+a|a\s+few|few|several|some|a\s+couple\s+of|a|an|one|two|three|four|five|six|"
              r"seven|eight|nine|ten|twenty|thirty)\s*(?:pounds?|lbs?|kilos?|kilograms?|kgs?|stones?)\b")
_EN_WEIGHT_CHANGE = re.compile(
    rf"\b(?:(?P<lose>{_EN_LOSE})|(?P<gain>{_EN_GAIN}))\s+(?:{_EN_AMOUNT}|(?:(?:a\s+lot|lots|a\s+bit|some)\s+(?:of\s+)?)?weight\b)",
    re.I)


def _as_weight(text: str) -> str:
    """``text`` with a weight lost or gained said as the vocabulary says it ("lost 10 pounds" → "lost weight", "put on a
    lot of weight" → "gained weight")."""
    def said(m: re.Match[str]) -> str:
        verb = m.group("lose") or m.group("gain")
        if m.group(0)[len(verb):].split() == ["weight"] and not verb.lower().startswith("put"):
            return m.group(0)  # "losing weight" is said as the vocabulary says it already
        return "lost weight" if m.group("lose") else "gained weight"

    return _EN_WEIGHT_CHANGE.sub(said, text)


#: everyday words for being short of breath that share no word with the vocabulary's wordings of it, or one that
#: finds another finding ("out of breath": MiniLM's nearest is Halitosis, BM25's "out" is Syncope's "passing out";
#: "puffed out" finds Syncope); "puffed" only where it opens the piece, its subject the patient's lead-in ("I'm
#: puffed"), since a part that is puffed ("my eyes are puffed", "my cheeks puffed out") is swollen
_EN_WINDED = re.compile(r"\bout\s+of\s+breath\b|^puffed(?:\s+out)?(?=\s*$|\s+(?:after|when|walking|climbing|going|from)\b)"
                        r"|\bwinded\b", re.I)


def _as_breathless(text: str) -> str:
    """``text`` with being out of breath said as the vocabulary says it ("out of breath", "puffed out", "winded" →
    "short of breath")."""
    return _EN_WINDED.sub("short of breath", text)


# wetting oneself, leaking urine: the vocabulary words them "Loss of bladder control" (Urinary incontinence);
# alone, "wet" found Wet cough ("I wet myself when I cough" decided Productive cough) and "leak" Capillary leak;
# wetting the bed is the rule ``joined_words``' (Bedwetting is one of the vocabulary's words)
_EN_WET = r"(?:wet|wets|wetting|wetted)"
_EN_WETTING = re.compile(
    rf"\b{_EN_WET}\s+(?:myself|herself|himself|themselves|yourself|ourselves|(?:my|his|her|their|your|the)\s+"
    r"(?:pants|knickers|trousers|underwear|nappy|nappies|diapers?))\b"
    r"|\bleak(?:s|ing|ed)?\s+(?:(?:a\s+)?(?:bit|little|drop|drops|few\s+drops)\s+of\s+)?(?:wee|pee|urine)\b"
    r"|\b(?:can't|can’t|cannot|can\s+not|couldn't|unable\s+to)\s+(?:hold|control)\s+(?:in\s+)?(?:my|his|her|their|your|the)\s+"
    r"(?:wee|pee|urine|bladder)\b", re.I)


def _as_wetting(text: str) -> str:
    """``text`` with wetting oneself and leaking urine in the vocabulary's words (:data:`_EN_WETTING`)."""
    return _EN_WETTING.sub("loss of bladder control", text)


#: everyday words and idioms whose own words the vocabulary's search reads as another finding or as none, each said
#: as the vocabulary (or the lay words it already reads) says it; applied in this order, each to what the ones before
#: it left. In parentheses, what the patient's own words found before.
_EN_DEGREE = r"(?:(?:a\s+)?(?:bit|little|really|very|quite|so|all|kind\s+of|sort\s+of)\s+)*"
_EN_OWNER = r"(?:my|his|her|their|your)"
_EN_EVERYDAY = (
    # British "poo" and "wee" as "poop" and "pee", which the rule ``lay_words`` reads (MiniLM puts "poo" nearest
    # "apo"); "a wee bit" is small, and "weed" no urine
    (re.compile(r"\bpoo(?=(?:s|ing|ed)?\b)", re.I), "poop"),
    (re.compile(r"(?<!\b[aA] )\bwee(?=(?:s|ing)?\b)(?!\s+(?:bit|bits|one|ones|while|boy|boys|girl|girls|lad|lads|lass|"
                r"bairns?|thing|things|baby|man|hours|dram|drop)\b)", re.I), "pee"),
    (re.compile(r"\bqueasiness\b", re.I), "nausea"),
    (re.compile(r"\bqueasy\b", re.I), "nauseous"),
    # feeling faint or light-headed is Presyncope ("faint" found Loss of consciousness, whose wording is "fainting";
    # "light-headed" Fair hair)
    (re.compile(rf"\b(?:(?:feel(?:s|ing)?|felt|go(?:es|ing)?|went|gone|turn(?:s|ed|ing)?|get(?:s|ting)?|got)\s+"
                rf"{_EN_DEGREE})?(?:light[\s-]?headed(?:ness)?|wooz(?:y|iness))\b"
                rf"|\b(?:feel(?:s|ing)?|felt|go(?:es|ing)?|went|gone|turn(?:s|ed|ing)?)\s+{_EN_DEGREE}faint\b", re.I),
     "presyncope"),
    # food stuck on the way down ("food gets stuck" found Food allergy; "when I swallow" alone finds Dysphagia, so is
    # no finding of its own)
    (re.compile(r"\b(?:(?:my\s+)?food|bread|meat|tablets?|pills?)\s+(?:(?:gets?|getting|got|keeps?\s+getting|feels?|felt|"
                r"is|seems?\s+to\s+get)\s+)?(?:stuck|sticks|sticking)\b(?:\s+(?:in|at)\s+(?:my|his|her|the)\s+"
                r"(?:throat|gullet|chest|oesophagus|esophagus))?"
                r"|\b(?:something|things|it)\s+(?:(?:gets?|getting|got|keeps?\s+getting|feels?|felt|is|seems?)\s+)?"
                r"(?:stuck|sticking)\s+(?:in|at)\s+(?:my|his|her|the)\s+(?:throat|gullet|oesophagus|esophagus)\b", re.I),
     "difficulty swallowing"),
    # British "spots" on the face or back are acne (Purpura); coloured spots stay spots
    (re.compile(r"(?<!red )(?<!purple )(?<!dark )(?<!brown )(?<!white )(?<!blue )(?<!black )(?<!pink )(?<!yellow )"
                r"\bspots(?=\s+(?:on|all\s+over|around|across)\s+(?:my|his|her|their|your|the)\s+(?:face|chin|forehead|"
                r"cheeks?|nose|back|shoulders|chest)\b)", re.I), "acne"),
    # a blocked nose (Fullness of paranasal tissue), a scratchy throat (Pharyngeal edema)
    (re.compile(rf"\b(?:blocked|bunged|stuffed)(?:[\s-]+up)?\s+nose\b|\b(?:{_EN_OWNER}\s+)?nose\s+(?:is|feels|gets|"
                r"keeps\s+getting|'s)\s+(?:(?:all|really|so|completely|totally|a\s+bit)\s+)*(?:blocked|bunged|stuffed)"
                r"(?:\s+up)?\b", re.I), "stuffy nose"),
    # not breathing through the nose is its blockage, not Dyspnea (which raised a notice to act on now)
    (re.compile(rf"\b(?:can't|can’t|cant|cannot|can\s+not|couldn't|could\s+not)\s+breathe\s+(?:properly\s+|well\s+)?"
                rf"(?:through|out\s+of)\s+(?:(?:{_EN_OWNER}|the)\s+|one\s+side\s+of\s+(?:{_EN_OWNER}|the)\s+)?"
                r"(?:nose|nostrils?|it)\b", re.I), "stuffy nose"),
    (re.compile(rf"\b(?:scratchy|tickly|raw)\s+throat\b|\b(?:{_EN_OWNER}\s+)?throat\s+(?:is|feels|'s)\s+"
                r"(?:(?:all|really|so|very|a\s+bit)\s+)*(?:scratchy|tickly|raw)\b", re.I), "sore throat"),
    # hearing voices (Hoarse voice)
    (re.compile(r"\b(?:hear|hears|hearing|heard)\s+voices\b", re.I), "auditory hallucinations"),
    # wanting to die, ending it all; "suicidal" only where it ends a piece ("Suicidal actions" is the vocabulary's)
    (re.compile(r"(?:\b(?:thinking|thought|thoughts|think|thinks)\s+(?:of|about)\s+)?"
                r"(?:\b(?:want(?:s|ed)?|wanting|wanna)\s+to\s+die\b"
                r"|\b(?:(?:want(?:s|ed)?|wanting|wanna|going)\s+to\s+)?(?:kill(?:ing)?|hang(?:ing)?)\s+"
                r"(?:myself|himself|herself)\b"
                r"|\b(?:end(?:ing)?|take|taking)\s+(?:it\s+all|my\s+(?:own\s+)?life)\b|\bsuicidal$"
                r"|\bthoughts\s+of\s+suicide\b)", re.I), "suicidal thoughts"),
    # about to faint (Syncope)
    (re.compile(r"\b(?:(?:feel|feels|felt|feeling)\s+)?(?:(?:like|as\s+if|as\s+though)\s+)?(?:(?:i'm|i\s+am|i\s+was|i'll|"
                r"i\s+will|he's|she's|he\s+was|she\s+was)\s+)?(?:going\s+to|gonna|about\s+to)\s+(?:faint|pass\s+out|"
                r"black\s+out|keel\s+over)\b", re.I), "presyncope"),
    # a face dropped on one side (Hemifacial hypoplasia)
    (re.compile(r"\b(?:(?:my|his|her|their)\s+)?face\s+(?:has\s+|is\s+|'s\s+|went\s+|has\s+gone\s+)?(?:dropped|drooped|"
                r"drooping|droopy|fallen|sagging|slipped)\b(?:\s+on\s+one\s+side)?|\bone\s+side\s+of\s+(?:my|his|her|"
                r"their|the)\s+face\s+(?:has\s+|is\s+|'s\s+)?(?:dropped|drooped|drooping|droopy|fallen|sagging|"
                r"gone\s+droopy)\b", re.I), "facial droop"),
    # blue lips (Blue irides)
    (re.compile(r"\b(?:(?:my|his|her|their)\s+)?lips\s+(?:are|have\s+gone|went|turned|turn|go|goes|look|looked)\s+"
                r"(?:(?:a\s+bit|slightly|really|very)\s+)?blue\b|\bblue\s+lips\b", re.I), "lip cyanosis"),
    # a child who is floppy (Neck muscle weakness); before a noun it is the vocabulary's ("Floppy infant")
    (re.compile(r"\bfloppy$", re.I), "low muscle tone"),
    # run down ("run" found Difficulty running, "the runs" Diarrhea)
    (re.compile(r"\b(?:run|worn)[\s-]+down\b", re.I), "tired"),
    # off one's food ("gone off my food" found Food intolerance)
    (re.compile(r"\b(?:(?:gone|went|go|goes|going)\s+)?off\s+(?:my|his|her|their|your|our)\s+(?:food|feeds?|milk|"
                r"bottle)\b", re.I), "poor appetite"),
    # a bad back, or one done in (Kyphosis)
    (re.compile(rf"\bbad\s+back\b|\b(?:done|did|do|put|putting|puts)\s+{_EN_OWNER}\s+back\s+(?:in|out)\b", re.I),
     "back pain"),
    # a baby pulling at an ear (Hair-pulling)
    (re.compile(r"\b(?:pull(?:s|ing|ed)?|tug(?:s|ging|ged)?)\s+(?:at|on)\s+(?:my|his|her|their|your|the)\s+ears?\b",
                re.I), "ear pain"),
    # feeling down or low (no term: low is Hypotonia's, down Down syndrome's); "down below" is a place
    (re.compile(r"\b(?:feel(?:s|ing)?|felt)\s+(?:(?:really|so|very|a\s+bit|quite|pretty|a\s+little)\s+)*(?:down|low)\b"
                r"(?!\s+(?:on|in|at|with|below|there|here)\b)", re.I), "feel depressed"),
    (re.compile(r"\b(?:can't|can’t|cannot|can\s+not|couldn't|could\s+not)\s+concentrate\b", re.I), "poor concentration"),
    # a pounding head (Macrocephaly)
    (re.compile(rf"\b(?:{_EN_OWNER}\s+)?head\s+(?:is|'s|keeps|feels\s+like\s+it's)\s+(?:(?:really|so|just)\s+)?"
                r"(?:pounding|throbbing|banging|thumping|splitting|killing\s+me)\b", re.I), "headache"),
    # blood in one's poo ("blood in my poo" found nothing, Hematuria offered); "Blood in stool" is the vocabulary's
    (re.compile(rf"\bblood\s+(?:in|on)\s+(?:{_EN_OWNER}|the|a)\s+(?:poops?|stools?|faeces|feces|motions?|"
                r"bowel\s+movements?)\b", re.I), "blood in stool"),
    # passing blood, unless the urine is said (Loss of consciousness's "passing out" took it)
    (re.compile(r"\bpass(?:ing|ed|es)?\s+blood\b(?!\s+(?:in|with|when)\s+(?:my|his|her|the)?\s*(?:urine|wee|pee)\b)",
                re.I), "rectal bleeding"),
    # needing the loo is needing to pee, and burning or stinging when one goes to it or pees is burning when one
    # pees (Venom allergy)
    (re.compile(r"\b(?:need(?:s|ing)?|want(?:s|ing)?)\s+(?:to\s+go\s+to\s+)?the\s+(?:loo|toilet|bathroom)\b", re.I),
     "need to pee"),
    (re.compile(r"\b(?P<how>burns?|burning|stings?|stinging)\s+when\s+(?:i|he|she|they|you)\s+(?:go|goes)\s+to\s+the\s+"
                r"(?:loo|toilet|bathroom)\b", re.I), r"\g<how> when I pee"),
    (re.compile(r"\b(?:painful|hurts|sore|burns|stings)\s+to\s+(?:pee|urinate)\b", re.I), "painful urination"),
    # scratching one's bottom (Rocker bottom foot)
    (re.compile(rf"\bscratch(?:es|ing|ed)?\s+(?:at\s+)?{_EN_OWNER}\s+(?:bottom|bum|backside)\b", re.I), "itchy bottom"),
    (re.compile(r"\b(?:stings?|stinging)(?=\s+when\s+(?:i|he|she|they|you)\s+(?:pee|urinate)\b)"
                r"|(?<=\bpee\s)(?:stings|is\s+stinging)\b", re.I), "burns"),
    # period cramps (Muscle spasm); "Menstrual cramps" is the vocabulary's own
    (re.compile(r"\bperiod\s+(?:cramps?|pains?)\b|\bcramps?\s+(?:with|during|before|on)\s+(?:my|her)\s+periods?\b",
                re.I), "painful periods"),
    # seeing flashing lights: Photopsia has no everyday wording
    (re.compile(r"\b(?:see|seeing|sees|saw)\s+(?:flashing\s+lights|flashes(?:\s+of\s+light)?)\b", re.I), "photopsia"),
    # wind (Wind-swept deformity of the knees)
    (re.compile(r"\b(?:fart(?:s|ing|ed)?|(?:passing|pass|passes|trapped|got|have|has|much|lots\s+of|a\s+lot\s+of)\s+"
                r"wind)\b(?!\s*(?:-|swept|pipe))|^wind$", re.I), "flatulence"),
    (re.compile(r"\bburning\s+up\b", re.I), "fever"),
    # a British "water infection" (Excessive salivation)
    (re.compile(r"\bwater\s+infections?\b", re.I), "urinary tract infection"),
    # not hearing properly (Auditory hallucination's "hearing sounds" took it)
    (re.compile(r"\b(?:can't|can’t|cannot|can\s+not|couldn't|could\s+not)\s+hear\s+(?:properly|well|very\s+well|much|"
                r"anything|clearly|as\s+well|people|what\s+people)\b", re.I), "hearing loss"),
    # pain at sex: Dyspareunia has no everyday wording (Addictive sex behavior)
    (re.compile(r"\b(?:hurts?|painful|pain|sore|burns?|stings?)\s+(?:when|during|after|while)\s+(?:(?:we|i|she|he)\s+"
                r"(?:have|has|had|are\s+having|am\s+having)\s+|having\s+)?(?:sex|intercourse)\b"
                r"|\b(?:painful|pain\s+(?:during|with|at))\s+(?:sex|intercourse)\b"
                r"|\b(?:sex|intercourse)\s+pain\b|\b(?:sex|intercourse)\s+(?:is|has\s+been|'s|was)\s+"
                r"(?:(?:really|very|so|a\s+bit)\s+)*(?:painful|sore)\b", re.I), "dyspareunia"),
    # not remembering things (Semantic dementia's wording "trouble remembering words" took it)
    (re.compile(r"\b(?:can't|can’t|cannot|can\s+not|couldn't|could\s+not)\s+remember\s+(?:things|anything|stuff|much|"
                r"a\s+thing|names)\b|\b(?:(?:my|his|her|their|your|our)\s+)?memory\s+(?:is|has\s+been|'s|seems)\s+"
                r"(?:(?:really|very|so|getting|a\s+bit)\s+)*(?:bad|poor|terrible|awful|rubbish|shocking|worse|going)\b",
                re.I), "poor memory"),
    # others better off without one is a thought of suicide (nothing was read in "everyone would be better off if I
    # was dead"), and pills taken on purpose an attempt (Pill-rolling tremor)
    (re.compile(r"\b(?:(?:everyone|everybody|they|people|my\s+(?:family|kids|children|wife|husband))\s+(?:would|'d)\s+"
                r"be\s+better\s+off\s+(?:if\s+i\s+(?:was|were)\s+(?:dead|gone|not\s+(?:here|around))|without\s+me)"
                r"|\bbetter\s+off\s+dead)\b", re.I), "suicidal thoughts"),
    (re.compile(r"\b(?:took|taken|take|swallowed)\s+(?:an\s+overdose|(?:too\s+many|a\s+lot\s+of|loads\s+of|a\s+load\s+of|"
                r"all\s+(?:my|the|of\s+my))\s+(?:pills|tablets|paracetamol|painkillers))\s+(?:on\s+purpose|deliberately)\b",
                re.I), "suicide attempt"),
    # bleeding from one's bottom (nothing was read)
    (re.compile(rf"\bbleed(?:s|ing)?\s+from\s+(?:{_EN_OWNER}|the)\s+(?:bottom|bum|back\s+passage|behind|rectum|anus)\b",
                re.I), "rectal bleeding"),
    # blacking out (Eschar); "about to black out" is Presyncope's, above
    (re.compile(r"\b(?:black(?:ed|s)?|blacking)\s+out\b|\bblackouts?\b", re.I), "loss of consciousness"),
    # gasping or fighting for air (Night gasping)
    (re.compile(r"\b(?:gasp(?:s|ing|ed)?|fight(?:s|ing)?|struggl(?:e|es|ing|ed))\s+for\s+(?:air|breath)\b", re.I),
     "shortness of breath"),
    # a tongue swelling alone is the tongue's edema (Glossitis: its wording "Smooth swollen tongue"); with the lips,
    # angioedema (a clause idiom, below)
    (re.compile(rf"\b(?:{_EN_OWNER}\s+)?tongue\s+(?:is|has|'s|feels|looks|keeps)?\s*(?:gone\s+|got\s+|been\s+|all\s+)?"
                r"(?:swollen|swelling(?:\s+up)?|swelled(?:\s+up)?|puffy|puffed\s+up)\b|(?<!smooth )\bswollen\s+tongue\b", re.I),
     "tongue edema"),
)


def _as_everyday(text: str) -> str:
    """``text`` with the everyday words and idioms of :data:`_EN_EVERYDAY` said as the vocabulary says them."""
    for pattern, said in _EN_EVERYDAY:
        text = pattern.sub(said, text)
    return text


def in_vocabulary_words(text: str) -> str:
    """An English piece as it is searched once its everyday words are said as the vocabulary says them (a weight
    lost, being out of breath, wetting oneself, :data:`_EN_EVERYDAY`): what the small-talk gate reads ("I feel down"
    is near the small talk "I feel fine"; "feel depressed" is near Depression)."""
    for pattern, said in _EN_NEGATION_SAYS:
        text = pattern.sub(said, text)
    return _as_everyday(_as_wetting(_as_breathless(_as_weight(text))))


# idioms read in the whole clause, since a piece loses its lead-in and its time ("I've been sick three times" is
# searched from "sick"): British "been sick twice", "being sick" is vomiting ("sick" alone finds Nausea; "I've been
# sick for a week" is ill, and stays so); getting up at night to pee, or peeing at night, is Nocturia (alone,
# "up at night to pee" found Maintenance insomnia, and "pee a lot" keeps no "at night"); a British "fit" one has is a
# seizure ("I had a fit" is searched from "fit", and decided nothing); leaking when one laughs or coughs is
# wetting oneself ("leaking" alone found Capillary leak; the circumstance is a clause of its own, so these idioms are
# looked for from the clause on, up to the complaint's end)
_EN_TIMES = r"(?:once|twice|again|everywhere|up|all\s+over|(?:\w+\s+)?\w+\s+times)"
_EN_CLAUSE_IDIOMS = (
    (re.compile(r"\bbeing\s+sick\b(?!\s+(?:of|notes?|leave|days?|pay)\b)"
                rf"|\b(?:been|was|were|is|are|am|get|gets|got|getting)\s+sick(?=\s+{_EN_TIMES}\b)", re.I), "vomiting"),
    (re.compile(r"\bleak(?:s|ing|ed)?\b(?:\s+(?:a\s+(?:bit|little)|urine|wee|pee))?\s+(?:when|whenever|if|every\s+time)\s+"
                r"(?:i|he|she|they|you|we)\s+(?:laugh|cough|sneeze|jump|run|exercise|lift|strain|stand)", re.I),
     "loss of bladder control"),
    (re.compile(r"\b(?:had|has|have|having|got|gets|get)\s+(?:a\s+|another\s+|some\s+|these\s+|those\s+)?fits?\b"
                r"(?!\s+(?:of|for|in|and\s+well)\b)", re.I), "seizure"),
    (re.compile(r"(?:\b(?:(?:have|has|had|need|needs)\s+to\s+)?(?:get|gets|getting|got|wake|wakes|waking|woke|woken)\s+)?"
                r"\bup\b(?:\s+(?!and\b|but\b)[\w-]+){0,3}?\s+(?:at|in\s+the|a|every|each|during\s+the)\s+night\s+to\s+"
                r"(?:pee|wee|urinate|go\s+(?:to\s+the\s+)?(?:toilet|loo|bathroom)|use\s+the\s+(?:toilet|loo|bathroom))\b"
                r"|\b(?:pee|wee|urinate|peeing|weeing|urinating)\s+(?:(?:a\s+lot|lots|more|often|loads|all\s+the\s+time)\s+)?"
                r"(?:at|in\s+the|during\s+the|every|each)\s+night\b", re.I), "nocturia"),
    # lips and tongue (or face and tongue) swelling together is angioedema (Glossitis; the pieces are cut at "and")
    (re.compile(rf"\b(?:{_EN_OWNER}\s+)?(?:(?:lips|face|mouth)\s+and\s+tongue|tongue\s+and\s+(?:lips|face|mouth))\s+"
                r"(?:(?:are|have|'ve|both|all|gone|got|become|been|went|keep|kept)\s+)*(?:swollen|swelling(?:\s+up)?|"
                r"swelled(?:\s+up)?|puffy|puffed\s+up)\b|\bswollen\s+(?:lips\s+and\s+tongue|tongue\s+and\s+lips)\b", re.I),
     "angioedema"),
)


#: idioms whose own words hold a negation and that state a finding, not deny one: not wanting to live is suicidal
#: ideation ("I don't want to live anymore" was read as a denial of "want to live anymore" and decided nothing)
_EN_NEGATION_SAYS = (
    (re.compile(r"\b(?:don't|do\s+not|dont|doesn't|does\s+not|didn't|no\s+longer|not)\s+(?:really\s+)?(?:want|wanna|wish)\s+"
                r"to\s+(?:live|be\s+alive|be\s+here|go\s+on|wake\s+up|carry\s+on)\b"
                r"|\b(?:can't|cannot|can\s+not)\s+(?:go\s+on|carry\s+on)\s+(?:living|like\s+this)\b", re.I), "suicidal thoughts"),
)


def _said_by_negation(text: str, a: int, b: int, c: int, d: int) -> tuple[str, int] | None:
    """What an idiom of :data:`_EN_NEGATION_SAYS` in the clause ``text[a:b]`` states, and where it starts, when it
    reaches into the piece ``text[c:d]``; None otherwise."""
    for pattern, said in _EN_NEGATION_SAYS:
        m = pattern.search(text, a, b)
        if m is not None and c < m.end() and m.start() < d:
            return said, m.start()
    return None


def _clause_idiom(text: str, a: int, c: int, d: int) -> str | None:
    """The piece ``text[c:d]`` of the clause that starts at ``a`` with the part an idiom of :data:`_EN_CLAUSE_IDIOMS`
    from the clause on covers said as the vocabulary says it; None when no idiom covers any of it."""
    for pattern, said in _EN_CLAUSE_IDIOMS:
        m = pattern.search(text, a)
        if m is not None and m.start() < d and c < m.end():
            x, y = max(c, m.start()), min(d, m.end())
            return " ".join(f"{text[c:x]} {said} {text[y:d]}".split())
    return None


#: "sick" in words that state no illness: a sick note, off sick, sick of something ("sick and tired" is cut at its
#: "and" before this is read: :func:`_sick_idioms` drops the "sick" before "and tired")
_EN_SICK_IDIOM = re.compile(
    r"\bsick[\s-]+(?:notes?|leave|days?|pay|certificates?|lists?|bays?)\b|\b(?:(?:call(?:s|ed|ing)?|phon(?:e|es|ed|ing))"
    r"\s+in|off)\s+sick\b|\bsick\s+(?:to\s+death\s+)?of\b|\bworried\s+sick\b", re.I)
#: what is left of a piece once such words are taken out that asks for nothing to be searched
_EN_ERRAND_WORDS = frozenset({"a", "an", "the", "for", "from", "to", "my", "me", "i", "need", "needs", "want", "wants",
                              "get", "got", "have", "had", "some", "work", "school", "college", "job", "off", "on",
                              "this", "that", "today", "tomorrow", "week", "please", "doctor", "doctor's", "can", "could",
                              "give", "write", "sign", "been", "be", "is", "am", "was", "of", "it", "again", "you", "us"})


#: "cold" as a noun: the illness ("I have a cold", "I think I've caught a bad cold", "off work with a cold") or the
#: weather a finding comes in ("my fingers go white in the cold"); neither is the sensation of coldness, which the
#: adjective says ("I feel cold", "my hands are cold", "a cold sweat"; alone, "I have a cold" decided Coldness)
_EN_COLD_NOUN = re.compile(
    r"(?:\b(?:caught|catch(?:es|ing)?|got|getting|coming\s+down\s+with|fighting(?:\s+off)?|with)\s+)?"
    r"(?:\b(?:a|my|this|that|his|her|their|our|your)|\b(?:in|into|out\s+in|from|during|by)\s+the)\s+"
    r"(?P<noun>(?:(?:bad|heavy|nasty|stinking|streaming|horrible|terrible|awful|head|chest|summer|winter|common|little|"
    r"slight|proper)\s+)?cold)\b(?!\s*-)(?=\s*(?:$|[,.;:!?)]|(?:and|or|but|with|for|since|that|which|so|last|from|on|"
    r"at|now|again|too|as|all|over|after|before|coming|going|i|it|he|she|they|we)\b))", re.I)
#: words of a piece that, with the cold taken out, say nothing more ("I think I've caught …", "probably just …")
_EN_COLD_LEFT = _EN_ERRAND_WORDS | {"think", "i've", "i'm", "ive", "im", "caught", "catch", "catching", "coming", "down",
                                    "with", "probably", "just", "maybe", "only", "still", "bit", "really", "off", "has",
                                    "he's", "she's", "he", "she", "they", "we"}


#: a craving said as dying or killing for something: no illness ("dying for a coffee" decided Coffee ground vomitus)
_EN_CRAVING = re.compile(
    r"\b(?:(?:dying|gagging|gasping|desperate|could\s+(?:murder|kill\s+for|do\s+with))\s+(?:for\s+)?)"
    r"(?:a|an|some|my)\s+(?:(?:cup|mug|glass|pint|bottle)\s+of\s+|nice\s+|good\s+|cold\s+|hot\s+|proper\s+|strong\s+|"
    r"quick\s+|long\s+|decent\s+)*(?:coffee|tea|cuppa|brew|drink|beer|pint|wine|smoke|fag|cigarette|ciggie|nap|sleep|"
    r"holiday|break|lie-in|kip|bath|shower|snack|burger|pizza|chocolate|biscuit|sandwich|meal|water)\b", re.I)
_EN_CRAVING_LEFT = _EN_COLD_LEFT | {"honestly", "so", "totally", "absolutely", "literally", "right", "now", "seriously"}
#: a thing swallowed is an ingestion, which no phenotype names ("swallowed a button battery" decided Aphagia): the
#: piece from the verb on is not searched (a poisoning is an urgent sign's own words, read in the whole text)
_EN_SWALLOWED = re.compile(
    r"\b(?:(?:has|have|had|just|accidentally|may\s+have|might\s+have|think\s+(?:he|she|i|they)(?:'s|\s+has|\s+have)?)\s+)*"
    r"swallowed\s+(?:a|an|some|the|one|two|three|\d+|his|her|my|their|a\s+few|part\s+of\s+(?:a|an|the))\b.*$", re.I)
_EN_SWALLOWED_LEFT = _EN_CRAVING_LEFT | set(EN_PERSON_NOUNS) | {"our", "his", "her", "their", "yo", "year", "years",
                                                                 "month", "months", "old", "think", "may", "might"}


def _without(span: Span, pattern: re.Pattern[str], filler: frozenset[str]) -> Span | None:
    """``span`` searched without the words ``pattern`` finds in its text; None when nothing but ``filler`` is left."""
    left = " ".join(pattern.sub(" ", span.text).split())
    return replace(span, text=left) if any(w not in filler for w in re.findall(r"[a-z']+", left.lower())) else None


def _sick_idioms(text: str, spans: list[Span]) -> list[Span]:
    """The pieces searched without words in which "sick" states no illness ("I need a sick note for work" is no
    nausea; "off sick with the flu" keeps the flu) and without "cold" as a noun (:data:`_EN_COLD_NOUN`, read in the
    whole text: a piece's lead-in, "I have a", is stripped before), without a craving (:data:`_EN_CRAVING`, "dying
    for a coffee") and without a thing swallowed (:data:`_EN_SWALLOWED`); a piece left with nothing but words of an errand is dropped, and "sick" alone before "and tired"
    too."""
    nouns = [m.span("noun") for m in _EN_COLD_NOUN.finditer(text)]
    out = []
    for span in spans:
        if span.text.strip().lower() == "sick" and re.match(r"\s+and\s+tired\b", text[span.end:], re.I):
            continue
        kept: Span | None = span
        if _EN_SICK_IDIOM.search(span.text) is not None:
            kept = _without(span, _EN_SICK_IDIOM, _EN_ERRAND_WORDS)
        held = [text[a:b] for a, b in nouns if span.start <= a and b <= span.end]
        if kept is not None and _EN_CRAVING.search(kept.text) is not None:
            kept = _without(kept, _EN_CRAVING, _EN_CRAVING_LEFT)
        if kept is not None and _EN_SWALLOWED.search(kept.text) is not None:
            kept = _without(kept, _EN_SWALLOWED, _EN_SWALLOWED_LEFT)
        if kept is not None and held:
            kept = _without(kept, re.compile(rf"(?:{_EN_COLD_NOUN.pattern})|{'|'.join(map(re.escape, held))}", re.I),
                            _EN_COLD_LEFT)
        if kept is not None:
            out.append(kept)
    return out


def _sensation_only(span: Span) -> bool:
    """One word that says how something feels but not what or where ("burning", "hurts", "itchy")."""
    words = span.text.lower().split()
    return len(words) == 1 and (words[0] in _EN_PREDICATES or words[0] in _EN_ADJECTIVES)


# how long, at a piece's end ("嗓子疼了两天", "肚子疼三天了", "咳了一个多礼拜"): it says when, not what, as an English
# clause's trailing time does; a number needs its unit here, since 多 alone is "much" (尿多, 痰多)
_ZH_TRAILING_TIME = re.compile(
    r"(?:了)?(?:好)?(?:[\d０-９]+|[一二两三四五六七八九十几半]+)(?:多)?(?:个)?(?:多)?"
    r"(?:天|日|晚|夜|周|星期|礼拜|月|年|小时|钟头|分钟)(?:了|多|左右|啦)*$")


def _zh_piece(clause: str, a: int, pos: int, end: int) -> Span:
    """The piece of ``clause`` between lexicon words, without its lead-in and a trailing time ("了两天"); negated by a
    cue before or inside that lead-in ("孩子没有…")."""
    m = _ZH_TRAILING_TIME.search(clause, pos, end)
    if m is not None and m.start() - pos >= 2:
        end = m.start()
    start = _strip_lead_zh(clause, pos, end)
    return Span(a + start, a + end, clause[start:end], None, _negated_zh(clause, pos) or _negated_zh(clause, start))


# what parts two items of a list: "or" / "nor" (with the article of the item after it), or a comma
_EN_OR_GAP = re.compile(r"^\s*,?\s*(?:or|nor)\s+(?:(?:a|an|any|the|some)\s+)?$", re.I)
_EN_COMMA_GAP = re.compile(r"^\s*,\s*(?:(?:a|an|any|the|some)\s+)?$", re.I)


def _deny_listed(text: str, spans: list[Span], start: int) -> bool:
    """Whether the English piece at ``start``, after "or", continues a list whose first item is denied ("no fever or
    cough", "no fever, cough or vomiting"); the list's items between are then denied too (``spans`` is changed)."""
    pieces = [i for i, s in enumerate(spans) if not s.reading]
    if not pieces or not _EN_OR_GAP.match(text[spans[pieces[-1]].end:start]):
        return False
    k = len(pieces) - 1
    while not spans[pieces[k]].negated and k > 0 and _EN_COMMA_GAP.match(
            text[spans[pieces[k - 1]].end:spans[pieces[k]].start]):
        k -= 1
    if not spans[pieces[k]].negated:
        return False
    for i in pieces[k + 1:]:
        spans[i] = replace(spans[i], negated=True)
    return True


def find_spans(text: str, lexicon: object | None = None, language: str | None = None,
               min_chars: int = 2, part_pain: bool = False, ache_words: Collection[str] = (),
               part_within: Mapping[str, str] | None = None) -> list[Span]:
    """Mention spans of ``text``: lexicon words and the rest of each clause (Chinese), clauses (English).

    ``lexicon`` is anything with ``find(text) -> [(start, end, name)]`` (a
    :class:`~medrank.pipelines.symptom.lexicon.SurfaceLexicon`). Pieces shorter than ``min_chars``
    non-space characters (a stray 的 between two symptoms) are dropped; lexicon words are always kept. With
    ``part_pain``, an English piece of a body part and a verb of pain is searched as "<part> pain" ("my knee hurts"
    → "knee pain"), or as the one word of ``ache_words`` (lower case) that names the part's pain ("headache"), a part
    of ``part_within`` as the part that holds it ("my heel hurts" → "foot pain").
    """
    zh = is_chinese(text) if language is None else language == "zh"
    spans: list[Span] = []
    before = 0  # where the clause before ended
    for a, b in clauses(text, "zh" if zh else "en"):
        clause = text[a:b]
        if zh:
            first = len(spans)
            hits = lexicon.find(clause) if lexicon is not None else []  # type: ignore[attr-defined]
            pos = 0
            for s, e, name in hits:
                # a measure right after a lexicon word says how much or how long of it ("发烧38度5", "咳嗽三天")
                if s > pos and not (pos > 0 and is_measure_zh(clause[pos:s])) and not _only_lead_zh(clause[pos:s]):
                    spans.append(_zh_piece(clause, a, pos, s))
                spans.append(Span(a + s, a + e, clause[s:e], name, _negated_zh(clause, s)))
                pos = e
            if (pos < len(clause) and not (pos > 0 and is_measure_zh(clause[pos:]))
                    and not (hits and _only_lead_zh(clause[pos:]))):
                spans.append(_zh_piece(clause, a, pos, len(clause)))
            # "没有发烧、咳嗽", "无发热、咳嗽、咳痰", "没有发烧或者咳嗽": a denial holds over the items 、 or a conjunction of
            # a list adds to it (not over a comma, which opens a new statement, nor over a clause that affirms)
            if (first and spans[first - 1].negated and ZH_LIST_GAP.fullmatch(text[before:a])
                    and not ZH_AFFIRMS.match(clause) and not any(sp.negated for sp in spans[first:])):
                spans[first:] = [replace(sp, negated=True) for sp in spans[first:]]
            before = b
        else:
            # the time first: what is left decides the lead-in ("I feel sick all day": "feel sick", as "I feel sick")
            c, d = _strip_lead(text, *_strip_time(text, a, b))
            if d <= c:
                continue
            # "(I) woke up with a stiff neck": waking says when the finding after "with" was noticed, not what it is
            # (alone, "woke up" finds Terminal insomnia); "I keep waking up at night" is a finding and stays
            if _EN_WOKE.match(text[c:d]) and _EN_WITH.match(text, b):
                continue
            neg = _negated_en(text[a:b], c - a + 1) if c > a else False
            # the lead-in can hold the negation ("I have no fever"); a negation word inside the rest counts too
            inner = _clause_idiom(text, a, c, d) or text[c:d]
            if _EN_FEEL.match(inner):
                # "I feel really weak": the verb kept for the one word after it reads that word, not how much of it
                # ("feel really weak" found Retrognathia's "weak chin" above Asthenia)
                inner = EN_INTENSIFIER.sub("", inner)
            first = inner.split(maxsplit=1)[0].lower() if inner.split() else ""
            if first in _EN_NEG or _EN_NOTHING_DOES.match(inner):
                neg = True
            # a clause that says all is well with what it names denies it as a negation does ("my appetite is fine")
            neg = neg or _negated_en(text[a:b], c - a) or EN_ALL_WELL.search(text[a:b]) is not None
            # "no fever or cough", "I don't have a fever or a cough": a denial holds over what "or" adds to it, and
            # over the items a comma lists before that "or" ("no fever, cough or vomiting"); a clause with its own
            # subject says its own ("no fever or I'd have called")
            if not neg and _EN_SUBJECT.search(text[a:c]) is None:
                neg = _deny_listed(text, spans, c)
            # "I haven't been able to poop" says what the patient cannot do, as "I can't poop" does: no denial
            able = _EN_ABLE_TO.match(inner)
            if able is not None and neg and not EN_ALL_WELL.search(text[a:b]):
                inner, neg = f"can't {inner[able.end():]}", False
            stated = _said_by_negation(text, a, b, c, d)
            if stated is not None:
                # the piece holds the idiom's negation too: read alone (the small-talk gate reads it so), it says
                # what the idiom says
                (inner, at), neg = stated, False
                c = min(c, at)
            # "I can't smell or taste anything": what "or" adds to what the patient cannot do, they cannot do either
            # ("taste anything" alone found Phantageusia)
            last = next((sp for sp in reversed(spans) if not sp.reading), None)
            cant = _EN_CANT.match(last.text) if last is not None else None
            if (not neg and cant is not None and _EN_BARE_OR.match(text[last.end:c])
                    and _EN_SUBJECT.search(text[a:c]) is None and not _EN_CANT.match(inner)):
                inner = f"{cant.group(0)}{inner}"
            span = Span(c, d, inner, None, neg, often=d < b and _EN_OFTEN.search(text[d:b]) is not None)
            prev = spans[-1] if spans else None
            if _EN_SUB_START.match(inner) and prev is not None and _SUB_GAP.match(text[prev.end:c]):
                # the circumstance of the clause before it: read with that clause, which keeps its own span too
                # ("no pain when I swallow": the negation covers both) unless that clause is one word of sensation
                # ("burning when I pee": "burning" alone names Burning mouth); then the two are one piece
                joined = Span(prev.start, d, prev.text + text[prev.end:d], None, prev.negated, reading=True,
                              circumstance=inner)
                if not prev.reading and _sensation_only(prev):
                    spans[-1] = replace(joined, reading=False)
                else:
                    spans.append(joined)
                continue
            # a bare predicate ("... swollen and hurts") says what, the clause before it says where
            words = inner.lower().split()
            # an adjective with a time of day after it says how the part is then ("red and sticky in the morning")
            timed = _EN_TIME_OF_DAY.search(inner)
            adjective = words[:1] if timed is not None and len(inner[:timed.start()].split()) == 1 else words
            bare = bool(words) and ((words[0] in _EN_PREDICATES and len(words) <= 3)
                                    or (len(adjective) == 1 and adjective[0] in _EN_PART_ADJECTIVES))
            # ... unless the clause names its own subject ("... and I feel sick")
            bare = bare and _EN_SUBJECT.search(text[a:c]) is None
            if bare and prev is not None and not prev.negated:
                # read as the words the two are searched as, without what was left out between them ("threw up twice
                # this morning and feel queasy" read the time too, and found Bilateral tonic-clonic seizure on awakening)
                raw = text[a:d].strip()
                opens = raw.split()[0].lower() in _EN_PREDICATES
                own = raw if opens else inner  # its own verb too: "and is swollen"
                conj = _EN_CONJ_WORD.search(text, prev.end, c)
                spans.append(Span(prev.start, d, f"{prev.text} {conj.group(0)} {own}" if conj else f"{prev.text}, {own}",
                                  None, False, reading=True))
                # searched with the subject it shares ("my eyes are itchy and watery": "my eyes are watery", where
                # "watery" alone finds Excessive salivation); it still covers its own words
                # a verb of pain takes the part only when nothing stood before it ("... and hurts"; not "... and it
                # hurts to swallow", where "it" is no body part)
                shared = _with_shared_subject(prev.text, own, part_pain and opens)
                if shared is not None:
                    span = replace(span, text=shared)
            spans.append(span)
    if part_pain and not zh:
        spans = [replace(s, text=_as_pain(s.text, ache_words, part_within)) for s in spans]
    if not zh:
        spans = _sick_idioms(text, [replace(s, text=in_vocabulary_words(s.text)) for s in spans])
        spans = [s for s in spans if _EN_QUALIFIED.match(text, s.start) is None and _EN_RELIEF.match(text, s.start) is None]
    spans = as_temperature(spans, "zh" if zh else "en")
    # a lexicon word is kept whatever its length (吐 → 呕吐); only the pieces between words need min_chars
    return [s for s in spans if s.normalised is not None or (len(s.text.replace(" ", "")) >= min_chars
                                                             and not (zh and is_measure_zh(s.text)))]


def as_temperature(spans: list[Span], language: str) -> list[Span]:
    """Each piece that reads a temperature or a blood pressure searched as what the reading says (a fever, a low body
    temperature; high or low blood pressure, :mod:`medrank.blood_pressure`); a normal reading is no finding, and its
    piece no span. Lexicon words stay as they are."""
    out = []
    for span in spans:
        said = None if span.normalised is not None else reading_as(span.text, language)
        if said != "":
            out.append(span if said is None else replace(span, text=said))
    return out


def is_measure_zh(piece: str) -> bool:
    """Whether a Chinese piece is only a quantity: numbers, their units, how often and how long ("38度5", "两天")."""
    return _ZH_MEASURE.fullmatch(piece.replace(" ", "")) is not None

"""Which language a text is in, and the script character classes every tokenizer and guesser shares.

medrank serves English and Chinese. :func:`identify` decides ``en`` / ``zh`` / ``other`` for a
short text such as a patient complaint:

1. the script first: kana means Japanese and Hangul Korean (both ``other``; Japanese is not
   Chinese although it writes Han characters); Han characters that outweigh the Latin letters
   (one Han character counts as three letters) mean Chinese;
2. a text written in Latin letters only is read word by word: each of the languages in
   :data:`WORD_LANGUAGES` scores it by how frequent its words are in that language
   (``Σ log10 f_L(w)``, the wordfreq lists of Speer, 2022: large multi-source word counts shipped
   inside the wheel, no download at run time; a word a list lacks counts at :data:`UNSEEN_WORD`),
   with English weighted :data:`ENGLISH_PRIOR` times: medical English words are often French or
   Latin words too ("fatigue", "constipation", "nausea"), and a served text refused costs the user
   more than a foreign text searched. A character n-gram model reads a short text poorly ("seizures"
   as German, "eczema" as Polish, "swollen hands" as Dutch, "vertiges" as English); a word's
   frequency is what tells them apart. Abbreviations in capitals ("GERD", "TIA": tía in Spanish)
   are not words of a language and are left out. A text of one word that English speakers write
   (:data:`ENGLISH_WORD_ALONE`) reads as English whatever the other lists say: "malaise" is more
   common in French and "influenza" in Italian, but one word is too little to refuse a served text on;
3. any other text with letters (another script, or nothing but abbreviations) goes to a trained
   language identifier, py3langid (the ``langid.py`` model of Lui & Baldwin, 2012, shipped inside the
   wheel), restricted to :data:`CANDIDATE_LANGUAGES` so that a short English complaint is not read as
   Frisian or Afrikaans, English weighted :data:`ENGLISH_PRIOR` times too;
4. no letters at all (digits, emoji, punctuation) is ``other``.

``bench/language_identification.py`` measures both readers on English symptom wordings and complaints and on
complaints in six other languages. Among several words, a word that is common in two languages still counts as the
one where it is more common; callers that know the language pass it explicitly.
"""

from __future__ import annotations

import bisect
import functools
import math
import re
import threading
import unicodedata
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

#: Han ideographs: CJK Unified Ideographs, Extension A, the compatibility block and Extensions B-F
HAN_RANGES = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef"
#: one Han character
HAN = re.compile(f"[{HAN_RANGES}]")
#: a run of Han characters
HAN_RUN = re.compile(f"[{HAN_RANGES}]+")
#: hiragana, katakana and their phonetic extensions (Japanese)
KANA = re.compile(r"[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f]")
#: Hangul syllables and jamo (Korean)
HANGUL = re.compile(r"[\uac00-\ud7af\u1100-\u11ff\u3130-\u318f]")
#: one ASCII Latin letter
LATIN = re.compile(r"[A-Za-z]")

#: the languages the identifier chooses among (ISO 639-1): the served ones and the ones most often confused with them
CANDIDATE_LANGUAGES = ("en", "zh", "fr", "de", "es", "it", "pt", "nl", "ru", "ja", "ko", "ar", "pl", "tr", "sv", "uk",
                       "el", "he", "hi", "vi", "id")
#: English names of the candidate languages, for messages
LANGUAGE_NAMES = {"en": "English", "zh": "Chinese", "fr": "French", "de": "German", "es": "Spanish", "it": "Italian",
                  "pt": "Portuguese", "nl": "Dutch", "ru": "Russian", "ja": "Japanese", "ko": "Korean", "ar": "Arabic",
                  "pl": "Polish", "tr": "Turkish", "sv": "Swedish", "uk": "Ukrainian", "el": "Greek", "he": "Hebrew",
                  "hi": "Hindi", "vi": "Vietnamese", "id": "Indonesian", "none": "no language (no letters)"}
SERVED = ("en", "zh")
#: a casual intensifier ("really wheezy", "so tired", "a bit dizzy"): no part of a finding ("slightly",
#: "significantly" stay, DDXPlus asks with them)
EN_INTENSIFIER = re.compile(r"\b(?:really|very|so|quite|a\s+bit|a\s+little|pretty|extremely|super|totally)\s+(?=[a-z])",
                            re.IGNORECASE)
#: a participle of a movement with what it moves over or through ("breathless walking up the stairs", "my knee hurts
#: going down the stairs") says in what circumstances, like "when": one that opens its clause, or follows a word that
#: makes it what the patient cannot do ("difficulty walking up stairs"), or a bare gerund ("slow breathing") does not.
#: EN_MOVING_PARTICIPLE matches the empty string before such a participle; the symptom spans cut a clause there and
#: the inquiry's reader reads what comes before it without the circumstance
EN_MOVING = r"walking|climbing|running|jogging|standing|sitting|lying|bending|lifting|going|coming|turning|kneeling|carrying"
EN_MOVED_OVER = (r"up|down|upstairs|downstairs|stairs|steps|uphill|downhill|the|a|an|my|in|out|on|over|around|into|onto|"
                 r"off|back|forward|heavy|things|something|anything")
_EN_NOT_CIRCUMSTANCE = ("difficulty", "difficulties", "trouble", "problem", "problems", "hard", "unable", "inability",
                        "can't", "cannot", "couldn't", "avoid", "stop", "stops", "stopped", "keep", "keeps", "kept",
                        "start", "started", "of", "in", "on", "upon", "by", "for", "from", "to", "with", "without",
                        "while", "when", "after", "before", "and", "or", "but", "i", "am", "is", "are", "was", "were",
                        "been", "be", "im", "i'm")
EN_MOVING_PARTICIPLE = (r"(?<=\w )" + "".join(rf"(?<!\b{re.escape(w)} )" for w in _EN_NOT_CIRCUMSTANCE)
                        + rf"(?=(?:{EN_MOVING})\s+(?:{EN_MOVED_OVER})\b)")
#: English nouns of a person a complaint may be about ("my little girl has …"): the symptom spans and the
#: inquiry's findings both leave such a subject out of what they search
EN_PERSON_NOUNS = ("son", "daughter", "child", "children", "baby", "kid", "kids", "toddler", "infant", "girl", "boy",
                   "wife", "husband", "partner", "mother", "father", "mum", "mom", "dad", "sister", "brother",
                   "grandmother", "grandfather", "grandma", "grandpa", "granny", "grandson", "granddaughter",
                   "newborn", "teenager", "teen")
#: :data:`EN_PERSON_NOUNS` as a regular-expression alternation, with a child named by age ("my 2 year old", "my
#: two-year-old", "our 18 month old") and a parent's "little one" (not "my left one", a part)
EN_PERSON = "|".join(EN_PERSON_NOUNS) + (r"|(?:\d+|[a-z]+)[\s-]+(?:year|month|week|day)s?[\s-]+old(?:\s+(?:"
                                          + "|".join(EN_PERSON_NOUNS) + r"))?|(?<=little )ones?")
#: how many times more likely English is taken to be a priori than the identifier's uniform prior says (chosen on
#: short English symptom names and French / German complaints, `tests/test_text.py` holds examples of both)
ENGLISH_PRIOR = 10.0
#: the candidate languages written in Latin letters that the word reader scores (each has a wordfreq list)
WORD_LANGUAGES = ("en", "fr", "de", "es", "it", "pt", "nl", "pl", "sv", "tr", "id", "vi")
#: the frequency a word counts at in a language whose list lacks it (the lists hold words down to about 1e-8)
UNSEEN_WORD = 1e-8
#: a word English speakers write (Zipf frequency 2.5: about three in ten million words), read as English when it is all
#: a text says: one word shared with another language ("malaise", "influenza") is too little evidence to refuse it
ENGLISH_WORD_ALONE = 10 ** (2.5 - 9)
#: an abbreviation in capitals: no word of a language
_ABBREVIATION = re.compile(r"\b[A-Z][A-Z0-9-]{0,5}\b")


@dataclass(frozen=True)
class LanguageGuess:
    """What :func:`identify` found: ``language`` is ``en`` | ``zh`` | ``other``; ``code`` the ISO 639-1 code of the
    language it read (``none`` when the text has no letters); ``confidence`` the identifier's probability (1.0 when
    the script decided)."""

    language: str
    code: str
    confidence: float

    @property
    def name(self) -> str:
        return LANGUAGE_NAMES.get(self.code, self.code)

    @property
    def reads(self) -> str:
        """How the text reads, for a message: "reads as French", or "has no letters"."""
        return "has no letters" if self.code == "none" else f"reads as {self.name}"


_IDENTIFIER: Any = None
_WORD_LISTS_LOADED = False
_LOCK = threading.Lock()


def _identifier() -> Any:
    global _IDENTIFIER
    with _LOCK:
        if _IDENTIFIER is None:
            from py3langid.langid import MODEL_FILE, LanguageIdentifier

            ident = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
            ident.set_languages(list(CANDIDATE_LANGUAGES))
            _IDENTIFIER = ident
    return _IDENTIFIER


def _latin_words(text: str) -> list[str] | None:
    """The words of a text written in Latin letters only, abbreviations in capitals left out; ``None`` for a text
    with letters of another script."""
    if any(ch.isalpha() and not unicodedata.name(ch, "").startswith("LATIN") for ch in text):
        return None
    from wordfreq import tokenize

    return [w for w in tokenize(_ABBREVIATION.sub(" ", text), "en") if any(ch.isalpha() for ch in w)]


def _load_word_lists() -> None:
    """Load the word lists of :data:`WORD_LANGUAGES` once (about a second); later calls only read them."""
    global _WORD_LISTS_LOADED
    if _WORD_LISTS_LOADED:
        return
    from wordfreq import word_frequency

    with _LOCK:
        if not _WORD_LISTS_LOADED:
            for lang in WORD_LANGUAGES:
                word_frequency("a", lang)
            _WORD_LISTS_LOADED = True


def word_scores(words: list[str]) -> dict[str, float]:
    """``log10`` of each :data:`WORD_LANGUAGES` language's likelihood of ``words`` as a bag of independent words
    (their frequencies in its wordfreq list, :data:`UNSEEN_WORD` where it lacks one), English's times
    :data:`ENGLISH_PRIOR`."""
    from wordfreq import word_frequency

    scores = {lang: sum(math.log10(word_frequency(w, lang, minimum=UNSEEN_WORD)) for w in words) for lang in WORD_LANGUAGES}
    scores["en"] += math.log10(ENGLISH_PRIOR)
    return scores


def identify(text: str, words: bool = True) -> LanguageGuess:
    """The language of ``text`` (see the module docstring for how it is decided); ``words=False`` reads a Latin
    text with the character n-gram identifier too, as before the word reader (for comparison)."""
    if KANA.search(text):
        return LanguageGuess("other", "ja", 1.0)
    if HANGUL.search(text):
        return LanguageGuess("other", "ko", 1.0)
    if mostly_han(text):
        return LanguageGuess("zh", "zh", 1.0)
    if not any(ch.isalpha() for ch in text):
        return LanguageGuess("other", "none", 1.0)
    latin = _latin_words(text) if words else None
    if latin:
        _load_word_lists()
        scores = word_scores(latin)
        top = max(scores.values())
        weights = {lang: 10.0 ** (v - top) for lang, v in scores.items()}
        code = max(weights, key=weights.__getitem__)
        # the word's English frequency is its English score less the prior
        if len(latin) == 1 and scores["en"] - math.log10(ENGLISH_PRIOR) >= math.log10(ENGLISH_WORD_ALONE):
            code = "en"  # the word reader's own share is still the confidence it reports
        prob = weights[code] / sum(weights.values())
    else:
        probs = dict(_identifier().rank(text))
        probs["en"] = probs.get("en", 0.0) * ENGLISH_PRIOR
        code = max(probs, key=probs.__getitem__)
        prob = probs[code] / sum(probs.values())
    return LanguageGuess(code if code in SERVED else "other", code, round(float(prob), 4))


def language_refusal(text: str, expected: str | None = None) -> str | None:
    """Why ``text`` should not be searched when nobody said its language: it reads as neither served language, or
    as the other one than ``expected`` (``en`` / ``zh``: what a model or run reads; ``None``: either). ``None`` when
    it may be searched. A nearest neighbour in the wrong language would be a confident wrong answer."""
    found = identify(text)
    if found.language == "other":
        return f"the text {found.reads}; medrank reads English and Chinese only"
    if expected is not None and found.language != expected:
        return f"the text reads as {found.name} and this model reads {LANGUAGE_NAMES[expected]}"
    return None


def detect_language(text: str) -> str:
    """``en`` | ``zh`` | ``other`` (:func:`identify`'s decision)."""
    return identify(text).language


# two or more Latin-1 Supplement characters in a row: what UTF-8 bytes decoded as Latin-1 look like ("Ã©", "ð§¿¹")
_LATIN1_RUN = re.compile(r"[\u0080-\u00ff]{2,}")
# a Latin-1 Supplement letter touching a Han character: no Chinese name is written that way
_LATIN1_BY_HAN = re.compile(f"[\u00c0-\u00ff][{HAN_RANGES}]|[{HAN_RANGES}][\u00c0-\u00ff]")


def repair_mojibake(text: str) -> str | None:
    """``text`` with every run of UTF-8 bytes that was decoded as Latin-1 decoded back ("其他ð§¿¹囊肿" → "其他𧿹囊肿",
    "cafÃ©" → "café"), or None when no run decodes (nothing to repair)."""
    def decode(match: re.Match[str]) -> str:
        try:
            return match.group().encode("latin-1").decode("utf-8")
        except UnicodeDecodeError:
            return match.group()

    fixed = _LATIN1_RUN.sub(decode, text)
    return fixed if fixed != text else None


def looks_like_mojibake(text: str) -> bool:
    """True when ``text`` still holds a run :func:`repair_mojibake` can decode, or Latin-1 letters glued to Han."""
    return repair_mojibake(text) is not None or _LATIN1_BY_HAN.search(text) is not None


def mostly_han(text: str) -> bool:
    """True when Han characters carry ``text``: at least one, and one Han character counts as three Latin letters."""
    han = len(HAN.findall(text))
    return bool(han) and 3 * han >= len(LATIN.findall(text))


def has_han(text: str) -> bool:
    """True when ``text`` holds at least one Han character."""
    return HAN.search(text) is not None


#: a word of blood or bleeding, everyday or learned, a bruise too ("nosebleed", "bloody", "Haemoptysis",
#: "Gingivorrhagia", "bruising"): a patient who bleeds says so, and a nearest wording that names blood is no reason to
#: read that they do
BLOOD_WORD = re.compile(r"blood|bleed|bled|bruis|\bha?em(?:o|at|or)|rrhag|\bpurpur|\becchymo|\bpetechi", re.I)
#: English words of breath or breathing ("out of breath", "can't breathe", "breathless"): a finding read from such words
#: is one whose wordings name breath too ("out of breath" is near "Passing out", a loss of consciousness, by its "out")
BREATH_WORD = re.compile(r"\bbreath", re.I)
#: an English clause that says what it names is as it should be: "my appetite is fine", "I can breathe fine",
#: "breathing normally" (it denies the finding, as a negation does)
#: what parts two items of a Chinese list (an enumeration comma, "and", "or"): a denial before the first item holds
#: over the others ("没有发烧、咳嗽", "没有发烧或者咳嗽"), where a comma opens a new statement ("没有发烧，咳嗽")
ZH_LIST_GAP = re.compile(r"\s*(?:、|和|或者|或|及|以及|与|跟)\s*")
#: what opens a Chinese clause or item that affirms what follows: "有", "但", or how often or how much ("不发烧、偶尔咳嗽":
#: a cough, now and then)
ZH_AFFIRMS = re.compile(r"(?:有|但|却|还|就|只|倒|可|而|又|偶|经常|常|时|总|一直|老|稍|略|轻|很|比较|特别|非常|挺|仍|依然|持续|反复)")
EN_ALL_WELL = re.compile(r"\b(?:is|are|was|were|feels?|seems?|looks?|been|'s|'re|can\s+\w+)\s+(?:(?:totally|completely|"
                         r"perfectly|pretty|quite|absolutely|just)\s+)?(?:fine|normal|ok|okay|alright|all\s+right)\b"
                         r"|\b\w+ing\s+(?:fine|normally)\b", re.IGNORECASE)
#: a word of a vocabulary's wording that says a thing is less than it should be, or missing ("Poor appetite", "Loss of
#: appetite", "Decreased visual acuity", "Hypotension", "Painless"): a term each of whose wordings has one names a
#: lessening that the patient's words must say too (:data:`LESS_SAID`)
LESS_WORD = re.compile(r"\b(?:no|not|non|none|without|lack\w*|loss|lost|poor|poorly|decreas\w*|reduc\w*|diminish\w*"
                       r"|absen\w*|low|fewer|less|hypo\w+|deficien\w*|insufficien\w*|impair\w*)\b|\w+less\b", re.I)
_MORE = r"more|increas\w*|excess\w*|hyper\w+|extra"
#: a word that says there is more of something ("more saliva than usual", "excessive tears", "increased sweating")
MORE_SAID = re.compile(rf"\b(?:{_MORE})\b", re.I)
#: a word of a vocabulary's wording that says a thing is more than it should be: :data:`MORE_SAID` and the learned and
#: graded forms ("Polyuria", "High blood pressure", "Elevated …", "Frequent urination"): a term with one, and no
#: :data:`LESS_WORD`, names an increase
MORE_WORD = re.compile(rf"\b(?:{_MORE}|poly\w+|elevat\w*|high(?:er)?|frequent\w*)\b", re.I)
#: a patient's words that say an amount is smaller than it was ("less urine", "I pee less", "fewer bowel movements",
#: "my blood pressure is lower"): the opposite of a term of an increase
FEWER_SAID = re.compile(r"\b(?:less|fewer|lower|decreas\w*|reduc\w*|diminish\w*|hardly|barely|smaller)\b", re.I)
#: a patient's words that say a thing is less, lost or not as it was: :data:`LESS_WORD` and the everyday forms ("I'm
#: losing weight", "getting thinner", "gone off my food", "my eyesight is getting worse", "I can't see well", a size
#: that is less: "small", "underdeveloped"); "I'm hungry all the time" says none, and is no poor appetite
LESS_SAID = re.compile(LESS_WORD.pattern + r"|\b(?:los[ei]\w*|thin\w*|off|gone|wors\w*|drop\w*|fall\w*|fell|down|little"
                       r"|hardly|barely|cannot|unable|never|shed\w*|slim\w*|skinn\w*|small\w*|tiny|underdevelop\w*|weak\w*"
                       r"|slow\w*|lower)\b"
                       r"|n't\b|\bcan\s+not\b", re.I)

# a body part and a verb of what it does ("my nose runs", "my eyes are watering", "the baby's nose is running"): a
# vocabulary says the part with the verb's adjective ("Runny nose", "Watery eyes", "Itchy skin"), which the verb does not
# reach ("my nose is running" was nearest nose bleeding, "my eyes water" Hydrocephalus)
_EN_PART_DOES = re.compile(
    r"^(?:(?:(?:both|all)\s+(?:of\s+)?)?(?:my|your|his|her|our|their|the)\s+)?(?:[a-z]+'s\s+)?"
    r"(?P<part>(?!(?:it|this|that|everything|something|anything|all|what|which|there|here|he|she|they|i|we)\b)[a-z]+)"
    r"\s+(?:(?:is|are|was|were|has\s+been|have\s+been|been|keeps?|kept|won't\s+stop|will\s+not\s+stop)\s+)?"
    r"(?P<verb>[a-z]+)$", re.I)


def as_part_adjective(text: str, adjectives: Collection[str]) -> str | None:
    """``text`` as a vocabulary says a part that does what it says: "<adjective> <part>", the adjective one of
    ``adjectives`` (lower case) made from the verb with -y ("my nose runs" / "my nose is running" → "runny nose", "my
    eyes water" → "watery eyes", "my skin itches" → "itchy skin"); None when the text is no subject and verb, or the
    verb has no such adjective among them ("my heart pounds"). Whether the subject is a body part is the caller's to
    check ("the tap runs")."""
    from lemminflect import getLemma

    m = _EN_PART_DOES.match(" ".join(text.split()))
    if m is None:
        return None
    verb = m.group("verb").lower()
    for lemma in dict.fromkeys((*getLemma(verb, upos="VERB"), verb)):
        for adjective in (f"{lemma}y", f"{lemma}{lemma[-1]}y", f"{lemma[:-1]}y" if lemma.endswith("e") else ""):
            if adjective and adjective != verb and adjective in adjectives:
                return f"{adjective} {m.group('part')}"
    return None


#: a thing said to be as an adjective says, with a linking verb: "my periods are heavy", "my urine is dark", "the glands
#: in my neck are swollen" is no such (a place after the thing)
_EN_THING_IS = re.compile(
    r"^(?:(?:(?:both|all)\s+(?:of\s+)?)?(?:my|your|his|her|our|their|the)\s+)?(?:[a-z]+'s\s+)?"
    r"(?P<thing>(?!(?:it|this|that|everything|something|anything|all|what|which|there|here|he|she|they|i|we|you)\b)"
    r"[a-z]+)\s+(?:is|are|was|were|has\s+been|have\s+been|been|feels?|felt|looks?|looked|seems?|seemed|gets?|got"
    r"|has\s+gone|have\s+gone|went|gone|turned)\s+(?P<adjective>(?![a-z]+ing\b)[a-z]+)$", re.I)


def as_attributive(text: str) -> str | None:
    """``text`` that says a thing is as an adjective says, with the adjective before the thing, as a vocabulary writes
    it ("my periods are heavy" → "heavy periods", "my urine has gone dark" → "dark urine"): an encoder puts the two
    words nearer a wording of them side by side ("very abundant or very long menstruation periods") than the clause;
    None for any other text (a verb in -ing, "my nose is running", is :func:`as_part_adjective`'s; a pronoun is no
    thing)."""
    m = _EN_THING_IS.match(" ".join(text.split()))
    if m is None:
        return None
    return f"{m.group('adjective').lower()} {m.group('thing').lower()}"


_IRREGULAR_PLURALS = {"teeth": "tooth", "feet": "foot"}


def singular(word: str) -> str:
    """An English word less a plural "s" ("knees" → "knee", "tonsils" → "tonsil"; "-ies" → "-y": "extremities" →
    "extremity"), or the singular of an irregular plural ("teeth" → "tooth"); a double s ("glass"), a Latin or Greek
    "-is" / "-us" ("pelvis", "penis", "sinus") and words of three letters or fewer ("gas") stay."""
    if word in _IRREGULAR_PLURALS:
        return _IRREGULAR_PLURALS[word]
    if len(word) <= 3 or not word.endswith("s") or word.endswith(("ss", "is", "us")):
        return word
    return word[:-3] + "y" if word.endswith("ies") and len(word) > 4 else word[:-1]


@functools.lru_cache(maxsize=4096)
def base_form(word: str) -> str:
    """The word an irregular English inflection is of, as lemminflect's lexicon reads it ("threw", "thrown": throw;
    "bled": bleed; "ate": eat; "woke": wake; "feet": foot): a Snowball stem keeps such a form apart from its word, so
    "I threw up blood" and "have you thrown up blood" share no stem. The word itself (lower case) when it is a word of
    its own too ("left", "felt", "bit", "swollen", "broken": a noun or adjective), when its readings name different
    words ("leaves": leave or leaf), or when the inflection is regular ("coughed": the stem already meets cough)."""
    from lemminflect import getLemma

    word = word.lower()
    lemmas: set[str] = set()
    for pos in ("VERB", "NOUN", "ADJ"):
        read = getLemma(word, upos=pos, lemmatize_oov=False)
        if word in read:
            return word
        lemmas.update(read)
    if len(lemmas) != 1:
        return word
    (lemma,) = lemmas
    # a regular inflection ("coughed", "vomits") already stems as its word does: it stays as written
    stem = _stemming()[0].stemWord
    return word if stem(word) == stem(lemma) else lemma


@functools.lru_cache(maxsize=1)
def _stemming() -> tuple[Any, frozenset[str]]:
    """The Snowball stemmer and the words that name nothing in a wording ("in", "of", "a": bm25s' English stop words,
    "you" and "your" too), made once."""
    import Stemmer
    from bm25s.stopwords import STOPWORDS_EN

    return Stemmer.Stemmer("english"), frozenset(STOPWORDS_EN) | {"you", "your"}


def stop_words() -> frozenset[str]:
    """The English words that name nothing in a wording (bm25s' English stop words, "you", "your")."""
    return _stemming()[1]


def content_stems(words: Sequence[str]) -> list[str]:
    """Snowball stems of English ``words`` (lower case), those that name nothing aside (bm25s' English stop words,
    "you", "your"); an irregular inflection is stemmed as the word it is of (:func:`base_form`: "threw", "thrown",
    "Throwing": throw)."""
    stemmer, stopwords = _stemming()
    return stemmer.stemWords([b for w in words if w not in stopwords and (b := base_form(w)) not in stopwords])


def beginnings(words: Sequence[str]) -> set[str]:
    """The first four letters of each word of three letters or more (the whole of a shorter one), an irregular
    inflection taken as the word it is of (:func:`base_form`: "threw" as throw): two words that begin alike are read
    as one word's forms ("cough", "coughing"; "threw", "thrown")."""
    return {base_form(w)[:4] for w in words if len(w) >= 3}


def plain_adjectives(text: str, vocabulary: Sequence[str]) -> str:
    """``text`` with each English adjective in -y (five letters or more) that ``vocabulary`` (lower-case words,
    sorted) lacks written as the vocabulary's word it comes from, its -ing form where there is one ("wheezy": wheezing,
    "sweaty": sweating, "shivery": shivers): an encoder reads "wheezy" as near no wheeze, and a Snowball stem of it
    meets none. The word it comes from begins with the adjective less its "y"; a word the vocabulary does not hold so
    stays as written."""
    def plain(m: re.Match[str]) -> str:
        word = m.group(0)
        lower = word.lower()
        at = bisect.bisect_left(vocabulary, lower)
        if at < len(vocabulary) and vocabulary[at] == lower:
            return word
        # the words the adjective comes from follow its stem in the sorted vocabulary (the adjective itself is not there)
        stem = lower[:-1]
        found = []
        for i in range(bisect.bisect_left(vocabulary, stem), len(vocabulary)):
            if not vocabulary[i].startswith(stem):
                break
            found.append(vocabulary[i])
        # the state the adjective says, its -ing form where the vocabulary has it ("wheezing", not "wheeze")
        return min(found, key=lambda w: (not w.endswith("ing"), len(w), w)) if found else word

    return re.sub(r"\b[a-z]{4,}y\b", plain, text, flags=re.IGNORECASE)

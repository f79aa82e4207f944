"""A concept's definition as one more index entry (``use_definitions``)."""

from __future__ import annotations

from medrank.records import Concept
from medrank.retrieval.concept import ConceptRetriever, concept_entries, definition_entry


def test_definition_entry_is_the_first_sentence():
    def entry(text: object) -> str | None:
        return definition_entry(Concept("x", "X", meta={"definition": text}))

    assert entry("Discharge of mucus from the nose. It may be clear.") == "Discharge of mucus from the nose"
    assert entry("Abnormality of the 2nd toe (e.g. a big one). More.") == "Abnormality of the 2nd toe (e.g. a big one)"
    assert entry("An increased concentration of copper in the urine.") == "An increased concentration of copper in the urine"
    assert entry("") is None and entry(None) is None and entry(3) is None
    assert definition_entry(Concept("x", "X")) is None


def test_concept_entries_add_definitions_only_when_asked():
    concepts = [Concept("HP:1", "Rhinorrhea", ("Runny nose",), meta={"definition": "Discharge of mucus from the nose."}),
                Concept("HP:2", "Fever"),
                Concept("HP:3", "Pain", meta={"definition": "Pain."})]  # a definition equal to a name adds nothing
    assert concept_entries(concepts)[1] == ["Rhinorrhea", "Runny nose", "Fever", "Pain"]
    ids, texts, items = concept_entries(concepts, use_definitions=True)
    assert texts == ["Rhinorrhea", "Runny nose", "Discharge of mucus from the nose", "Fever", "Pain"]
    assert ids[2] == "HP:1#def" and items[2] == "HP:1"


def test_a_definition_reaches_its_concept_by_words_it_alone_holds(tmp_path):
    concepts = [Concept("HP:1", "Rhinorrhea", meta={"definition": "Discharge of mucus from the nose."}),
                Concept("HP:2", "Pyrexia", meta={"definition": "Elevated body temperature."})]
    plain = ConceptRetriever.build(concepts, method="bm25", language="en")
    assert plain.search("mucus from my nose", k=1)[0].ids == ()
    with_defs = ConceptRetriever.build(concepts, method="bm25", language="en", use_definitions=True)
    assert with_defs.search("mucus from my nose", k=1)[0].ids == ("HP:1",)
    with_defs.save(tmp_path / "r")
    assert ConceptRetriever.load(tmp_path / "r").search("body temperature", k=1)[0].ids == ("HP:2",)

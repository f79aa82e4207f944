"""KAR's keyword attention inside ``forward_states`` on a tiny random model: which positions [PS] and [PT]
read, what they do not see, and how the three special outputs are pooled (no downloads, CPU, < 1 s)."""

from __future__ import annotations

import pytest
import torch

import medrank.pipelines.procedures.kar as kar_module
from medrank.models import BiEncoder
from medrank.pipelines.procedures.kar import CLS, N_SPECIAL, PS, PT, KeywordAttentiveRanker
from medrank.pipelines.procedures.mtcg import bottom_states
from tests.test_procedures import SITES, TYPES, tiny_chinese_encoder

MENTION = "右肾切除术"  # tokens: [CLS] 右 肾(site) 切 除 术(type: 切除术) [SEP]
CANDIDATE = "肾切除术"  # tokens: [CLS] 肾(site) 切 除 术(type) [SEP]


@pytest.fixture
def kar() -> KeywordAttentiveRanker:
    """One joint block over a 2-block frozen bottom, the paper's head (no extra interaction features)."""
    bottom = BiEncoder(tiny_chinese_encoder(), train_layers=1, cache=False)
    torch.manual_seed(1)
    model = KeywordAttentiveRanker(bottom, SITES, TYPES, hidden=8, dropout=0.0, interaction="none").eval()
    with torch.no_grad():  # non-zero learned offsets, so the three special rows do not start equal
        model.special.normal_()
        model.segment.normal_()
    return model


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(mask, output) of every call of the last block's [CLS]/[PS]/[PT] rows."""
    calls: list[tuple[torch.Tensor, torch.Tensor]] = []
    real = kar_module.special_rows_block

    def spy(block, hidden, mask, rows=N_SPECIAL):
        out = real(block, hidden, mask, rows)
        calls.append((mask.detach().clone(), out.detach().clone()))
        return out

    monkeypatch.setattr(kar_module, "special_rows_block", spy)
    return calls


def _states(kar: KeywordAttentiveRanker):
    mh, mm = bottom_states(kar.bottom, [MENTION], "query")
    ch, cm = bottom_states(kar.bottom, [CANDIDATE], "passage")
    assert mh.shape[1] == 7 and ch.shape[1] == 6  # [CLS] + characters + [SEP]
    return mh, mm, ch, cm


def _run(kar, mh, mm, ch, cm) -> torch.Tensor:
    with torch.no_grad():
        return kar.forward_states([MENTION], [CANDIDATE], mh, mm, ch, cm)


def test_ps_and_pt_attend_exactly_to_their_keyword_tokens(kar, recorded) -> None:
    _run(kar, *_states(kar))
    mask = recorded[-1][0][0, 0]
    # joint positions: 0-2 specials | mention 3..9 = [CLS] 右 肾 切 除 术 [SEP] | candidate 10..15 = [CLS] 肾 切 除 术 [SEP]
    assert torch.nonzero(mask[PS]).flatten().tolist() == [PS, 5, 11]  # itself + 肾 of both texts
    assert torch.nonzero(mask[PT]).flatten().tolist() == [PT, 6, 7, 8, 12, 13, 14]  # itself + 切除术 of both
    assert torch.nonzero(mask[CLS]).flatten().tolist() == list(range(16))
    # the ablation without keyword attention: [PS] and [PT] read every position like [CLS]
    kar.keyword_attention = False
    _run(kar, *_states(kar))
    plain = recorded[-1][0][0, 0]
    assert all(torch.nonzero(plain[r]).flatten().tolist() == list(range(16)) for r in (CLS, PS, PT))


def test_ps_output_ignores_non_keyword_tokens(kar, recorded) -> None:
    mh, mm, ch, cm = _states(kar)
    base_logit = _run(kar, mh, mm, ch, cm)
    base = recorded[-1][1][0]

    def special_rows_after(delta: dict[int, float]) -> torch.Tensor:
        h = mh.clone()
        for pos, d in delta.items():
            h[0, pos] += d
        logit = _run(kar, h, mm, ch, cm)
        return recorded[-1][1][0], logit

    # the mention's own [CLS] (position 0: neither a keyword nor part of the specials' starting mean)
    out, logit = special_rows_after({0: 5.0})
    assert torch.allclose(out[PS], base[PS], atol=1e-5) and torch.allclose(out[PT], base[PT], atol=1e-5)
    assert not torch.allclose(out[CLS], base[CLS], atol=1e-3)  # [CLS] sees every token
    assert not torch.allclose(logit, base_logit, atol=1e-5)
    # the site token 肾 up and the plain token 右 down by the same amount (the token mean is unchanged):
    # [PS] sees it, [PT] does not
    out, _ = special_rows_after({2: 5.0, 1: -5.0})
    assert not torch.allclose(out[PS], base[PS], atol=1e-3) and torch.allclose(out[PT], base[PT], atol=1e-5)
    # two type tokens 切 up / 除 down: [PT] sees them, [PS] does not
    out, _ = special_rows_after({3: 5.0, 4: -5.0})
    assert torch.allclose(out[PS], base[PS], atol=1e-5) and not torch.allclose(out[PT], base[PT], atol=1e-3)


def test_keyword_attention_changes_the_logit(kar) -> None:
    states = _states(kar)
    with_keywords = _run(kar, *states)
    kar.keyword_attention = False
    without = _run(kar, *states)
    assert with_keywords.shape == without.shape == (1,)
    assert abs(float(with_keywords[0]) - float(without[0])) > 1e-4


def test_pooled_state_is_the_mean_of_cls_ps_pt(kar, recorded) -> None:
    seen: list[torch.Tensor] = []
    kar.ffn.register_forward_hook(lambda module, args, out: seen.append(args[0].detach().clone()))
    logit = _run(kar, *_states(kar))
    rows = recorded[-1][1]  # (1, 3, d)
    assert not torch.allclose(rows[0, CLS], rows[0, PS], atol=1e-3)  # the mean is not any single row
    torch.testing.assert_close(seen[-1], rows.mean(dim=1), atol=1e-6, rtol=0)
    with torch.no_grad():
        torch.testing.assert_close(logit, kar.ffn(rows.mean(dim=1))[:, 0], atol=1e-6, rtol=0)

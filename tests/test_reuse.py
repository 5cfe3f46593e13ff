"""bench/reuse.py counts what the llama.cpp backend evaluates without decoding: the count must be
the real backend's, or a prompt layout measured with it would be measured wrong."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import reuse  # noqa: E402

from simulation.llm.llamacpp.prefix_cache import PrefixCache, TokenCounts  # noqa: E402
from simulation.llm.types import LLMRequest  # noqa: E402


def _persona(a: int) -> dict[str, str]:
    return {"role": "system", "content": f"You are person {a}, a baker who likes long walks and talks. " * 6}


def _calls() -> list[reuse.Call]:
    """Three people over three ticks: a scored question, then a line whose context grows by one
    message a tick (a live context), and a one-off question that shares only the persona."""
    calls = []
    for tick in range(3):
        for a in range(3):
            seen = [{"role": "user", "content": f"At {8 + t}:00 person {a} saw a neighbour {t}."} for t in range(tick + 1)]
            calls.append(reuse.Call(tick, "aim", [_persona(a), *seen, {"role": "user", "content": "1 or 2?"}],
                                    scored=True, generated=0))
            calls.append(reuse.Call(tick, "utterance", [_persona(a), *seen, {"role": "user", "content": "Say hi."}],
                                    scored=False, generated=0))
            calls.append(reuse.Call(tick, "plan", [_persona(a), {"role": "user", "content": f"Plan hour {tick}."}],
                                    scored=False, generated=0))
    return calls


def _simulated(chat, calls, n_seq=8) -> TokenCounts:
    counts = TokenCounts()
    prefix = PrefixCache(reuse.TokenSequences(n_seq, 1 << 20, reuse.kv_bytes_per_token(chat)), 1 << 30, 1 << 29)
    reuse.count(calls, chat, prefix, counts)  # type: ignore[arg-type]
    return counts


def test_a_live_context_is_counted_as_evaluated_once():
    """The stand-in alone (the bundled model's tokenizer, loaded vocabulary-only): a person whose
    calls grow by one message evaluates their persona once and each message once, plus each
    question's last message."""
    from simulation.llm.llamacpp.backend import _vocab_chat, bundled_model_path

    chat = _vocab_chat(bundled_model_path())
    calls = [c for c in _calls() if c.purpose == "utterance"]
    counts = _simulated(chat, calls)
    assert counts.requests == 9
    by_person: dict[str, list[list[dict[str, str]]]] = {}
    for c in calls:
        by_person.setdefault(c.messages[0]["content"], []).append(c.messages)
    expected = 0
    for prompts in by_person.values():
        last = prompts[-1]
        tokens, bounds = chat.pieces(last)
        expected += bounds[-1]  # every piece but the question, once
        expected += sum(len(chat.pieces(p)[0]) - chat.pieces(p)[1][-1] for p in prompts)  # each question's tail
    assert counts.evaluated == expected
    assert counts.reused == counts.prompt - expected > 0


def test_a_message_grown_at_its_end_is_evaluated_up_to_its_last_break_once():
    """A person's working memory is one message that grows a batch at a time, each batch ending in
    a ``PIECE_BREAK`` (``cognition.prompts.messages``): each batch is evaluated once, the break
    never reaches the tokens, and a prompt without breaks tokenizes as before."""
    from simulation.llm.llamacpp.backend import _vocab_chat, bundled_model_path
    from simulation.llm.types import PIECE_BREAK

    chat = _vocab_chat(bundled_model_path())
    calls = []
    for tick in range(4):
        for a in range(2):
            seen = "".join(f"- At {8 + t}:00 person {a} saw a neighbour {t}.\n{PIECE_BREAK}" for t in range(tick + 1))
            situation = {"role": "user", "content": f"{seen}</memories>\nIt is {8 + tick}:30."}
            calls.append(reuse.Call(tick, "utterance", [_persona(a), situation, {"role": "user", "content": "Say hi."}],
                                    scored=False, generated=0))
    counts = _simulated(chat, calls)
    expected = 0
    for c in calls:
        tokens, bounds = chat.pieces(c.messages)
        assert len(bounds) == 3 + c.tick  # persona, each batch, situation
        assert PIECE_BREAK.encode() not in chat._llm.detokenize(tokens, special=True)
        expected += len(tokens) - (bounds[-3] if c.tick else bounds[0])  # the newest batch, situation, question
    expected += sum(chat.pieces(c.messages)[1][0] for c in calls if c.tick == 0)  # each persona once
    assert counts.evaluated == expected
    assert counts.reused == counts.prompt - expected > 0
    one = _simulated(chat, calls, n_seq=1)  # every call restores its person's saved working memory
    assert (one.prompt, one.evaluated) == (counts.prompt, counts.evaluated)
    assert chat.cuts_clean, "a BPE vocabulary reads a cut line start as it would whole"
    chat.cuts_clean = False  # a SentencePiece one: breaks are taken out, never cut
    try:
        tokens, bounds = chat.pieces(calls[-1].messages)
        assert len(bounds) == 2 and tokens == chat.tokenize(chat.render(calls[-1].messages, True)
                                                            .replace(PIECE_BREAK, ""))
    finally:
        chat.cuts_clean = True


@pytest.mark.slow
def test_the_count_is_the_real_backends():
    """The same calls sent to the real bundled model in the same batches: prompt, reused and
    per-question counts equal the stand-in's."""
    from simulation.llm.llamacpp import LlamaCppBackend

    calls = _calls()
    backend = LlamaCppBackend(threads=1)
    try:
        backend.prefix.clear()
        backend.tokens = TokenCounts()
        for batch in reuse._batches(calls):
            backend.generate([LLMRequest(messages=c.messages, options=["1", "2"] if c.scored else None,
                                         max_tokens=4, seed=1, purpose=c.purpose) for c in batch])
        real = backend.tokens
        simulated = _simulated(backend.chat, calls, n_seq=backend.seqs.n_seq)
    finally:
        backend.close()
    assert (simulated.requests, simulated.prompt, simulated.reused) == (real.requests, real.prompt, real.reused)
    assert simulated.by_purpose == real.by_purpose


def test_evaluated_tokens_are_split_by_what_their_piece_holds():
    """The pieces table adds up to the evaluated count, and names each piece by its message: a
    person's persona once, each memory batch once, the situation and the question every call."""
    from simulation.llm.llamacpp.backend import _vocab_chat, bundled_model_path
    from simulation.llm.types import PIECE_BREAK

    chat = _vocab_chat(bundled_model_path())
    persona = _persona(0)
    calls = []
    for tick in range(2):
        batches = [{"role": "user", "content": f"<memories>\nSaw neighbour {t}.\n</memories>"} for t in range(tick + 1)]
        situation = {"role": "user", "content": f"<situation>\nIt is {8 + tick}:00.\n</situation>"}
        calls.append(reuse.Call(tick, "aim", [persona, *batches, situation, {"role": "user", "content": "1 or 2?"}],
                                scored=False, generated=0))
    counts = TokenCounts()
    pieces: dict[str, int] = {}
    prefix = PrefixCache(reuse.TokenSequences(8, 1 << 20, reuse.kv_bytes_per_token(chat)), 1 << 30, 1 << 29)
    reuse.count(calls, chat, prefix, counts, pieces=pieces)  # type: ignore[arg-type]
    assert sum(pieces.values()) == counts.evaluated
    assert set(pieces) == {"persona", "memories", "situation", "question"}
    tokens, bounds = chat.pieces(calls[-1].messages)
    assert pieces["persona"] == bounds[0]  # evaluated once, at the first call
    assert pieces["memories"] == bounds[2] - bounds[0]  # two batches, each once
    assert reuse.piece_kinds(calls[1].messages) == ["persona", "memories", "memories", "situation", "question"]
    # Today's layout: the batches open the situation message, each ending in a piece break.
    grown = {"role": "user", "content": f"<memories>\nSaw 0.\n{PIECE_BREAK}Saw 1.\n{PIECE_BREAK}</memories>\n"
                                        "<situation>\nIt is 9:00.\n</situation>"}
    messages = [persona, grown, {"role": "user", "content": "1 or 2?"}]
    assert reuse.piece_kinds(messages) == ["persona", "memories", "memories", "situation", "question"]
    assert len(reuse.piece_kinds(messages)) == len(chat.pieces(messages)[1]) + 1


def test_one_order_for_the_backend_and_the_count():
    """``batch_order``: sorted by the messages' JSON, each scored request alone first, then the rest
    ``n_seq`` at a time: what both the backend and ``reuse.count`` follow."""
    from simulation.llm.llamacpp.order import batch_order

    messages = [[{"role": "user", "content": c}] for c in "cadbe"]
    assert batch_order(messages, [False, True, False, False, False], 2) == [[1], [3, 0], [2, 4]]
    assert batch_order([], [], 8) == []


def test_why_a_call_was_evaluated_follows_each_persons_working_memory():
    """A person's first live question is 'first'; the next with the same first batch is 'appended'
    when something past the persona was reused, 'lost' when only the persona was; a working memory
    that opens with another batch 'restarted'; a prompt with none is 'no working memory'."""
    from simulation.llm.types import PIECE_BREAK

    def live(agent: str, batches: list[str]) -> reuse.Call:
        block = "<memories>\n" + "".join(b + PIECE_BREAK for b in batches) + "</memories>\n<situation>x</situation>"
        return reuse.Call(1, "aim", [_persona(0), {"role": "user", "content": block},
                                     {"role": "user", "content": "1 or 2?"}], scored=True, generated=0, agent=agent)

    seen: dict[str, str] = {}
    bounds = (50, 80, 120)
    assert reuse.why_evaluated(live("ann", ["- a"]), bounds, 0, seen) == "first"
    assert reuse.why_evaluated(live("bob", ["- b"]), bounds, 0, seen) == "first"
    assert reuse.why_evaluated(live("ann", ["- a", "- c"]), bounds, 80, seen) == "appended"
    assert reuse.why_evaluated(live("ann", ["- a", "- c"]), bounds, 50, seen) == "lost"
    assert reuse.why_evaluated(live("ann", ["- d"]), bounds, 50, seen) == "restarted"
    plain = reuse.Call(1, "recap", [_persona(0), {"role": "user", "content": "Sum up."}], scored=False, generated=0,
                       agent="ann")
    assert reuse.why_evaluated(plain, bounds, 0, seen) == "no working memory"
    assert seen == {"ann": "<memories>\n- d", "bob": "<memories>\n- b"}

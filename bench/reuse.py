"""What a run's prompts cost the llama.cpp backend, counted without a model: evaluated prompt tokens
per person per game hour, by question.

    .venv/bin/python bench/reuse.py RUN [RUN ...] [--model PATH|measure] [--sequences 8] [--cache-mb 4096]
    .venv/bin/python bench/reuse.py RUN --what-if split-turn   # the same calls in another layout (bench/layouts.py)

RUN is a run directory or its run.db. Why this exists: issue 34's lever is the prompt layout (what
is stable first, in messages of its own, so that a person's calls share a growing prefix), and
what a layout saves is decided by tokens, not by decoding. A day on the 1.5B takes hours of CPU to
decode; tokenizing its calls takes seconds. So every call of the run is replayed, in tick order,
through the backend's own ``PrefixCache`` (the same class: the same pieces, the same saved states
at the persona, the working memory and the last boundary, the same byte-bounded LRUs, the same
choice of sequence) over a stand-in for the llama.cpp sequences that keeps tokens and never
decodes. What it prints is what the backend would have counted (``TokenCounts``), if the requests
reached it in these batches; a prompt too long for the run's context window is refused unevaluated,
as the backend refuses it.

Where it is an approximation, and which way: a run does not record its batches, so consecutive
calls of one tick, purpose and attempt count as one batch (the client may have sent two purposes
together, which the backend would have ordered together). Calls answered from the replay cache
count as made: the figure is the layout's cost on a cold run. Only the calls of the run's own
model are counted (a model group's are another backend's). A scripted control run (``--backend control``) has the engine's prompts and
the script's answers, so its figures are the layout's, not a model's town. ``tests/test_reuse.py``
checks the count against the real backend's on the bundled model.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import sqlite_utils  # noqa: E402
import yaml  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from layouts import LAYOUTS, rewrite  # noqa: E402

from simulation.llm.llamacpp.backend import PREFIX_CACHE_MB, SEQUENCES, _vocab_chat, bundled_model_path  # noqa: E402
from simulation.llm.llamacpp.chat_format import ChatFormat  # noqa: E402
from simulation.llm.llamacpp.order import batch_order  # noqa: E402
from simulation.llm.types import PIECE_BREAK  # noqa: E402
from simulation.llm.llamacpp.prefix_cache import PrefixCache, TokenCounts, keeps_context  # noqa: E402

MEASURE_MODEL = ROOT / ".cache" / "measure-model" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"

__all__ = ["WHY", "Call", "TokenSequences", "calls_of", "count", "kv_bytes_per_token", "why_evaluated"]


class _Size:
    """A saved state's stand-in: only its size in bytes (what the shelves budget by)."""

    __slots__ = ("n",)

    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n


class TokenSequences:
    """The part of ``Sequences`` that ``PrefixCache`` uses, keeping tokens only: ``eval`` appends,
    ``save`` returns the state's size (``bytes_per_token`` a held token), ``restore`` puts the
    tokens back."""

    def __init__(self, n_seq: int, n_ctx: int, bytes_per_token: int):
        self.n_seq = n_seq
        self.n_ctx = n_ctx
        self.bytes_per_token = bytes_per_token
        self.held: list[list[int]] = [[] for _ in range(n_seq)]
        self.evaluated = 0

    def keep(self, seq: int, n: int) -> None:
        del self.held[seq][n:]

    def clear(self, seq: int | None = None) -> None:
        for k in range(self.n_seq) if seq is None else [seq]:
            self.held[k].clear()

    def eval(self, seq: int, tokens: list[int], logits: bool = False) -> int:
        self.held[seq].extend(tokens)
        self.evaluated += len(tokens)
        return 0

    def save(self, seq: int, limit: int) -> _Size | None:
        size = len(self.held[seq]) * self.bytes_per_token
        return None if size > limit else _Size(size)

    def restore(self, seq: int, data: Any, tokens: list[int]) -> bool:
        self.held[seq] = list(tokens)
        return True


def kv_bytes_per_token(chat: ChatFormat) -> int:
    """Bytes of KV cache a token takes in a f16 cache (what ``llama_state_seq_get_data`` copies),
    from the GGUF's metadata: layers x KV heads x head size x 2 (K and V) x 2 bytes."""
    meta = chat._llm.metadata
    arch = meta.get("general.architecture", "llama")
    layers = int(meta[f"{arch}.block_count"])
    heads = int(meta[f"{arch}.attention.head_count"])
    kv_heads = int(meta.get(f"{arch}.attention.head_count_kv", heads))
    head = int(meta.get(f"{arch}.attention.key_length", int(meta[f"{arch}.embedding_length"]) // heads))
    return layers * kv_heads * head * 2 * 2


@dataclass
class Call:
    """One request of a run, as the backend saw it."""

    tick: int
    purpose: str
    messages: list[dict[str, str]]
    scored: bool
    generated: int
    attempt: int = 0
    max_tokens: int = 0
    options: list[str] | None = None
    agent: str | None = None


WHY = {
    "appended": "the person's working memory was resident: their new memories, situation and question",
    "first": "the person's first question with a working memory in the run (a later day's first counts as "
             "started again)",
    "restarted": "their working memory started again (full, cognition/working.py): all of it evaluated anew",
    "lost": "their working memory was unchanged, yet neither resident nor saved (evicted)",
    "no working memory": "a question laid out without one (ratings, recaps, reflection): its own retrieval",
}
"""The classes of ``why_evaluated``, in the order they are printed."""


def _first_batch(messages: list[dict[str, str]]) -> str | None:
    """A live-context prompt's first working-memory batch (None: the prompt has no working memory)."""
    for m in messages:
        text = m.get("content") or ""
        if m["role"] == "user" and text.startswith("<memories>") and PIECE_BREAK in text:
            return text.split(PIECE_BREAK, 1)[0]
    return None


def why_evaluated(call: Call, bounds: tuple[int, ...], reused: int, seen: dict[str, str]) -> str:
    """Which ``WHY`` class a call falls in. ``seen`` (agent -> first batch of their last question)
    is updated: a working memory that starts with another batch than last time started again."""
    first = _first_batch(call.messages)
    if first is None or call.agent is None:
        return "no working memory"
    before = seen.get(call.agent)
    seen[call.agent] = first
    if before is None:
        return "first"
    if before != first:
        return "restarted"
    return "lost" if reused <= (bounds[0] if bounds else 0) else "appended"


@dataclass
class RunCost:
    run: str
    agents: int
    game_hours: float
    counts: TokenCounts
    probes: TokenCounts = field(default_factory=TokenCounts)
    pieces: dict[str, int] = field(default_factory=dict)
    """Evaluated tokens (probes apart) by what the piece they lie in holds (``piece_kinds``)."""
    by_question: dict[str, dict[str, int]] = field(default_factory=dict)
    """The same, per question (purpose -> piece kind -> evaluated tokens): the token diet's map."""
    why: dict[str, list[int]] = field(default_factory=dict)
    """Why a call's tokens were evaluated (``why_evaluated``) -> [calls, evaluated tokens]."""

    @property
    def per_person_hour(self) -> float:
        return self.counts.evaluated / self.agents / self.game_hours


def calls_of(db: sqlite_utils.Database, model: str | None = None) -> list[Call]:
    """The run's calls in the order they were made (of ``model`` only, when given)."""
    rows = db.query("select tick, purpose, messages, options, completion_tokens, attempt, max_tokens, model, "
                    "agent_id from llm_calls order by id")
    return [Call(r["tick"], r["purpose"], json.loads(r["messages"]), r["options"] is not None,
                 r["completion_tokens"] or 0, r["attempt"] or 0, r["max_tokens"] or 0,
                 options=json.loads(r["options"]) if r["options"] else None, agent=r["agent_id"])
            for r in rows if model is None or r["model"] == model]


def _batches(calls: list[Call]) -> list[list[Call]]:
    """Consecutive calls of one tick, purpose and attempt, in the order the run made them."""
    groups: list[list[Call]] = []
    for call in calls:
        if groups and (groups[-1][0].tick, groups[-1][0].purpose, groups[-1][0].attempt) == \
                (call.tick, call.purpose, call.attempt):
            groups[-1].append(call)
        else:
            groups.append([call])
    return groups


def _message_kind(m: dict[str, str], last: bool) -> str:
    if last:
        return "question"
    if m["role"] == "system":
        return "persona"
    if m["role"] == "user" and m["content"].startswith("<memories>"):
        return "memories"
    if m["role"] == "user" and m["content"].startswith("<situation>"):
        return "situation"
    return "other turns"


def piece_kinds(messages: list[dict[str, str]], clean: bool = True) -> list[str]:
    """What each piece of a prompt holds (``ChatFormat.pieces``'s order, the tail last): the
    persona (system), a working-memory batch, the situation, the question (the last message), or
    another turn (a few-shot answer, a retry). A message cut at piece breaks (a working memory
    opening the situation, ``prompts.messages``) is a memory batch up to its last break, then what
    follows it; runs made before 2026-11-30 have one message per batch. ``clean``: the vocabulary
    cuts at breaks (``ChatFormat.cuts_clean``)."""
    kinds: list[str] = []
    for k, m in enumerate(messages):
        parts = (m.get("content") or "").split(PIECE_BREAK) if clean else [m.get("content") or ""]
        parts = [p for i, p in enumerate(parts) if p or i in (0, len(parts) - 1)]  # empty parts are no pieces
        kinds += ["memories"] * (len(parts) - 1)
        rest = {**m, "content": parts[-1].lstrip("\n")}
        if len(parts) > 1 and rest["content"].startswith("</memories>"):
            rest["content"] = rest["content"].removeprefix("</memories>").lstrip("\n")
        kinds.append(_message_kind(rest, k == len(messages) - 1))
    return kinds


def _by_piece(messages: list[dict[str, str]], bounds: tuple[int, ...], n: int, reused: int,
              into: dict[str, int], clean: bool = True) -> None:
    """Add the evaluated tokens (those after ``reused``) to the kinds of the pieces they lie in."""
    kinds = piece_kinds(messages, clean)
    starts = (0, *bounds)
    ends = (*bounds, n)
    for k, (a, b) in enumerate(zip(starts, ends, strict=True)):
        fresh = b - max(a, reused)
        if fresh > 0:
            kind = kinds[k] if k < len(bounds) else "question"
            into[kind] = into.get(kind, 0) + fresh


def count(calls: list[Call], chat: ChatFormat, prefix: PrefixCache, counts: TokenCounts,
          probes: TokenCounts | None = None, pieces: dict[str, int] | None = None,
          by_question: dict[str, dict[str, int]] | None = None, why: dict[str, list[int]] | None = None) -> None:
    """Replay ``calls`` through ``prefix`` in the order ``LlamaCppBackend.generate`` takes a batch
    (``simulation.llm.llamacpp.order.batch_order``), each in the sequence ``PrefixCache.slots``
    gives it."""
    seqs = prefix.seqs
    seen: dict[str, str] = {}
    for batch in _batches(calls):
        order = batch_order([c.messages for c in batch], [c.scored for c in batch], seqs.n_seq)
        for group in ([batch[i] for i in g] for g in order):
            prompts = [chat.pieces(c.messages) for c in group]
            slots = prefix.slots(prompts)
            for call, (tokens, bounds), seq in zip(group, prompts, slots):
                after = max((len(chat.tokenize(o)) + 1 for o in call.options or ()), default=0) if call.scored \
                    else call.max_tokens
                if len(tokens) + after > seqs.n_ctx:  # refused before anything is evaluated, as the backend does
                    prefix.drop(seq)
                    continue
                reused = prefix.prime(seq, tokens, bounds, keeps_context(call.messages))
                seqs.eval(seq, tokens[bounds[-1] if bounds else 0:])
                target = probes if probes is not None and call.purpose.startswith("probe") else counts
                target.count(len(tokens), reused, call.purpose)
                target.generated += call.generated
                if target is counts and (pieces is not None or by_question is not None):
                    fresh: dict[str, int] = {}  # this call's evaluated tokens by piece, added to both tables
                    _by_piece(call.messages, bounds, len(tokens), reused, fresh, chat.cuts_clean)
                    for into in (pieces, None if by_question is None else by_question.setdefault(call.purpose, {})):
                        for kind, n in fresh.items() if into is not None else ():
                            into[kind] = into.get(kind, 0) + n
                if why is not None and target is counts:
                    row = why.setdefault(why_evaluated(call, bounds, reused, seen), [0, 0])
                    row[0] += 1
                    row[1] += len(tokens) - reused


def cost(path: Path, chat: ChatFormat, sequences: int, cache_mb: int, what_if: list[str] | None = None) -> RunCost:
    db_path = path / "run.db" if path.is_dir() else path
    if not db_path.is_file():
        raise SystemExit(f"{db_path}: no run.db here")
    db = sqlite_utils.Database(db_path)
    run = next(db["runs"].rows)
    ticks = db.execute("select count(*) from ticks").fetchone()[0]
    llm = (yaml.safe_load(run["scenario_yaml"] or "") or {}).get("llm") or {}
    seqs = TokenSequences(sequences, int(llm.get("context_tokens", 2048)), kv_bytes_per_token(chat))
    prefix = PrefixCache.sized(seqs, cache_mb)  # type: ignore[arg-type]
    result = RunCost(run["run_id"], db["agents"].count, ticks * run["tick_minutes"] / 60, TokenCounts())
    calls = calls_of(db, run["model"])
    if what_if:
        calls = rewrite(calls, what_if)
    count(calls, chat, prefix, result.counts, result.probes, result.pieces, result.by_question, result.why)
    return result


def report(costs: list[RunCost], console: Console) -> None:
    table = Table(title="evaluated prompt tokens (what the llama.cpp backend would decode), probes apart")
    for col in ("run", "people", "game h", "calls", "prompt tok", "evaluated", "reused", "eval/person/h",
                "probes eval"):
        table.add_column(col, justify="right")
    for c in costs:
        t = c.counts
        table.add_row(c.run, str(c.agents), f"{c.game_hours:g}", str(t.requests), f"{t.prompt:,}", f"{t.evaluated:,}",
                      f"{t.reused / max(1, t.prompt):.0%}", f"{c.per_person_hour:,.0f}", f"{c.probes.evaluated:,}")
    console.print(table)
    by: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for c in costs:
        for purpose, row in c.counts.by_purpose.items():
            by[purpose] = [a + b for a, b in zip(by[purpose], row)]
    pt = Table(title="by question, all runs together")
    for col in ("purpose", "calls", "tokens per call", "evaluated per call", "reused", "share of evaluated"):
        pt.add_column(col, justify="right")
    total = sum(p - r for _, p, r in by.values()) or 1
    for purpose, (n, p, r) in sorted(by.items(), key=lambda kv: -(kv[1][1] - kv[1][2])):
        pt.add_row(purpose, str(n), f"{p / n:,.0f}", f"{(p - r) / n:,.0f}", f"{r / max(1, p):.0%}",
                   f"{(p - r) / total:.0%}")
    console.print(pt)
    kinds: dict[str, int] = defaultdict(int)
    for c in costs:
        for kind, n in c.pieces.items():
            kinds[kind] += n
    kt = Table(title="evaluated tokens by what they hold, all runs together")
    for col in ("piece", "evaluated", "share", "per person per game hour"):
        kt.add_column(col, justify="right")
    person_hours = sum(c.agents * c.game_hours for c in costs) or 1
    for kind, n in sorted(kinds.items(), key=lambda kv: -kv[1]):
        kt.add_row(kind, f"{n:,}", f"{n / total:.0%}", f"{n / person_hours:,.0f}")
    console.print(kt)
    grid: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for c in costs:
        for purpose, row in c.by_question.items():
            for kind, n in row.items():
                grid[purpose][kind] += n
    shown = [k for k, _ in sorted(kinds.items(), key=lambda kv: -kv[1])]
    gt = Table(title="evaluated tokens per person per game hour, by question and piece, all runs together")
    for col in ("purpose", *shown, "all"):
        gt.add_column(col, justify="right")
    for purpose, row in sorted(grid.items(), key=lambda kv: -sum(kv[1].values())):
        gt.add_row(purpose, *(f"{row.get(k, 0) / person_hours:,.0f}" for k in shown),
                   f"{sum(row.values()) / person_hours:,.0f}")
    console.print(gt)
    reasons: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for c in costs:
        for kind, (n, e) in c.why.items():
            reasons[kind][0] += n
            reasons[kind][1] += e
    wt = Table(title="why a question's tokens were evaluated, all runs together")
    for col in ("why", "calls", "evaluated", "per call", "share", "per person per game hour", "meaning"):
        wt.add_column(col, justify="left" if col == "meaning" else "right")
    for kind, meaning in WHY.items():
        n, e = reasons.get(kind, [0, 0])
        if n:
            wt.add_row(kind, str(n), f"{e:,}", f"{e / n:,.0f}", f"{e / total:.0%}", f"{e / person_hours:,.0f}", meaning)
    console.print(wt)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="run directories or run.db files")
    ap.add_argument("--model", default=None, help="the GGUF whose tokenizer and KV size to count with: a path, "
                                                  "'measure' for the 1.5B measurement model (default: bundled)")
    ap.add_argument("--sequences", type=int, default=SEQUENCES)
    ap.add_argument("--cache-mb", type=int, default=PREFIX_CACHE_MB, help="saved prefix states' budget")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here too")
    ap.add_argument("--what-if", action="append", choices=sorted(LAYOUTS), default=None,
                    help="count the calls rewritten in this layout (bench/layouts.py); repeatable, applied in order")
    args = ap.parse_args()
    model = MEASURE_MODEL if args.model == "measure" else Path(args.model) if args.model else bundled_model_path()
    chat = _vocab_chat(model)
    console = Console(width=max(140, Console().width))
    costs = [cost(p, chat, args.sequences, args.cache_mb, args.what_if) for p in args.runs]
    if args.what_if:
        console.print(f"what if: {' then '.join(args.what_if)} (bench/layouts.py: the same calls, rewritten)")
    report(costs, console)
    if args.json:
        args.json.write_text(json.dumps([{"run": c.run, "agents": c.agents, "game_hours": c.game_hours,
                                          "per_person_hour": c.per_person_hour, **vars(c.counts),
                                          "probes": vars(c.probes), "pieces": c.pieces,
                                          "by_question": c.by_question, "why": c.why} for c in costs], indent=2) + "\n")


if __name__ == "__main__":
    main()

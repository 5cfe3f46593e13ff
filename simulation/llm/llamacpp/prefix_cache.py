"""Evaluate each prompt token once: canonical prefix reuse for the llama.cpp backend.

Why canonical: llama.cpp's logits depend, in the last bits, on how a prompt was split into
decode batches, so plain KV-cache reuse would make an answer depend on whatever ran before it.
Every prompt is therefore evaluated in **pieces fixed by the prompt itself**: one per chat
message before the last (``ChatFormat.pieces``: the system message with BOS, then each further
message, cut further at each piece break in its text, ``simulation.llm.types.PIECE_BREAK``), then
the last message with the generation prompt (the tail, evaluated by the
completion call). A piece is always evaluated alone, so the KV cache after a piece boundary is
the same bits whether it was evaluated just now, left in the cache by the previous request, or
restored from a saved state. An answer therefore never depends on what ran before it
(``tests/test_llm.py``), and the guarantee is the backend's, not the caller's.

What is reused:

- **In its sequence**: the pieces the sequence's previous request left there, up to the longest
  boundary both requests share (same tokens, same piece boundaries): a person's next question
  after their last one;
- **Saved states**: at three boundaries of every prompt, the system message (a person's persona,
  the same in every call they make), all messages but the last (a question's stable preamble:
  the importance scale with its rated examples, say) and all pieces but the last two (a person's
  live context: their working memory up to its last batch, before the situation of this
  question, ``cognition.working``),
  the KV of the sequence is copied out (``llama_state_seq_get_data``, only the cells in use,
  about 23 KB a token on the bundled model) and copied back when a later prompt starts the same
  way. Personas, working memories and longer preambles are kept in three LRUs, each bounded in
  bytes, so one-off preambles never push out the personas or the working memories; a working
  memory's state replaces the shorter ones it extends (they are never asked for again).

The sequences are those of ``simulation.llm.llamacpp.sequences`` (several, decoded together when a batch
generates); a saved state restores into any of them.

So the way to make a prompt cheap is to put what is stable first, in messages of its own, and
what changes in the last message. ``TokenCounts`` says how well that works (``bench/day.py``).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from simulation.llm.llamacpp.sequences import Sequences

__all__ = ["PrefixCache", "TokenCounts", "keeps_context"]


def keeps_context(messages: list[dict[str, str]]) -> bool:
    """Whether a prompt's pieces but the last two are a person's live context worth a saved state
    of their own: not when an answer is among its turns (a few-shot preamble of rated examples, or
    a retry that shows the rejected answer), whose cut there is one-off."""
    return not any(m.get("role") == "assistant" for m in messages)


@dataclass
class TokenCounts:
    """What a backend's requests cost in tokens: ``prompt`` tokens in all, of which ``reused``
    came from a cached prefix (left in the KV cache or restored from a saved state) and the rest
    were evaluated; ``generated`` tokens (for a scored request, the options' tokens evaluated one
    by one). ``bench/day.py`` reads it per game hour."""

    requests: int = 0
    prompt: int = 0
    reused: int = 0
    generated: int = 0
    by_purpose: dict[str, list[int]] = field(default_factory=dict)
    """Purpose -> [requests, prompt tokens, reused tokens]: which questions cost what."""

    @property
    def evaluated(self) -> int:
        return self.prompt - self.reused

    def count(self, prompt: int, reused: int, purpose: str = "") -> None:
        self.requests += 1
        self.prompt += prompt
        self.reused += reused
        row = self.by_purpose.setdefault(purpose, [0, 0, 0])
        row[0] += 1
        row[1] += prompt
        row[2] += reused

    def copy(self) -> TokenCounts:
        return TokenCounts(self.requests, self.prompt, self.reused, self.generated,
                           {k: list(v) for k, v in self.by_purpose.items()})


Key = tuple[tuple[int, ...], tuple[int, ...]]
"""A saved prefix: its tokens and its piece boundaries."""


@dataclass(frozen=True)
class _Saved:
    data: bytes
    n_tokens: int


class _Shelf:
    """Saved states, least recently used dropped first once their bytes pass the budget."""

    def __init__(self, budget: int):
        self.budget = budget
        self.bytes = 0
        self.items: OrderedDict[Key, _Saved] = OrderedDict()

    def get(self, key: Key) -> _Saved | None:
        found = self.items.get(key)
        if found is not None:
            self.items.move_to_end(key)
        return found

    def put(self, key: Key, saved: _Saved) -> None:
        self.items[key] = saved
        self.bytes += len(saved.data)
        while self.bytes > self.budget and self.items:
            _, dropped = self.items.popitem(last=False)
            self.bytes -= len(dropped.data)

    def clear(self) -> None:
        self.items.clear()
        self.bytes = 0

    def supersede(self, key: Key) -> None:
        """Drop the saved states that ``key`` extends by one piece: a person's working memory grows
        a batch at a time, so its state of one batch fewer is never asked for again."""
        tokens, bounds = key
        for old in [k for k in self.items if len(k[1]) == len(bounds) - 1 and bounds[:-1] == k[1]
                    and tokens[:len(k[0])] == k[0]]:
            self.bytes -= len(self.items.pop(old).data)


class PrefixCache:
    """What each sequence of a ``Sequences`` holds canonically, and saved states of earlier
    prefixes, for one loaded model (shared by every backend object using it)."""

    def __init__(self, seqs: Sequences, persona_bytes: int = 1 << 30, preamble_bytes: int = 1 << 30,
                 context_bytes: int = 2 << 30):
        self.seqs = seqs
        self.bounds: list[tuple[int, ...]] = [() for _ in range(seqs.n_seq)]
        """Per sequence, the piece boundaries of what it holds canonically (beyond the last: a
        tail and generated tokens, never reused)."""
        self.personas = _Shelf(persona_bytes)
        """First pieces (a system message: a person's rules and persona), kept apart so that the many
        one-off preambles never push out the few personas every call starts with."""
        self.preambles = _Shelf(preamble_bytes)
        """Longer prefixes (all messages but the last: a situation asked about twice, the importance
        question's rated examples)."""
        self.contexts = _Shelf(context_bytes)
        """All pieces but the last two (a person's working memory before the situation, the
        prefix their next question starts with), each dropping the shorter ones it extends."""
        self.used = [0] * seqs.n_seq
        """Per sequence, when a request last primed it (a count of requests)."""
        self.hits = 0
        """Requests that found their prefix still in their sequence."""
        self.restores = 0
        """Requests that restored a saved prefix state."""

    @classmethod
    def sized(cls, seqs: Sequences, megabytes: int) -> PrefixCache:
        """A cache of ``megabytes`` of saved states: a quarter for personas, a quarter for
        preambles, half for people's working memories."""
        quarter = (megabytes << 20) // 4
        return cls(seqs, quarter, quarter, 2 * quarter)

    def clear(self) -> None:
        """Drop every saved state and trust nothing in the sequences: the next prompt is evaluated cold."""
        for shelf in self._shelves:
            shelf.clear()
        self.forget()

    def forget(self) -> None:
        """The sequences were changed behind this object's back (an error): empty them, trust nothing."""
        self.seqs.clear()
        self.bounds = [() for _ in range(self.seqs.n_seq)]

    def drop(self, seq: int) -> None:
        """Empty one sequence and trust nothing of it (a failed request left it half evaluated)."""
        self.seqs.clear(seq)
        self.bounds[seq] = ()

    def prime(self, seq: int, tokens: list[int], bounds: tuple[int, ...], context: bool = True) -> int:
        """Leave sequence ``seq`` holding exactly ``tokens[:bounds[-1]]`` (nothing when there are
        no bounds), each piece evaluated alone; returns how many of those tokens were reused.
        ``context``: save the state before the last two pieces as a working memory
        (``keeps_context``)."""
        seqs = self.seqs
        self.used[seq] = max(self.used) + 1
        if not bounds:
            self.drop(seq)
            return 0
        kept = self.held(seq, tokens, bounds)
        longer = [i for i, b in enumerate(bounds) if b > kept and self._has(self._key(tokens, bounds, i))]
        if longer:  # a saved state goes further than what the sequence still holds
            kept = self._restore(seq, tokens, bounds, longer[-1])
        elif kept:
            seqs.keep(seq, kept)
            self.hits += 1
        else:
            seqs.clear(seq)
        reused = kept
        start = kept
        saves = {bounds[-1]: self.preambles, bounds[0]: self.personas}
        if context and len(bounds) > 2:
            saves = {bounds[-1]: self.preambles, bounds[-2]: self.contexts, bounds[0]: self.personas}
        self.bounds[seq] = ()
        for end in bounds:
            if end <= start:
                continue
            seqs.eval(seq, tokens[start:end])
            start = end
            if end in saves:
                self._save(seq, tokens[:end], bounds[: bounds.index(end) + 1], saves[end])
        self.bounds[seq] = bounds
        return reused

    def slots(self, prompts: list[tuple[list[int], tuple[int, ...]]]) -> list[int]:
        """A sequence for each prompt of a batch (at most ``n_seq``): the free one already
        holding most of it, else the one used least recently (what it holds is the least likely
        to be asked for again)."""
        free = list(range(self.seqs.n_seq))
        chosen = []
        for tokens, bounds in prompts:
            k = max(free, key=lambda k: (self.held(k, tokens, bounds), -self.used[k]))
            free.remove(k)
            chosen.append(k)
        return chosen

    def held(self, seq: int, tokens: list[int], bounds: tuple[int, ...]) -> int:
        """The longest boundary up to which ``seq`` already holds these pieces canonically (0 if none)."""
        held = self.seqs.held[seq]
        shared = 0
        for mine, theirs in zip(bounds, self.bounds[seq]):
            if mine != theirs or mine > len(held):
                break
            shared = mine
        for b in [b for b in bounds if b <= shared][::-1]:
            if held[:b] == tokens[:b]:
                return b
        return 0

    @staticmethod
    def _key(tokens: list[int], bounds: tuple[int, ...], i: int) -> Key:
        return tuple(tokens[: bounds[i]]), bounds[: i + 1]

    @property
    def _shelves(self) -> tuple[_Shelf, _Shelf, _Shelf]:
        return self.personas, self.contexts, self.preambles

    def _has(self, key: Key) -> bool:
        return any(key in shelf.items for shelf in self._shelves)

    def _find(self, key: Key) -> _Saved | None:
        for shelf in self._shelves:
            if key in shelf.items:
                return shelf.get(key)
        return None

    @property
    def bytes(self) -> int:
        return sum(shelf.bytes for shelf in self._shelves)

    def _restore(self, seq: int, tokens: list[int], bounds: tuple[int, ...], i: int) -> int:
        """Restore the saved state of the pieces up to ``bounds[i]`` into ``seq``."""
        saved = self._find(self._key(tokens, bounds, i))
        assert saved is not None
        if not self.seqs.restore(seq, saved.data, tokens[: saved.n_tokens]):
            return 0
        self.restores += 1
        return saved.n_tokens

    def _save(self, seq: int, prefix: list[int], bounds: tuple[int, ...], shelf: _Shelf) -> None:
        key = (tuple(prefix), bounds)
        if shelf.budget <= 0 or self._find(key) is not None:
            return
        data = self.seqs.save(seq, shelf.budget)
        if data is not None:
            if shelf is self.contexts:
                shelf.supersede(key)
            shelf.put(key, _Saved(data, len(prefix)))

    def __len__(self) -> int:
        return sum(len(shelf.items) for shelf in self._shelves)

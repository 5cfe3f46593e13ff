"""Ratings by probability (simulation/llm/scoring.py): the arithmetic, the client's rating with
its sampled fallback, and on the bundled model an importance that is deterministic and puts a
fire above a breakfast."""

from __future__ import annotations

import json
import math

import pytest

from simulation.llm import batching
from simulation.llm.client import LLMClient
from simulation.llm.scoring import ScoredOptions, expected, from_top_logprobs
from simulation.llm.types import LLMRequest
from simulation.testing import AnsweringBackend

SCALE = tuple(str(i) for i in range(1, 11))
VALUES = [float(i) for i in range(1, 11)]


def test_probabilities_are_renormalised_over_the_options_seen():
    scored = ScoredOptions([math.log(0.2), None, math.log(0.6)], exact=False)
    assert scored.probabilities() == pytest.approx([0.25, 0.0, 0.75])
    assert expected([1.0, 2.0, 3.0], scored.probabilities()) == pytest.approx(2.5)


def test_a_scored_answer_round_trips_and_bad_ones_say_why():
    scored = ScoredOptions([-0.5, None, -2.0], exact=True)
    assert ScoredOptions.from_text(scored.to_text(), 3) == scored
    for text, why in [("7", "not a scored-options answer"), ('{"logprobs": [-1]}', "expected 3"),
                      ('{"logprobs": [null, null, null]}', "no option"), ('{"logprobs": [0.5, -1, -1]}', "not a log")]:
        with pytest.raises(ValueError, match=why):
            ScoredOptions.from_text(text, 3)


def test_first_token_scores_from_a_servers_top_list():
    top = {" 7": math.log(0.3), "7": math.log(0.2), "8": math.log(0.4), "I": math.log(0.1)}
    scored = from_top_logprobs(top, ["7", "8", "9"])
    assert not scored.exact and scored.logprobs[2] is None
    assert scored.probabilities() == pytest.approx([5 / 9, 4 / 9, 0.0])


class RatingDouble(AnsweringBackend):
    """Scores options with fixed probabilities, or, told it cannot, answers like a server that
    gives no log-probabilities (and then answers the sampled fallback with "4")."""

    name = "ratingdouble"
    model_id = "ratingdouble-v1"

    def __init__(self, can_score: bool = True):
        self.can_score = can_score
        self.batches, self.closed = [], False

    def answer(self, req: LLMRequest) -> str:
        if req.options is not None:
            if not self.can_score:
                return "4"
            weights = {"3": 0.5, "8": 0.5}
            return ScoredOptions([math.log(weights[o]) if o in weights else None for o in req.options],
                                 exact=True).to_text()
        return json.dumps({"answer": "4"})


def rate(backend, calls=None):
    client = LLMClient(backend, run_seed=1, on_call=(calls.append if calls is not None else None))

    async def go():
        return await client.rate([{"role": "user", "content": "rate it"}], SCALE, VALUES, default=5.0,
                                 purpose="importance", agent_id="a", tick=0)

    return batching.run(go(), name="rating"), client


def test_a_rating_is_the_expected_value_over_the_options():
    calls = []
    rating, client = rate(RatingDouble(), calls)
    assert rating.ok and not rating.sampled and rating.value == pytest.approx(5.5)
    assert calls[0].request.options == list(SCALE) and calls[0].parse_ok
    assert (client.stats.ratings, client.stats.sampled_ratings) == (1, 0)


def test_a_backend_that_cannot_score_gets_one_option_sampled_and_counted():
    calls = []
    rating, client = rate(RatingDouble(can_score=False), calls)
    assert rating.ok and rating.sampled and rating.value == 4.0
    assert [c.parse_ok for c in calls] == [False, True]
    assert calls[1].request.options is None and calls[1].request.json_schema is not None
    assert (client.stats.ratings, client.stats.sampled_ratings) == (1, 1)


def test_options_change_the_replay_key_and_plain_requests_keep_theirs():
    plain = LLMRequest(messages=[{"role": "user", "content": "x"}])
    assert plain.key("m") == LLMRequest(messages=[{"role": "user", "content": "x"}], options=None).key("m")
    assert plain.key("m") != plain.model_copy(update={"options": ["1", "2"]}).key("m")


@pytest.fixture(scope="module")
def llama():
    from simulation.llm.llamacpp import LlamaCppBackend

    backend = LlamaCppBackend()
    yield backend
    backend.close()


@pytest.mark.slow
def test_the_bundled_model_rates_a_fire_above_a_breakfast_deterministically(llama):
    """Importance as the engine asks it (cognition/templates/importance.j2), on the real model:
    the expected value puts the clearly poignant memory above the mundane one, and asking again,
    in another order, gives the same numbers to the last digit."""
    from types import SimpleNamespace

    from simulation.cognition.importance import rating_messages

    isabella = SimpleNamespace(first_name="Isabella",
                               system_prompt="You are Isabella Rodriguez, 34, who runs Hobbs Cafe in a small town.")

    def ask(memory: str) -> LLMRequest:
        return LLMRequest(messages=rating_messages(isabella, memory), options=list(SCALE), max_tokens=1,
                          temperature=0.0)

    poignant = ["Isabella's house caught fire and she lost everything.", "Isabella got engaged to the man she loves.",
                "Isabella's mother died this morning."]
    mundane = ["Isabella ate breakfast.", "Isabella brushed her teeth.", "Isabella made the bed."]
    memories = poignant + mundane
    first = [ScoredOptions.from_text(o.text, 10) for o in llama.generate([ask(m) for m in memories])]
    shuffled = [4, 0, 3]  # asked again, alone and in another order
    again = [ScoredOptions.from_text(llama.generate([ask(memories[i])])[0].text, 10) for i in shuffled]
    assert [first[i] for i in shuffled] == again
    assert all(s.exact and all(v is not None for v in s.logprobs) for s in first)
    rated = [expected(VALUES, s.probabilities()) for s in first]
    print(" ".join(f"{r:.2f}" for r in rated))
    assert min(rated[:3]) > max(rated[3:]), "every poignant memory above every mundane one"

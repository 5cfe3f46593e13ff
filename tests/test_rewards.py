"""Co-evolution rewards: arithmetic by hand, the zero-sum peer mapping, parse failures, run.db rows,
the TRL exports (loaded with `datasets` and put through the trainers' own dataset preparation),
and `agora rewards`.

Runs are real runs of the flagship on the scripted backend (simulation.testing); the judge is
``rewards_support.JudgeDouble``, whose scores the tests choose. One test (marked slow) judges a
few turns with the real bundled model.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import sqlite_utils
from conftest import agora
from rewards_support import JudgeDouble, finished_scripted_run, is_retry, judged_text

from simulation.errors import InputError
from simulation.evaluation import targets
from simulation.rewards import arithmetic, engine, export, judging, rubric, store
from simulation.rewards.critique import Critique, peers
from simulation.rewards.judging import Judgement
from simulation.rewards.measured import DIMENSIONS
from simulation.rewards.turns import Turn, read_turns

# --------------------------------------------------------------------------- arithmetic by hand


def test_rubric_reward_is_the_normalised_mean() -> None:
    assert arithmetic.rubric_reward({"a": 5, "b": 4, "c": 4, "d": 3}, 1, 5) == 0.75  # mean 4 -> 3/4
    assert arithmetic.rubric_reward({"a": 3, "b": 3, "c": 2, "d": 2}, 1, 5) == 0.375  # mean 2.5 -> 1.5/4
    assert arithmetic.rubric_reward({"a": 1}, 1, 5) == 0.0 and arithmetic.rubric_reward({"a": 5}, 1, 5) == 1.0
    assert arithmetic.normalise(7, 0, 9) == pytest.approx(7 / 9)
    with pytest.raises(ValueError):
        arithmetic.normalise(3, 5, 5)


def test_group_advantages_by_hand() -> None:
    # conversation c1: rewards 0.75, 0.25, 0.5 -> mean 0.5, population std sqrt((0.0625 + 0.0625 + 0) / 3)
    std = math.sqrt(0.125 / 3)
    got = arithmetic.group_advantages([0.75, 0.25, 0.5, 1.0, 1.0, 0.3], ["c1", "c1", "c1", "t0", "t0", "t1"])
    assert got[:3] == pytest.approx([0.25 / std, -0.25 / std, 0.0])
    assert got[0] == pytest.approx(1.2247449, abs=1e-6)
    assert got[3:] == [0.0, 0.0, 0.0], "equal rewards (std 0) and a group of one give advantage 0"
    # two members: always +1 and -1
    assert arithmetic.group_advantages([0.2, 0.6], ["g", "g"]) == pytest.approx([-1.0, 1.0])
    with pytest.raises(ValueError):
        arithmetic.group_advantages([0.1], [])


def test_running_totals_follow_ticks_not_row_order() -> None:
    # agent a: tick 0 -> 0.5, tick 1 -> 0.75 (total 1.25), tick 2 -> 1.0 (total 2.25); agent b alone
    got = arithmetic.running_totals([0.5, 0.25, 1.0, 0.75], ["a", "b", "a", "a"], [(0, 0), (0, 1), (2, 2), (1, 3)])
    assert got == [0.5, 0.25, 2.25, 1.25]


def test_zero_sum_peer_mapping() -> None:
    r = arithmetic.peer_rewards(4, 1, 5)  # s = (4 - 1) / 4
    assert (r.speaker, r.critic, r.scorer) == (0.75, 0.25, 0.0)
    assert r.speaker + r.critic == 1.0
    r = arithmetic.peer_rewards(1, 1, 5)
    assert (r.speaker, r.critic, r.scorer) == (0.0, 1.0, 0.0)
    r = arithmetic.peer_rewards(None, 1, 5)  # the scorer's answer could not be parsed
    assert (r.speaker, r.critic, r.scorer) == (None, None, -1.0)
    r = arithmetic.peer_rewards(2, 1, 5, critic_parsed=False)  # an unparsable critique pays the format penalty
    assert (r.speaker, r.critic, r.scorer) == (0.25, -1.0, 0.0)


def _turn(source_id: int, agent: str, tick: int, group: str, kind: str = "utterance", other: str | None = None) -> Turn:
    table = "utterances" if kind == "utterance" else "events"
    return Turn(table, source_id, kind, agent, tick, f"2023-02-13 07:{tick:02d}", f"text {source_id}", group,
                "scene", 100 + source_id, other_id=other)


def _scores(*items: int) -> dict[str, int]:
    return dict(zip(rubric.KEYS, items, strict=True))


def test_rows_of_a_pass_by_hand() -> None:
    u1, u2 = _turn(1, "ann", 0, "conversation:1", other="bob"), _turn(2, "bob", 0, "conversation:1", other="ann")
    a1, a2 = _turn(7, "ann", 1, "tick:1", "action"), _turn(8, "bob", 1, "tick:1", "action")
    judged = [Judgement(u1, _scores(5, 5, 5, 5), 1), Judgement(u2, _scores(1, 1, 1, 1), 2),
              Judgement(a1, _scores(3, 3, 3, 3), 3), Judgement(a2, None, 4)]  # a2 dropped
    critiques = [Critique(u1, "bob", "cat", "weak", 5, 2, "meh", 6),  # s = 0.25
                 Critique(u2, "ann", "cat", "weak", 7, None, "", 8)]  # scorer unparsable
    rows = engine.build_rows("run", judged, critiques, "judge-m", "peer-m")
    got = [(r.id, r.agent_id, r.role, r.source_id, r.reward, r.advantage, r.total, r.judge_model) for r in rows]
    assert got == [
        (1, "ann", "actor", 1, 1.0, 1.0, 1.0, "judge-m"),  # conversation 1: 1.0 and 0.0 -> +1, -1
        (2, "ann", "speaker", 1, 0.25, 0.0, 0.25, "peer-m"),  # the only speaker row of the group
        (3, "bob", "critic", 1, 0.75, 0.0, 0.75, "peer-m"),  # 1 - s
        (4, "cat", "scorer", 1, 0.0, 1.0, 0.0, "peer-m"),  # scorers of conversation 1: 0 and -1
        (5, "bob", "actor", 2, 0.0, -1.0, 0.0, "judge-m"),
        (6, "cat", "scorer", 2, -1.0, -1.0, -1.0, "peer-m"),  # no speaker or critic row for line 2
        (7, "ann", "actor", 7, 0.5, 0.0, 1.5, "judge-m"),  # tick 1: alone (bob's action dropped); total 1.0 + 0.5
    ]
    assert rows[0].scores == _scores(5, 5, 5, 5) and rows[1].scores == {"peer": 2}
    assert rows[0].llm_call_id == 101 and rows[2].llm_call_id is None, "a critic's turn is not the run's call"
    assert rows[0].reward_call_id == 1 and rows[2].reward_call_id == 5 and rows[3].reward_call_id == 6


# --------------------------------------------------------------------------- a real (scripted) run


@pytest.fixture(scope="module")
def base_run(tmp_path_factory: pytest.TempPathFactory, flagship: Any) -> Path:
    """A finished 18-tick flagship run on the scripted backend (conversations and plan steps)."""
    return finished_scripted_run(flagship, tmp_path_factory.mktemp("rw"), 18)


@pytest.fixture
def run_dir(base_run: Path, tmp_path: Path) -> Path:
    """A private copy, so a test's rewards never meet another's."""
    target = tmp_path / base_run.name
    target.mkdir()
    shutil.copy(base_run / "run.db", target / "run.db")
    return target


def _personas(run_dir: Path) -> dict[str, Any]:
    return {t.agent_id: t.persona for t in targets.resolve([run_dir])}


def _label(run_dir: Path, judge: JudgeDouble, peer: JudgeDouble | None = None, **options: Any) -> engine.RewardResult:
    return engine.label(run_dir / "run.db", _personas(run_dir), judge, peer, engine.RewardOptions(**options))


def _db_rows(run_dir: Path, sql: str, params: tuple = ()) -> list[dict[str, Any]]:
    db = sqlite_utils.Database(run_dir / "run.db")
    try:
        return list(db.query(sql, params))
    finally:
        db.close()


def test_turns_are_every_utterance_and_decided_action_linked_to_their_calls(run_dir: Path) -> None:
    run_id, turns = read_turns(run_dir / "run.db")
    said = _db_rows(run_dir, "select id, conversation_id, llm_call_id from utterances")
    acted = _db_rows(run_dir, "select id from events where kind in ('action', 'reaction') and agent_id is not null")
    assert {t.source_id for t in turns if t.kind == "utterance"} == {u["id"] for u in said} and said
    assert {t.source_id for t in turns if t.source_table == "events"} == {e["id"] for e in acted} and acted
    by_id = {u["id"]: u for u in said}
    for t in turns:
        if t.kind == "utterance":
            assert t.group == f"conversation:{by_id[t.source_id]['conversation_id']}"
            assert t.llm_call_id == by_id[t.source_id]["llm_call_id"]
        else:
            assert t.group == f"tick:{t.tick}"
    # an action is linked to the plan answer that chose it
    action = next(t for t in turns if t.kind == "action" and t.llm_call_id is not None)
    call = _db_rows(run_dir, "select purpose, agent_id, tick, completion from llm_calls where id = ?",
                    (action.llm_call_id,))[0]
    assert call["purpose"] == "plan" and call["agent_id"] == action.agent_id and call["tick"] <= action.tick
    # the judge sees the conversation so far
    second = next(t for t in turns if t.kind == "utterance" and "The conversation so far:" in t.scene)
    assert second.scene.count('"') >= 2
    assert [t.order for t in turns] == sorted(t.order for t in turns)


def test_actions_link_to_the_answer_that_queued_them_in_either_layout() -> None:
    from simulation.rewards import turns

    steps = json.dumps({"steps": [{"action": "baking bread.", "place": "cafe", "minutes": 20, "importance": 2},
                                  {"action": "  serving  ", "place": "cafe", "minutes": 10, "importance": 2}]})
    assert turns._planned(steps) == ["baking bread", "serving"]
    assert turns._planned('{"action": "having breakfast!", "place": "home", "minutes": 10}') == ["having breakfast"]
    assert turns._planned("not json") == [] and turns._planned('{"steps": [{"place": "x"}]}') == []


def test_reactions_are_judged_with_what_the_agent_noticed(tmp_path: Path, flagship: Any) -> None:
    from simulation.testing import ScriptedBackend

    from simulation import Simulation

    run = Simulation.from_scenario(flagship, backend=ScriptedBackend(react="react"), out=tmp_path, ticks=8)
    for _ in range(run.ticks):
        run.model.step()
    run.store.close()
    _, turns = read_turns(run.run_dir / "run.db")
    reactions = [t for t in turns if t.kind == "reaction"]
    assert reactions, "the scripted agents react instead of talking"
    for t in reactions:
        call = _db_rows(run.run_dir, "select purpose, agent_id, tick from llm_calls where id = ?", (t.llm_call_id,))
        assert call == [{"purpose": "react", "agent_id": t.agent_id, "tick": t.tick}]
        assert "noticed:" in t.scene


def test_judging_a_run_gives_the_rubric_rewards(run_dir: Path) -> None:
    judge = JudgeDouble()
    result = _label(run_dir, judge)
    counts = result.counts()
    assert counts["usable"] == counts["turns"] == len(result.rows) > 0 and counts["dropped"] == 0
    assert len(judge.batches) == 1 and len(judge.batches[0]) == counts["turns"], "one batch for every judgement"
    for r in result.rows:
        assert r.role == "actor"
        assert r.reward == (0.75 if r.kind == "utterance" else 0.375)  # the double's (5,4,4,3) and (3,3,2,2)
    # every group's advantages: mean 0, population std 1 (or all 0)
    groups: dict[str, list[float]] = {}
    for r in result.rows:
        groups.setdefault(r.group_key, []).append(r.advantage)
    assert all(abs(sum(v)) < 1e-9 for v in groups.values())
    # running totals: the agent's rewards summed in tick order
    for agent in {r.agent_id for r in result.rows}:
        mine = sorted((r for r in result.rows if r.agent_id == agent), key=lambda r: (r.tick, r.id))
        assert [r.total for r in mine] == pytest.approx(list(_cumsum([r.reward for r in mine])))
    # the judge read the persona, the scene and the line
    req = judge.batches[0][0]
    assert "<persona>" in req.messages[0]["content"] and "<scene>" in req.messages[1]["content"]
    assert req.json_schema["properties"]["in_character"]["enum"] == [1, 2, 3, 4, 5]


def _cumsum(xs: list[float]) -> list[float]:
    total, out = 0.0, []
    for x in xs:
        total += x
        out.append(total)
    return out


def test_unparsable_judgements_are_retried_once_then_dropped_and_counted(run_dir: Path) -> None:
    _, turns = read_turns(run_dir / "run.db")
    always = {judging.purpose("judge", t) for t in turns[:3]}
    once = {judging.purpose("judge", t) for t in turns[3:6]}
    out_of_scale = judging.purpose("judge", turns[6])

    def garbage(req: Any) -> bool:
        return req.purpose in always or (req.purpose in once and not is_retry(req))

    def scores(req: Any) -> dict[str, int]:
        bad = req.purpose == out_of_scale and not is_retry(req)
        return dict(zip(rubric.KEYS, (7 if bad else 4, 4, 4, 4)))  # 7 is off the 1-5 scale: retried

    result = _label(run_dir, JudgeDouble(scores=scores, garbage=garbage))
    counts = result.counts()
    assert counts["dropped"] == 3 and counts["usable"] == len(turns) - 3
    assert counts["calls"] == len(turns) + 3 + 3 + 1, "every failed first answer was retried exactly once"
    judged = {(r.source_table, r.source_id) for r in result.rows}
    assert all((t.source_table, t.source_id) not in judged for t in turns[:3]), "dropped, never guessed"
    assert all((t.source_table, t.source_id) in judged for t in turns[3:7]), "usable on the retry"
    retry = next(c for c in result.calls if c["purpose"] == out_of_scale and c["attempt"] == 1)
    assert "not usable" in json.loads(retry["messages"])[-1]["content"]


def test_peer_critique_zero_sum_roles(run_dir: Path) -> None:
    _, turns = read_turns(run_dir / "run.db")
    lines = [t for t in turns if t.kind == "utterance"]
    broken = judging.purpose("score", lines[0])

    def peer(req: Any) -> str:
        return "Score: 2" if "Hello there" in judged_text(req) else "Score: 4"

    agents = JudgeDouble(peer=peer, garbage=lambda req: req.purpose == broken)
    judge = JudgeDouble()
    result = _label(run_dir, judge, agents, peer_critique=True)
    counts = result.counts()
    assert counts["critiqued"] == len(lines) and counts["scorer_dropped"] == 1 and counts["critic_dropped"] == 0
    assert not any(r.purpose.startswith("rw_critic") for b in judge.batches for r in b), "peers are the agents' LLM"
    by = {(r.role, r.source_id): r for r in result.rows if r.source_table == "utterances"}
    for line in lines:
        scorer = by[("scorer", line.source_id)]
        assert scorer.agent_id not in (line.agent_id, line.other_id)
        if line is lines[0]:
            assert scorer.reward == -1.0, "a scorer whose answer cannot be parsed gets -1"
            assert ("speaker", line.source_id) not in by and ("critic", line.source_id) not in by
            continue
        s = 0.25 if "Hello there" in line.text else 0.75
        speaker, critic = by[("speaker", line.source_id)], by[("critic", line.source_id)]
        assert (speaker.agent_id, speaker.reward) == (line.agent_id, s)
        assert (critic.agent_id, critic.reward) == (line.other_id, 1 - s), "the listener critiques"
        assert scorer.reward == 0.0
    critic_call = next(c for c in result.calls if c["purpose"] == judging.purpose("critic", lines[1]))
    critic_persona = json.loads(critic_call["messages"])[0]["content"]
    assert "role-playing" in critic_persona and f"Name: {_personas(run_dir)[lines[1].other_id].name}" in critic_persona
    assert peers(lines[1], ["a_only"], 0) is None, "no critic or scorer outside the run"


def test_rows_land_in_run_db_and_a_second_pass_replaces_them(run_dir: Path) -> None:
    result = _label(run_dir, JudgeDouble(), JudgeDouble(), peer_critique=True)
    assert store.write(run_dir / "run.db", result) == len(result.rows)
    rows = _db_rows(run_dir, "select * from rewards order by id")
    assert len(rows) == len(result.rows)
    first = rows[0]
    assert first["run_id"] == run_dir.name and first["pass_id"] == result.pass_id
    assert json.loads(first["scores"]) == result.rows[0].scores
    assert {r["role"] for r in rows} == {"actor", "speaker", "critic", "scorer"}
    assert {r["judge_model"] for r in rows} == {"judgedouble-v1"}
    calls = _db_rows(run_dir, "select id, purpose, messages from reward_calls")
    assert len(calls) == len(result.calls) and {r["reward_call_id"] for r in rows} <= {c["id"] for c in calls}
    passes = _db_rows(run_dir, "select * from reward_passes")
    assert len(passes) == 1 and passes[0]["turns"] == result.counts()["turns"]
    again = _label(run_dir, JudgeDouble())
    store.write(run_dir / "run.db", again)
    assert len(_db_rows(run_dir, "select id from rewards")) == len(again.rows)
    assert _db_rows(run_dir, "select pass_id from reward_passes") == [{"pass_id": again.pass_id}]


def test_same_run_judge_and_seed_same_rewards(run_dir: Path) -> None:
    def varied(req: Any) -> dict[str, int]:
        return dict(zip(rubric.KEYS, (1 + req.seed % 5, 1 + req.seed // 5 % 5, 3, 4)))

    a, b = _label(run_dir, JudgeDouble(scores=varied)), _label(run_dir, JudgeDouble(scores=varied))
    key = [(r.source_id, r.role, r.reward, r.advantage, r.total) for r in a.rows]
    assert key == [(r.source_id, r.role, r.reward, r.advantage, r.total) for r in b.rows]
    assert len({r.reward for r in a.rows}) > 1, "the scores vary, so the comparison means something"
    c = _label(run_dir, JudgeDouble(scores=varied), seed=1)
    assert [x["seed"] for x in c.calls] != [x["seed"] for x in a.calls]


# --------------------------------------------------------------------------- export for TRL

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def _tokenizer(texts: list[str]) -> Any:
    """A word-level tokenizer with a ChatML template, trained here on the exported text (no download)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(texts, trainers.WordLevelTrainer(
        special_tokens=["[UNK]", "[PAD]", "<|im_start|>", "<|im_end|>"]))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", eos_token="<|im_end|>")
    fast.chat_template = CHATML
    return fast


def _trl_accepts(kind: str, data: Any, tok: Any, out: Path) -> Any:
    """Put ``data`` through the matching TRL trainer's own dataset preparation and collator."""
    import trl
    from trl.data_utils import is_conversational, maybe_apply_chat_template

    assert all(is_conversational(row) for row in data)
    settings = {"output_dir": str(out), "max_length": None, "report_to": [], "use_cpu": True, "bf16": False}
    if kind == "sft":
        args = trl.SFTConfig(**settings)
        fake = SimpleNamespace(_tokenizer=tok, chat_template=None, completion_only_loss=False)
        ready = trl.SFTTrainer._prepare_dataset(fake, data, tok, args, packing=False, formatting_func=None,
                                                dataset_name="train")
        collate = trl.trainer.sft_trainer.DataCollatorForLanguageModeling(pad_token_id=tok.pad_token_id)
        columns = ["input_ids"]
    elif kind == "kto":
        args = trl.KTOConfig(**settings)
        fake = SimpleNamespace(_tokenizer=tok, calculate_KL=False, desirable_weight=1.0, undesirable_weight=1.0)
        ready = trl.KTOTrainer._prepare_dataset(fake, data, tok, args, "train")
        collate = trl.trainer.kto_trainer.DataCollatorForUnpairedPreference(pad_token_id=tok.pad_token_id)
        columns = ["prompt_ids", "completion_ids", "label"]
    elif kind == "dpo":
        args = trl.DPOConfig(**settings)
        ready = trl.DPOTrainer._prepare_dataset(SimpleNamespace(_tokenizer=tok), data, tok, args, "train")
        collate = trl.trainer.dpo_trainer.DataCollatorForPreference(pad_token_id=tok.pad_token_id)
        columns = ["prompt_ids", "chosen_ids", "rejected_ids"]
    else:  # grpo / rloo: prompt-only; the prompt is rendered with the chat template at generation time
        for row in data:
            text = maybe_apply_chat_template({"prompt": row["prompt"]}, tok)["prompt"]
            assert text.endswith("<|im_start|>assistant\n")
        return data
    assert len(ready) == len(data) and all(len(r[columns[0]]) > 0 for r in ready)
    batch = collate([{c: r[c] for c in columns} for r in ready.select(range(min(4, len(ready))))])
    assert batch and all(hasattr(v, "shape") for v in batch.values())
    return ready


@pytest.fixture
def exported(run_dir: Path, tmp_path: Path) -> tuple[Path, engine.RewardResult]:
    def varied(req: Any) -> dict[str, int]:
        n = 1 + req.seed % 5
        return dict(zip(rubric.KEYS, (n, n, 1 + req.seed // 7 % 5, 3)))

    peers = JudgeDouble(peer=lambda req: f"Score: {1 + req.seed % 5}")  # critics' rewards differ too
    result = _label(run_dir, JudgeDouble(scores=varied), peers, peer_critique=True)
    store.write(run_dir / "run.db", result)
    out = tmp_path / "export"
    export.export(run_dir / "run.db", out)
    return out, result


def test_every_exported_file_loads_and_passes_its_trainers_checks(exported: tuple[Path, Any], tmp_path: Path) -> None:
    from datasets import load_dataset

    out, result = exported
    manifest = json.loads((out / "manifest.json").read_text())
    files = manifest["files"]
    assert {f"town/{k}.jsonl" for k in export.FILES} <= set(files), "every format for the town"
    texts = [json.dumps(json.loads(line)) for name in files for line in (out / name).read_text().splitlines()]
    tok = _tokenizer(texts)
    for name, count in files.items():
        kind = Path(name).stem
        data = load_dataset("json", data_files=str(out / name), split="train")
        assert len(data) == count > 0, name
        need = {"sft": {"messages"}, "kto": {"prompt", "completion", "label"},
                "dpo": {"prompt", "chosen", "rejected", "margin"},
                "grpo": {"prompt", "persona", "scene", "rubric", "kind"}}[kind]
        assert need <= set(data.column_names), name
        if name.startswith("town/") or name.startswith("agents/isabella"):
            _trl_accepts(kind, data, tok, tmp_path / "trl")
    kto = load_dataset("json", data_files=str(out / "town/kto.jsonl"), split="train")
    assert all(row["label"] == (row["advantage"] > 0) and row["advantage"] != 0 for row in kto)
    assert {"actor", "critic"} <= set(kto["role"]) and {True, False} <= set(kto["label"])
    assert "scorer" not in set(kto["role"]), "a scorer's reward is 0 when it parses: never above or below its group"
    assert set(kto.column_names) >= {"peer_reward", "peer_advantage"}, "every row carries every column"
    dpo = load_dataset("json", data_files=str(out / "town/dpo.jsonl"), split="train")
    assert all(row["margin"] > 0 for row in dpo)
    sft = load_dataset("json", data_files=str(out / "town/sft.jsonl"), split="train")
    assert all(row["messages"][-1]["role"] == "assistant" for row in sft)


def test_exported_prompts_are_exactly_what_the_agents_were_given(exported: tuple[Path, Any], run_dir: Path) -> None:
    out, _ = exported
    calls = {r["id"]: r for r in _db_rows(run_dir, "select id, messages, completion from llm_calls")}
    said = {r["id"]: r["llm_call_id"] for r in _db_rows(run_dir, "select id, llm_call_id from utterances")}
    rows = [json.loads(line) for line in (out / "town/kto.jsonl").read_text().splitlines()]
    own = [r for r in rows if r["role"] == "actor"]
    assert own
    for row in own:
        table, ident = row["source"].split(",")[0].split(":")
        if table == "utterances":
            call = calls[said[int(ident)]]
            assert row["prompt"] == json.loads(call["messages"])
            assert row["completion"] == [{"role": "assistant", "content": call["completion"]}]
    # a critic's example is the critique prompt it was given
    peer_calls = {r["messages"] for r in _db_rows(run_dir, "select messages from reward_calls")}
    critic = next(r for r in rows if r["role"] == "critic")
    assert json.dumps(critic["prompt"]) in {json.dumps(json.loads(m)) for m in peer_calls}


def test_sft_takes_each_agents_best_turns_and_dpo_pairs_within_groups(exported: tuple[Path, Any]) -> None:
    out, _ = exported
    own = [json.loads(line) for line in (out / "town/grpo.jsonl").read_text().splitlines()]  # every own turn
    sft = [json.loads(line) for line in (out / "town/sft.jsonl").read_text().splitlines()]
    for agent in {r["agent_id"] for r in own}:
        mine = sorted((r["reward"] for r in own if r["agent_id"] == agent), reverse=True)
        picked = sorted((r["reward"] for r in sft if r["agent_id"] == agent), reverse=True)
        assert len(picked) == max(1, math.ceil(0.25 * len(mine)))
        assert picked == mine[: len(picked)]
    dpo = [json.loads(line) for line in (out / "town/dpo.jsonl").read_text().splitlines()]
    assert dpo, "the varied scores make pairs"
    rewards = {r["source"]: r["reward"] for r in own}
    for pair in dpo:
        assert pair["margin"] == pytest.approx(rewards[pair["chosen_source"]] - rewards[pair["rejected_source"]])
    per_agent = json.loads((out / "manifest.json").read_text())["files"]
    assert sum(v for k, v in per_agent.items() if k.startswith("agents/") and k.endswith("/dpo.jsonl")) == len(dpo)


def test_rows_carry_the_rubric_items_behind_each_reward(exported: tuple[Path, Any]) -> None:
    """The reward is one number; the four items it averages come along as columns, so a trainer
    can weight the dimensions (in character, goals, responsive, plausible) its own way."""
    out, _ = exported
    for name in ("sft", "kto", "grpo"):
        for row in (json.loads(line) for line in (out / f"town/{name}.jsonl").read_text().splitlines()):
            if row.get("role", "actor") != "actor":
                assert row["scores"] == {}, "a critic's or scorer's turn is one number, no items"
                continue
            measured = set(DIMENSIONS) if row["kind"] == "utterance" else set()
            assert set(row["scores"]) == set(rubric.KEYS) | measured, "lines also carry what they did"
            mean = sum(row["scores"][k] for k in rubric.KEYS) / len(rubric.KEYS)
            assert row["reward"] == pytest.approx((mean - 1) / 4), "the reward is the items' normalised mean"
    for pair in (json.loads(line) for line in (out / "town/dpo.jsonl").read_text().splitlines()):
        assert set(pair["chosen_scores"]) == set(pair["rejected_scores"]) >= set(rubric.KEYS)


def test_grpo_rows_carry_what_a_reward_function_needs_to_rejudge(exported: tuple[Path, Any]) -> None:
    from datasets import load_dataset

    out, _ = exported
    data = load_dataset("json", data_files=str(out / "town/grpo.jsonl"), split="train").select(range(4))
    judge = JudgeDouble(scores=lambda req: dict(zip(rubric.KEYS, (5, 5, 5, 1))),
                        garbage=lambda req: "I refuse" in judged_text(req))
    reward = judging.reward_function(judge)
    inputs = [dict(row) for row in data]
    completions = [[{"role": "assistant", "content": json.dumps({"say": "Lovely day for it, Walter!",
                                                                 "end_conversation": False})}],
                   [{"role": "assistant", "content": "I refuse"}], [{"role": "assistant", "content": "plain words"}],
                   [{"role": "assistant", "content": json.dumps({"steps": [{"action": "bake", "place": "cafe",
                                                                            "minutes": 20}]})}]]
    keys = [k for k in inputs[0] if k not in ("prompt", "completion", "completion_ids")]  # as GRPOTrainer passes them
    kwargs = {k: [row[k] for row in inputs] for k in keys}
    got = reward(prompts=[r["prompt"] for r in inputs], completions=completions, trainer_state=None, **kwargs)
    assert got == [0.75, None, 0.75, 0.75]
    texts = [judged_text(r) for b in judge.batches for r in b]
    assert "Lovely day for it, Walter!" in texts and "bake (cafe, 20 min)" in texts
    assert json.loads(inputs[0]["persona"])["name"] in judge.batches[0][0].messages[0]["content"]


def test_export_refuses_a_used_folder_and_a_run_without_rewards(run_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no rewards in run.db yet"):
        export.export(run_dir / "run.db", tmp_path / "e")
    store.write(run_dir / "run.db", _label(run_dir, JudgeDouble()))
    export.export(run_dir / "run.db", tmp_path / "e")
    with pytest.raises(InputError, match="already holds an export"):
        export.export(run_dir / "run.db", tmp_path / "e")


# --------------------------------------------------------------------------- the command


def test_rewards_command_judges_stores_and_exports(run_dir: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    double = JudgeDouble()
    out = tmp_path / "trl"
    result = agora("rewards", str(run_dir), "--peer-critique", "--export", str(out), "--format", "trl",
                   monkeypatch=monkeypatch, backend=double)
    assert result.exit_code == 0, result.output
    assert result.output.strip().splitlines()[-1] == str(out)
    assert "Rewards · judge judgedouble-v1" in result.output and "Isabella" in result.output
    assert "Peer critique:" in result.output and "per game hour" in result.output
    assert double.closed and (out / "manifest.json").is_file()
    assert _db_rows(run_dir, "select count(*) n from rewards")[0]["n"] > 0
    again = agora("rewards", str(run_dir), "--export", str(tmp_path / "again"), "--export-only", "--quiet",
                  monkeypatch=monkeypatch, backend=JudgeDouble())
    assert again.exit_code == 0, again.output
    assert (tmp_path / "again" / "town" / "grpo.jsonl").read_text() == (out / "town" / "grpo.jsonl").read_text()


@pytest.mark.parametrize(("args", "fragment"), [
    (["no/such/run"], "run directory not found"),
    (["tests"], "not a run directory (no run.db inside)"),
    (["RUN", "--format", "csv", "--export", "x"], "--format: unknown format 'csv'"),
    (["RUN", "--export-only"], "--export-only: needs --export DIR"),
    (["RUN", "--cache", "sometimes"], "--cache"),
])
def test_rewards_command_bad_input_exits_2(args: list[str], fragment: str, run_dir: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    double = JudgeDouble()
    result = agora("rewards", *[str(run_dir) if a == "RUN" else a for a in args], monkeypatch=monkeypatch,
                   backend=double)
    assert result.exit_code == 2, result.output
    assert fragment in result.output and "Traceback" not in result.output
    assert not double.batches


def test_rewards_command_with_an_unreachable_judge_exits_1(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = agora("rewards", str(run_dir), "--judge-backend", "openai", "--judge-base-url", "http://127.0.0.1:9/v1",
                   "--cache", "off", monkeypatch=monkeypatch)
    assert result.exit_code == 1, result.output
    assert "cannot reach" in result.output and "Traceback" not in result.output
    assert _db_rows(run_dir, "select name from sqlite_master where name = 'rewards'") == []


# --------------------------------------------------------------------------- the real model


@pytest.mark.slow
def test_bundled_model_judges_a_few_turns(run_dir: Path, tmp_path: Path) -> None:
    """Two turns of a scripted run judged by the bundled SmolLM2-135M: schema-valid scores or counted drops
    (each judgement is a written assessment of up to a few hundred tokens: 4 to 8 s on two cores)."""
    from simulation.llm.factory import build_backend
    from simulation.llm.settings import LlamaCppSettings

    judge = build_backend(LlamaCppSettings(cache="off"), Path.cwd())
    try:
        result = engine.label(run_dir / "run.db", _personas(run_dir), judge, None, engine.RewardOptions(limit=2))
    finally:
        judge.close()
    counts = result.counts()
    assert counts["turns"] == 2 and counts["usable"] + counts["dropped"] == 2
    assert 2 <= counts["calls"] <= 4 and "SmolLM2" in result.judge["model"]
    for r in result.rows:
        assert set(r.scores) == set(rubric.KEYS) and all(1 <= v <= 5 for v in r.scores.values())
    store.write(run_dir / "run.db", result)
    if result.rows:
        summary = export.export(run_dir / "run.db", tmp_path / "real")
        assert summary.files


def test_actions_link_to_the_plan_call_that_chose_them(run_dir: Path) -> None:
    """The engine records the call behind each action (events.data.llm_call_id); rewards use it."""
    from simulation.rewards.turns import read_turns

    _, turns = read_turns(run_dir / "run.db")
    data = {r["id"]: json.loads(r["data"] or "{}") for r in _db_rows(
        run_dir, "select id, data from events where kind = 'action'")}
    purposes = {r["id"]: r["purpose"] for r in _db_rows(run_dir, "select id, purpose from llm_calls")}
    linked = [t for t in turns if t.kind == "action" and "llm_call_id" in data[t.source_id]]
    assert linked
    for t in linked:
        assert t.llm_call_id == data[t.source_id]["llm_call_id"] and purposes[t.llm_call_id] == "plan"

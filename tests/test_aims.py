"""The moves a speaker is offered (``cognition.aims``), and what saying them does to the people
and to run.db: news told once, news heard passed on, invitations made, answered and kept."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

import pytest
from conftest import MINIMAL
from fake_mind import FakeMind

from simulation.agents import AgentState
from simulation.cognition.aims import aim_menu, instruction, off_aim, option_text, untold_news
from simulation.cognition.converse import WRONG_PERSON, Converse, misaddressed
from simulation.llm.types import asked
from simulation.core import (
    Action, Aim, Happening, MemoryKind, Move, PlanItem, Provenance, Source, Status, as_doing, doing_at,
)

MORNING = datetime(2023, 2, 13, 9, 0)
PARTY = Happening("party", "cafe", datetime(2023, 2, 14, 17, 0), datetime(2023, 2, 14, 19, 0))


@pytest.fixture(scope="module")
def personas():
    from simulation.scenario import load

    return {rp.persona.id: rp for rp in load(MINIMAL).people}


@pytest.fixture
def mind(personas) -> FakeMind:
    people = {pid: AgentState(id=pid, persona=rp.persona, home=rp.home, workplace=rp.workplace, place="cafe",
                              status=Status.IDLE, system_prompt=f"You are {rp.persona.name}.")
              for pid, rp in personas.items() if pid in ("ann", "bob")}
    m = FakeMind(people, now=MORNING)
    m.settings = dataclasses.replace(m.settings, max_conversation_turns=8)
    return m


def whisper(mind: FakeMind, pid: str, text: str, importance: float = 5.0) -> int:
    node = mind.remember(pid, MemoryKind.THOUGHT, text, Provenance(Source.WHISPERED), importance=importance)
    mind.person(pid).news.append(node.id)
    return node.id


def talk(mind: FakeMind, *lines: tuple[str, Move]):
    conv = mind.start_conversation(mind.person("ann"), mind.person("bob"), None)
    for speaker, move in (("ann", Move(Aim.GREET)), *lines):
        mind.say(conv, mind.person(speaker), "words", None, move)
    return conv


def aims(menu: list[Move]) -> list[Aim]:
    return [m.aim for m in menu]


def test_a_first_line_greets_back_shares_invites_or_asks_and_cannot_yet_say_goodbye(mind):
    whisper(mind, "bob", "The bakery burned down last night.", importance=8)
    whisper(mind, "bob", "The river is high.", importance=3)
    mind.known = [PARTY]
    conv = talk(mind)
    menu = aim_menu(mind.person("bob"), mind, conv)
    assert aims(menu) == [Aim.GREET, Aim.SHARE, Aim.SHARE, Aim.INVITE, Aim.ASK]
    assert menu[1].topic == "The bakery burned down last night.", "the most important news first"
    assert menu[3].happening == PARTY and menu[3].topic == "the party at Cafe on Tuesday 14 February, 17:00-19:00"
    assert menu[4] == Move(Aim.ASK, "plans")
    assert option_text(menu[3], "Bob", "Ann") == "invite Ann to the party at Cafe on Tuesday 14 February, 17:00-19:00"


def test_an_invitation_says_the_name_the_town_calls_the_happening_by(mind):
    """A fact's ``name`` ("Valentine's Day party") is what an invitation and a plan say; without one,
    the id's words. (A guest asked "Do you know of a Valentine's Day party?" then holds a line naming it.)"""
    named = dataclasses.replace(PARTY, name="Valentine's Day party")
    mind.known = [named]
    invite = next(m for m in aim_menu(mind.person("bob"), mind, talk(mind)) if m.aim == Aim.INVITE)
    assert invite.happening == named
    assert invite.topic == "the Valentine's Day party at Cafe on Tuesday 14 February, 17:00-19:00"
    assert (named.title, PARTY.title, dataclasses.replace(PARTY, fact="bake_sale").title) == (
        "Valentine's Day party", "party", "bake sale")


def test_goodbye_is_offered_from_the_fourth_line_and_is_the_only_move_at_the_limit(mind):
    conv = talk(mind, ("bob", Move(Aim.GREET)), ("ann", Move(Aim.ASK, "plans")),
                ("bob", Move(Aim.ANSWER, "Bob's plans: nothing more planned today")))
    menu = aim_menu(mind.person("ann"), mind, conv)
    assert aims(menu) == [Aim.REPLY, Aim.ASK, Aim.END]
    assert menu[1] == Move(Aim.ASK, "doing"), "a question already asked is not asked again"
    mind.settings = dataclasses.replace(mind.settings, max_conversation_turns=5)
    assert aims(aim_menu(mind.person("ann"), mind, conv)) == [Aim.END]


def test_a_question_is_answered_from_the_speakers_own_plan_doing_or_news(mind):
    bob = mind.person("bob")
    bob.plan = [PlanItem(hour=8, activity="breakfast", place="cafe"), PlanItem(hour=10, activity="baking", place="cafe"),
                PlanItem(hour=18, activity="a drink", place="cafe")]
    conv = talk(mind, ("bob", Move(Aim.GREET)), ("ann", Move(Aim.ASK, "plans")))
    assert aim_menu(bob, mind, conv) == [Move(Aim.ANSWER, "Bob's plans: 10:00 baking; 18:00 a drink")]
    mind.end_conversation(conv, "goodbye")
    conv = talk(mind, ("bob", Move(Aim.GREET)), ("ann", Move(Aim.ASK, "news")))
    assert aim_menu(bob, mind, conv) == [Move(Aim.ANSWER, "Bob has heard no news")]
    news = whisper(mind, "bob", "The bakery burned down last night.")
    assert aim_menu(bob, mind, conv) == [Move(Aim.ANSWER, "The bakery burned down last night.", memory_id=news)]


def test_asked_what_they_are_doing_mid_conversation_people_say_what_they_were_doing_not_talking(mind):
    bob = mind.person("bob")
    bob.status, bob.action = Status.ACTING, Action("black coffee at the Cafe", "cafe", 30)
    conv = talk(mind, ("bob", Move(Aim.GREET)), ("ann", Move(Aim.ASK, "doing")))
    assert bob.status == Status.TALKING
    assert aim_menu(bob, mind, conv) == [Move(Aim.ANSWER, "Bob is busy with black coffee at the Cafe")]
    mind.end_conversation(conv, "goodbye")
    assert bob.status == Status.ACTING
    bob.status, bob.action = Status.IDLE, None
    conv = talk(mind, ("bob", Move(Aim.GREET)), ("ann", Move(Aim.ASK, "doing")))
    assert aim_menu(bob, mind, conv) == [Move(Aim.ANSWER, "Bob is spending some time at Cafe")]


@pytest.mark.parametrize("activity, doing", [
    ("dispensing prescriptions", "dispensing prescriptions"),
    ("black coffee at Hobbs Cafe", "busy with black coffee at Hobbs Cafe"),
    ("the yearly stock count", "busy with the yearly stock count"),
    ("late for his shift at Hobbs Cafe", "late for his shift at Hobbs Cafe"),
    ("home with the cat", "home with the cat"),
])
def test_an_activity_reads_as_what_someone_is_doing(activity, doing):
    assert as_doing(activity) == doing
    assert doing_at(as_doing(activity), "Hobbs Cafe").endswith("Hobbs Cafe")
    assert doing_at("reading", "the Library") == "reading at the Library"


def test_an_invitation_is_accepted_or_declined_and_an_accepted_one_is_kept(mind):
    mind.known = [PARTY]
    conv = talk(mind, ("bob", Move(Aim.GREET)))
    invite = next(m for m in aim_menu(mind.person("ann"), mind, conv) if m.aim == Aim.INVITE)
    mind.say(conv, mind.person("ann"), "Come to the party at the Cafe tomorrow at five!", None, invite)
    assert mind.person("ann").invited == {"bob": ["party"]}
    answer = aim_menu(mind.person("bob"), mind, conv)
    assert aims(answer) == [Aim.ACCEPT, Aim.DECLINE] and answer[0].happening == PARTY
    assert answer[0].invitation_id is not None, "the answer names the invitation it answers"
    mind.say(conv, mind.person("bob"), "I'd love to come!", None, answer[0])
    assert mind.person("bob").going == [PARTY]
    assert not any(m.aim == Aim.INVITE for m in aim_menu(mind.person("ann"), mind, conv)), "invited once"


def test_nothing_is_invited_to_once_it_has_begun(mind):
    mind.known = [PARTY]
    mind.now = PARTY.start + timedelta(minutes=10)
    conv = talk(mind, ("bob", Move(Aim.GREET)))
    assert Aim.INVITE not in aims(aim_menu(mind.person("ann"), mind, conv))


def test_nobody_is_invited_to_their_own_happening(mind):
    """Bob holds the party first-hand (whispered to him: he is its host); Ann, who knows of it, may
    tell him nothing new by inviting him to it."""
    mind.known = [PARTY]
    node = mind.remember("bob", MemoryKind.THOUGHT, "I will throw a party at the cafe tomorrow at five.",
                         Provenance(Source.WHISPERED, fact="party"))
    mind.person("bob").news.append(node.id)
    conv = talk(mind, ("bob", Move(Aim.GREET)))
    assert Aim.INVITE not in aims(aim_menu(mind.person("ann"), mind, conv))


def test_a_guest_who_heard_of_it_may_invite_someone_else(mind):
    mind.known = [PARTY]
    node = mind.remember("bob", MemoryKind.UTTERANCE, 'Carl said to Bob Brown: "Come to the party!"',
                         Provenance(Source.HEARD, from_agent="carl", fact=None, quote="Come to the party!"))
    mind.person("bob").news.append(node.id)
    conv = talk(mind, ("bob", Move(Aim.GREET)))
    assert Aim.INVITE in aims(aim_menu(mind.person("ann"), mind, conv))


def test_news_is_not_told_twice_nor_back_to_whoever_told_it(mind):
    news = whisper(mind, "ann", "The bakery burned down last night.")
    conv = talk(mind, ("bob", Move(Aim.GREET)))
    ann = mind.person("ann")
    share = next(m for m in aim_menu(ann, mind, conv) if m.aim == Aim.SHARE)
    mind.say(conv, ann, "Did you hear? The bakery burned down!", None, share)
    assert ann.told == {"bob": [news]} and untold_news(ann, mind, "bob") == []
    heard = mind.remember("bob", MemoryKind.UTTERANCE, 'Ann Archer said to Bob Brown: "The bakery burned down!"',
                          Provenance(Source.HEARD, from_agent="ann", quote="The bakery burned down!"))
    mind.person("bob").news.append(heard.id)
    assert untold_news(mind.person("bob"), mind, "ann") == [], "not told back to the one who told it"
    mind.people_by_id["carl"] = mind.person("ann").model_copy(update={"id": "carl", "told": {}, "invited": {}})
    assert [n.id for n in untold_news(mind.person("bob"), mind, "carl")] == [heard.id]


def test_a_spoken_line_is_neither_a_bare_word_nor_the_prompt_read_back():
    from simulation.cognition.converse import check_spoken

    assert check_spoken("Fiona", []) == "is a bare word, not a line"
    assert check_spoken("furthermore", []) == "is a bare word, not a line"
    assert check_spoken("Yes.", []) is None and check_spoken("Mate!", []) is None
    assert check_spoken("The conversation so far: Fiona greeted Walter.", []) == \
        "reads the prompt back instead of speaking"
    assert check_spoken("In Isabella's own words and speaking style", []) == "reads the prompt back instead of speaking"
    assert check_spoken("Good morning, Walter! Busy day at the shop?", []) is None


def test_an_assistants_refusal_is_not_a_line_but_a_persons_apology_is():
    """The 1.5B sometimes steps out of the person: "I'm sorry, but I can't assist with that." """
    from simulation.cognition.converse import check_spoken
    from simulation.rundb.garbled import garbled

    refusal = "is the model refusing as an assistant, not the person speaking"
    for text in ("I'm sorry, but I can't assist with that.", "I’m sorry, but I cannot help with that request.",
                 "As an AI, I don't have plans for the day.", "I am unable to assist with this."):
        assert check_spoken(text, []) == refusal, text
        assert garbled(text) == refusal
    for text in ("I'm sorry, Daniel. I just can't go to that party.", "Sorry Isabella, I have to go.",
                 "I'm sorry, I can't make it tonight.", "Can I help you carry those boxes?",
                 "I'd love to assist with the decorations!"):
        assert check_spoken(text, []) is None, text


def test_a_line_cut_by_the_schemas_length_keeps_its_whole_sentences():
    from simulation.cognition.converse import whole_sentences

    cut = ("Morning, Kit! The coastguard says a gale is coming on Tuesday, so the ferry won't run. "
           "Have you tied the boats down yet, or should I come round later and give you a hand?")[:160]
    assert whole_sentences(cut) == "Morning, Kit! The coastguard says a gale is coming on Tuesday, so the ferry won't run."
    assert whole_sentences("Short and sweet.") == "Short and sweet."
    unbroken = "word " * 31 + "end"  # no sentence to go back to: kept as it is
    assert whole_sentences(unbroken) == unbroken.strip()
    assert whole_sentences("   ") == "   "  # blank: left for check_line to refuse, never made ""


def test_a_blank_line_is_refused_not_a_crash():
    """A model that answers {"say": " "}: the repair must not assign "" (below the schema's
    minimum), which stopped a Kelder Cove run with a ValidationError."""
    from simulation.cognition.converse import _check_utterance
    from simulation.cognition.schemas import UtteranceAnswer

    answer = UtteranceAnswer(say=" ")
    assert _check_utterance(answer, [], Move(Aim.GREET), ("Ann", "Bob"), ["Ann", "Bob"]) == "says nothing"


def test_a_line_written_as_a_transcript_keeps_only_the_speakers_words():
    """A capable model writes "Walter: Hello, Isabella." (its own name as a label), which used to
    read as Walter calling himself; a further turn after " / " is someone else's line."""
    from simulation.cognition.converse import _check_utterance, unlabel
    from simulation.cognition.schemas import UtteranceAnswer

    town = ["Bob", "Isabella", "Walter"]
    answer = UtteranceAnswer(say="Walter: Hello, Isabella. How are you?")
    assert _check_utterance(answer, [], Move(Aim.GREET), ("Walter", "Isabella"), town) is None
    assert answer.say == "Hello, Isabella. How are you?"
    said = "Isabella Rodriguez: Great idea, Walter. I'll invite everyone. / Walter: Yes, I agree."
    assert unlabel(said, "Isabella", town) == "Great idea, Walter. I'll invite everyone."
    assert unlabel('"Walter: Hello, Isabella."', "Walter", town) == "Hello, Isabella."
    assert unlabel("**Walter:** Hello there.", "Walter", town) == "Hello there."
    # What follows a further turn is someone else's line, however short the speaker's part.
    assert unlabel("Hello, Isabella. / Isabella: Hi!", "Walter", town) == "Hello, Isabella."
    # Someone else's label is the model writing the other person's line: refused.
    for line in ("Isabella: Sounds good, see you there.", "Isabella Rodriguez: That sounds lovely."):
        assert _check_utterance(UtteranceAnswer(say=line), [], Move(Aim.GREET), ("Walter", "Isabella"),
                                town) == "writes someone else's line"
    # A line that is nothing but a label is refused, never left empty (an empty line is no
    # UtteranceAnswer: a bundled run stopped on it).
    for bare in ("Walter:", '"Walter: "', " Isabella: hi"):
        answer = UtteranceAnswer(say=bare)
        assert _check_utterance(answer, [], Move(Aim.GREET), ("Walter", "Isabella"), town) is not None
    # A colon that is no label stays.
    assert unlabel("Meet me at 5:30, Bob.", "Walter", town) == "Meet me at 5:30, Bob."


def test_a_line_must_do_what_its_move_is_for():
    names = ("Ann", "Bob")
    share = Move(Aim.SHARE, "The bakery burned down last night.")
    assert off_aim(share, "Did you hear the bakery burned down?", names) is None
    assert off_aim(share, "Good morning, Bob!", names) == "does not say what it was to tell"
    invite = Move(Aim.INVITE, "the party at Cafe on Tuesday 14 February, 17:00-19:00", happening=PARTY)
    assert off_aim(invite, "Come to my party, Bob!", names) is None
    assert off_aim(invite, "Would you like to come, Bob?", names) == "does not say what the invitation is to"
    assert off_aim(Move(Aim.ASK, "plans"), "What are you doing today?", names) is None
    assert off_aim(Move(Aim.ASK, "plans"), "Tell me about your day.", names) == "asks nothing"
    assert off_aim(Move(Aim.ASK, "plans"), "I hope you can come to the party.", names) == "asks nothing"
    assert off_aim(Move(Aim.ASK, "plans"), "Bob, I was wondering if you had any plans for today.", names) is None
    assert off_aim(Move(Aim.ASK, "plans"), "I just wanted to ask you about your plans.", names) is None
    for statement in ("I was wondering about the fire all night.", "Everyone wondered who did it.",
                      "No wonder why the bakery closed.", "I'm not asking you about it."):
        assert off_aim(Move(Aim.ASK, "plans"), statement, names) == "asks nothing", statement
    assert off_aim(Move(Aim.GREET), "Hi!", names) is None
    assert instruction(Move(Aim.ASK, "plans"), "Ann", "Bob") == "asks Bob a question about Bob's plans for today."


def test_an_invitation_flows_through_a_conversation(mind):
    """Ann invites, Bob accepts, both through the Converse phase with the model's words."""
    mind.known = [PARTY]
    conv = talk(mind, ("bob", Move(Aim.GREET)))
    conv.next_speaker = "ann"
    mind.answers["aim"] = mind.choosing("invite", "accept")
    lines = iter(["Bob, come to the party at the Cafe on Tuesday at five!", "Thank you, I will come to the party."])
    mind.answers["utterance"] = lambda schema, default: {"say": next(lines)}
    mind.run(Converse())
    mind.run(Converse())
    assert [m.aim for m in conv.moves] == [Aim.GREET, Aim.GREET, Aim.INVITE, Aim.ACCEPT]
    assert mind.person("bob").going == [PARTY]
    prompt = asked(mind.asked[-1].messages)
    assert "- Ann invited Bob to the party at Cafe" in prompt and "Now Bob gladly accepts Ann's invitation" in prompt


def test_a_run_records_moves_and_invitations_and_the_guest_plans_to_go(make_run):
    """Through the real run: Isabella knows of the party and invites whoever she talks to; they
    accept; the rows, the guest's happenings and the behaviour metrics follow."""
    import json

    from simulation.testing import ScriptedBackend

    from simulation.rundb.behaviour import behaviour

    run = make_run(ScriptedBackend(prefer=("invite", "accept"), end_after=6), ticks=12)
    for _ in range(12):
        run.step()
    db = run.store.db
    invitations = list(db.query("select * from invitations"))
    assert invitations and all(i["fact_id"] == "party" and i["place"] == "hobbs_cafe" for i in invitations)
    assert all(i["answer"] == "accepted" and i["answer_utterance_id"] for i in invitations)
    assert {i["starts_at"] for i in invitations} == {"2023-02-14 17:00"}
    invite = db.execute("select aim, topic, speaker_id from utterances where id = ?",
                        [invitations[0]["utterance_id"]]).fetchone()
    assert invite[0] == "invite" and invite[2] == invitations[0]["inviter_id"]
    assert "the Valentine's Day party at Hobbs Cafe" in invite[1], "the invitation says what the town calls it"
    answer = db.execute("select aim, speaker_id from utterances where id = ?",
                        [invitations[0]["answer_utterance_id"]]).fetchone()
    assert answer == ("accept", invitations[0]["guest_id"])
    guest = run.model.people[invitations[0]["guest_id"]].state
    assert [(h.fact, h.title) for h in guest.going] == [("party", "Valentine's Day party")]
    assert "party" in [h.fact for h in run.model.mind.happenings(guest.id)], "the guest's next day can hold it"
    assert all(json.loads(c["participants"]) for c in db.query("select participants from conversations"))
    metrics = behaviour(db.conn, run.store.run_id)
    assert metrics["talk.invitations"] == len(invitations) and metrics["talk.invitations_accepted_share"] == 1.0
    assert metrics["talk.aim.invite"] > 0 and metrics["talk.aim.accept"] > 0
    assert metrics["talk.invitation_turnout"] is None, "the party has not happened within the run"


def test_turnout_counts_accepted_guests_who_were_there_while_it_went_on():
    """Turnout counts accepted guests who were at the place while it went on; the accepted share
    counts an invitation the guest walked away from as not accepted, and leaves out one still
    unanswered in a conversation the run's end cut off (pending, not a 'no')."""
    import sqlite3

    from simulation.rundb.behaviour import _moves

    con = sqlite3.connect(":memory:")
    con.execute("create table utterances (run_id, aim)")
    con.execute("create table conversations (id, run_id, ended_tick)")
    con.execute("create table invitations (run_id, conversation_id, guest_id, place, starts_at, ends_at, answer)")
    con.execute("create table agent_states (run_id, agent_id, place, sim_time, status)")
    con.executemany("insert into utterances values ('r', ?)", [("invite",), ("accept",), ("invite",), ("decline",)])
    con.executemany("insert into conversations values (?, 'r', ?)", [(1, 5), (2, 9), (3, 12), (4, 20), (5, None)])
    party = ("cafe", "2023-02-14 17:00", "2023-02-14 19:00")
    con.executemany("insert into invitations values ('r', ?, ?, ?, ?, ?, ?)", [
        (1, "ann", *party, "accepted"), (2, "bob", *party, "accepted"), (3, "cat", *party, "declined"),
        (4, "dan", *party, None), (5, "eve", *party, None)])
    con.executemany("insert into agent_states values ('r', ?, ?, ?, ?)", [
        ("ann", "cafe", "2023-02-14 17:30", "idle"), ("bob", "cafe", "2023-02-14 19:00", "idle"),
        ("bob", "cafe", "2023-02-14 18:00", "walking"), ("cat", "cafe", "2023-02-14 17:30", "idle"),
        ("ann", "home", "2023-02-14 20:00", "sleeping")])
    out = _moves(con, "r")
    assert out["talk.invitations"] == 5
    assert out["talk.invitations_accepted_share"] == 2 / 4, "Dan walked away (not accepted); Eve's is pending"
    assert out["talk.invitation_turnout"] == 0.5, "Bob only walked through, and came when it was over"
    assert out["talk.aim.invite"] == 0.5 and out["talk.aim.decline"] == 0.25


def test_a_move_is_drawn_from_its_probabilities_with_the_questions_seed():
    """Seeds are replicates: a scored choice is drawn (p ** (1/T)), the same for the same seed, and
    the most probable one only under ``choices: argmax`` or a temperature of 0."""
    from collections import Counter

    from simulation.cognition.converse import draw

    probabilities = [0.6, 0.3, 0.1, 0.0]
    assert draw(probabilities, 0.7, 12345) == draw(probabilities, 0.7, 12345)  # replayable
    picks = Counter(draw(probabilities, 1.0, seed) for seed in range(4000))
    assert picks[3] == 0, "an option the model gave no probability is never drawn"
    assert abs(picks[0] / 4000 - 0.6) < 0.03 and abs(picks[1] / 4000 - 0.3) < 0.03 and abs(picks[2] / 4000 - 0.1) < 0.02
    sharp = Counter(draw(probabilities, 0.5, seed) for seed in range(4000))  # p**2: 0.78, 0.20, 0.02
    assert abs(sharp[0] / 4000 - 0.36 / 0.46) < 0.03
    assert {draw(probabilities, 0.7, seed, "argmax") for seed in range(50)} == {0}
    assert {draw(probabilities, 0.0, seed) for seed in range(50)} == {0}
    assert draw([0.5, 0.5], 0.7, 1, "argmax") == 0, "ties go to the first option"


def test_a_line_that_misses_its_move_is_said_as_a_plain_reply_and_tells_nothing(mind):
    """News that never says the news is still the person's words: the talk goes on, as a reply,
    and nothing is counted as told (a goodbye was the old fallback, which cut talks short)."""
    whisper(mind, "ann", "The bakery burned down last night.", importance=8)
    conv = talk(mind, ("bob", Move(Aim.GREET)))
    conv.next_speaker = "ann"
    mind.answers["aim"] = mind.choosing("tell")
    mind.answers["utterance"] = lambda schema, default: {"say": "What a lovely cold morning it is."}
    mind.run(Converse())
    assert conv.moves[-1].aim == Aim.REPLY and conv.lines[-1][1] == "What a lovely cold morning it is."
    assert mind.person("ann").told == {}


def test_a_line_that_calls_the_wrong_person_is_not_said(mind):
    """Ann talking to Bob must not call herself (or anyone not there) by name: the line is
    rejected, and with no better one the turn is a goodbye, not a misaddressed line."""
    conv = talk(mind, ("bob", Move(Aim.GREET)))
    conv.next_speaker = "ann"
    mind.answers["aim"] = mind.choosing("ask")
    mind.answers["utterance"] = lambda schema, default: {"say": "How are you today, Ann?"}
    mind.run(Converse())
    assert conv.moves[-1].aim == Aim.END and "Ann?" not in conv.lines[-1][1]
    assert misaddressed("Morning, Ann!", "Bob", ["Ann", "Bob"]) == WRONG_PERSON
    assert misaddressed("Morning, Bob! Ann says hello.", "Bob", ["Ann", "Bob"]) is None

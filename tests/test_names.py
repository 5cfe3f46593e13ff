"""Name errors in lines (``simulation.rundb.names``): an address to the speaker or an outsider counts,
a mention does not."""

import sqlite3

from simulation.rundb.names import addressed, name_errors

NAMES = ["Daniel", "Isabella", "Walter"]


def test_addresses_are_found_where_one_calls_someone():
    assert addressed("Daniel, would you like a coffee?", NAMES) == {"Daniel"}
    assert addressed("See you later, Isabella!", NAMES) == {"Isabella"}
    assert addressed("Good morning Walter, lovely day.", NAMES) == {"Walter"}
    assert addressed("What are your plans today, Daniel?", NAMES) == {"Daniel"}
    assert addressed("Thanks, Daniel. I will come.", NAMES) == {"Daniel"}


def test_a_mention_is_not_an_address():
    assert addressed("I saw Daniel at the pharmacy this morning.", NAMES) == set()
    assert addressed("Isabella is throwing a party at the cafe.", NAMES) == set()
    assert addressed("Walter and I fixed the fence.", NAMES) == set()


def _db(lines):
    con = sqlite3.connect(":memory:")
    con.execute("create table agents (run_id, agent_id, name)")
    con.execute("create table utterances (id, run_id, speaker_id, listener_id, text)")
    con.executemany("insert into agents values ('r', ?, ?)", [("dan", "Daniel Okafor"), ("isa", "Isabella Rodriguez"),
                                                              ("wal", "Walter Hughes")])
    con.executemany("insert into utterances values (?, 'r', ?, ?, ?)",
                    [(i, s, li, t) for i, (s, li, t) in enumerate(lines)])
    return con


def test_a_line_to_oneself_or_an_outsider_is_an_error_and_to_the_listener_is_not():
    con = _db([("isa", "dan", "See you later, Isabella!"),      # the speaker herself
               ("isa", "dan", "Walter, have you heard the news?"),  # someone not in the conversation
               ("isa", "dan", "See you later, Daniel!"),         # the listener: right
               ("isa", "dan", "Walter told me about the fence.")])  # a mention: right
    wrong, lines = name_errors(con, "r")
    assert lines == 4
    assert wrong == [(0, "addresses the speaker: Isabella"), (1, "addresses someone not in it: Walter")]

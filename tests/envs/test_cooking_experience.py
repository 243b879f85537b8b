"""The template distiller on real cooking games: a procedure with roles, verb rules and pitfalls
read off a won walkthrough and plays that lose; its text round-trips and fits a small model's
prompt; its prior over another game's valid commands points at the next step and away from
pitfalls; held-out games never seed a bank; ``bank seed --source cooking`` builds one.

Two default-difficulty train games are generated once for the session (conftest's
``cooking_pair``); the held-out test makes one small valid game.
"""

from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("textworld")

from genmem.cli import main
from genmem.envs.cooking import CookingConfig, CookingRecord, load_cooking_games
from genmem.envs.cooking_experience import (
    NEXT_BONUS,
    PITFALL_PENALTY,
    TRIED_PENALTY,
    WRITER,
    CookingExperienceError,
    CookingProcedure,
    CookingTrajectory,
    GameStep,
    GameView,
    HeldOutWalkthrough,
    cooking_experience,
    cooking_seed_row,
    distill_procedure,
    losing_variants,
    merge_procedures,
    parse_procedure,
    parse_recipe,
    play_commands,
    prior_ranks_first,
    procedure_prior,
    step_of,
    walkthrough_views,
)
from genmem.envs.textworld_env import TextWorldGame
from genmem.memory.gate import check_payload


@pytest.fixture(scope="module")
def games(cooking_pair: CookingConfig) -> list[tuple[CookingRecord, str]]:
    folder = cooking_pair.games_dir()
    return [(r, str(folder / r.file)) for r in load_cooking_games(cooking_pair)]


@pytest.fixture(scope="module")
def procedures(games) -> list[CookingProcedure]:
    """Each game's procedure, as a seed entry holds it (won walkthrough + losing plays)."""
    return [parse_procedure(cooking_experience(*_row(r, f))) for r, f in games]


def _row(record: CookingRecord, game_file: str) -> tuple[str, dict]:
    row = cooking_seed_row(record, game_file)
    return row["question"], row["answer"]


def test_prior_ranks_first_counts_the_walkthrough_commands_the_prior_alone_puts_on_top(
    games, procedures
) -> None:
    """The measure a choice among procedures is judged by: another game's procedure ranks most
    of game 1's walkthrough first; one that lost its rules ranks fewer; no steps rank none."""
    record, game_file = games[1]
    views = walkthrough_views(game_file, record.walkthrough)
    assert [c for c, _, _ in views] == record.walkthrough
    assert views[0][2] == GameView() and "examine cookbook" in views[0][1]
    full = prior_ranks_first(procedures[0], views)
    no_rules = procedures[0].model_copy(update={"rules": ()})
    assert len(views) > full > prior_ranks_first(no_rules, views) > 0
    assert prior_ranks_first(CookingProcedure(steps=()), views) == 0


def test_the_won_walkthrough_becomes_role_level_steps_with_their_cookbook_lines(games) -> None:
    record, game_file = games[0]
    play = play_commands(game_file, record.walkthrough, game=record.id, split="train")
    assert play.won and sum(play.gains()) == play.steps[-1].score
    proc = distill_procedure(play)
    assert [(s.template, s.kind, s.enables) for s in proc.steps] == [
        ("examine cookbook", "recipe", None),
        ("open {place}", "prerequisite", "take {food}"),
        ("take {food}", "scored", None),
        ("cook {food} with {appliance}", "scored", None),
        ("take knife", "prerequisite", "{verb} {food} with knife"),
        ("{verb} {food} with knife", "scored", None),
        ("prepare meal", "scored", None),
        ("eat meal", "scored", None),
    ]
    recipe = parse_recipe(record.recipe)
    foods = [f for f, _, _ in record.ingredients]
    assert list(recipe.ingredients) == foods
    text = proc.render()
    assert not any(f in s.template for f in foods for s in proc.steps)  # objects as roles
    # each rule: a recipe line, and the walkthrough command that carried it out
    lines = {d.line for d in recipe.directions}
    verbs = {v for _, cooking, cutting in record.ingredients for v in (cooking, cutting)}
    assert proc.rules and all(r.line in lines for r in proc.rules)
    for rule in proc.rules:
        food = rule.line.split(" the ", 1)[1]
        assert rule.command.replace("{food}", food) in record.walkthrough
        assert any(v.startswith(rule.verb[:2]) for v in verbs)  # 'fry' ~ 'fried'
    assert proc.places and "fridge" in proc.places and not proc.pitfalls
    assert proc.won == 1 and proc.lost == 0 and "1 won plays" in text


def test_losing_plays_become_pitfalls_with_the_games_message(games) -> None:
    record, game_file = games[0]
    question, answer = _row(record, game_file)
    lost = [CookingTrajectory.model_validate(t) for t in answer["lost"]]
    assert len(lost) == len(losing_variants(record.walkthrough)) == 4
    assert all(p.lost and not p.won for p in lost)
    assert "You burned" in lost[0].steps[-1].observation
    proc = parse_procedure(cooking_experience(question, answer))
    found = {(p.template, p.kind) for p in proc.pitfalls}
    assert found == {
        ("cook {food} with {appliance}", "again"),  # cooking twice burns
        ("cook {food} with {appliance}", "wrong"),  # the appliance the rules do not give
        ("eat {food}", "always"),
        ("{verb} {food} with knife", "wrong"),
    }
    burned = next(p for p in proc.pitfalls if p.kind == "again")
    assert burned.message == "You burned the {food}!"
    assert proc.won == 1 and proc.lost == 4
    # a play that never read the cookbook cannot be written as roles
    blind = lost[0].model_copy(
        update={"steps": [s for s in lost[0].steps if "Recipe" not in s.observation]}
    )
    with pytest.raises(CookingExperienceError, match="never showed the recipe"):
        distill_procedure(blind)


def test_the_text_round_trips_passes_the_gate_and_fits_a_small_prompt(games, procedures) -> None:
    from transformers import AutoTokenizer

    from genmem.policies.local import model_directory

    tokenizer = AutoTokenizer.from_pretrained(model_directory(None))
    for (record, _), proc in zip(games, procedures, strict=True):
        text = proc.render()
        assert parse_procedure(text) == proc
        assert check_payload(text, sources=[record.intro]).action == "write"
        assert len(tokenizer(text)["input_ids"]) <= 300  # 265 for these two games
        cut = text[: text.index("(before") + 8]  # a payload cut mid-step is refused
        assert check_payload(cut, sources=[record.intro]).reason == "unfinished"
    # two entries joined at one SID read back as one procedure: rules and pitfalls of both
    joined = parse_procedure(f"{procedures[0].render()}\n\n{procedures[1].render()}")
    assert joined == merge_procedures(procedures)
    assert {r.verb for r in joined.rules} == {r.verb for p in procedures for r in p.rules}
    with pytest.raises(CookingExperienceError, match="not a rendered cooking procedure"):
        parse_procedure("Take the knife, then cook.")
    with pytest.raises(CookingExperienceError, match="not a cookbook recipe"):
        parse_recipe("You are hungry!")


def test_the_prior_ranks_another_games_next_step_first_and_its_pitfalls_last(
    games, procedures
) -> None:
    """Game 1 played with game 0's procedure: every step game 1's own procedure needs is ranked
    first (alone), and a second cook, a wrong appliance or eating an ingredient is penalised."""
    record, game_file = games[1]
    teacher, own = procedures[0], procedures[1]
    recipe = parse_recipe(record.recipe)
    needed = first = twice = wrong = 0
    for command, valid, view in walkthrough_views(game_file, record.walkthrough):
        prior = procedure_prior(teacher, valid, view)
        assert len(prior) == len(valid)
        best = max(prior)
        if view.notes == ():  # before the recipe is read: only the cookbook helps
            assert {c for c, p in zip(valid, prior, strict=True) if p > 0} == {"examine cookbook"}
        scores = dict(zip(valid, prior, strict=True))
        if step_of(own, recipe, command) is not None:
            needed += 1
            first += scores[command] == best == NEXT_BONUS and prior.count(best) == 1
        for c in valid:
            if re.fullmatch(rf"eat ({'|'.join(recipe.ingredients)})", c):
                assert scores[c] == PITFALL_PENALTY, c
            if c.startswith("take ") and not any(f in c for f in [*recipe.ingredients, "knife"]):
                assert scores[c] == 0.0, c  # distractor food: unrelated
        for line in recipe.directions if view.notes else ():
            rule = teacher.rule(line.verb)
            if rule is not None and rule.command.startswith("cook ") and line.ingredient:
                right = rule.command.replace("{food}", line.ingredient)
                for c in valid:
                    if c.startswith(f"cook {line.ingredient} with ") and c != right:
                        assert scores[c] == PITFALL_PENALTY, c  # the wrong appliance
                        wrong += 1
        cooked = [c for c in view.played if c.startswith("cook ")]
        for c in cooked:
            food = c.split(" with ")[0].removeprefix("cook ")
            again = [v for v in valid if v.startswith(f"cook {food} with ")]
            assert all(scores[v] == PITFALL_PENALTY for v in again), again
            twice += len(again)
    assert needed >= 10 and first == needed and twice >= 4 and wrong >= 4


def test_a_slot_holding_two_procedures_reads_as_both_merged(procedures) -> None:
    """A seed bank puts two games' procedures that share an address in one numbered payload;
    the prior must read it (it read nothing, so a lookup of such a slot gave no prior)."""
    from genmem.memory.build import ExperienceRecord, concat_consolidate
    from genmem.memory.sid import SID

    texts = [p.render() for p in procedures[:2]]
    payload = concat_consolidate(SID((0, 0, 0, 0)), [ExperienceRecord(text=t) for t in texts])
    assert payload.startswith("2 experiences share this address") and "[2] Cooking" in payload
    assert parse_procedure(payload) == merge_procedures(procedures[:2])


def test_a_loss_against_a_verb_no_rule_covers_is_kept_for_that_verb_only(games) -> None:
    """Game 0 roasts its pork chop and fries its purple potato. A play that has not learnt what
    roasting needs cooks the pork chop on the stove and loses: the pitfall names the stove for
    the recipe verb 'roast', so the prior steers a later roast away from the stove and leaves
    frying on it alone (a pitfall without the verb would forbid the stove for every food)."""
    record, game_file = games[0]
    assert ("pork chop", "roasted", "diced") in record.ingredients
    at = record.walkthrough.index("cook pork chop with oven")
    play = play_commands(
        game_file,
        [*record.walkthrough[:at], "cook pork chop with stove"],
        game=record.id,
        split="train",
    )
    assert play.lost
    [pitfall] = distill_procedure(play).pitfalls
    assert (pitfall.template, pitfall.kind, pitfall.verb) == (
        "cook {food} with stove",
        "wrong",
        "roast",
    )
    procedure = distill_procedure(play)
    text = procedure.render()
    assert "cook {food} with stove where the recipe says roast lost" in text
    assert parse_procedure(text) == procedure  # the verb survives the round trip
    _, valid, view = walkthrough_views(game_file, record.walkthrough)[at]
    scores = dict(zip(valid, procedure_prior(procedure, valid, view), strict=True))
    assert scores["cook pork chop with stove"] == PITFALL_PENALTY
    assert scores["cook pork chop with oven"] > PITFALL_PENALTY
    assert scores["cook purple potato with stove"] > PITFALL_PENALTY  # fried: the stove is right
    merged = merge_procedures([procedure, procedure.model_copy(update={"pitfalls": (
        pitfall.model_copy(update={"verb": "grill"}),)})])  # fmt: skip
    assert [p.verb for p in merged.pitfalls] == ["roast", "grill"]


def test_a_play_that_stalls_keeps_its_dead_ends_and_a_later_play_skips_them(games) -> None:
    """A play that took its food and then wandered keeps what it tried without gain; the prior
    pushes those below untried commands (never below a step), and a merge drops a dead end
    that another play made a step."""
    record, game_file = games[0]
    wander = ["examine pork chop", "look", "take knife from table", "inventory", "close fridge"]
    wander += ["open oven", "examine counter"]  # taking and opening: maybe prerequisites
    took = record.walkthrough.index("take purple potato from counter") + 1
    play = play_commands(
        game_file, [*record.walkthrough[:took], *wander], game=record.id, split="train"
    )
    assert not play.won and not play.lost
    stalled = distill_procedure(play)
    assert set(stalled.tried) >= {"examine {food}", "look", "inventory", "close fridge"}
    assert "open {place}" not in stalled.tried  # a step (before taking food from the fridge)
    assert not any(t.startswith(("take ", "open ")) for t in stalled.tried)
    assert parse_procedure(stalled.render()) == stalled
    assert "Tried without gain: " in stalled.render()
    _, valid, view = walkthrough_views(game_file, record.walkthrough)[took]
    scores = dict(zip(valid, procedure_prior(stalled, valid, view), strict=True))
    tried = ("look", "inventory", "close fridge", "examine counter")
    assert all(scores[c] == TRIED_PENALTY for c in tried)
    assert scores["examine oven"] == scores["cook pork chop with oven"] == 0  # untried
    assert all(scores[c] > TRIED_PENALTY for c in valid if c not in tried)
    won = distill_procedure(
        play_commands(game_file, record.walkthrough, game=record.id, split="train")
    )
    merged = merge_procedures([stalled, won.model_copy(update={"tried": ()})])
    assert set(merged.tried) == set(stalled.tried)  # none of them became a step
    made_a_step = stalled.model_copy(update={"tried": (*stalled.tried, "take knife")})
    assert "take knife" not in merge_procedures([made_a_step, won]).tried


def test_gains_come_from_the_games_message_when_no_score_is_kept() -> None:
    play = CookingTrajectory(
        game="g",
        split="train",
        steps=[
            GameStep(command="look", observation="A kitchen."),
            GameStep(
                command="take carrot",
                observation="Taken. Your score has just gone up by one point.",
            ),
        ],
        won=False,
        lost=False,
    )
    assert play.gains() == [0, 1]


def test_a_held_out_games_walkthrough_never_reaches_a_bank(cooking_config: CookingConfig) -> None:
    valid = cooking_config.model_copy(update={"split": "valid"})
    [record] = load_cooking_games(valid)
    with pytest.raises(HeldOutWalkthrough, match="only cooking-train walkthroughs"):
        cooking_seed_row(record, valid.games_dir() / record.file)
    test = record.model_copy(update={"split": "test"})
    with pytest.raises(HeldOutWalkthrough):
        cooking_seed_row(test, valid.games_dir() / record.file)


@pytest.mark.slow
def test_bank_seed_source_cooking_writes_template_entries_through_the_gate(capsys) -> None:
    """48 cooking-train games (the codebook fit; about 3 min the first time) and 2 entries."""
    from genmem.envs.benches import BenchOptions, open_bench
    from genmem.experiments.contamination import tasks_in_bank
    from genmem.memory.location import open_bank

    argv = ["bank", "seed", "--source", "cooking", "--size", "2", "--json"]
    assert main([*argv, "--distill", "procedure"]) == 2
    assert "--distill abstract" in capsys.readouterr().err
    assert main([*argv, "--distill", "abstract"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["bank_id"].startswith("cooking-seed-") and info["experiences"] == 2
    assert info["rejected"] == {} and info["pairs"] == 2
    bank = open_bank(info["url"])
    entries = list(bank.entries())
    assert 1 <= len(entries) == info["entries"] <= 2
    for entry in entries:
        assert entry.metadata["writer"] == WRITER
        assert all(
            s["writer"] == WRITER and s["by"] == "abstract" for s in entry.metadata["sources"]
        )
        assert all(s["id"].startswith("cook-train-") for s in entry.metadata["sources"])
        proc = parse_procedure(entry.payload)
        assert proc.won >= 1 and proc.pitfalls and proc.rules
    train = open_bench("cooking-train", BenchOptions(games=2)).tasks()
    held = [
        *open_bench("cooking-valid", BenchOptions(games=2)).tasks(),
        *open_bench("cooking-test", BenchOptions(games=2)).tasks(),
    ]
    assert len(tasks_in_bank(bank, train)) == 2 and tasks_in_bank(bank, held) == []


def test_a_knife_dropped_twice_is_taken_again_before_the_next_cut(games, procedures) -> None:
    """Three ingredients drop and retake the knife twice: ``take knife`` played before is still
    the prerequisite of the next cut (an opened fridge is not opened again)."""
    record, _ = games[1]
    walk = record.walkthrough
    first_drop = walk.index("drop knife")
    played = (*walk[: first_drop + 1], "take knife", "drop knife")
    view = GameView(played=played, notes=(record.recipe,))
    valid = ["take knife", "open fridge", "look"]
    assert procedure_prior(procedures[0], valid, view) == [NEXT_BONUS, 0.0, 0.0]


def test_the_ranker_reads_a_retrieved_procedure_and_ignores_other_text(games, procedures) -> None:
    """experience_prior: a retrieved entry's text (two joined) -> procedure_prior over the
    episode's view; text without a rendered procedure -> None (it acts as text only)."""
    from genmem.envs.cooking_experience import experience_prior

    record, game_file = games[1]
    text = procedures[0].render() + "\n\n" + procedures[0].render()
    for _command, valid, view in walkthrough_views(game_file, record.walkthrough):
        episode_view = {"history": list(view.played), "notes": list(view.notes)}
        got = experience_prior(text, valid, episode_view)
        assert got == procedure_prior(procedures[0], valid, view)
        assert (
            experience_prior("take the apple, then put it on the table", valid, episode_view)
            is None
        )


def _run_of(game_file: str, plays: list[list[str]]) -> dict:
    """A StackPlanner trajectory of the interactor playing ``plays`` through the real game tools
    (a reset, then one refused command; each later play begins with a resume, as a later
    delegation's does), as the graph records it."""
    from genmem.envs.textworld_env import GameEpisode, game_tools
    from genmem.graph.trajectory import StepRecord, Trajectory

    episode = GameEpisode(TextWorldGame(game_file), max_steps=50, tool_prefix="tw")  # type: ignore[arg-type]
    reset, step = game_tools(lambda: episode, prefix="tw", game="cooking")
    steps: list[StepRecord] = []

    def call(tool, args: dict) -> None:
        text = tool.invoke({"type": "tool_call", "id": "c", "name": tool.name, "args": args})
        arguments = {"tool": tool.name, "args": args}
        steps.append(
            StepRecord(
                step=len(steps), agent="interactor", action="tool", arguments=arguments,
                observation=str(text.content),
            )
        )  # fmt: skip

    def resume() -> None:  # a later delegation, as the ranking interactor records it
        text, _ = reset.metadata["resume"]()
        steps.append(
            StepRecord(
                step=len(steps), agent="interactor", action="tool",
                arguments={"tool": "tw_resume", "args": {}}, observation=text,
            )
        )  # fmt: skip

    try:
        for n, commands in enumerate(plays):
            if n == 0:
                call(reset, {})
                call(step, {"command": "dance"})
            else:  # after a loss the game restarts, though no reset was called
                resume()
            for command in commands:
                call(step, {"command": command})
    finally:
        episode.close()
    return Trajectory(query="cook", steps=steps, status="budget").model_dump()


def test_a_run_through_the_game_tools_is_distilled_as_its_plays(games) -> None:
    """MemEvolver's template writer reads the run the graph recorded: a lost play, a reset, a
    won play (refused commands and the episode's own lines left out) give the same procedure as
    the plays replayed directly; it merges into a stored one; a run with nothing learnt gives
    nothing, and a stored text that is not a procedure is not merged."""
    from genmem.envs.cooking_experience import cooking_writer, plays_of_run

    record, game_file = games[0]
    losing = losing_variants(record.walkthrough)[0]
    run = _run_of(game_file, [losing, record.walkthrough])
    plays = plays_of_run(run)
    assert [(p.lost, p.won) for p in plays] == [(True, False), (False, True)]
    assert [s.command for s in plays[1].steps] == [c.lower() for c in record.walkthrough]
    assert not any("Valid commands" in s.observation for p in plays for s in p.steps)
    direct = [
        play_commands(game_file, c, game=record.id, split="train")
        for c in (losing, record.walkthrough)
    ]
    expected = merge_procedures(
        [
            distill_procedure(direct[0]),
            distill_procedure(direct[1], distill_procedure(direct[0]).rules),
        ]
    )
    writer = cooking_writer()
    text = writer.distil("cook", run, "success")
    assert text == expected.render()
    from genmem.graph.trajectory import render_trajectory

    # grounded in what MemEvolver's gate reads: the task and the rendered run
    assert check_payload(text, sources=["cook", render_trajectory(run)]).action == "write"
    assert parse_procedure(text).pitfalls and parse_procedure(text).won == 1
    other = _row(*games[1])
    stored = cooking_experience(*other)
    labels = [c.label for c in writer.candidates(text, stored)]
    assert labels == ["retain", "replace", "merge"]
    merged = parse_procedure(writer.merge(stored, text))
    assert merged.won == 2 and merged.lost == parse_procedure(stored).lost + 1
    assert writer.merge("take the apple first", text) is None
    blind = _run_of(game_file, [["inventory", "look"]])
    assert writer.distil("cook", blind, "failure") is None
    assert writer.distil("cook", "a trajectory as text", None) is None


@pytest.mark.slow
def test_the_default_model_chooses_among_the_writers_candidates(games, tmp_path) -> None:
    """MemEvolver on the real default model with the template writer: a won run of one game,
    the slot holding another game's seeded procedure; the model picks retain, replace or merge
    by likelihood, the gate passes it and the log names the writer."""
    from genmem.envs.cooking_experience import cooking_writer
    from genmem.graph.evolver import EvolverConfig, build_evolver_graph
    from genmem.memory.location import open_bank
    from genmem.policies.chat_local import ChatLocal
    from tests.fakes import FixedGenerator
    from tests.graph._banks import A, one_entry_bank

    stored = cooking_experience(*_row(*games[1]))
    url = one_entry_bank(tmp_path, stored, name="cooking")
    record, game_file = games[0]
    run = _run_of(game_file, [record.walkthrough])
    config = EvolverConfig(writer=cooking_writer(), choice_rule="mean")  # the model's choice
    graph = build_evolver_graph(ChatLocal(), sid_generator=FixedGenerator([A]), config=config)
    state = {"query": record.intro, "trajectory": run, "outcome": "success"}
    out = graph.compile().invoke(state, context={"bank_url": url})
    choice = out["write_choice"]
    assert choice["chooser"] == "likelihood"
    assert choice["candidates"] == ["retain", "replace", "merge"]
    assert set(choice["scores"]) == set(choice["candidates"]) and out["error"] is None
    assert all(s < 0 for s in choice["scores"].values())  # log-probabilities per token
    entry = open_bank(url).get(A)
    expected = {"retain": stored, "replace": out["experience"]}
    if choice["chosen"] in expected:
        assert entry.payload == expected[choice["chosen"]]
    else:  # merge: both plays' counts
        assert parse_procedure(entry.payload).won == 2
    assert open_bank(url).events()[-1].actor == "mem_evolver/template"

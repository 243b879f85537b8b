"""The seed bank: reference or model distillation, frozen codebooks, cached, resumable."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from genmem.envs.bundled import GSM8K_TRAIN, read_gsm8k
from genmem.experiments.seed_bank import (
    SeedBankConfig,
    abstract_experience,
    build_seed_bank,
    model_experience,
    reference_experience,
)
from genmem.memory.bank_copy import copy_bank_file
from genmem.memory.location import open_bank
from tests.fakes import FakeChat

ROW = read_gsm8k(GSM8K_TRAIN, limit=1)[0]


def test_reference_experience_numbers_the_steps_without_calculator_marks() -> None:
    text = reference_experience(ROW["question"], ROW["answer"])
    assert text.startswith("Problem: ") and "1. " in text and "<<" not in text
    assert text.rstrip().endswith(f"Result: {ROW['answer'].rsplit('####', 1)[1].strip()}")


def _digits_left(text: str) -> bool:
    """Whether a digit is left once the placeholders and the step numbers are gone."""
    body = re.sub(r"^\d+\. ", "", text, flags=re.M)
    return any(ch.isdigit() for ch in re.sub(r"n\d+", "", body))


def test_abstract_experience_keeps_the_steps_without_names_or_numbers() -> None:
    text = abstract_experience(ROW["question"], ROW["answer"])  # Natalia's clips
    assert text == (
        "Procedure that solved it:\n"
        "1. A sold n1/n2 = n3 clips in May.\n"
        "2. A sold n1+n3 = n4 clips altogether in B and May.\n"
        "Check: redo each calculation and make sure the result answers the question asked."
    )  # "May" is also a function word, so it stays; the result line would read "Result: n4"
    question = "Mr. Lee paid $1,250.50 for 3 chairs and $1,250.50 for a desk. What did he pay?"
    answer = "Lee paid 1,250.50 * 2 = <<1250.5*2=2501>>2501 dollars.\n#### 2501"
    text = abstract_experience(question, answer)
    assert "1. A paid n1 * n2 = n3 dollars." in text  # 1,250.50 is one number
    assert not _digits_left(text) and "Lee" not in text


def test_every_abstract_seed_experience_passes_the_gate_and_hides_its_numbers() -> None:
    from genmem.memory.gate import check_payload

    rows = read_gsm8k(GSM8K_TRAIN, limit=300)
    for row in rows:
        text = abstract_experience(row["question"], row["answer"])
        assert check_payload(text, sources=[row["question"]]).passed, text
        assert not _digits_left(text), text


def test_model_experience_asks_for_a_bounded_lesson() -> None:
    lesson = {"problem_type": "rates", "procedure": "multiply", "check": "units"}
    chat = FakeChat(structured=lambda schema, messages: lesson)
    text = model_experience(chat, ROW["question"], ROW["answer"])
    assert text.startswith("Problem type: rates\nProcedure: multiply\nCheck: units\nExample: ")
    ((schema, method, _),) = chat.asked
    assert method == "json_schema"
    assert schema["required"] == ["problem_type", "procedure", "check"]
    assert all(p["maxLength"] <= 320 for p in schema["properties"].values())


def test_config_rejects_bad_settings() -> None:
    with pytest.raises(ValidationError):
        SeedBankConfig(fit_size=10)
    with pytest.raises(ValidationError):
        SeedBankConfig(distill="guess")  # type: ignore[arg-type]
    assert SeedBankConfig(size=3).key() != SeedBankConfig(size=4).key()


def test_the_library_and_the_commands_build_the_same_default_seed_bank() -> None:
    from genmem.cli.main import build_parser

    cfg = SeedBankConfig()
    seed = build_parser().parse_args(["bank", "seed"])
    demo = build_parser().parse_args(["demo"])
    assert (seed.distill, seed.size, seed.source, seed.model) == (
        cfg.distill,
        cfg.size,
        cfg.source,
        cfg.model,
    )
    assert (demo.distill, demo.fit_size) == (cfg.distill, cfg.fit_size)
    # the codebooks are fitted on as many rows as the bank holds, at least 48
    assert (cfg.fit_size, SeedBankConfig(size=5).fit_size) == (cfg.size, 48)
    assert SeedBankConfig(size=5, fit_size=60).fit_size == 60


@pytest.mark.slow
def test_reference_seed_bank_is_built_once_and_copied(tmp_path: Path) -> None:
    cfg = SeedBankConfig(distill="reference", size=5, fit_size=48, sizes=(8, 4))
    built = build_seed_bank(cfg, root=tmp_path, progress=False)
    assert not built.reused and built.experiences == 5 and 1 <= built.entries <= 5
    bank = open_bank(built.url)
    assert bank.codebook_hash == built.codebook_hash
    again = build_seed_bank(cfg, root=tmp_path, progress=False)
    assert again.reused and again.url == built.url

    copy = tmp_path / "copy" / "bank.db"
    copy_bank_file(Path(built.dir) / "seed.db", copy)
    copied = open_bank(f"sqlite:///{copy}?bank={built.bank_id}")
    assert copied.stats().entries == built.entries


@pytest.mark.slow
@pytest.mark.parametrize("torn", [False, True], ids=["whole", "torn-last-line"])
def test_model_distillation_resumes_from_its_file(tmp_path: Path, torn: bool) -> None:
    # the lessons are already on disk: the build reads them and loads no model; a kill -9
    # mid-write leaves half a line, which is dropped with a warning, never a crash
    cfg = SeedBankConfig(distill="model", size=2, fit_size=48, sizes=(8, 4), model="no-such-model")
    base = tmp_path / cfg.key()
    base.mkdir()
    lessons = [  # grounded in the first two training problems (Natalia's clips, Weng's pay)
        "Problem type: clips sold in two months\nProcedure: add April and May",
        "Problem type: pay for minutes worked\nProcedure: scale the hourly rate",
    ]
    whole = "".join(json.dumps({"index": i, "text": t}) + "\n" for i, t in enumerate(lessons))
    (base / "experiences.jsonl").write_text(whole + ('{"index": 2, "text": "Problem ty' * torn))
    if torn:
        with pytest.warns(RuntimeWarning, match="experiences.jsonl:3"):
            built = build_seed_bank(cfg, root=tmp_path, progress=False)
    else:
        built = build_seed_bank(cfg, root=tmp_path, progress=False)
    payloads = {e.payload for e in open_bank(built.url).entries()}
    assert payloads and all(any(x in p for x in lessons) for p in payloads)  # one slot may merge
    assert built.rejected == {} and built.experiences == 2


@pytest.mark.slow
def test_default_model_distils_lessons(tmp_path: Path) -> None:
    cfg = SeedBankConfig(distill="model", size=2, fit_size=48, sizes=(8, 4))
    built = build_seed_bank(cfg, root=tmp_path, progress=False)
    lines = (Path(built.dir) / "experiences.jsonl").read_text().splitlines()
    texts = [json.loads(line)["text"] for line in lines]
    assert len(texts) == 2
    assert all(t.startswith("Problem type: ") and "\nProcedure: " in t for t in texts)
    assert built.experiences == 2 and built.entries >= 1


@pytest.mark.slow
def test_a_procedure_bank_holds_no_problem_text(tmp_path: Path) -> None:
    """Issue 21 part 4: entries a retrieval test cannot win by matching the query's own words."""
    from genmem.experiments.retrieval_eval import RetrievalPair, query_payload_overlap
    from genmem.experiments.seed_bank import procedure_experience, seed_pairs

    cfg = SeedBankConfig(distill="procedure", size=6, fit_size=48, sizes=(8, 4))
    built = build_seed_bank(cfg, root=tmp_path, progress=False)
    bank = open_bank(built.url)
    pairs = seed_pairs(bank)
    assert len(pairs) == 6 and built.rejected == {}
    for pair in pairs:
        payload = bank.get(pair["reference_sid"]).payload
        assert pair["query"] not in payload and "Procedure that solved it:" in payload
    overlap = query_payload_overlap([RetrievalPair(**p) for p in pairs], bank)
    assert overlap["verbatim"] == 0 and 0 < overlap["mean"] < 1
    assert procedure_experience("Q?", "a = 1\n#### 1") == (
        "Procedure that solved it:\n1. a = 1\n"
        "Check: redo each calculation and make sure the result answers the question asked.\n"
        "Result: 1"
    )

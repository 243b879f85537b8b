"""Benches by name and task files by format: the right environment, tools and tasks."""

from __future__ import annotations

from pathlib import Path

import pytest

from genmem.envs.benches import BENCHES, BenchOptions, detect_format, open_bench, open_data
from genmem.envs.bundled import DATA_DIR
from genmem.envs.choice import MathEnvironment, MultipleChoiceEnvironment
from genmem.envs.gsm8k import GSM8KEnvironment
from genmem.envs.qa import QAEnvironment

SAMPLES = Path(__file__).parent / "data"


@pytest.mark.parametrize(
    ("path", "fmt"),
    [
        (DATA_DIR / "qa" / "nq_test_200.jsonl", "qa"),
        (DATA_DIR / "gsm8k" / "test.jsonl", "gsm8k"),
        (SAMPLES / "gpqa_sample.jsonl", "choice"),
        (SAMPLES / "math_sample.jsonl", "math"),
    ],
)
def test_formats_are_read_off_the_first_record(path: Path, fmt: str) -> None:
    assert detect_format(path) == fmt


def test_undetectable_and_empty_files_are_named(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(ValueError, match="holds no records"):
        detect_format(empty)
    odd = tmp_path / "odd.jsonl"
    odd.write_text('{"prompt": "x"}\n')
    with pytest.raises(ValueError, match=r"odd.jsonl:1: cannot tell the format"):
        detect_format(odd)
    with pytest.raises(FileNotFoundError):
        open_data(tmp_path / "missing.jsonl")


def test_open_data_picks_the_environment_and_honours_an_explicit_format(tmp_path: Path) -> None:
    assert isinstance(open_data(SAMPLES / "gpqa_sample.jsonl"), MultipleChoiceEnvironment)
    assert isinstance(open_data(SAMPLES / "math_sample.jsonl"), MathEnvironment)
    gsm = tmp_path / "mine.jsonl"
    gsm.write_text('{"question": "1+1?", "answer": "one and one #### 2"}\n')
    env = open_data(gsm)
    assert isinstance(env, GSM8KEnvironment) and env.name == "mine"
    assert [t.reference for t in env.tasks()] == ["2"]
    qa = open_data(DATA_DIR / "qa" / "2wiki_dev_200.jsonl", "qa")
    assert isinstance(qa, QAEnvironment) and not qa.tools().research  # closed-book
    with pytest.raises(ValueError, match="needs an 'answer' string"):
        open_data(DATA_DIR / "qa" / "2wiki_dev_200.jsonl", "gsm8k")


def test_the_distractor_bench_is_its_100_questions_with_bm25_search() -> None:
    env = open_bench("hotpotqa-distractor")
    tasks = env.tasks()
    assert len(tasks) == 100 and env.metric_names == ("f1", "em")
    (search,) = env.tools().research
    text = search.invoke({"query": "Scott Derrickson nationality"})
    assert "Scott Derrickson" in text


def test_qa_search_comes_from_a_corpus_file(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "p1", "title": "Paris", "text": "Paris is the capital of France."}\n')
    env = open_bench("nq", BenchOptions(corpus=corpus))
    (search,) = env.tools().research
    assert "capital of France" in search.invoke({"query": "capital France"})
    with pytest.raises(ValueError, match="not both"):
        BenchOptions(corpus=corpus, search_url="http://127.0.0.1:9")


def test_every_bench_name_is_known_and_others_are_refused(monkeypatch) -> None:
    assert list(BENCHES) == [
        "gsm8k-train", "gsm8k-test", "hotpotqa-distractor", "hotpotqa", "2wiki", "nq",
        "textworld-train", "textworld-test", "cooking-train", "cooking-valid", "cooking-test",
        "alfworld", "webshop",
    ]  # fmt: skip
    assert isinstance(open_bench("gsm8k-test"), GSM8KEnvironment)
    with pytest.raises(ValueError, match="unknown bench 'musique'"):
        open_bench("musique")
    monkeypatch.delenv("WEBSHOP_URL", raising=False)
    from genmem.envs.webshop import WebShopUnavailable

    with pytest.raises(WebShopUnavailable, match="WEBSHOP_URL"):
        open_bench("webshop")


def test_the_registry_refuses_what_would_make_a_bench_ambiguous_or_unopenable() -> None:
    from pydantic import Field

    from genmem.envs.benches import (
        ENVIRONMENTS,
        Bench,
        EnvOptions,
        EnvSpec,
        Seeding,
        register,
        seeding,
    )

    def spec(bench: str = "toy-a", **kw) -> EnvSpec:
        fields = {"name": "toy", "benches": (Bench(name=bench, about="-", metrics=("x",)),)}
        return EnvSpec(**fields, open=lambda bench, options: None, **kw)  # type: ignore[arg-type]

    class Required(EnvOptions):
        size: int

    class OtherSeed(EnvOptions):
        seed: int = Field(default=1)

    before = dict(ENVIRONMENTS)
    with pytest.raises(ValueError, match="'gsm8k-test' is already a bench of 'gsm8k'"):
        register(spec("gsm8k-test"))
    with pytest.raises(ValueError, match="option 'size' of 'toy' has no default"):
        register(spec(options=Required))
    with pytest.raises(ValueError, match="option 'seed' of 'toy' differs from 'textworld'"):
        register(spec(options=OtherSeed))
    with pytest.raises(ValueError, match="bench 'toy-b', which is not registered"):
        register(spec(seed=Seeding(about="-", rows=lambda n: [], heldout="toy-b")))
    assert ENVIRONMENTS == before  # a refusal registers nothing
    with pytest.raises(ValueError, match=r"unknown bench option 'gamez'; .* games, seed"):
        BenchOptions(gamez=3)
    with pytest.raises(ValueError, match="unknown seed source 'mmlu'; choose from gsm8k, qa"):
        seeding("mmlu")
    assert BenchOptions(games=3).games == 3 and BenchOptions().search_k == 3

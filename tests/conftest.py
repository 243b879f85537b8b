"""Shared fixtures: one parametrised ``store`` / ``bank`` fixture runs the bank suite on every
backend."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from genmem.memory.bank import Bank
from genmem.memory.sid import DEFAULT_SPEC
from genmem.memory.store import BankStore

if TYPE_CHECKING:
    from genmem.envs.cooking import CookingConfig

TEST_HASH = "0" * 64


def pytest_configure(config: pytest.Config) -> None:
    """Under xdist, split the cores between workers instead of every worker using all of them."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers and os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(workers)))


# The longest tests of a fresh-clone CI run (seconds on 2 workers, 2026-11-26; those cut down on
# 2026-11-27 scaled by the CPU time they lost): started first, longest first, so no worker is
# left with a long test at the end while the other idles.
_LONGEST = {
    "test_joint_grpo_trains_whole_turns_through_the_graph": 237,
    # two processes each (2026-11-27, 2 workers): the one-process reference run comes first
    "test_two_processes_run_every_stage_with_one_writer_per_file": 70,
    "test_the_cli_under_torchrun_trains_zero3_and_prints_once": 31,
    "test_coldstart_bank_then_online_evolution": 178,
    "test_eval_killed_mid_run_resumes_to_the_same_records": 107,
    "test_evolve_killed_mid_run_resumes_to_the_same_records": 121,
    "test_every_method_end_to_end_on_the_default_model": 88,
    "test_alignment_pauses_resumes_and_ends_as_an_uninterrupted_run": 87,
    "test_symbols_on_the_real_model_and_seed_bank": 50,
    "test_coldstart_stages_run_on_the_server": 77,
    "test_seed_a_textworld_bank_from_training_games": 77,
    # 48 cooking-train games generated for the codebook fit: 114 s of CPU, 323 s wall at load 6
    # (2026-11-27, one worker)
    "test_bank_seed_source_cooking_writes_template_entries_through_the_gate": 150,
    "test_demo_closed_loop_on_a_gsm8k_problem": 30,
    "test_coldstart_killed_while_writing_its_bank_resumes_to_the_same_bank": 47,
    "test_real_default_model_answers_through_the_graph": 19,
    "test_align_killed_mid_run_resumes_from_its_last_whole_checkpoint": 45,
    # 2 SFT steps of the embedded model on one small cooking game, and two scoring passes
    # (2026-11-28: 47 s idle, one worker)
    "test_a_reader_trained_on_the_real_model_ranks_its_walkthrough_better": 47,
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Slow tests first, the longest known ones first among them (stable order otherwise), so
    parallel workers start the long ones early."""
    items.sort(
        key=lambda item: (
            item.get_closest_marker("slow") is None,
            -_LONGEST.get(item.originalname, 0),
        )
    )


def _sqlite_file(tmp_path) -> BankStore:
    from genmem.memory.sqlite_store import SQLiteBankStore

    return SQLiteBankStore(tmp_path / "bank.db")


def _sqlite_memory(tmp_path) -> BankStore:
    from genmem.memory.sqlite_store import SQLiteBankStore

    return SQLiteBankStore(":memory:")


def _postgres(tmp_path) -> BankStore:
    from genmem.memory.postgres_store import PostgresBankStore
    from tests import _postgres

    return PostgresBankStore(_postgres.fresh_schema())


def _postgres_icu(tmp_path) -> BankStore:
    from genmem.memory.postgres_store import PostgresBankStore
    from tests import _postgres

    return PostgresBankStore(_postgres.fresh_schema(icu=True))


def _langgraph_memory(tmp_path) -> BankStore:
    from langgraph.store.memory import InMemoryStore

    from genmem.memory.langgraph_store import LangGraphBankStore

    return LangGraphBankStore(InMemoryStore())


def _langgraph_sqlite(tmp_path) -> BankStore:
    from genmem.memory.langgraph_store import LangGraphBankStore
    from genmem.memory.location import parse_bank_url

    return LangGraphBankStore.from_url(parse_bank_url(f"langgraph+sqlite:///{tmp_path}/lg.db"))


def _langgraph_postgres(tmp_path, *, icu: bool = False) -> BankStore:
    from genmem.memory.langgraph_store import LangGraphBankStore
    from genmem.memory.location import BankURL
    from tests import _postgres

    conninfo = _postgres.fresh_schema(icu=icu)
    return LangGraphBankStore.from_url(
        BankURL("langgraph+postgresql", conninfo, "default", "langgraph+postgresql://test")
    )


def _langgraph_postgres_icu(tmp_path) -> BankStore:
    return _langgraph_postgres(tmp_path, icu=True)


# Every backend the shared suite runs on: name -> factory(tmp_path) -> a fresh, empty store.
# The "-icu" ones live in a database whose default collation is ICU en-US, as on most managed
# servers, where text does not compare byte-wise.
BACKENDS = {
    "sqlite-file": _sqlite_file,
    "sqlite-memory": _sqlite_memory,
    "postgres": _postgres,
    "postgres-icu": _postgres_icu,
    "langgraph-memory": _langgraph_memory,
    "langgraph-sqlite": _langgraph_sqlite,
    "langgraph-postgres": _langgraph_postgres,
    "langgraph-postgres-icu": _langgraph_postgres_icu,
}
# Backends that need a real server carry the ``integration`` marker.
INTEGRATION = {"postgres", "postgres-icu", "langgraph-postgres", "langgraph-postgres-icu"}


@pytest.fixture(scope="session", autouse=True)
def _one_openmp_thread() -> Iterator[None]:
    """Tiny K-means fits are faster on one OpenMP thread than contending for two cores."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, user_api="openmp"):
        yield


@pytest.fixture(scope="session", autouse=True)
def _postgres_server() -> Iterator[None]:
    """Stop the throwaway PostgreSQL server (started on first use) when the session ends."""
    yield
    from tests import _postgres

    _postgres.stop()


@pytest.fixture(
    params=[
        pytest.param(name, marks=[pytest.mark.integration] if name in INTEGRATION else [])
        for name in sorted(BACKENDS)
    ]
)
def store(request, tmp_path) -> Iterator[BankStore]:
    """A fresh, empty store of each backend."""
    s = BACKENDS[request.param](tmp_path)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def bank(store: BankStore) -> Bank:
    """An empty default-spec bank in a fresh store of each backend."""
    return store.create_bank("default", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)


@pytest.fixture(scope="module")
def seed_bank_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A private copy of the demo's GSM8K reference seed bank (300 problems, built once)."""
    from genmem.experiments.seed_bank import SeedBankConfig, build_seed_bank
    from genmem.memory.bank_copy import copy_bank_file

    seed = build_seed_bank(SeedBankConfig(distill="reference", size=300, fit_size=300))
    target = tmp_path_factory.mktemp("seedbank") / "bank.db"
    copy_bank_file(pathlib.Path(seed.dir) / "seed.db", target)
    return f"sqlite:///{target}?bank={seed.bank_id}"


@pytest.fixture(scope="session")
def cooking_config(tmp_path_factory: pytest.TempPathFactory) -> CookingConfig:
    """One small cooking game (train split: take, cook, eat), generated once for the session
    (into a folder the xdist workers share: one that comes later reads it from the cache)."""
    pytest.importorskip("textworld")
    from genmem.envs.cooking import CookingConfig, load_cooking_games

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    config = CookingConfig(
        split="train", n_games=1, seed=5, recipe=1, rooms=1, open=False, cook=True, cut=False,
        max_steps=12, cache_dir=root / "cooking-games",
    )  # fmt: skip
    load_cooking_games(config)
    return config


@pytest.fixture(scope="session")
def cooking_pair(cooking_config: CookingConfig) -> CookingConfig:
    """Two cooking train games of the default difficulty (two ingredients to take, cook and
    cut, the fridge closed), generated once for the session beside ``cooking_config``'s."""
    from genmem.envs.cooking import CookingConfig, load_cooking_games

    config = CookingConfig(
        split="train", n_games=2, seed=0, max_steps=50, cache_dir=cooking_config.cache_dir
    )
    load_cooking_games(config)
    return config

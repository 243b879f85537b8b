"""Retrieval-only evaluation: hand-computed hit counts, rerank steps, the pairs file, checks on
ranker answers, and the adapters over an SID generator, TF-IDF and the reranker."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from genmem.envs.stats import IntervalConfig, bootstrap_interval
from genmem.errors import InvalidSID
from genmem.experiments.retrieval_eval import (
    RetrievalPair,
    RetrievalReport,
    baseline_ranker,
    evaluate_retrieval,
    load_pairs,
    paired_hits,
    reranker_fn,
    sid_ranker,
)
from genmem.graph.retriever import build_retriever_graph
from genmem.memory.sid import DEFAULT_SPEC, SIDSpec
from genmem.memory.sqlite_store import SQLiteBankStore
from genmem.policies.baselines import TfidfRetriever
from genmem.policies.prompts import retriever_user_message
from genmem.policies.rerank import Reranker, aggregate_hits
from genmem.policies.types import SIDGenerator
from tests.conftest import TEST_HASH
from tests.fakes import FakeChat, FixedGenerator, HashEncoder
from tests.graph._banks import A, one_entry_bank

SPEC = SIDSpec((4, 4, 4))


def sid(*codes: int) -> str:
    return str(SPEC.make(codes))


# Four queries with hand-computed outcomes (reference -> ranked candidates):
#   q0: reference second; the top SID shares levels 1-2; (0,2,3) also matches level 3.
#   q1: reference first.
#   q2: reference sixth (a candidate, but not in the top 5); the top SID matches levels 2-3 only.
#   q3: nothing returned.
REFS = {"q0": sid(1, 2, 3), "q1": sid(0, 0, 0), "q2": sid(3, 3, 3), "q3": sid(2, 1, 0)}
RANKED = {
    "q0": [sid(1, 2, 0), sid(1, 2, 3), sid(0, 2, 3)],
    "q1": [sid(0, 0, 0)],
    "q2": [sid(0, 3, 3), sid(1, 1, 1), sid(2, 2, 2), sid(0, 0, 1), sid(0, 1, 0), sid(3, 3, 3)],
    "q3": [],
}
PAIRS = [RetrievalPair(query=q, reference_sid=r) for q, r in REFS.items()]


def table_ranker(table: dict[str, list[str]], expect_k: int | None = None):
    calls: list[tuple[str, int]] = []

    def rank(query: str, k: int) -> list[str]:
        calls.append((query, k))
        if expect_k is not None:
            assert k == expect_k
        return list(table[query])[:k]

    rank.calls = calls  # type: ignore[attr-defined]
    return rank


def test_hand_computed_report() -> None:
    rank = table_ranker(RANKED, expect_k=6)
    rep = evaluate_retrieval(PAIRS, rank, k=6, spec=SPEC)
    assert [q for q, _ in rank.calls] == ["q0", "q1", "q2", "q3"]  # type: ignore[attr-defined]
    assert (rep.n, rep.k, rep.levels, rep.reranked) == (4, 6, 3, False)
    assert rep.mean_candidates == 2.5
    assert (rep.candidate_hits, rep.hits_at_1, rep.hits_at_5) == (3, 1, 2)
    assert (rep.candidate_hit, rep.hit_at_1, rep.hit_at_5) == (0.75, 0.25, 0.5)
    assert rep.level_hits_at_1 == [2, 3, 2]
    assert rep.prefix_hits_at_1 == [2, 2, 1]
    assert rep.level_hits_at_5 == [2, 3, 3]
    assert rep.prefix_hits_at_5 == [2, 2, 2]
    assert rep.level_at_1 == [0.5, 0.75, 0.5]
    assert rep.prefix_at_1 == [0.5, 0.5, 0.25]
    # Cumulative accuracy at the last level is the full-SID hit rate.
    assert rep.prefix_at_1[-1] == rep.hit_at_1 and rep.prefix_at_5[-1] == rep.hit_at_5
    assert [r.reference for r in rep.per_query] == list(REFS.values())
    assert "hit@1=25.0%" in rep.summary()


def test_every_rate_gets_a_bootstrap_interval_over_queries() -> None:
    rep = evaluate_retrieval(PAIRS, table_ranker(RANKED), k=6, spec=SPEC)
    ci = rep.intervals(IntervalConfig(seed=5))
    # Each interval is the bootstrap of that rate's per-query 0/1 hits (q0..q3 as above).
    assert ci.candidate_hit == bootstrap_interval([1, 1, 1, 0], IntervalConfig(seed=5))
    assert ci.hit_at_1 == bootstrap_interval([0, 1, 0, 0], IntervalConfig(seed=5))
    assert ci.prefix_at_1[0] == bootstrap_interval([1, 1, 0, 0], IntervalConfig(seed=5))
    assert len(ci.prefix_at_1) == len(ci.level_at_5) == len(ci.prefix_at_5) == 3
    for rate, (lo, hi) in [
        (rep.candidate_hit, ci.candidate_hit),
        (rep.hit_at_1, ci.hit_at_1),
        (rep.hit_at_5, ci.hit_at_5),
        *zip(rep.prefix_at_1, ci.prefix_at_1, strict=True),
        *zip(rep.prefix_at_5, ci.prefix_at_5, strict=True),
        *zip(rep.level_at_1, ci.level_at_1, strict=True),
    ]:
        assert 0.0 <= lo <= rate <= hi <= 1.0
    assert ci.settings.seed == 5 and rep.intervals() == rep.intervals()  # seeded


def test_paired_hits_compare_two_methods_query_by_query() -> None:
    perfect = evaluate_retrieval(
        PAIRS, table_ranker({q: [r] for q, r in REFS.items()}), 6, spec=SPEC
    )
    rep = evaluate_retrieval(PAIRS, table_ranker(RANKED), k=6, spec=SPEC)
    diffs = paired_hits(rep, perfect, IntervalConfig(seed=5))
    assert set(diffs) == {"candidate_hit", "hit_at_1", "hit_at_5"}
    # Hand-computed per query (q0..q3): hit@1 0,1,0,0 against 1,1,1,1.
    h1 = diffs["hit_at_1"]
    assert (h1.diff, h1.wins, h1.losses, h1.ties, h1.n) == (-0.75, 0, 3, 1, 4)
    assert h1.ci == bootstrap_interval([-1, 0, -1, -1], IntervalConfig(seed=5))
    assert diffs["candidate_hit"].diff == -0.25 and diffs["hit_at_5"].diff == -0.5
    assert paired_hits(rep, rep)["hit_at_5"].diff == 0.0
    with pytest.raises(ValueError, match="cannot pair"):
        paired_hits(rep, evaluate_retrieval(PAIRS[:2], table_ranker(RANKED), k=6, spec=SPEC))


def test_report_agrees_with_aggregate_hits() -> None:
    rep = evaluate_retrieval(PAIRS, table_ranker(RANKED), k=6, spec=SPEC)
    rates = aggregate_hits(rep.per_query)
    assert rates.candidate_hit == rep.candidate_hit
    assert (rates.hit_at_1, rates.hit_at_5) == (rep.hit_at_1, rep.hit_at_5)
    assert rates.prefix_at_1 == rep.prefix_at_1 and rates.level_at_1 == rep.level_at_1
    assert rates.prefix_at_5 == rep.prefix_at_5 and rates.level_at_5 == rep.level_at_5


def test_budget_k_limits_the_candidate_set() -> None:
    rep = evaluate_retrieval(PAIRS, table_ranker(RANKED), k=5, spec=SPEC)
    assert rep.candidate_hits == 2  # q2's reference was sixth


def test_report_round_trips_through_json() -> None:
    rep = evaluate_retrieval(PAIRS, table_ranker(RANKED), k=6, spec=SPEC)
    data = json.loads(rep.model_dump_json())
    assert data["hit_at_5"] == 0.5 and data["prefix_at_1"] == [0.5, 0.5, 0.25]
    data = {k: v for k, v in data.items() if k in RetrievalReport.model_fields}
    assert RetrievalReport.model_validate(data) == rep


def test_rerank_moves_hits_but_not_candidate_hit() -> None:
    def reference_first(query: str, candidates: list[str]) -> list[str]:
        ref = REFS[query]
        rest = [c for c in candidates if c != ref]
        return ([ref] if ref in candidates else []) + rest[:4]

    rep = evaluate_retrieval(PAIRS, table_ranker(RANKED), k=6, rerank=reference_first, spec=SPEC)
    assert rep.reranked
    assert (rep.candidate_hits, rep.hits_at_1, rep.hits_at_5) == (3, 3, 3)
    assert rep.per_query[2].n_candidates == 6 and rep.per_query[2].n_reranked == 5


def test_mappings_and_whitespace_are_accepted() -> None:
    pairs = [{"query": "q1", "reference_sid": f" {REFS['q1']}\n", "id": 7}]
    rep = evaluate_retrieval(pairs, table_ranker(RANKED), k=3, spec=SPEC)
    assert rep.hits_at_1 == 1 and rep.per_query[0].reference == REFS["q1"]


def test_level_hit_needs_only_that_level() -> None:
    # Level 3 matches, levels 1-2 do not: an independent hit but no cumulative one.
    pairs = [RetrievalPair(query="q", reference_sid=sid(0, 0, 2))]
    rep = evaluate_retrieval(pairs, lambda q, k: [sid(1, 1, 2)], k=1, spec=SPEC)
    assert rep.level_hits_at_1 == [0, 0, 1] and rep.prefix_hits_at_1 == [0, 0, 0]


# -- refused input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "error", "match"),
    [
        (sid(1, 2, 3), ValueError, "must be a list"),
        (None, ValueError, "must be a list"),
        ([sid(1, 2, 3), 5], ValueError, r"\[1\] is a int"),
        (["<SID_L1_9><SID_L2_0><SID_L3_0>"], InvalidSID, r"pair 0 \('q0'\)\[0\]"),
        ([sid(1, 2, 3), sid(1, 2, 3)], ValueError, "more than once"),
        ([sid(0, 0, c) for c in range(4)], ValueError, "at most 3"),
    ],
)
def test_bad_ranker_answers_are_refused(answer, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        evaluate_retrieval(PAIRS[:1], lambda q, k: answer, k=3, spec=SPEC)


@pytest.mark.parametrize(
    ("rerank", "match"),
    [
        (lambda q, c: [*c, sid(3, 3, 0)], "at most"),
        (lambda q, c: [sid(3, 3, 0)], "not among the candidates"),
        (lambda q, c: c[0], "must be a list"),
    ],
)
def test_bad_rerank_answers_are_refused(rerank, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        evaluate_retrieval(PAIRS[:1], table_ranker(RANKED), k=3, rerank=rerank, spec=SPEC)


@pytest.mark.parametrize("k", [0, -1, True, 2.5, "5"])
def test_bad_k_is_refused(k) -> None:
    with pytest.raises(ValueError, match="k="):
        evaluate_retrieval(PAIRS, table_ranker(RANKED), k=k, spec=SPEC)


@pytest.mark.parametrize(
    ("pairs", "error", "match"),
    [
        ([], ValueError, "empty"),
        ("q0", ValueError, "list of RetrievalPair"),
        ({"query": "q0", "reference_sid": sid(0, 0, 0)}, ValueError, "list of RetrievalPair"),
        ([{"query": "q0"}], ValueError, "pair 0: needs"),
        ([("q0", sid(0, 0, 0))], ValueError, "pair 0 is a tuple"),
        ([{"query": " ", "reference_sid": sid(0, 0, 0)}], ValueError, "query is empty"),
        ([{"query": "q0", "reference_sid": "<SID_L1_0>"}], InvalidSID, "pair 0: reference_sid"),
    ],
)
def test_bad_pairs_are_refused(pairs, error: type[Exception], match: str) -> None:
    rank = table_ranker(RANKED)
    with pytest.raises(error, match=match):
        evaluate_retrieval(pairs, rank, k=3, spec=SPEC)
    assert rank.calls == []  # type: ignore[attr-defined]  # checked before any ranking


# -- pairs file ----------------------------------------------------------------------------------

REF = "<SID_L1_3><SID_L2_0><SID_L3_7><SID_L4_1>"


def write_lines(tmp_path: Path, lines: Sequence[str]) -> Path:
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_load_pairs(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path,
        [
            json.dumps({"query": "how to count fruit", "reference_sid": REF, "split": "test"}),
            "",
            "   ",
            json.dumps({"query": "second", "reference_sid": f"  {REF} "}),
        ],
    )
    pairs = load_pairs(path)
    assert pairs == [
        RetrievalPair(query="how to count fruit", reference_sid=REF),
        RetrievalPair(query="second", reference_sid=REF),
    ]
    assert load_pairs(str(path), spec=DEFAULT_SPEC) == pairs


@pytest.mark.parametrize(
    ("line", "error", "match"),
    [
        ("{not json", ValueError, "pairs.jsonl:2: not valid JSON"),
        ("[1, 2]", ValueError, "pairs.jsonl:2: expected a JSON object"),
        ('{"query": "q"}', ValueError, "pairs.jsonl:2: 'reference_sid' must be a string .missing"),
        ('{"query": 3, "reference_sid": "x"}', ValueError, "pairs.jsonl:2: 'query' .* .int"),
        ('{"query": "", "reference_sid": "x"}', ValueError, "pairs.jsonl:2: query is empty"),
        (
            json.dumps(
                {"query": "q", "reference_sid": "<SID_L1_48><SID_L2_0><SID_L3_0><SID_L4_0>"}
            ),
            InvalidSID,
            "pairs.jsonl:2: reference_sid: .*code 48",
        ),
    ],
)
def test_load_pairs_names_the_bad_line(
    tmp_path: Path, line: str, error: type[Exception], match: str
) -> None:
    path = write_lines(tmp_path, [json.dumps({"query": "ok", "reference_sid": REF}), line])
    with pytest.raises(error, match=match):
        load_pairs(path)


def test_load_pairs_refuses_an_empty_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no pairs"):
        load_pairs(write_lines(tmp_path, ["", ""]))


def test_load_pairs_checks_the_spec(tmp_path: Path) -> None:
    path = write_lines(tmp_path, [json.dumps({"query": "q", "reference_sid": REF})])
    with pytest.raises(InvalidSID, match=r"pairs\.jsonl:1"):
        load_pairs(path, spec=SPEC)


# -- adapters ------------------------------------------------------------------------------------


def table_generator(table: dict[str, list[str]]) -> FixedGenerator:
    """An SID generator that answers from a table (best first), keyed by query."""
    # The ranker decodes from the retriever's own user turn, never the bare query.
    by_context = {retriever_user_message(q): sids for q, sids in table.items()}
    return FixedGenerator(by_context.__getitem__, spec=SPEC)


def test_sid_ranker() -> None:
    gen = table_generator(RANKED)
    assert isinstance(gen, SIDGenerator)
    rep = evaluate_retrieval(PAIRS, sid_ranker(gen), k=6, spec=SPEC)
    assert gen.ks == [6, 6, 6, 6]
    assert rep.model_dump(exclude={"per_query"}) == evaluate_retrieval(
        PAIRS, table_ranker(RANKED), k=6, spec=SPEC
    ).model_dump(exclude={"per_query"})


def test_sid_ranker_decodes_from_the_context_the_retriever_graph_gives(tmp_path) -> None:
    """Retrieval eval scores the addressing inference runs: the same decoder input, to the byte."""
    url = one_entry_bank(tmp_path, "For rate problems, find the amount per unit first.")
    query = "  Pens cost $3 for 2. How much do 10 cost?\n"
    in_graph, in_eval = FixedGenerator([A]), FixedGenerator([A])
    chat = FakeChat(responses=["<answer>Find the unit price.</answer>"])
    graph = build_retriever_graph(chat, sid_generator=in_graph).compile()
    graph.invoke({"query": query}, context={"bank_url": url})
    assert sid_ranker(in_eval)(query, 1) == [str(A)]
    assert in_eval.calls == in_graph.calls and len(in_graph.calls) == 1


def test_adapters_refuse_what_is_not_a_candidate_list() -> None:
    class Broken:
        def retrieve(self, query: str, k: int = 50):
            return [sid(0, 0, 0)]  # strings, not SIDCandidate

    with pytest.raises(ValueError, match="Broken returned a str at 0"):
        baseline_ranker(Broken())("q", 5)


TEXTS = {
    sid(0, 0, 0): "add the apples and the oranges to count the fruit",
    sid(1, 0, 0): "subtract the cost of the pen from the money in the wallet",
    sid(2, 1, 0): "multiply the rows by the columns to count the chairs",
    sid(3, 2, 1): "divide the cake evenly between the children",
}


def small_bank():
    bank = SQLiteBankStore(":memory:").create_bank("eval", spec=SPEC, codebook_hash=TEST_HASH)
    for s, text in TEXTS.items():
        bank.insert(s, text)
    return bank


def test_tfidf_baseline_with_the_reranker_end_to_end() -> None:
    bank = small_bank()
    pairs = [RetrievalPair(query=text, reference_sid=s) for s, text in TEXTS.items()]
    pairs.append(RetrievalPair(query="zebra quartz", reference_sid=sid(0, 0, 0)))  # no term shared
    tfidf = TfidfRetriever.from_bank(bank)
    plain = evaluate_retrieval(pairs, baseline_ranker(tfidf), k=50, spec=SPEC)
    assert (plain.n, plain.candidate_hits, plain.hits_at_1) == (5, 4, 4)

    reranker = Reranker(bank, encoder=HashEncoder(16))
    rerank = reranker_fn(reranker)
    # An empty slot among the candidates is dropped by the reranker.
    assert rerank(TEXTS[sid(1, 0, 0)], [sid(3, 3, 3), sid(1, 0, 0)]) == [sid(1, 0, 0)]
    rep = evaluate_retrieval(pairs, baseline_ranker(tfidf), k=50, rerank=rerank, spec=SPEC)
    assert rep.reranked and rep.mean_candidates == pytest.approx(16 / 5)
    # The query is the payload itself, so the hash encoder scores it first after reranking.
    assert (rep.candidate_hits, rep.hits_at_1, rep.hits_at_5) == (4, 4, 4)
    assert rep.prefix_at_1 == [0.8, 0.8, 0.8]

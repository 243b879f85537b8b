"""GenMem around a LangChain agent: retrieve experience, run the agent, write back what it did.

Runs on the embedded default model (SmolLM2-135M-Instruct on CPU) with nothing configured:

1. builds a tiny SQLite bank in a temporary folder from a few bundled GSM8K worked solutions;
2. creates an agent with ``langchain.agents.create_agent`` and a calculator tool;
3. wraps it with ``genmem.graph.embed.add_memory`` and runs one held-out GSM8K question:
   MemRetriever generates an SID, reads it with ``memory_lookup`` and rewrites it into support;
   the agent answers with that support; MemEvolver reads the agent's steps and writes one
   update to the bank;
4. prints the SID, the support, the answer and the memory update.

    python examples/memory_around_create_agent.py
    python examples/memory_around_create_agent.py --bank "sqlite:///genmem-demo/bank.db?bank=..."

A 135M model is there to prove the plumbing, not to solve GSM8K: expect a wrong answer and
rough support. Give ``create_agent`` and ``add_memory`` a stronger model to see useful
memory (``add_memory(model=...)`` then needs an ``sid_generator`` for a non-local model).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import ModelCallLimitMiddleware

from genmem.envs.bundled import gsm8k_seed_experiences, read_gsm8k
from genmem.envs.gsm8k import calculator_tool
from genmem.graph.embed import add_memory
from genmem.graph.evolver import EvolverConfig
from genmem.graph.retriever import RetrieverConfig
from genmem.memory.location import open_bank
from genmem.memory.sid import DEFAULT_SPEC, SID
from genmem.memory.sqlite_store import SQLiteBankStore
from genmem.policies.backends import load_chat_model

PLACEHOLDER_HASH = "0" * 64
"""Codebook hash of the example bank. A real bank records the hash of the codebooks its SIDs
came from (``genmem bank build``, ``genmem demo``); this one is hand-filled at fixed SIDs, so it
names no codebooks, and its addresses carry no meaning beyond "one slot per experience"."""


def build_example_bank(folder: Path, seeds: int = 4) -> str:
    """A SQLite bank holding ``seeds`` GSM8K worked solutions, one per SID; returns its URL."""
    store = SQLiteBankStore(folder / "bank.db")
    bank = store.create_bank("gsm8k-example", spec=DEFAULT_SPEC, codebook_hash=PLACEHOLDER_HASH)
    for i, row in enumerate(gsm8k_seed_experiences(limit=seeds)):
        # Spread over level 1 so every entry is its own branch of the address tree.
        sid = SID((i * (DEFAULT_SPEC.sizes[0] // seeds), 0, 0, 0))
        bank.insert(sid, row["text"], metadata={"source": row["source"], "index": row["index"]})
    store.close()
    return f"sqlite:///{folder.resolve()}/bank.db?bank=gsm8k-example"


def main(
    *,
    bank_url: str | None = None,
    out_dir: Path | None = None,
    seeds: int = 4,
    max_new_tokens: int = 64,
) -> dict[str, Any]:
    """Run one GSM8K question through memory and the agent; print and return what happened."""
    with tempfile.TemporaryDirectory(prefix="genmem-example-") as tmp:
        if bank_url is None:
            folder = Path(out_dir or tmp)
            folder.mkdir(parents=True, exist_ok=True)
            bank_url = build_example_bank(folder, seeds)
        return _run(bank_url, max_new_tokens)


def _run(bank_url: str, max_new_tokens: int) -> dict[str, Any]:
    bank = open_bank(bank_url)
    occupied = [str(s) for s in bank.occupied()]
    before = bank.stats().events
    last = read_gsm8k()[-1]  # held out: the seeds come from the start of the file
    question, reference = last["question"], last["answer"].split("####")[-1].strip()

    chat = load_chat_model("local", max_new_tokens=max_new_tokens)
    agent = create_agent(
        chat,
        tools=[calculator_tool()],
        system_prompt=(
            "You solve grade-school math word problems. Use the calculator tool for "
            "arithmetic, then reply with the final number."
        ),
        # A small model can call tools forever: two model calls (a tool call and an answer).
        middleware=[ModelCallLimitMiddleware(run_limit=2, exit_behavior="end")],
    )
    app = add_memory(
        agent,
        model=chat,
        # The retriever may only decode occupied SIDs, so its one lookup lands on an entry.
        retriever_config=RetrieverConfig(allowed="occupied"),
        # One decision, no second try: on CPU each decision costs up to 512 new tokens.
        evolver_config=EvolverConfig(max_retries=0),
    )
    out = app.compile().invoke(
        {"messages": [{"role": "user", "content": question}]},
        context={"bank_url": bank_url},
    )
    answer = out["trajectory"]["answer"] if out.get("trajectory") else None
    result = {
        "bank_url": bank_url,
        "question": question,
        "reference": reference,
        "occupied_before": occupied,
        "sid": out.get("sid"),
        "support": out.get("support"),
        "answer": answer,
        "steps": out["trajectory"]["steps"] if out.get("trajectory") else [],
        "update": out.get("update"),
        "evolve_error": out.get("evolve_error"),
        "events": out.get("events", []),
        "bank_events_before": before,
        "bank_events_after": open_bank(bank_url).stats().events,
    }
    _print(result)
    return result


def _print(r: dict[str, Any]) -> None:
    print(f"bank: {r['bank_url']} ({len(r['occupied_before'])} entries)")
    print(f"question: {r['question']}")
    print(f"SID read by MemRetriever: {r['sid']}")
    print(f"support given to the agent: {r['support']}")
    for s in r["steps"]:
        print(f"  agent step {s['step']}: {json.dumps(s['arguments'])} -> {s['observation']}")
    print(f"agent's answer: {r['answer']} (reference: {r['reference']})")
    if r["update"]:
        u = r["update"]
        print(f"memory update: {u['op']} at {u['sid']} -> {u['outcome']} (seq {u['seq']})")
    else:
        print(f"memory update: none ({(r['evolve_error'] or {}).get('message')})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bank", help="an existing bank URL instead of the tiny example bank")
    parser.add_argument("--out", type=Path, help="folder to keep the example bank in")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="reply cap per call")
    args = parser.parse_args()
    main(bank_url=args.bank, out_dir=args.out, max_new_tokens=args.max_new_tokens)

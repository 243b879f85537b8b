"""`genmem train align` end to end on the embedded model and a GSM8K seed bank; bad input."""

from __future__ import annotations

import json
import math

import pytest

from genmem.cli import main
from genmem.memory.location import open_bank
from genmem.memory.sid import DEFAULT_SPEC
from tests.training._weights import assert_trained


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--config", "h100x64"], "use cpu, cpu-lora, cpu-ddp, cpu-zero3, gpu, gpu-lora"),
        (["--model", "/no/such/policy"], "policy directory"),
        (["--weights", "query_sid=two"], "not a number"),
        (["--weights", "querysid=1"], "NAME=VALUE"),
        (["--describer", "local:/no/such/model"], "not a model directory"),
        (["--describer", "vllm:http://x"], "has no '#'"),
        (["--weights", "query_sid=0,trajectory_sid=0,experience_sid=0,sid_experience=0,"
          "sid_description=0"], "at least one"),
        (["--resume"], "holds no checkpoint"),
        (["--finish"], "holds no checkpoint"),
        (["--resume", "--finish"], "give one of them"),
        (["--pause-after", "0"], "must be a finite number > 0"),
        (["--pause-after", "soon"], "is not a number"),
        (["--curve-every", "-1"], "must be >= 0"),
    ],
)  # fmt: skip
def test_bad_input_exits_2_and_writes_nothing(
    seed_bank_url, tmp_path, capsys, extra, message
) -> None:
    out = tmp_path / "out"
    try:
        code = main(["train", "align", "--bank", seed_bank_url, "--out", str(out), *extra])
    except SystemExit as exc:  # argparse's own refusals
        code = exc.code
    assert code == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_a_bank_with_no_entries_exits_2(tmp_path, capsys) -> None:
    from tests.graph._banks import A, one_entry_bank

    url = one_entry_bank(tmp_path, "only entry")
    open_bank(url).revise(A, "")  # deleted: the bank holds a tombstone and nothing else
    out = tmp_path / "out"
    assert main(["train", "align", "--bank", url, "--out", str(out)]) == 2
    assert "has no entries to train on" in capsys.readouterr().err and not out.exists()


@pytest.mark.slow
def test_align_two_steps_then_the_policy_loads_and_generates_sids(
    seed_bank_url, tmp_path, capsys
) -> None:
    out = tmp_path / "aligned"
    preset = tmp_path / "tiny.yaml"  # a preset file over the cpu preset: small, short batches
    preset.write_text("base: cpu\nper_device_train_batch_size: 2\nmax_length: 256\n")
    code = main([
        "train", "align", "--bank", seed_bank_url, "--config", str(preset), "--train-steps", "2",
        "--eval-size", "2", "--max-context-tokens", "128", "--max-target-chars", "300",
        "--out", str(out), "--json",
    ])  # fmt: skip
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["steps"] == 2 and len(report["losses"]) == 2 and report["preset"] == "tiny"
    assert all(math.isfinite(x) and x > 0 for x in report["losses"])
    assert set(report["counts"]) == {
        "query_sid", "trajectory_sid", "experience_sid", "sid_experience", "sid_description"
    }  # fmt: skip
    assert all(n > 0 for n in report["counts"].values())
    for split in ("heldout", "trained"):
        for when in ("before", "after"):
            acc = report[when][split]
            assert acc["n"] == 2 and acc["ks"] == [1, 5, 50]
            assert all(0 <= v <= 1 for v in acc["prefix"]["50"])
            # A longer beam never finds less.
            assert acc["prefix"]["50"][0] >= acc["prefix"]["1"][0]
    assert open(report["files"]["plot"], "rb").read(4) == b"\x89PNG"
    info = json.loads((out / "genmem_policy.json").read_text())
    assert info["sid_sizes"] == list(DEFAULT_SPEC.sizes) and info["notes"]["stage"] == "align"
    # The directory records what it was aligned to: --addresser auto generates with it there.
    bank = open_bank(seed_bank_url)
    alignment = info["alignment"]
    assert alignment["codebook_hash"] == bank.codebook_hash and alignment["steps"] == 2
    assert alignment["bank_id"] == bank.bank_id and alignment["heldout"]["n"] == 2
    assert json.loads((out / "run.json").read_text())["status"] == "done"
    assert set(report["withheld"]) == set(report["counts"])
    held = (out / "heldout_pairs.jsonl").read_text().splitlines()
    assert report["withheld"]["query_sid"] == len(held) == 30  # 10% of the 300 queries
    assert_trained(out, open_bank(seed_bank_url))

    # The policy directory is a --model for every other command.
    code = main([
        "sid", "generate", "--bank", seed_bank_url, "--model", f"local:{out}", "--beam", "3",
        "--query", "A baker sells 12 muffins a day. How many in a week?", "--json",
    ])  # fmt: skip
    assert code == 0
    rows = json.loads(capsys.readouterr().out)
    sids = [c["sid"] for c in rows]
    assert len(sids) == 3 and all(DEFAULT_SPEC.is_valid(s) for s in sids)
    assert {c["addresser"] for c in rows} == {"generative"}  # aligned to this bank: auto generates
    code = main([
        "sid", "generate", "--bank", seed_bank_url, "--beam", "3", "--json",
        "--query", "A baker sells 12 muffins a day. How many in a week?",
    ])  # fmt: skip
    assert code == 0  # the embedded policy was never aligned: auto quantises
    assert {c["addresser"] for c in json.loads(capsys.readouterr().out)} == {"quantizer"}


@pytest.mark.slow
def test_lora_alignment_trains_only_adapters_and_sid_rows_and_merges_them(seed_bank_url) -> None:
    import torch

    from genmem.policies.sid_tokens import sid_token_ids
    from genmem.training.adapters import attach_adapter, merge_adapter, optimizer_for
    from genmem.training.config import load_preset
    from genmem.training.policy_io import load_trainable

    bank = open_bank(seed_bank_url)
    preset = load_preset("cpu-lora")
    policy = load_trainable(None, bank)
    start = {k: v.detach().clone() for k, v in policy.model.state_dict().items()}
    attach_adapter(policy, bank.spec, preset)
    trainable = [n for n, p in policy.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n or "trainable_tokens_delta" in n for n in trainable)
    optimizer = optimizer_for(policy.model, preset, 1e-3)
    assert [g["lr"] for g in optimizer.param_groups] == [1e-3, 1e-3 * preset.sid_rows_lr_scale]
    rows = [i for level in sid_token_ids(policy.tokenizer, bank.spec) for i in level]
    sid = "".join(bank.spec.token(level, 0) for level in range(1, bank.spec.levels + 1))
    batch = policy.tokenizer([f"Task: add two numbers. Address: {sid}"] * 2, return_tensors="pt")
    for _ in range(2):  # two steps: LoRA's B matrices start at zero and move on the first
        loss = policy.model(**batch, labels=batch["input_ids"]).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    merge_adapter(policy)
    merged = policy.model.state_dict()
    assert merged.keys() == start.keys()  # a plain model again, saved like any other
    emb = next(k for k in merged if k.endswith("embed_tokens.weight"))
    others = torch.ones(merged[emb].shape[0], dtype=torch.bool)
    others[rows] = False
    assert torch.equal(merged[emb][others], start[emb][others])  # the old vocabulary is frozen
    assert not torch.equal(merged[emb][rows], start[emb][rows])  # the SID rows trained
    q = next(k for k in merged if k.endswith("layers.0.self_attn.q_proj.weight"))
    assert not torch.equal(merged[q], start[q])  # the adapters were merged into the weights


@pytest.mark.slow
def test_alignment_pauses_resumes_and_ends_as_an_uninterrupted_run(
    seed_bank_url, tmp_path, capsys
) -> None:
    preset = tmp_path / "tiny-lora.yaml"
    preset.write_text("base: cpu-lora\nper_device_train_batch_size: 2\nmax_length: 192\n")
    common = [
        "train", "align", "--bank", seed_bank_url, "--config", str(preset), "--train-steps", "2",
        "--eval-size", "2", "--max-context-tokens", "96", "--max-target-chars", "200",
        "--weights", "addressing", "--curve-every", "1", "--json",
    ]  # fmt: skip

    def align(out, *extra: str) -> dict:
        assert main([*common, "--out", str(out), *extra]) == 0
        return json.loads(capsys.readouterr().out)

    whole = align(tmp_path / "whole")
    assert whole["complete"] and whole["steps"] == 2 and whole["adapter"] == "lora"
    assert set(whole["counts"]) >= {"query_sid"} and whole["counts"]["sid_experience"] == 0

    out = tmp_path / "pieces"
    first = align(out, "--pause-after", "0.001")  # stops after its first step
    assert not first["complete"] and first["steps"] == 1 and first["after"] == {}
    assert json.loads((out / "run.json").read_text())["status"] == "paused"
    assert (out / "model.safetensors").is_file()  # a usable policy after every piece
    _finish_elsewhere(out, tmp_path / "moved", align)
    second = align(out, "--resume")
    assert second["complete"] and second["steps"] == 2 and second["piece_steps"] == 1
    assert second["resumed_from"].endswith("checkpoint-1")
    # The resumed run trains on the same batches with the same schedule: the same losses.
    assert second["loss_steps"] == whole["loss_steps"] == [1, 2]
    assert second["losses"] == pytest.approx(whole["losses"], rel=1e-2)  # float32 reloads
    curve = [json.loads(x) for x in (out / "curve.jsonl").read_text().splitlines()]
    assert [p["step"] for p in curve] == [0, 1, 2]  # step 0: the untrained policy
    assert all(0 <= p["splits"]["heldout"]["hit_at_5"] <= 1 for p in curve)
    assert (out / "curve.png").read_bytes()[:4] == b"\x89PNG"
    assert second["before"] == whole["before"]  # measured once, kept for later pieces


def _finish_elsewhere(out, moved, align) -> None:
    """A checkpoint brought from another machine without its optimiser state and without the
    base embedding's copy (a GPU run's way back) merges into the paused run's very policy."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    shutil.copytree(out, moved)
    (checkpoint,) = (moved / "trainer").glob("checkpoint-*")
    (checkpoint / "optimizer.pt").unlink()
    adapter = checkpoint / "adapter_model.safetensors"
    weights = load_file(adapter)
    slim = {k: v for k, v in weights.items() if not k.endswith("token_adapter.base_layer.weight")}
    assert len(slim) < len(weights)
    save_file(slim, adapter)
    for f in ("model.safetensors", "report.json"):
        (moved / f).unlink(missing_ok=True)
    done = align(moved, "--finish")
    assert done["steps"] == 1 and done["piece_steps"] == 0 and not done["complete"]
    assert done["after"]["heldout"]["n"] == 2  # scored, though the schedule was not finished
    paused, finished = load_file(out / "model.safetensors"), load_file(moved / "model.safetensors")
    assert paused.keys() == finished.keys()
    for name, tensor in paused.items():
        assert torch.allclose(tensor, finished[name], atol=1e-6), name


@pytest.fixture
def text_bank_url(tmp_path, monkeypatch) -> str:
    """A bank from plain texts (its entries name no query), codebooks kept in a fresh cache."""
    from genmem.memory.from_texts import bank_from_texts

    monkeypatch.setenv("GENMEM_CACHE", str(tmp_path / "cache"))
    url = f"sqlite:///{tmp_path}/lessons.db?bank=lessons"
    bank_from_texts(LESSONS, url)
    return url


LESSONS = [
    "To split a bill evenly, add the tip to the total first, then divide by the number of people.",
    "For distance, multiply speed by time and keep the units the same throughout.",
    "When items come in packs, divide the count needed by the pack size and round up.",
    "For an average, add the values and divide by how many values there are.",
    "Convert every duration to minutes before adding them up.",
]


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"query": "q"}'], "exactly one of 'sid' and 'text'"),
        (['{"query": "q", "text": "t", "extra": 1}'], "extra"),
        (["not json"], "queries.jsonl:1"),
        ([], "holds no queries"),
    ],
)
def test_a_bad_queries_file_exits_2(text_bank_url, tmp_path, capsys, lines, message) -> None:
    queries = tmp_path / "queries.jsonl"
    queries.write_text("".join(x + "\n" for x in lines))
    out = tmp_path / "out"
    code = main(["train", "align", "--bank", text_bank_url, "--queries", str(queries),
                 "--out", str(out)])  # fmt: skip
    assert code == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.slow
def test_a_bank_from_plain_texts_aligns_with_queries_from_a_file(
    text_bank_url, tmp_path, capsys
) -> None:
    args = ["train", "align", "--bank", text_bank_url, "--train-steps", "1", "--eval-size", "2",
            "--max-context-tokens", "128", "--max-target-chars", "300", "--json"]  # fmt: skip
    # without queries nothing can be held out: the refusal says what to do instead
    assert main([*args, "--out", str(tmp_path / "none")]) == 1
    err = capsys.readouterr().err
    assert "--queries FILE" in err and "--heldout 0" in err
    queries = tmp_path / "queries.jsonl"
    asked = {
        "Four friends share a $60 bill and a $12 tip. How much does each pay?": LESSONS[0],
        "A train runs 3 hours at 80 km/h. How far does it go?": LESSONS[1],
        "Eggs come in boxes of 12. How many boxes for 30 eggs?": LESSONS[2],
        "What is the mean of 4, 8 and 12?": LESSONS[3],
    }
    queries.write_text(
        "".join(json.dumps({"query": q, "text": t}) + "\n" for q, t in asked.items())
    )
    out = tmp_path / "aligned"
    assert main([*args, "--queries", str(queries), "--heldout", "0.25", "--out", str(out)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["steps"] == 1 and report["heldout"] == 1
    held = [json.loads(x) for x in (out / "heldout_pairs.jsonl").read_text().splitlines()]
    assert len(held) == 1 and held[0]["query"] in asked
    assert report["counts"]["query_sid"] > 0
    # every query was kept (3 trained, 1 held out), and no held-out query was trained
    assert report["before"]["trained"]["n"] == 2 and report["before"]["heldout"]["n"] == 1

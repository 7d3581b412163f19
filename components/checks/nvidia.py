"""The nvidia wheel's runtime check: InfiniLM must generate what transformers generates.

Run by ``infini-stack check WHEEL --vendor nvidia`` (and by ``release`` where an NVIDIA GPU is
present) in a fresh venv holding the wheel and seeing the target interpreter's packages (torch,
transformers, tokenizers, safetensors, flash-attn). Downloads nothing:

- makes a tiny random Qwen3 (vocab 512, hidden 256, 2 layers, 4 heads, 2 KV heads, head_dim
  128, fp16, a WordLevel tokenizer), seeded, in a temporary directory;
- transformers' greedy ``generate`` on the GPU gives the reference token ids;
- InfiniLM's ``LLM`` generates greedily for every (cache type, attention backend) pair InfiniLM
  9439ea6 supports, and must give the same ids: static + default, static + static-attn, paged
  + paged-attn (upstream's CLI switches ``default`` to ``paged-attn`` when paging is on);
- the backends it rejects on purpose at that pin (flash-attn, flashinfer) must raise a clean
  ValueError from ``LLM(...)`` (std::invalid_argument through pybind11), not crash;
- top-k and top-p sampling (static and paged cache) must give NEW_TOKENS valid ids, each one
  inside what its filters allow at its step: among the top k of transformers' logits for the
  same prefix (teacher-forced on InfiniLM's own sampled ids, at the same temperature) and inside
  the top-p nucleus, within fp16 slack; and a near-zero temperature must give the greedy ids.
  This needs PR #922's NVIDIA kernel in InfiniOps (components/infiniops/patches/) and
  components/infinilm/patches/nvidia-sampling-dispatch.patch: InfiniLM 9439ea6 asked its own
  inline copy of ``active_implementation_indices``, which sees no NVIDIA kernel (``Assertion
  `!indices.empty()` failed``), and scaled the logits by a {1, 1} tensor that InfiniOps' CUDA
  Mul reads past its one element (every temperature then sampled the same wrong ids);
- a few infinicore operators must agree with torch.

Every InfiniLM call runs in a child process of this script, so a segmentation fault is a
reported failure, not the end of the check. One JSON line per check on stdout, then a summary;
exit status 0 only when every check passed.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SUPPORTED = (("static", "default"), ("static", "static-attn"), ("paged", "paged-attn"))
REJECTED = (("static", "flash-attn"), ("paged", "flash-attn"), ("paged", "flashinfer"))
SAMPLING = {
    "top_k5": {"top_k": 5, "top_p": 1.0, "temperature": 1.0},
    "top_p0.9": {"top_k": 512, "top_p": 0.9, "temperature": 1.0},
    "top_k5_top_p0.8_t0.7": {"top_k": 5, "top_p": 0.8, "temperature": 0.7},
}
NEAR_GREEDY = {"top_k": 5, "top_p": 1.0, "temperature": 0.01}
VOCAB = 512
SPECIALS = ("<pad>", "<s>", "</s>", "<unk>")  # ids 0..3
PROMPT = "w17 w213 w5 w88 w401 w33 w250 w9"
NEW_TOKENS = 12
CHILD_TIMEOUT = 420.0
LOGIT_SLACK = 0.05  # fp16 kernels on both sides: a rank decided by less than this is a tie
PROB_SLACK = 0.02  # the same, for the nucleus' cumulative probability
FAILED: list[str] = []
GAPS: list[str] = []  # reported, not required: what is known not to run yet (none now)


def emit(check: str, ok: bool, *, gap: str | None = None, **info: Any) -> None:
    """One check's line; a failure counts unless ``gap`` names it as a known gap."""
    if not ok:
        (GAPS if gap else FAILED).append(check)
    extra = {"required": False, "gap": gap} if gap and not ok else {}
    print(json.dumps({"check": check, "ok": ok, **extra, **info}, default=str), flush=True)


# --- children: every infinicore/InfiniLM call runs in one ---------------------------------------


def run_child(mode: str, spec: dict[str, Any]) -> dict[str, Any]:
    """``python THIS --child MODE SPEC``: its last RESULT line, or how it died."""
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", mode, json.dumps(spec)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"}
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=CHILD_TIMEOUT, env=env, check=False
        )
    except subprocess.TimeoutExpired:
        return {"outcome": f"timed out after {CHILD_TIMEOUT:g}s"}
    lines = done.stdout.splitlines()
    results = [json.loads(line[7:]) for line in lines if line.startswith("RESULT ")]
    if done.returncode < 0:
        outcome = f"killed by {signal.Signals(-done.returncode).name}"
    else:
        outcome = "ok" if done.returncode == 0 else f"exit status {done.returncode}"
    out = {"outcome": outcome, **(results[-1] if results else {})}
    if outcome != "ok":
        out["stderr_tail"] = done.stderr[-1500:]
    return out


def child(mode: str, spec: dict[str, Any]) -> int:
    def result(data: dict[str, Any]) -> None:
        print("RESULT " + json.dumps(data, default=str), flush=True)

    try:
        {"import": child_import, "ops": child_ops, "llm": child_llm}[mode](spec, result)
    except BaseException as exc:  # everything is reported: the parent decides
        result({"exception": type(exc).__name__, "message": str(exc)[:1500]})
        return 3
    return 0


def child_import(spec: dict[str, Any], result: Callable[[dict[str, Any]], None]) -> None:
    import infinicore
    import infinilm
    from infinilm.llm import LLM, SamplingParams  # noqa: F401

    result({"infinicore": infinicore.__file__, "infinilm": infinilm.__file__})


def child_ops(spec: dict[str, Any], result: Callable[[dict[str, Any]], None]) -> None:
    import infinicore
    import infinicore.nn.functional as F
    import torch

    torch.manual_seed(0)
    half = {"device": "cuda", "dtype": torch.float16}

    def back(x: Any) -> Any:
        return torch.from_numpy(x.to_numpy()).cuda().float()

    def wrap(t: Any) -> Any:
        return infinicore.from_torch(t)

    a, b = torch.randn(3, 17, 64, **half), torch.randn(3, 17, 64, **half)
    m, n = torch.randn(37, 256, **half), torch.randn(256, 96, **half)
    x, w = torch.randn(6, 128, **half), (1 + 0.1 * torch.randn(128, device="cuda")).half()
    g = torch.randn(8, 320, **half)
    table, ids = torch.randn(512, 256, **half), torch.randint(0, 512, (2, 11), device="cuda")
    xf = x.float()
    cases = {
        "add": (lambda: back(infinicore.add(wrap(a), wrap(b))), (a + b).float(), 1e-3),
        "matmul": (lambda: back(infinicore.matmul(wrap(m), wrap(n))), m.float() @ n.float(), 5e-2),
        "rms_norm": (
            lambda: back(F.rms_norm(wrap(x), wrap(w), 1e-6)),
            xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float(),
            1e-2,
        ),
        "silu": (lambda: back(F.silu(wrap(g))), torch.nn.functional.silu(g.float()), 1e-2),
        "silu_and_mul": (
            lambda: back(F.silu_and_mul(wrap(g))),
            torch.nn.functional.silu(g.float()[:, :160]) * g.float()[:, 160:],
            2e-2,
        ),
        "embedding": (lambda: back(F.embedding(wrap(ids), wrap(table))), table[ids].float(), 0.0),
    }
    out = {}
    for name, (run, want, tol) in cases.items():
        got = run()
        same = got.shape == want.shape and torch.allclose(got, want, atol=tol, rtol=tol)
        err = (got - want).abs().max().item() if got.shape == want.shape else None
        out[name] = {"ok": bool(same), "max_abs_err": err}
    infinicore.sync_device()
    result({"ops": out})


def child_llm(spec: dict[str, Any], result: Callable[[dict[str, Any]], None]) -> None:
    from infinilm.llm import LLM, SamplingParams

    sampling = spec.get("sampling", {"top_k": 1, "top_p": 1.0, "temperature": 1.0})
    try:
        llm = LLM(
            model_path=spec["model"],
            device="cuda",
            dtype="float16",
            cache_type=spec["cache"],
            attn_backend=spec["backend"],
            max_batch_size=1,
            max_tokens=NEW_TOKENS,
            num_blocks=16,
            block_size=256,  # flash-attn's paged KV cache wants a multiple of 256
            max_cache_len=1024,
            enable_graph=False,
            **sampling,  # the engine-level values are what sampling uses at 9439ea6
        )
    except BaseException as exc:
        result({"phase": "construct", "exception": type(exc).__name__, "message": str(exc)})
        return
    params = SamplingParams(max_tokens=NEW_TOKENS, ignore_eos=True, **sampling)
    (out,) = llm.generate(prompts=[PROMPT], sampling_params=params, use_tqdm=False)
    result({"phase": "generate", "token_ids": [int(t) for t in out.outputs[0].token_ids]})
    del llm  # joins the engine's worker threads
    gc.collect()


# --- the model and the reference ----------------------------------------------------------------


def make_model(directory: str) -> None:
    """A tiny random Qwen3 with well-separated logits, and a WordLevel tokenizer."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    vocab = {token: i for i, token in enumerate(SPECIALS)}
    vocab.update({f"w{i}": i for i in range(len(SPECIALS), VOCAB)})
    words = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    words.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    words.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=words,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
    )
    tokenizer.save_pretrained(directory)
    torch.manual_seed(1234)
    config = Qwen3Config(
        vocab_size=VOCAB,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=128,
        max_position_embeddings=2048,  # the paged scheduler asserts at least 1024
        rms_norm_eps=1e-6,
        attention_bias=False,
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        torch_dtype="float16",
    )
    model = Qwen3ForCausalLM(config)
    with torch.no_grad():
        # Greedy choices that fp16 kernel differences cannot flip; specials never win.
        head = model.get_output_embeddings().weight
        head.mul_(25.0)
        head[: len(SPECIALS)].zero_()
    model.half().save_pretrained(directory, safe_serialization=True)
    _top_level_rope_theta(Path(directory) / "config.json")


def _top_level_rope_theta(path: Path) -> None:
    """InfiniLM 9439ea6 reads a top-level rope_theta; transformers 5 writes only
    rope_parameters.rope_theta."""
    config = json.loads(path.read_text())
    if "rope_theta" not in config and isinstance(config.get("rope_parameters"), dict):
        config["rope_theta"] = config["rope_parameters"]["rope_theta"]
    config.setdefault("torch_dtype", config.get("dtype", "float16"))
    path.write_text(json.dumps(config, indent=2))


def reference(directory: str) -> list[int]:
    """transformers' greedy ids for PROMPT, on the GPU."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    ids = AutoTokenizer.from_pretrained(directory).encode(PROMPT)
    model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float16).cuda().eval()
    prompt = torch.tensor([ids], device="cuda")
    with torch.no_grad():
        out = model.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            max_new_tokens=NEW_TOKENS,
            do_sample=False,
            pad_token_id=0,
        )
    del model
    torch.cuda.empty_cache()
    return [int(t) for t in out[0, len(ids) :].tolist()]


# --- the checks ---------------------------------------------------------------------------------


def check_environment() -> bool:
    import torch

    versions = {}
    for name in ("torch", "transformers", "tokenizers", "safetensors"):
        versions[name] = getattr(__import__(name), "__version__", "?")
    cuda = torch.cuda.is_available()
    device = torch.cuda.get_device_name(0) if cuda else None
    emit("environment", cuda, device=device, **versions)
    return cuda


def check_import() -> bool:
    found = run_child("import", {})
    ok = found["outcome"] == "ok" and "exception" not in found
    emit("import", ok, **found)
    return ok


def check_ops() -> None:
    found = run_child("ops", {})
    for name, data in found.get("ops", {}).items():
        emit(f"ops.{name}", data["ok"], max_abs_err=data["max_abs_err"])
    if "ops" not in found:
        emit("ops", False, **found)


def check_generation(model: str, expected: list[int]) -> None:
    for cache, backend in SUPPORTED:
        found = run_child("llm", {"model": model, "cache": cache, "backend": backend})
        got = found.get("token_ids")
        emit(
            f"generate.{cache}.{backend}",
            got == expected,
            infinilm=got,
            transformers=expected,
            **{k: v for k, v in found.items() if k != "token_ids"},
        )


def check_rejections(model: str) -> None:
    for cache, backend in REJECTED:
        found = run_child("llm", {"model": model, "cache": cache, "backend": backend})
        clean = found.get("phase") == "construct" and found.get("exception") == "ValueError"
        emit(f"reject.{cache}.{backend}", clean, expected="ValueError from LLM(...)", **found)


def check_sampling(model: str, expected: list[int]) -> None:
    for label, sampling in SAMPLING.items():
        for cache, backend in (("static", "default"), ("paged", "paged-attn")):
            spec = {"model": model, "cache": cache, "backend": backend, "sampling": sampling}
            found = run_child("llm", spec)
            ids = found.get("token_ids")
            valid = (
                isinstance(ids, list)
                and len(ids) == NEW_TOKENS
                and all(len(SPECIALS) <= t < VOCAB for t in ids)
            )
            outside = outside_filters(model, ids, **sampling) if valid else None
            emit(
                f"sampling.{label}.{cache}",
                valid and outside == [],
                outside_filters=outside,
                **sampling,
                **found,
            )
    spec = {"model": model, "cache": "static", "backend": "default", "sampling": NEAR_GREEDY}
    found = run_child("llm", spec)
    got = found.get("token_ids")
    emit(
        "sampling.near_greedy_equals_greedy",
        got == expected,
        infinilm=got,
        transformers=expected,
        **NEAR_GREEDY,
    )


def outside_filters(
    directory: str, ids: list[int], top_k: int, top_p: float, temperature: float
) -> list[int]:
    """The steps whose sampled id neither top-k nor top-p would let through, judged on
    transformers' logits for the prompt and the ids sampled before it."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    prompt = AutoTokenizer.from_pretrained(directory).encode(PROMPT)
    model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float16).cuda().eval()
    with torch.no_grad():
        logits = model(torch.tensor([prompt + ids], device="cuda")).logits[0].float()
    del model
    torch.cuda.empty_cache()
    outside = []
    for step, token in enumerate(ids):
        row = logits[len(prompt) - 1 + step] / temperature
        ranked = torch.sort(row, descending=True).values
        kth = ranked[min(top_k, VOCAB) - 1]
        in_top_k = bool(row[token] >= kth - LOGIT_SLACK)
        kept = ranked[: min(top_k, VOCAB)]
        probs = torch.softmax(kept, dim=0)
        above = float(probs[kept > row[token] + LOGIT_SLACK].sum())  # mass ranked before it
        if not (in_top_k and above < top_p + PROB_SLACK):
            outside.append(step)
    return outside


def main() -> int:
    if sys.argv[1:2] == ["--child"]:
        return child(sys.argv[2], json.loads(sys.argv[3]))
    start = time.monotonic()
    if check_environment() and check_import():
        check_ops()
        with tempfile.TemporaryDirectory(prefix="infini-check-qwen3-") as model:
            make_model(model)
            expected = reference(model)
            emit("reference", len(expected) == NEW_TOKENS, transformers=expected)
            check_generation(model, expected)
            check_rejections(model)
            check_sampling(model, expected)
    summary = {"check": "summary", "ok": not FAILED, "failed": FAILED, "known_gaps": GAPS}
    print(json.dumps({**summary, "seconds": round(time.monotonic() - start, 1)}), flush=True)
    return 0 if not FAILED else 1


if __name__ == "__main__":
    sys.exit(main())

"""The cpu wheel's runtime check: what InfiniLM can do on the CPU at its pins, proven.

Run by ``infini-stack check WHEEL --vendor cpu`` (and by ``release --vendor cpu``) in a fresh venv
holding the wheel and seeing the target interpreter's packages (torch, transformers, ...).
Downloads nothing.

InfiniOps (1f6f9c2) has CPU kernels for a few operators only: add, cast, cat, causal_softmax,
gemm, linear, mul, relu, rms_norm, silu, silu_and_mul, swiglu and top-k/top-p sampling. The
infinicore sources that call any other operator are left out of the cpu build
(components/infinilm/CMakeLists.txt, INFINILM_SKIP_MISSING_OPS), so those operators have no CPU
implementation; the ones that remain reach the CPU through a recipe patch
(components/infinilm-runtime/patches/cpu-infiniops-devices.patch: InfiniLM 9439ea6 registers its
InfiniOps implementations for GPU vendors only). So:

- every infinicore operator that has one must agree with torch on the CPU;
- the operators greedy decoding of a Qwen3 needs and that have none (embedding first: a model
  cannot even look its tokens up) must fail cleanly or be reported as missing, by name;
- InfiniLM's ``LLM`` is asked to generate with a tiny random Qwen3 on the CPU: if it does, its
  greedy ids must equal transformers'; if it cannot, the line names the missing operators and
  counts as a known gap, not a pass.

Every infinicore/InfiniLM call runs in a child process of this script, so an abort is a reported
outcome, not the end of the check; the children run side by side (``children.py``: as many as the
host's cores and memory hold, or ``INFINI_STACK_CHECK_JOBS``). One JSON line per check on stdout,
in a fixed order, then a summary; exit status 0 only when every required check passed.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import children  # beside this script
from children import FAILED, GAPS, emit

CHILD_TIMEOUT = 300.0
CHILD_MEMORY = 1 << 30  # bytes of host memory a child is given room for (torch, infinicore)
# The operators with a CPU implementation, each with its tolerance against torch (float32).
PRESENT = {
    "add": 1e-5,
    "matmul": 1e-4,
    "linear": 1e-4,
    "rms_norm": 1e-4,
    "silu": 1e-5,
    "silu_and_mul": 1e-5,
    "causal_softmax": 1e-5,
    "cat": 0.0,
}
# What greedy decoding of a Qwen3 needs beyond them, probed one by one.
NEEDED_ELSEWHERE = ("embedding", "random_sample")
VOCAB = 256
PROMPT_IDS = [5, 17, 42, 99, 7, 123, 64, 200]
NEW_TOKENS = 8


def run_child(mode: str, spec: dict[str, Any]) -> dict[str, Any]:
    """``python THIS --child MODE SPEC`` (:func:`children.run_child`)."""
    return children.run_child(str(Path(__file__).resolve()), mode, spec, timeout=CHILD_TIMEOUT)


def child(mode: str, spec: dict[str, Any]) -> int:
    modes = {"import": child_import, "op": child_op, "llm": child_llm}
    return children.serve(modes, mode, spec)


def child_import(spec: dict[str, Any], result: Callable[[dict[str, Any]], None]) -> None:
    import infinicore
    import infinilm

    result({"infinicore": infinicore.__file__, "infinilm": infinilm.__file__})


def child_op(spec: dict[str, Any], result: Callable[[dict[str, Any]], None]) -> None:
    import infinicore
    import infinicore.nn.functional as F
    import torch

    torch.manual_seed(0)
    name = spec["op"]

    def wrap(t: Any) -> Any:
        return infinicore.from_torch(t.contiguous())

    def back(x: Any) -> Any:
        return torch.from_numpy(x.to_numpy()).float()

    a, b = torch.randn(3, 17, 64), torch.randn(3, 17, 64)
    m, n = torch.randn(37, 96), torch.randn(96, 48)
    x, w = torch.randn(6, 128), 1 + 0.1 * torch.randn(128)
    g = torch.randn(8, 320)
    s = torch.randn(2, 5, 5)
    table, ids = torch.randn(VOCAB, 32), torch.randint(0, VOCAB, (2, 11))
    mask = torch.full((5, 5), float("-inf")).triu(1)
    cases: dict[str, tuple[Callable[[], Any], Any]] = {
        "add": (lambda: infinicore.add(wrap(a), wrap(b)), a + b),
        "matmul": (lambda: infinicore.matmul(wrap(m), wrap(n)), m @ n),
        "linear": (lambda: F.linear(wrap(m), wrap(n.T)), m @ n),
        "rms_norm": (
            lambda: F.rms_norm(wrap(x), wrap(w), 1e-6),
            x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w,
        ),
        "silu": (lambda: F.silu(wrap(g)), torch.nn.functional.silu(g)),
        "silu_and_mul": (
            lambda: F.silu_and_mul(wrap(g)),
            torch.nn.functional.silu(g[:, :160]) * g[:, 160:],
        ),
        "causal_softmax": (lambda: F.causal_softmax(wrap(s)), torch.softmax(s + mask, -1)),
        "cat": (lambda: infinicore.cat([wrap(a), wrap(b)], 1), torch.cat([a, b], 1)),
        "embedding": (lambda: F.embedding(wrap(ids), wrap(table)), table[ids]),
        "random_sample": (
            lambda: F.random_sample(wrap(g[0]), 0.5, 1.0, 1, 1.0),
            torch.argmax(g[0]).reshape(()),
        ),
    }
    run, want = cases[name]
    got = back(run())
    want = want.float()
    same_shape = tuple(got.shape) == tuple(want.shape)
    err = (got - want).abs().max().item() if same_shape and got.numel() else None
    result({"shape": list(got.shape), "want_shape": list(want.shape), "max_abs_err": err})


def child_llm(spec: dict[str, Any], result: Callable[[dict[str, Any]], None]) -> None:
    from infinilm.llm import LLM, SamplingParams

    try:
        llm = LLM(
            model_path=spec["model"],
            device="cpu",
            dtype="float32",
            cache_type="static",
            attn_backend="default",
            max_batch_size=1,
            max_tokens=NEW_TOKENS,
            max_cache_len=256,
            enable_graph=False,
            top_k=1,
            top_p=1.0,
            temperature=1.0,
        )
    except BaseException as exc:
        result({"phase": "construct", "exception": type(exc).__name__, "message": str(exc)})
        return
    params = SamplingParams(max_tokens=NEW_TOKENS, ignore_eos=True, top_k=1)
    (out,) = llm.generate(prompts=[spec["prompt"]], sampling_params=params, use_tqdm=False)
    result({"phase": "generate", "token_ids": [int(t) for t in out.outputs[0].token_ids]})


# --- the model and the reference ----------------------------------------------------------------


def make_model(directory: str) -> str:
    """A tiny random Qwen3 (float32) and a WordLevel tokenizer; returns the prompt's text."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=256,
        tie_word_embeddings=False,
        torch_dtype="float32",
    )
    Qwen3ForCausalLM(config).eval().save_pretrained(directory, safe_serialization=True)
    vocab = {f"w{i}": i for i in range(VOCAB)}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="w0"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="w0").save_pretrained(directory)
    return " ".join(f"w{i}" for i in PROMPT_IDS)


def reference(directory: str) -> list[int]:
    import torch
    from transformers import Qwen3ForCausalLM

    model = Qwen3ForCausalLM.from_pretrained(directory, torch_dtype=torch.float32).eval()
    with torch.no_grad():
        out = model.generate(torch.tensor([PROMPT_IDS]), max_new_tokens=NEW_TOKENS, do_sample=False)
    return [int(t) for t in out[0, len(PROMPT_IDS) :]]


# --- the checks ---------------------------------------------------------------------------------


def check_op(name: str, tolerance: float) -> None:
    """An operator with a CPU implementation, against torch."""
    got = run_child("op", {"op": name})
    err = got.get("max_abs_err")
    ok = got.get("outcome") == "ok" and err is not None and err <= tolerance
    emit(f"op:{name}", ok, max_abs_err=err, tolerance=tolerance, **_why(got))


def check_needed(name: str, missing: list[str]) -> None:
    """An operator greedy decoding needs: present, or named in ``missing`` (a known gap)."""
    got = run_child("op", {"op": name})
    err = got.get("max_abs_err")
    if got.get("outcome") == "ok" and err is not None and err == 0.0:
        emit(f"op:{name}", True, max_abs_err=err, note="has a CPU implementation")
        return
    missing.append(name)
    emit(
        f"op:{name}",
        False,
        gap=f"no CPU implementation of {name} in infinicore at these pins",
        **_why(got),
    )


def generation(found: dict[str, Any]) -> None:
    """The tiny model, transformers' ids and InfiniLM's, into ``found``."""
    try:
        with tempfile.TemporaryDirectory(prefix="infinilm-cpu-check-") as directory:
            prompt = make_model(directory)
            found["expected"] = reference(directory)
            found["got"] = run_child("llm", {"model": directory, "prompt": prompt})
    except Exception as exc:  # the reference itself: transformers' side
        found["error"] = f"the reference failed: {type(exc).__name__}: {exc}"


def check_generation(found: dict[str, Any], missing: list[str]) -> None:
    if "error" in found:
        emit("generate", False, reason=found["error"])
        return
    expected, got = found["expected"], found["got"]
    ids = got.get("token_ids")
    if ids is not None:
        emit("generate", ids == expected, expected=expected, got=ids)
        return
    names = ", ".join(sorted(missing, key=NEEDED_ELSEWHERE.index)) or "an operator"
    emit(
        "generate",
        False,
        gap=f"InfiniLM cannot generate on the CPU at these pins: no CPU implementation of {names}",
        expected=expected,
        **_why(got),
    )


def _why(got: dict[str, Any]) -> dict[str, Any]:
    keys = ("outcome", "phase", "exception", "message", "stderr_tail")
    return {k: got[k] for k in keys if k in got and got[k] not in (None, "ok")}


def main() -> int:
    children.pool(children.jobs_for(device_bytes=None, child_bytes=CHILD_MEMORY))
    got = run_child("import", {})
    emit("import", "infinicore" in got, **got)
    if "infinicore" in got:
        missing: list[str] = []
        found: dict[str, Any] = {}
        children.side_by_side(
            *(partial(check_op, name, tolerance) for name, tolerance in PRESENT.items()),
            *(partial(check_needed, name, missing) for name in NEEDED_ELSEWHERE),
            partial(generation, found),
        )
        check_generation(found, missing)
    ok = not FAILED
    summary = {"check": "summary", "ok": ok, "failed": FAILED, "gaps": GAPS}
    print(json.dumps({**summary, **children.timeline()}), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        sys.exit(child(sys.argv[2], json.loads(sys.argv[3])))
    sys.exit(main())

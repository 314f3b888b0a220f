"""One prepared run for a lent GPU (see scripts/gpu_check.sh): numbers for the issue notes.

1. Parity: tiny random Qwen3 / Qwen2 / Qwen3-MoE made by torch + transformers; tbjax logits on the GPU (fp32,
   highest matmul precision) against transformers on the CPU.
2. Attention kernels: `triton` (segment ids) against `cudnn` (dense mask) on a packed bf16 batch: max |diff| of
   the output and of dq/dk/dv, and forward+backward time of each.
3. One GRPO update of the largest Qwen3 shape in SHAPES that fits: tokens/s and MFU (6 x params x tokens / s
   over the chip's dense bf16 peak), bf16 params and compute, full remat, float32 AdamW moments.
4. One LoRA GRPO update (rank 16, alpha 32, attention and MLP projections) of the largest shape in SHAPES that
   fits: the base frozen in bf16, AdamW on the adapters alone; tokens/s, MFU and peak memory.
5. Weight transfer: device-to-host and host-to-device GB/s of a 2 GiB bf16 array (median of 3; pageable, as the
   exporter and a server's loader copy, and pinned), a publish of the model check 3 updated through
   publish_weights into /dev/shm with its page-cache read-back, and the 27B reference's publish-time estimate
   at these rates (tbjax.plan.publish_time, which assumes the copies' rates on a machine without a GPU).
6. JaxEngine decode tokens/s at 1, 8, 32 and 64 concurrent sequences on the tiny model.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from tbjax.models import Qwen

sys.path.insert(0, str(Path(__file__).parent))

PEAK_BF16 = {"H200": 989e12, "H100": 989e12, "A100": 312e12}
SHAPES = {  # (hidden, layers, heads, kv heads, intermediate), Qwen3-like with head_dim 128 and vocab 151936
    "qwen3-8b": (4096, 36, 32, 8, 12288),
    "qwen3-4b": (2560, 36, 32, 8, 9728),
    "qwen3-1.7b": (2048, 28, 16, 8, 6144),
}
ATTENTION = "cudnn"  # the GRPO updates' attention kernel


def parity() -> None:
    import torch
    import transformers
    from make_tiny_model import make_checkpoint

    from tbjax.models import from_pretrained

    jax.config.update("jax_default_matmul_precision", "highest")
    for arch in ("qwen3", "qwen2", "qwen3-moe"):
        path = make_checkpoint(Path(tempfile.mkdtemp()) / arch, arch)
        ids = np.random.default_rng(0).integers(0, 500, size=(2, 64))
        with torch.no_grad():
            ref = transformers.AutoModelForCausalLM.from_pretrained(path).eval()(torch.tensor(ids)).logits.numpy()
        got = np.asarray(from_pretrained(path)(jnp.asarray(ids, jnp.int32)))
        print(f"parity {arch:10s} on {jax.devices()[0].device_kind}: max |diff| {np.abs(got - ref).max():.2e}")
    jax.config.update("jax_default_matmul_precision", "default")


def attention_kernels(rows: int = 2, seq: int = 8192, heads: int = 32, kv_heads: int = 8, steps: int = 10) -> None:
    """triton exists so long packed rows fit (no dense mask); this says whether it agrees with cuDNN and what it
    costs in time. Rows hold documents cut at random points and end in padding (segment 0)."""
    from tbjax.models.attention_kernels import attend

    rng = np.random.default_rng(0)
    q, k, v = (jnp.asarray(rng.normal(size=(rows, seq, n, 128)), jnp.bfloat16) for n in (heads, kv_heads, kv_heads))
    cuts = np.sort(rng.integers(1, seq, size=(rows, 7)), axis=1)
    segments = 1 + (np.arange(seq)[None, :, None] >= cuts[:, None, :]).sum(-1)
    segments[:, -300:] = 0
    segments = jnp.asarray(segments, jnp.int32)
    cotangent = jnp.asarray(rng.normal(size=q.shape), jnp.bfloat16)

    def output_and_grads(impl: str):
        def loss(q, k, v):
            out = attend(impl, q, k, v, segments)
            return jnp.sum(out.astype(jnp.float32) * cotangent), out
        return jax.jit(jax.grad(loss, argnums=(0, 1, 2), has_aux=True))

    results, seconds = {}, {}
    try:
        for impl in ("cudnn", "triton"):
            step = output_and_grads(impl)
            grads, out = jax.block_until_ready(step(q, k, v))  # compile
            results[impl] = (out, *grads)
            start = time.perf_counter()
            for _ in range(steps):
                jax.block_until_ready(step(q, k, v))
            seconds[impl] = (time.perf_counter() - start) / steps
    except Exception as error:  # noqa: BLE001 - report it and go on to the other checks
        print(f"attention {impl}: failed ({type(error).__name__}: {str(error)[:300]})")
        return
    pairs = zip(("out", "dq", "dk", "dv"), results["triton"], results["cudnn"], strict=True)
    diffs = ", ".join(f"{name} {float(jnp.abs(t.astype(jnp.float32) - c).max()):.2e} (|cudnn| up to "
                      f"{float(jnp.abs(c).max()):.1e})" for name, t, c in pairs)
    print(f"attention triton vs cudnn ({rows} x {seq} packed tokens, {heads}/{kv_heads} heads, bf16) on "
          f"{jax.devices()[0].device_kind}: max |diff| {diffs}")
    print(f"attention forward+backward: cudnn {seconds['cudnn'] * 1e3:.1f} ms, "
          f"triton {seconds['triton'] * 1e3:.1f} ms, triton/cudnn {seconds['triton'] / seconds['cudnn']:.2f}x")


def grpo_update(name: str, seq: int = 4096, rows: int = 2, lora_rank: int = 0) -> Qwen | None:
    """One GRPO update of SHAPES[name]: every weight (bf16 with float32 masters), or with `lora_rank` > 0 the
    adapters alone (unscanned layers: adapters are not stacked for scanned ones). Returns the updated policy,
    None where the update did not fit or failed."""
    from flax import nnx

    from rollout.trajectory import Trajectory
    from tbjax.models import ModelConfig, RuntimeConfig
    from tbjax.models.lora import add_adapters
    from tbjax.sections.lora import LoraSpec
    from tbjax.sections.training import GRPOSection
    from tbjax.trainer.packing import batch_from_groups
    from tbjax.trainer.update import GRPOTrainer

    hidden, layers, heads, kv, inter = SHAPES[name]
    cfg = ModelConfig.from_hf_dict({"model_type": "qwen3", "vocab_size": 151936, "hidden_size": hidden,
                                    "intermediate_size": inter, "num_hidden_layers": layers,
                                    "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": 128,
                                    "tie_word_embeddings": False, "rope_theta": 1e6},
                                   RuntimeConfig("bfloat16", "bfloat16", ATTENTION, "full", not lora_rank))
    what = f"lora r{lora_rank}" if lora_rank else "grpo"
    try:
        model = Qwen(cfg, nnx.Rngs(0))
        if lora_rank:
            add_adapters(model, LoraSpec(rank=lora_rank, alpha=2.0 * lora_rank))
        trainer = GRPOTrainer(model, GRPOSection(), logprob_chunk=16384)
        state = trainer.init_state(model)
        # bfloat16 parameters: AdamW steps their float32 master weights; adapters are float32 and need none
        assert (state.master is None) == bool(lora_rank)
        rng = np.random.default_rng(0)

        def episode(group: int, member: int) -> Trajectory:
            ids = [int(x) for x in rng.integers(0, 150000, size=seq)]
            return Trajectory("t", f"g{group}", ids, [0] * 64 + [1] * (seq - 64), [0.0] * 64 + [-1.0] * (seq - 64),
                              ["0"], float(member % 2), "user_done")

        groups = [[episode(g, m) for m in range(2)] for g in range(rows // 2)]
        batch = batch_from_groups(groups, GRPOSection(), seq, 1)
        batch = trainer.prepare(state.params, batch)
        state, _ = trainer.update(state, batch)  # compile
        jax.block_until_ready(state.params)
        start = time.perf_counter()
        steps = 3
        for _ in range(steps):
            state, metrics = trainer.update(state, batch)
        jax.block_until_ready(state.params)
        seconds = (time.perf_counter() - start) / steps
    except Exception as error:  # noqa: BLE001 - out of memory means: try the next smaller shape
        print(f"{what} {name}: does not fit or failed ({type(error).__name__}: {str(error)[:200]})")
        return None
    tokens = rows * seq
    kind = jax.devices()[0].device_kind
    peak = next((v for k, v in PEAK_BF16.items() if k in kind), None)
    # forward + backward (2x forward); LoRA's backward computes no weight gradients of the base, so 1x
    flops = (2 if lora_rank else 3) * cfg.flops_per_token(seq) * tokens
    mfu = f"{flops / seconds / peak:.1%}" if peak else "n/a"
    peak_memory = (jax.devices()[0].memory_stats() or {}).get("peak_bytes_in_use", 0) / 1e9
    trained = sum(x.size for x in jax.tree.leaves(state.params))
    detail = (f"base frozen in bfloat16, {trained / 1e6:.1f}M adapter parameters trained" if lora_rank
              else "bfloat16 with float32 master weights")
    print(f"{what} {name} ({cfg.num_params() / 1e9:.2f}B, {detail}) on {kind}: "
          f"{tokens / seconds:,.0f} tokens/s, "
          f"{seconds:.2f} s/update, MFU {mfu}, {peak_memory:.1f} GB peak device memory")
    return trainer.model_for(state.params)


def weight_transfer(policy: Qwen | None, name: str) -> None:
    """Copies between the GPU and host memory each way, then `policy` (SHAPES[name]) published as the trainer
    publishes it each step, and what those rates make of the 27B reference's publish."""
    from flax import nnx

    from tbjax.config import load_config
    from tbjax.plan.publish_time import plan_publish, publish_lines, rates_from
    from tbjax.plan.transfer_rates import SHM, TIMED_PUBLISHES, measure_transfers, probe_directory, probe_publish

    transfers = measure_transfers(2 << 30)
    if transfers is None:
        print("weight transfer: no accelerator")
        return

    def gbps(rate: float | None) -> str:
        return "n/a (no pinned_host memory)" if rate is None else f"{rate / 1e9:.1f}"
    size = f"{transfers.device}, {transfers.nbytes / 2**30:.0f} GiB bf16, median of 3"
    print(f"device-to-host GB/s ({size}): pageable {gbps(transfers.d2h)}, pinned {gbps(transfers.d2h_pinned)}")
    print(f"host-to-device GB/s ({size}): pageable {gbps(transfers.h2d)}, pinned {gbps(transfers.h2d_pinned)}")
    if policy is None:
        return
    nbytes = sum(x.nbytes for x in jax.tree.leaves(nnx.state(policy, nnx.Param)))
    probe = probe_publish(policy, probe_directory(SHM, nbytes))
    print(f"publish_weights {name} ({probe.nbytes / 1e9:.1f} GB {probe.dtype}) into {probe.directory}: "
          f"{probe.publish_s:.2f} s, {probe.publish_rate / 1e9:.2f} GB/s (the fastest of {TIMED_PUBLISHES} after "
          f"one that compiled); page-cache read {probe.read_s:.2f} s, {probe.read_rate / 1e9:.2f} GB/s")
    for line in publish_lines(plan_publish(load_config("qwen3-27b-3x8-h100"), lambda _: rates_from(probe, transfers))):
        print(line)


def engine_decode() -> None:
    from bench.rollout_throughput import jax_tokens_per_second, prompts

    from tbjax.assets.tiny import make_flax_checkpoint
    from tbjax.engine.jax_engine import JaxEngine
    from tbjax.models import from_pretrained

    model = from_pretrained(make_flax_checkpoint(Path(tempfile.mkdtemp()) / "tiny"))
    for n in (1, 8, 32, 64):
        engine = JaxEngine(model, slots=64, max_len=512)
        rate = jax_tokens_per_second(engine, prompts(n, 128, model.config.vocab_size), 256)
        print(f"JaxEngine decode, {n:2d} concurrent: {rate:,.0f} tokens/s")
        asyncio.run(engine.close())


def stage(name: str, start: float = time.perf_counter()) -> None:
    print(f"--- {name} at {time.perf_counter() - start:.0f} s", flush=True)


if __name__ == "__main__":
    print(jax.__version__, jax.devices(), flush=True)
    parity()
    stage("attention")
    attention_kernels()
    stage("lora update")
    for shape in SHAPES:  # LoRA first: the device's peak memory is the process's, so the smaller peak goes first
        if grpo_update(shape, lora_rank=16) is not None:
            break
    stage("full update")
    # every weight: Qwen3-8B's state alone (bf16 weights, float32 masters, moments and gradient accumulator) is
    # 147 GB, past any single GPU, so the full update starts at the next shape
    updated, shape = None, ""
    for shape in list(SHAPES)[1:]:
        updated = grpo_update(shape)
        if updated is not None:
            break
    stage("weight transfer")
    weight_transfer(updated, shape)
    del updated
    stage("engine decode")
    engine_decode()
    stage("done")

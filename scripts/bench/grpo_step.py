"""Tokens/s of one GRPO update (forward + backward + clipped AdamW) on CPU for a ~50M-parameter Qwen3:
tbjax's GRPOTrainer beside google-tunix's GRPO learner step on the same model config and the same fixed
synthetic batch, in the same run, with the ratio and each side's peak RSS.

tunix runs in its own venv (scripts/bench/tunix_grpo_worker.py, one long-lived process) so its pins
never meet ours; the two sides' steps alternate so that load from other processes falls on both alike.
Both get the same XLA_FLAGS (tbjax's import turns XNNPACK dot kernels on; the worker inherits them).
tokens/s counts the batch's real tokens (prompt + completion, no padding) on both sides: tbjax packs
episodes into rows, tunix pads prompts left and completions right, and that difference is part of what
is measured. `--lengths full` gives every episode the whole budget, so no packing can help.

    python -m venv /tmp/tunix-venv && /tmp/tunix-venv/bin/pip install google-tunix
    TBJAX_TUNIX_PYTHON=/tmp/tunix-venv/bin/python python scripts/bench/grpo_step.py [--lengths varied|full]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jax
import numpy as np
from bench_common import CONFIG, median_seconds
from flax import nnx

from rollout.trajectory import Trajectory
from tbjax.models import ModelConfig, Qwen
from tbjax.sections.training import GRPOSection, OptimSection
from tbjax.trainer.objective import episode_advantages
from tbjax.trainer.packing import PackedBatch, batch_from_groups
from tbjax.trainer.update import GRPOTrainer

WORKER = Path(__file__).with_name("tunix_grpo_worker.py")
PAD_ID = 0  # the worker's pad id; synthetic tokens start above it


def synthetic_groups(args: argparse.Namespace, vocab: int = CONFIG["vocab_size"]) -> list[list[Trajectory]]:
    """Fixed episodes: random tokens, rewards alternating within each group (every group informative),
    behaviour log-probs near the policy's (random init puts ~1/vocab on every token)."""
    rng = np.random.default_rng(0)
    groups = []
    for g in range(args.episodes // args.group_size):
        members = []
        for m in range(args.group_size):
            prompt, completion = args.prompt, args.completion
            if args.lengths == "varied":
                prompt = int(rng.integers(prompt // 2, prompt + 1))
                completion = int(rng.integers(completion // 4, completion + 1))
            ids = [int(t) for t in rng.integers(3, vocab, size=prompt + completion)]
            behaviour = -np.log(vocab) + 0.1 * rng.standard_normal(completion)
            members.append(Trajectory(
                f"task{g}", f"group{g}", ids, [0] * prompt + [1] * completion, [0.0] * prompt + behaviour.tolist(),
                ["0"], float(m % 2), "user_done", prompt_tokens=prompt, completion_tokens=completion))
        groups.append(members)
    return groups


def tunix_arrays(groups: list[list[Trajectory]], args: argparse.Namespace, optim: OptimSection,
                 grpo: GRPOSection) -> dict[str, np.ndarray]:
    """The same batch in tunix's layout (prompts left-padded, completions right-padded), the same advantages,
    and the setup the worker needs (it cannot import tbjax)."""
    episodes = [t for group in groups for t in group]
    prompt_ids = np.full((len(episodes), args.prompt), PAD_ID, np.int32)
    completion_ids = np.full((len(episodes), args.completion), PAD_ID, np.int32)
    for row, t in enumerate(episodes):
        prompt_ids[row, args.prompt - t.prompt_tokens:] = t.token_ids[:t.prompt_tokens]
        completion_ids[row, :t.completion_tokens] = t.token_ids[t.prompt_tokens:]
    advantages = episode_advantages([[t.reward for t in g] for g in groups], grpo)
    setup = {"model": CONFIG, "group_size": args.group_size, "temperature": 1.0,
             "loss": {"clip_low": grpo.clip_low, "clip_high": grpo.clip_high},
             "optim": {k: getattr(optim, k) for k in ("learning_rate", "b1", "b2", "eps", "weight_decay", "grad_clip")}}
    return {"setup": np.array(json.dumps(setup)), "prompt_ids": prompt_ids, "completion_ids": completion_ids,
            "advantages": advantages.astype(np.float32)}


def tbjax_step(batch: PackedBatch, optim: OptimSection, grpo: GRPOSection, logprob_chunk: int, cpu: list[float]):
    """One GRPOTrainer.update per call (the state it donates is carried over; its CPU seconds go to `cpu`),
    and the parameter count."""
    model = Qwen(ModelConfig.from_hf_dict(CONFIG), nnx.Rngs(0))
    params = sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param)))
    trainer = GRPOTrainer(model, grpo, optim, logprob_chunk=logprob_chunk)
    state = trainer.init_state(model)

    def step() -> None:
        nonlocal state
        start = time.process_time()
        state, _ = trainer.update(state, trainer.prepare(state.params, batch))  # it fetches its metrics: done
        cpu.append(time.process_time() - start)

    return step, params


class TunixWorker:
    """The tunix side: a process in tunix's venv that runs one update per `step()`."""

    def __init__(self, python: str, batch_file: Path, log_file: Path):
        self.log_file, self.cpu_seconds = log_file, []
        self.process = subprocess.Popen([python, str(WORKER), str(batch_file)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=log_file.open("w"), text=True)
        self.info = self._read()

    def _read(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            log = self.log_file.read_text()[-3000:]
            raise RuntimeError(f"the tunix worker exited (code {self.process.wait()}); its log ends:\n{log}")
        return json.loads(line)

    def step(self) -> float:
        self.process.stdin.write("step\n")
        self.process.stdin.flush()
        reply = self._read()
        self.cpu_seconds.append(reply["cpu_seconds"])
        return reply["seconds"]

    def close(self) -> float:
        """Stops the worker; returns its peak RSS in MB."""
        self.process.stdin.write("quit\n")
        self.process.stdin.flush()
        peak = self._read()["peak_rss_mb"]
        self.process.wait()
        return peak


def tunix_python(flag: str | None) -> str:
    python = flag or os.environ.get("TBJAX_TUNIX_PYTHON")
    if not python or not Path(python).exists():
        sys.exit("tunix's side needs its own venv's python, by --tunix-python or TBJAX_TUNIX_PYTHON "
                 f"(got {python!r}). Make one with:\n"
                 "    python3.11 -m venv /tmp/tunix-venv && /tmp/tunix-venv/bin/pip install google-tunix\n"
                 "then: TBJAX_TUNIX_PYTHON=/tmp/tunix-venv/bin/python python scripts/bench/grpo_step.py")
    return python


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=5, help="timed updates per side, after 2 warm-up updates")
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--prompt", type=int, default=128, help="prompt token budget")
    parser.add_argument("--completion", type=int, default=384, help="completion token budget")
    parser.add_argument("--lengths", choices=("varied", "full"), default="varied",
                        help="varied: prompts 1/2-1x, completions 1/4-1x of the budget; full: all at the budget")
    parser.add_argument("--micro-rows", type=int, default=1, help="packed rows per micro-batch (the loop's default)")
    parser.add_argument("--logprob-chunk", type=int, default=8192)
    parser.add_argument("--tunix-python", help="python of a venv with google-tunix (default: $TBJAX_TUNIX_PYTHON)")
    args = parser.parse_args()
    python = tunix_python(args.tunix_python)
    optim, grpo = OptimSection(), GRPOSection()
    groups = synthetic_groups(args)
    tokens = sum(len(t.token_ids) for g in groups for t in g)
    batch = batch_from_groups(groups, grpo, args.prompt + args.completion, args.micro_rows)

    with tempfile.TemporaryDirectory() as tmp:
        np.savez(Path(tmp) / "batch.npz", **tunix_arrays(groups, args, optim, grpo))
        worker = TunixWorker(python, Path(tmp) / "batch.npz", Path(tmp) / "worker.log")
        tbjax_cpu: list[float] = []
        step, params = tbjax_step(batch, optim, grpo, args.logprob_chunk, tbjax_cpu)
        seconds = median_seconds({"tbjax": step, "tunix": worker.step}, args.steps)
        tunix_rss = worker.close()
    tbjax_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    info = worker.info
    rows, row_len = batch.shape[0] * batch.shape[1], batch.shape[2]
    cpu = {"tbjax": float(np.median(tbjax_cpu[2:])), "tunix": float(np.median(worker.cpu_seconds[2:]))}

    print(f"model: qwen3 {params / 1e6:.1f}M params (tunix's build: {info['params'] / 1e6:.1f}M), "
          f"{args.episodes} episodes = {tokens} tokens ({batch.trained_tokens} trained), lengths {args.lengths}, "
          f"{os.cpu_count()} cores; jax {jax.__version__}; tunix {info['tunix']} (jax {info['jax']}, "
          f"flax {info['flax']})")
    print(f"tbjax : {tokens / seconds['tbjax']:8.1f} tokens/s ({seconds['tbjax'] * 1e3:.0f} ms/update), "
          f"{cpu['tbjax']:.1f} CPU-s/update, {rows} packed rows x {row_len}, peak RSS {tbjax_rss:.0f} MB")
    print(f"tunix : {tokens / seconds['tunix']:8.1f} tokens/s ({seconds['tunix'] * 1e3:.0f} ms/update), "
          f"{cpu['tunix']:.1f} CPU-s/update, {args.episodes} rows x {args.prompt}+{args.completion} padded, "
          f"peak RSS {tunix_rss:.0f} MB")
    print(f"ratio tbjax / tunix: {seconds['tunix'] / seconds['tbjax']:.2f}x in wall time (target >= 1.2), "
          f"{cpu['tunix'] / cpu['tbjax']:.2f}x in CPU time (less moved by other load on the machine)")


if __name__ == "__main__":
    main()

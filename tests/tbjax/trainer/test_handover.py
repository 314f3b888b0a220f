"""The colocated hand-over against a real `python -m tbjax.serve` (started by the SGLang launcher with
`--colocated`, i.e. `--enable-memory-saver`): two training cycles with real GRPO updates, the order of the
endpoint calls, where the memory is in every phase, generation with the new weights after the hand-back;
the training loop wired to it; and the transitions it refuses."""

import asyncio
import dataclasses
import json
import sys

import httpx
import jax
import portpicker
import pytest

from rollout.engines.protocol import EngineError, SamplingParams
from rollout.engines.sglang import SGLangEngine
from rollout.engines.sglang_settings import MEMORY_TAGS, SGLangConfig
from rollout.launch_sglang import LaunchConfig, Supervisor
from rollout.records import read_records
from tbjax.config import load_config
from tbjax.models import from_pretrained
from tbjax.models.hf.versions import DELTA_FILE, publish_weights
from tbjax.parallel.offload import HOST_MEMORY, HostOffload
from tbjax.parallel.xla_memory import configure_xla_memory
from tbjax.sections.rollout import RolloutSection
from tbjax.sections.training import GRPOSection, OptimSection
from tbjax.trainer.backends.sglang_backend import SGLangBackend
from tbjax.trainer.handover import Handover, IllegalTransition, Phase
from tbjax.trainer.loop import run_steps
from tbjax.trainer.packing import batch_from_groups
from tbjax.trainer.run_setup import build_run
from tbjax.trainer.update import GRPOTrainer
from tests.tbjax.trainer.loop_support import brief_session, config_for, signal_tasks
from tests.tbjax.trainer.support import synthetic_groups

GREEDY = SamplingParams(max_new_tokens=4, temperature=0.0)
CYCLE = [
    ("/generate", None),
    ("/release_memory_occupation", None),  # everything: weights, KV cache, CUDA graphs
    ("/resume_memory_occupation", ["weights"]),
    ("/pause_generation", None), ("/update_weights_from_disk", None), ("/continue_generation", None),
    ("/resume_memory_occupation", ["kv_cache", "cuda_graph"]),  # only once the trainer has left
]


@pytest.fixture(scope="module")
def server(tiny_dir):
    config = LaunchConfig(model_path=str(tiny_dir("qwen3")), tp=1, servers=1, port=portpicker.pick_unused_port(),
                          colocated=True, server_command=(sys.executable, "-m", "tbjax.serve"),
                          extra_args=("--slots", "8", "--max-len", "1024"), startup_timeout_s=120, poll_s=0.25)
    supervisor = Supervisor(config)
    assert "--enable-memory-saver" in supervisor.servers[0].argv
    supervisor.start()
    yield supervisor.urls[0]
    supervisor.stop()


def backend_of(engine: SGLangEngine, publish_root) -> SGLangBackend:
    """The rollout backend over `engine`'s servers (what the hand-over asks to release and resume memory)."""
    rollout = RolloutSection(engine="sglang", sglang_urls=list(engine.config.urls))
    return SGLangBackend(engine, rollout, publish_root, publish_root)


class Recorder(httpx.AsyncBaseTransport):
    """The real HTTP transport, noting each request's path and memory tags on the way."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.calls: list[tuple[str, list[str] | None]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else {}
        self.calls.append((request.url.path, body.get("tags")))
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


class Trainer:
    """The trainer's side of the hand-over: a GRPOTrainer and the state it owns."""

    def __init__(self, model_dir) -> None:
        model = from_pretrained(model_dir)
        self.trainer = GRPOTrainer(model, GRPOSection(), OptimSection(learning_rate=1e-4), logprob_chunk=512)
        self.state = self.trainer.init_state(model)
        self.batch = batch_from_groups(synthetic_groups(), GRPOSection(), 512, 1)

    def memory_kinds(self, part: str | None = None) -> set[str]:
        return memory_kinds(self.state if part is None else getattr(self.state, part))


def memory_kinds(tree) -> set[str]:
    return {x.sharding.memory_kind for x in jax.tree.leaves(tree)}


def released(url: str) -> list[str]:
    return httpx.get(f"{url}/get_model_info", timeout=10).json()["memory_released"]


def on_server(url: str, action) -> None:
    """`await action(engine)` with a fresh client for `url`."""
    async def main():
        engine = SGLangEngine.from_urls([url])
        try:
            await action(engine)
        finally:
            await engine.close()
    asyncio.run(main())


def test_two_colocated_cycles_against_tbjax_serve(server, tiny_dir, tmp_path):
    trainer = Trainer(tiny_dir("qwen3"))
    recorder = Recorder()
    seen: dict[str, list] = {"during_update": [], "during_publish": [], "versions": []}

    async def scenario():
        engine = SGLangEngine(SGLangConfig(urls=(server,)), transport=recorder)
        handover = Handover(backend_of(engine, tmp_path), HostOffload())
        handover.start(trainer)
        assert trainer.memory_kinds() == {HOST_MEMORY}
        for version in ("1", "2"):
            seen["versions"].append((await engine.generate([5, 6, 7], GREEDY)).weight_version)
            await handover.to_trainer(trainer)
            assert trainer.memory_kinds("params") == {"device"} and handover.phase is Phase.TRAINING
            assert trainer.memory_kinds("opt_state") == {HOST_MEMORY}  # the update fetches it for AdamW's apply
            seen["during_update"].append(released(server))
            before = jax.tree.leaves(trainer.state.params)[0].copy()
            trainer.state, metrics = trainer.trainer.update(
                trainer.state, trainer.trainer.prepare(trainer.state.params, trainer.batch))
            assert trainer.memory_kinds() == {"device"}
            assert metrics["grad_norm"] > 0 and bool((jax.tree.leaves(trainer.state.params)[0] != before).any())

            async def publish(version=version):
                seen["during_publish"].append(released(server))
                model = trainer.trainer.model_for(trainer.state.params)
                await engine.update_weights(str(publish_weights(model, tmp_path / "weights", version)), version)

            await handover.to_engines(trainer, publish)
            assert trainer.memory_kinds() == {HOST_MEMORY} and released(server) == []
        seen["versions"].append((await engine.generate([5, 6, 7], GREEDY)).weight_version)
        await engine.close()
        return handover

    handover = asyncio.run(scenario())
    assert seen["versions"] == ["0", "1", "2"]  # served by the weights each hand-back loaded
    assert seen["during_update"] == [sorted(MEMORY_TAGS)] * 2  # the server held nothing while the trainer ran
    assert seen["during_publish"] == [["cuda_graph", "kv_cache"]] * 2  # weights back, cache not yet
    assert recorder.calls == CYCLE * 2 + [("/generate", None)]
    assert [(t.source, t.target) for t in handover.transitions] == [(Phase.STARTING, Phase.ROLLOUT)] + [
        (Phase.ROLLOUT, Phase.HANDOVER_TO_TRAINER), (Phase.HANDOVER_TO_TRAINER, Phase.TRAINING),
        (Phase.TRAINING, Phase.HANDOVER_TO_ENGINES), (Phase.HANDOVER_TO_ENGINES, Phase.ROLLOUT)] * 2
    assert all(t.seconds >= 0 for t in handover.transitions)


@pytest.mark.slow
def test_the_training_loop_hands_over_around_each_update(server, tiny_dir, tmp_path):
    """A loop step on the SGLang engine with rollout.placement=colocated: the update finds the parameters on
    the device, the rollouts find the state in host memory, the export reads the parameters from the device
    again (the optimizer state stays in host memory)."""
    model_dir = tiny_dir("qwen3")
    on_server(server, lambda engine: engine.update_weights(str(model_dir), "0"))  # the base policy again
    rollout = load_config(overrides=["rollout.engine=sglang", "rollout.placement=colocated", "grpo.kl_coef=0",
                                     "validation.tasks=0", f"rollout.sglang_urls=[{server}]",
                                     f"rollout.publish_dir={tmp_path}/shm/{{run}}", "rollout.publish_keep=1"]).rollout
    config = config_for(tmp_path, 1)
    config = config.model_copy(update={"rollout": rollout, "groups": dataclasses.replace(config.groups, groups=1)})
    run = build_run(config, from_pretrained(model_dir), model_dir, tasks=signal_tasks(model_dir))
    export = asyncio.run(run_steps(run, opener=brief_session))
    lines = [json.loads(line) for line in (tmp_path / "resume" / "metrics.jsonl").read_text().splitlines()]
    updates = sum(not line["skipped"] for line in lines)
    phases = [t.target for t in run.handover.transitions]
    assert len(lines) == 1 and updates == 1
    assert phases == [Phase.ROLLOUT] + [Phase.HANDOVER_TO_TRAINER, Phase.TRAINING, Phase.HANDOVER_TO_ENGINES,
                                        Phase.ROLLOUT] * updates + [Phase.HANDOVER_TO_TRAINER, Phase.TRAINING]
    assert memory_kinds(run.state.params) == {"device"} and memory_kinds(run.state.opt_state) == {HOST_MEMORY}
    assert released(server) == sorted(MEMORY_TAGS)  # the run ended with the devices handed to the trainer
    on_server(server, lambda engine: engine.resume_memory())
    assert (export / "config.json").is_file()
    # published under rollout.publish_dir ({run}: the run's name), the version before the update removed
    assert sorted(p.name for p in (tmp_path / "shm" / config.run.name / "weights").iterdir()) == ["latest", "v1"]
    assert not (tmp_path / "resume" / "weights").exists()


@pytest.mark.slow
def test_deltas_reach_the_server_and_pass_the_weight_probe(server, tiny_dir, tmp_path):
    """Three steps on tbjax.serve with rollout.publish_delta=elements: whole, delta, whole
    (publish_full_every=2); after every publish the server scores the weight probe as the trainer does
    (train.weight_probe). `tensors` deltas load through the whole load's path (tests/tbjax/engine/
    test_delta_loading.py compares both granularities with whole loads bit for bit). The held-out tasks scored
    during training (evaluate.every=2) run on the server too, under the step's weights."""
    model_dir = tiny_dir("qwen3")
    on_server(server, lambda engine: engine.update_weights(str(model_dir), "0"))  # the base policy again
    rollout = load_config(overrides=["rollout.engine=sglang", "grpo.kl_coef=0", "validation.tasks=0",
                                     f"rollout.sglang_urls=[{server}]", f"rollout.publish_dir={tmp_path}/shm",
                                     "rollout.publish_delta=elements", "rollout.publish_full_every=2"]).rollout
    config = config_for(tmp_path, 3, "evaluate.tasks=2", "evaluate.every=2", "evaluate.every_tasks=2",
                        "evaluate.k=1")
    config = config.model_copy(update={"rollout": rollout, "groups": dataclasses.replace(config.groups, groups=1)})
    tasks = signal_tasks(model_dir)
    run = build_run(config, from_pretrained(model_dir), model_dir, tasks=tasks, heldout_tasks=tasks[:2])
    asyncio.run(run_steps(run, opener=brief_session))
    lines = [json.loads(line) for line in (tmp_path / "resume" / "metrics.jsonl").read_text().splitlines()]
    published = [line for line in lines if not line["skipped"]]
    assert len(published) == 3, "the test needs every step to train and publish"
    assert all(line["weight_probe_max_diff"] <= 1e-4 for line in published)
    for step in (2, 3):
        records = read_records(tmp_path / "resume" / "heldout" / f"step{step}" / "trials.jsonl")
        assert len(records) == 2 and {r.weight_version for r in records} == {str(step)}
    assert [line.get("heldout_pass_at_1") is not None for line in lines] == [False, True, True]
    weights = tmp_path / "shm" / "weights"
    assert [(weights / f"v{step}" / DELTA_FILE).is_file() for step in (1, 2, 3)] == [False, True, False]


def test_the_server_refuses_loads_into_released_weights_and_unknown_tags(server, tiny_dir):
    """SGLang cannot load weights into released memory; tbjax.serve refuses too, so a wrong order fails here."""
    async def wrong_order(engine):
        await engine.release_memory(["weights"])
        with pytest.raises(EngineError, match=r"resume_memory\(\['weights'\]\) before loading"):
            await engine.update_weights(str(tiny_dir("qwen3")), "wrong")
        with pytest.raises(EngineError, match="unknown memory tags"):
            await engine.release_memory(["activations"])
        await engine.resume_memory()

    on_server(server, wrong_order)
    assert released(server) == []


def test_transitions_out_of_order_raise():
    handover = Handover()  # disaggregated: the same phases, no memory moves

    class Holder:
        state = {"w": 1.0}

    async def scenario():
        with pytest.raises(IllegalTransition, match="STARTING -> HANDOVER_TO_TRAINER is not allowed"):
            await handover.to_trainer(Holder)
        handover.start(Holder)
        with pytest.raises(IllegalTransition, match="ROLLOUT -> HANDOVER_TO_ENGINES .* next phase is "
                                                    "HANDOVER_TO_TRAINER"):
            await handover.to_engines(Holder, lambda: asyncio.sleep(0))
        await handover.to_trainer(Holder)
        with pytest.raises(IllegalTransition, match="TRAINING -> ROLLOUT"):
            handover.start(Holder)

    asyncio.run(scenario())
    assert handover.phase is Phase.TRAINING and len(handover.transitions) == 3


def test_a_failed_hand_over_refuses_every_later_transition(tmp_path):
    dead = SGLangEngine.from_urls([f"http://127.0.0.1:{portpicker.pick_unused_port()}"])
    handover = Handover(backend_of(dead, tmp_path), HostOffload())

    class Holder:
        state = {"w": jax.numpy.ones(3)}

    async def scenario():
        handover.start(Holder)
        with pytest.raises(EngineError, match="/release_memory_occupation failed on 1 of 1 servers"):
            await handover.to_trainer(Holder)
        with pytest.raises(IllegalTransition, match="failed midway"):
            await handover.to_trainer(Holder)
        await dead.close()

    asyncio.run(scenario())
    assert handover.phase is Phase.HANDOVER_TO_TRAINER


def test_colocated_processes_neither_preallocate_nor_pool_device_memory(caplog):
    env: dict[str, str] = {}
    configure_xla_memory("disaggregated", env)
    assert env == {}
    configure_xla_memory("colocated", env)
    assert env == {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "XLA_PYTHON_CLIENT_ALLOCATOR": "platform"}
    chosen = {"XLA_PYTHON_CLIENT_PREALLOCATE": "true", "XLA_PYTHON_CLIENT_ALLOCATOR": "bfc"}
    configure_xla_memory("colocated", chosen)
    assert chosen == {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "XLA_PYTHON_CLIENT_ALLOCATOR": "bfc"}
    assert "keeps freed device memory in JAX's pool" in caplog.text


@pytest.mark.parametrize("engine", ["embedded", "replay"])
def test_colocation_is_refused_for_an_engine_without_servers(engine):
    from tbjax.config import ConfigError

    with pytest.raises(ConfigError, match=f"the {engine} engine has none to hand over"):
        load_config(overrides=[f"rollout.engine={engine}", "rollout.placement=colocated", "train.weight_probe=false"])


@pytest.mark.parametrize(("overrides", "message"), [
    (["rollout.publish_dir=/dev/shm/x"], "rollout.publish_dir: the embedded engine publishes no files"),
    (["rollout.publish_keep=3"], "rollout.publish_keep: the embedded engine"),
    (["rollout.engine=sglang", "rollout.sglang_urls=[http://127.0.0.1:1]", "rollout.publish_replicas=true"],
     r"needs a node-local directory: set rollout.publish_dir \(e.g. /dev/shm/tbjax/\{run\}\)"),
    (["rollout.engine=sglang", "rollout.sglang_urls=[http://127.0.0.1:1]", "rollout.publish_dir=/dev/shm/{name}"],
     r"\{run\} \(the run's name\) is the only placeholder it may hold \(KeyError: 'name'\)"),
    (["rollout.engine=sglang", "rollout.sglang_urls=[http://127.0.0.1:1]", "rollout.publish_keep=0"],
     "publish_keep"),
])
def test_publish_settings_that_cannot_act_are_refused(overrides, message):
    from tbjax.config import ConfigError

    with pytest.raises(ConfigError, match=message):
        load_config(overrides=overrides)

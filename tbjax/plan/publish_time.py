"""`python -m tbjax.plan.publish_time CONFIG... [--publish-probe]`: how long one publish takes (the trainer
writes the policy, every rollout server loads it), estimated for each config.

Bytes per node: the served weights (parameters x the export dtype; under LoRA the float32 adapters), a whole
copy for every host whose servers load them. The write (publish_weights) and page-cache read rates are this
machine's, measured by a probe (tbjax.plan.transfer_rates) only on request: `--publish-probe` here, on `python -m
tbjax.train --dry-run` and on `python -m tbjax.compile`; without it the estimate says they were not measured.
Device-host copies are measured where the probe runs on an accelerator, else assumed, as the output says.

A publish is the export (the trainer's write, overlapped with its device-to-host copies), then the servers' load,
which follows what SGLang's `/update_weights_from_disk` does (LOADER).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from flax import nnx
from rich.console import Console
from rich.filesize import decimal

from rollout.report_numbers import count
from tbjax.assets.model_source import planned_model_config
from tbjax.config import Config, ConfigError, load_config
from tbjax.models import ModelConfig, Qwen
from tbjax.models.hf.exporter import export_dtype
from tbjax.models.hf.peft_adapter import module_shapes
from tbjax.parallel.mesh import parse_mesh_spec
from tbjax.plan.transfer_rates import (
    TIMED_PUBLISHES,
    PublishProbe,
    Transfers,
    measure_transfers,
    probe_config,
    probe_directory,
    probe_model,
    probe_publish,
)
from tbjax.sections.lora import LoraSpec

GOAL_S = 15.0  # issue 38: the 27B reference's publish
GPUS_PER_SERVER_HOST = 8  # disaggregated servers' hosts, whose GPUs no config names
NOT_MEASURED = "not measured: run with --publish-probe"
LOADER = ("based on SGLang's /update_weights_from_disk (adapters: /load_lora_adapter, assumed alike): its default "
          "loader has every tensor-parallel rank read every safetensors file of the directory from the page cache "
          "(safe_open, get_tensor), tensor after tensor, and copy the part its GPU holds from ordinary (pageable) "
          "memory; ranks and hosts load in parallel, so a publish waits for one rank's read of the whole directory "
          "and copy of 1/TP of it")


@dataclasses.dataclass(frozen=True)
class Rate:
    bytes_per_s: float
    source: str  # "measured here (how)" or "assumed (why)"

    @property
    def text(self) -> str:
        return f"{decimal(int(self.bytes_per_s))}/s"


ASSUMED_LINK = Rate(25e9, "assumed (PCIe Gen5 x16: 64 GB/s nominal, 25 GB/s effective per device, until "
                          "scripts/gpu_check.sh measures it)")


@dataclasses.dataclass(frozen=True)
class Rates:
    write: Rate | None  # publish_weights, end to end (None: not measured)
    read: Rate | None  # the published files read back from the page cache
    d2h: Rate  # one device to host memory
    h2d: Rate  # host memory to one device


@dataclasses.dataclass(frozen=True)
class Served:
    """What one publish moves: `nbytes` to every server host, where `servers_per_host` servers of `tp` GPUs
    each load it."""

    what: str
    nbytes: int
    hosts: tuple[str, ...]
    servers_per_host: int
    tp: int
    servers: str  # the servers of a host, in words
    copies: str  # who writes the copies the hosts read


@dataclasses.dataclass(frozen=True)
class PublishEstimate:
    served: Served
    rates: Rates

    @property
    def write_s(self) -> float | None:
        """publish_weights on one host, at the probe's rate."""
        return None if self.rates.write is None else self.served.nbytes / self.rates.write.bytes_per_s

    @property
    def d2h_s(self) -> float:
        """The exporter copies every gathered tensor to the host from one device of its process."""
        return self.served.nbytes / self.rates.d2h.bytes_per_s

    @property
    def export_s(self) -> float | None:
        """The write overlaps the device-to-host copies (the exporter's copy threads): the slower counts."""
        return None if self.write_s is None else max(self.write_s, self.d2h_s)

    @property
    def read_s(self) -> float | None:
        return None if self.rates.read is None else self.served.nbytes / self.rates.read.bytes_per_s

    @property
    def h2d_s(self) -> float:
        return self.served.nbytes / self.served.tp / self.rates.h2d.bytes_per_s

    @property
    def load_s(self) -> float | None:
        return None if self.read_s is None else self.read_s + self.h2d_s

    @property
    def total_s(self) -> float | None:
        return None if self.export_s is None or self.load_s is None else self.export_s + self.load_s

    @property
    def meets_goal(self) -> bool | None:
        return None if self.total_s is None else self.total_s <= GOAL_S

    def lines(self) -> list[str]:
        """The estimate as --dry-run prints it: what moves, each part and the total, the rates' sources."""
        s, nbytes, rates = self.served, decimal(self.served.nbytes), self.rates
        hosts = len(s.hosts)
        lines = [f"weight publish (estimate): {nbytes} of {s.what} to each of {hosts} server host{'s' * (hosts > 1)} "
                 f"({', '.join(s.hosts)}: {s.servers}); {s.copies}"]
        d2h = f"device-to-host at {rates.d2h.text} = {self.d2h_s:.1f} s (from one device of each host)"
        h2d = f"host-to-device {decimal(s.nbytes // s.tp)} per GPU at {rates.h2d.text} = {self.h2d_s:.1f} s"
        link = (f"device-host copies {rates.d2h.source}" if rates.d2h.source == rates.h2d.source else
                f"device-to-host {rates.d2h.source}; host-to-device {rates.h2d.source}")
        if rates.write is None or rates.read is None or self.total_s is None:
            return [*lines, f"  write and page-cache read {NOT_MEASURED}; {d2h}; {h2d}; {link}"]
        verdict = "meets" if self.meets_goal else "misses"
        return [*lines,
                f"  export: {nbytes} written at {rates.write.text} = {self.write_s:.1f} s, overlapped with {d2h}: "
                f"{self.export_s:.1f} s",
                f"  load: {nbytes} read at {rates.read.text} = {self.read_s:.1f} s, then {h2d}: {self.load_s:.1f} s",
                f"  total: {self.export_s:.1f} s export + {self.load_s:.1f} s load = {self.total_s:.1f} s per "
                f"publish: {verdict} the {GOAL_S:.0f} s goal",
                f"  rates: write {rates.write.source}; read {rates.read.source}; {link}",
                f"  load {LOADER}"]

    def record(self) -> dict[str, Any]:
        """The estimate as JSON (tbjax.compile --json): bytes, rates with their sources, seconds per part."""
        seconds = {"write": self.write_s, "device_to_host": self.d2h_s, "export": self.export_s,
                   "read": self.read_s, "host_to_device": self.h2d_s, "load": self.load_s, "total": self.total_s}
        return {**dataclasses.asdict(self.served), "bytes_per_node": self.served.nbytes,
                "rates": dataclasses.asdict(self.rates),
                "seconds": seconds, "goal_s": GOAL_S, "meets_goal": self.meets_goal, "load_based_on": LOADER}


def served(config: Config) -> Served | None:
    """What a publish moves to the config's servers; None for an engine without servers (the embedded one takes
    the trainer's parameters in process)."""
    rollout = config.rollout
    if not rollout.traits.servers:
        return None
    cfg = planned_model_config(config)
    hosts = tuple(dict.fromkeys(urlsplit(url).hostname or url for url in rollout.sglang_urls))
    servers_per_host = math.ceil(len(rollout.sglang_urls) / len(hosts))
    colocated = rollout.placement == "colocated"
    gpus = (parse_mesh_spec(config.mesh.shape, config.mesh.layout).num_devices // len(hosts) if colocated
            else GPUS_PER_SERVER_HOST)
    tp = max(1, gpus // servers_per_host)
    servers = (f"{servers_per_host} SGLang server{'s' * (servers_per_host > 1)} of TP {tp} on each, "
               + ("sharing the trainer's GPUs" if colocated else f"{GPUS_PER_SERVER_HOST} GPUs a host assumed"))
    if config.lora.enabled:
        spec = config.lora.spec()
        what, nbytes = f"float32 LoRA adapters (rank {spec.rank})", adapter_params(cfg, spec) * 4
    else:
        dtype = export_dtype(cfg)
        what, nbytes = f"{dtype.name} weights", cfg.num_params() * dtype.itemsize
    return Served(what, nbytes, hosts, servers_per_host, tp, servers, copies(config, hosts))


def copies(config: Config, hosts: tuple[str, ...]) -> str:
    """Who writes the copies the server hosts read, where the estimate's page-cache read assumes too much, and
    that a delta-publishing run's estimate is its whole versions'."""
    rollout = config.rollout
    root = rollout.publish_root(config.run.name, config.run.directory)
    delta = ("" if rollout.publish_delta == "off" else f"; whole versions every {rollout.publish_full_every} "
             f"publishes, between them only what changed (rollout.publish_delta={rollout.publish_delta}): this "
             "estimates a whole version")
    if rollout.placement == "colocated" and rollout.publish_replicas:
        return f"every host writes its own copy under {root} at once (rollout.publish_replicas){delta}"
    if rollout.placement == "colocated" and len(hosts) == 1:
        return f"the driver writes it under {root} on the servers' host{delta}"
    return (f"the driver writes one copy under {root}, which the server hosts read through a shared file "
            f"system: slower than the page-cache read counted here{delta}")


def adapter_params(cfg: ModelConfig, spec: LoraSpec) -> int:
    """Parameters of `spec`'s adapters on a model of `cfg`, counted on an abstract model (no weights)."""
    model = nnx.eval_shape(lambda: Qwen(cfg, nnx.Rngs(0)))
    return sum((fan_in + fan_out) * spec.rank for fan_in, fan_out in module_shapes(model, spec.modules).values())


def assumed_rates() -> Rates:
    return Rates(None, None, ASSUMED_LINK, ASSUMED_LINK)


def measured_rates(directory: Path) -> Rates:
    """This machine's rates: a probe publish into `directory` and, on an accelerator, 1 GiB copies each way."""
    return rates_from(probe_publish(probe_model(), directory), measure_transfers())


def rates_from(probe: PublishProbe, transfers: Transfers | None) -> Rates:
    """Rates measured on this machine, each saying how; assumed copies where `transfers` is None (a CPU)."""
    what = (f"measured here (publish_weights of a {count(probe.params)}-parameter {probe.dtype} Qwen3, "
            f"{decimal(probe.nbytes)}, into {probe.directory}, fastest of {TIMED_PUBLISHES})")
    read = Rate(probe.read_rate, "measured here (the probe's files, read back from the page cache)")
    write = Rate(probe.publish_rate, what)
    if transfers is None:
        return Rates(write, read, ASSUMED_LINK, ASSUMED_LINK)
    copy = f"measured here ({decimal(transfers.nbytes)} copied by JAX on {transfers.device}, pageable)"
    return Rates(write, read, Rate(transfers.d2h, copy), Rate(transfers.h2d, copy))


def plan_publish(config: Config, measure: Callable[[Path], Rates] | None = None) -> PublishEstimate | None:
    """The config's publish estimate, with the rates `measure` (e.g. `measured_rates`) gives for the probe's
    directory (the config's publish directory where it exists here, else node-local memory), else assumed
    ones."""
    what = served(config)
    if what is None:
        return None
    if measure is None:
        return PublishEstimate(what, assumed_rates())
    root = config.rollout.publish_root(config.run.name, config.run.directory)
    return PublishEstimate(what, measure(probe_directory(root, probe_config().num_params() * 4)))


def publish_lines(estimate: PublishEstimate | None) -> list[str]:
    """The estimate's lines, or the one line saying that the embedded engine has nothing published."""
    if estimate is None:
        return ["weight publish: none (the embedded engine takes the trainer's parameters in process)"]
    return estimate.lines()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tbjax.plan.publish_time", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("configs", nargs="+", help="YAML files or shipped config names")
    parser.add_argument("--publish-probe", action="store_true", help="measure this machine's write and read rates "
                        "(a real publish of a ~200 MB model, about 2 s; once per publish directory)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    console = Console(highlight=False, soft_wrap=True)
    measure = functools.cache(measured_rates) if args.publish_probe else None  # one probe per directory
    for name in args.configs:
        try:
            config = load_config(name)
        except ConfigError as error:
            console.print(f"{name}: skipped, not a run config ({error})", markup=False)
            continue
        console.print(f"{name}:", markup=False)
        for line in publish_lines(plan_publish(config, measure)):
            console.print(f"  {line}", markup=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())

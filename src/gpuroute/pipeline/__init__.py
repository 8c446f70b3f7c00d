"""The build pipeline (OSRM's stage model): one module per stage, each with a config naming the files it
reads and writes and ``run(config)``; every file it writes goes through :mod:`gpuroute.store` (atomic,
with a manifest and fingerprints), so a stage refuses the output of a stage run on something else.

Stages
------
extract     source (+ profile: native ``car-basic`` or an OSRM Lua profile) -> graph
            (:class:`~gpuroute.pipeline.extract.ExtractConfig`)
partition   graph -> nested multi-level partition (:class:`~gpuroute.pipeline.partition.PartitionConfig`)
contract    graph -> contraction hierarchy for a weight (:class:`~gpuroute.pipeline.contract.ContractConfig`)
customize   graph + partition -> overlay customized for a metric, traffic applied
            (:class:`~gpuroute.pipeline.customize.CustomizeConfig`)

A stage's input is the previous stage's output, in memory or as the directory it wrote. ``build`` runs
them all into a dataset directory (``gpuroute build``) or in memory (``Engine.open`` of a graph file) --
all but ``contract`` for a graph with turn costs, whose overlay answers every service
(:func:`~gpuroute.pipeline.build.needs_hierarchy`);
``overlay_dir`` is the directory ``gpuroute partition`` and ``gpuroute customize`` share.

Public API
----------
extract, partition, contract, customize     the stage modules (``run(config)``, their ``*Config``)
STAGES                                      those four, by name, in pipeline order
build.BuildConfig, build.run, build_dataset, build_overlay
overlay_dir                                 the CLI's overlay directory (run_partition, run_customize,
                                            check_overlay, open_overlay, save_overlay)
"""
from __future__ import annotations

from . import build, contract, customize, extract, overlay_dir, partition
from .build import BuildConfig, build_dataset, build_overlay
from .contract import ContractConfig
from .customize import CustomizeConfig
from .extract import ExtractConfig
from .partition import PartitionConfig

#: The stage modules by name, in pipeline order (contract and customize both read extract's and, for
#: customize, partition's output).
STAGES = {"extract": extract, "partition": partition, "contract": contract, "customize": customize}

__all__ = ["extract", "partition", "contract", "customize", "build", "overlay_dir", "STAGES", "ExtractConfig",
           "PartitionConfig", "ContractConfig", "CustomizeConfig", "BuildConfig", "build_dataset", "build_overlay"]

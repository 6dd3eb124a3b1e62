"""vLLM plugin (entry point group `vllm.general_plugins`, name `fabric_weights`): registers the
`fabric` weight-transfer backend with the installed vLLM's factories, so that
weight_transfer_config={"backend": "fabric"} (--weight-transfer-config '{"backend": "fabric"}')
selects it by name. The engines are imported lazily (vllm_engine, vllm_trainer), as vLLM's own."""

from __future__ import annotations

BACKEND = "fabric"


def register() -> None:
    """Idempotent: vLLM may load general plugins in several processes and more than once."""
    from vllm.distributed.weight_transfer.factory import (
        WeightTransferEngineFactory,
        WeightTransferTrainerFactory,
    )

    if BACKEND not in WeightTransferEngineFactory._registry:
        WeightTransferEngineFactory.register_engine(
            BACKEND, "fabric_lib.weights.vllm_engine", "FabricWeightTransferEngine")
    if BACKEND not in WeightTransferTrainerFactory._registry:
        WeightTransferTrainerFactory.register_engine(
            BACKEND, "fabric_lib.weights.vllm_trainer", "FabricTrainerWeightTransferEngine")

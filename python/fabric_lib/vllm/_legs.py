"""The two legs of one disaggregated request, as request bodies for vLLM's OpenAI server.

The prefill leg asks the producer to compute the prompt, emit one token and keep the KV for a
remote decoder; the decode leg is the client's request as it came, carrying what the producer
returned. The proxy never looks inside either set of kv_transfer_params: it works for any
connector that returns them (FabricConnector, and vLLM's own NixlConnector, which read the same
"do_remote_decode" request).

A third body, the drain, is for a decode leg the decode server refused: see drain_body.
"""

from __future__ import annotations

import copy
from typing import Any

# What the prefill leg carries. A connector that needs an id derives it from vLLM's request id
# on the producer (FabricConnector does), so no one mints ids by hand.
PREFILL_PARAMS: dict[str, Any] = {
    "do_remote_decode": True,
    "do_remote_prefill": False,
    "remote_engine_id": None,
    "remote_block_ids": None,
    "remote_host": None,
    "remote_port": None,
}


def prefill_body(body: dict[str, Any]) -> dict[str, Any]:
    """The client's body, cut to a one-token, non-streaming prefill."""
    out = copy.deepcopy(body)
    out["kv_transfer_params"] = dict(PREFILL_PARAMS)
    out["stream"] = False
    out.pop("stream_options", None)  # vLLM refuses stream_options without stream
    out["max_tokens"] = 1
    if "max_completion_tokens" in out:  # chat's newer name for it wins when both are given
        out["max_completion_tokens"] = 1
    out.pop("min_tokens", None)  # a min_tokens over 1 would be refused against max_tokens=1
    return out


def decode_body(body: dict[str, Any], returned: dict[str, Any] | None) -> dict[str, Any]:
    """The client's body with the producer's returned kv_transfer_params, as they are.

    None (the producer returned none: e.g. a one-token prompt leaves nothing to move) sends the
    request without any, and the decode server computes it whole: right tokens, no transfer."""
    out = copy.deepcopy(body)
    out.pop("kv_transfer_params", None)  # the proxy's to set, never the client's
    if returned:
        out["kv_transfer_params"] = returned
    return out


def drain_body(body: dict[str, Any], returned: dict[str, Any]) -> dict[str, Any]:
    """What releases the producer's KV after the decode server refused the client's body.

    A producer holds a finished prefill's blocks until a consumer reads them, or for its own
    bound (480 s for FabricConnector and NixlConnector), and its engine keeps stepping all that
    while. The drain is the prefill leg's body (which a server of the same model just accepted,
    so it makes the same prompt tokens) carrying the returned params: the decode server loads
    the KV and emits one token, which nobody reads, and the producer frees the blocks now."""
    out = prefill_body(body)
    out["kv_transfer_params"] = returned
    return out

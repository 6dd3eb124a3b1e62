"""The id a request travels under between the two instances, from its kv_transfer_params.

Both instances see the same `fabric_id`: the producer makes it from vLLM's request id when a
proxy asks for a remote decode and returns it (producer_id), or a user gives it to both. The wire id appends a hash of the
prompt's token ids, so two requests that share a fabric_id by mistake but hold different prompts
never exchange KV (that would be silent wrong tokens); a client retry of the same prompt under
the same id is a true duplicate, and the kv module refuses the second one ("exists"), which
fails only that request.
"""

from __future__ import annotations

import hashlib
from array import array
from typing import Any

# The kv module takes ids of 1-256 bytes: the user's part is cut to leave room for the hash.
_MAX_USER_ID = 200


class BadTransferParams(ValueError):
    """kv_transfer_params that name a transfer but cannot be used (the request runs locally)."""


def fabric_id(params: Any) -> str | None:
    """The user's fabric_id, None when the request asks for no transfer.

    Raises BadTransferParams for params that try to ask for one but are malformed.
    """
    if params is None:
        return None
    if not isinstance(params, dict):
        raise BadTransferParams(f"kv_transfer_params must be a dict, not {type(params).__name__}")
    value = params.get("fabric_id")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise BadTransferParams(f"fabric_id must be a string or int, not {type(value).__name__}")
    text = str(value)
    if not text or len(text.encode()) > _MAX_USER_ID:
        raise BadTransferParams(f"fabric_id must be 1-{_MAX_USER_ID} bytes, got {len(text)}")
    return text


def producer_id(params: Any, request_id: str) -> str | None:
    """The producer's fabric_id for a request: the one it carries, or, for a request that asks
    only for a remote decode (a proxy's `"do_remote_decode": true`, as for vLLM's other P2P
    connectors), one made from vLLM's request id, which is unique on the producer. The producer
    returns it in its kv_transfer_params, so no one mints ids by hand.

    Raises BadTransferParams as fabric_id does."""
    given = fabric_id(params)
    if given is not None or not (isinstance(params, dict) and params.get("do_remote_decode")):
        return given
    if len(request_id.encode()) <= _MAX_USER_ID:
        return request_id
    # A client's X-Request-Id can be long: its hash is as unique for the kv module's purposes.
    return "h" + hashlib.blake2b(request_id.encode(), digest_size=16).hexdigest()


def fabric_address(params: Any) -> bytes | None:
    """The producer's address a request carries (the kv_transfer_params the producer returned,
    forwarded by a proxy), None when it carries none (the consumer then reads address_file).

    Raises BadTransferParams for an address that is not hex.
    """
    value = params.get("fabric_address") if isinstance(params, dict) else None
    if value is None:
        return None
    try:
        address = bytes.fromhex(value) if isinstance(value, str) else b""
    except ValueError:
        address = b""
    if not address:
        raise BadTransferParams("fabric_address must be the producer's address in hex")
    return address


def wire_id(user_id: str, prompt_token_ids: list[int] | None) -> str:
    """user_id plus a hash of the prompt: the id both instances use in the kv module."""
    tokens = array("q", prompt_token_ids or [])
    digest = hashlib.blake2b(tokens.tobytes(), digest_size=8).hexdigest()
    return f"{user_id}#{digest}"

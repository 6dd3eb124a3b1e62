"""fabric_lib.vllm.proxy against fake vLLM servers (aiohttp, loopback): what each leg is sent,
that the decode answer comes back as it is (streamed or not), and that every failure reaches the
client with its status, its cause and the leg that failed. No vLLM needed; runs in the vLLM
venv for aiohttp (ctest kv.vllm_proxy, by tests/support/in-vllm-venv.sh).
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import unittest
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from fabric_lib.vllm._upstreams import Pool
from fabric_lib.vllm.proxy import Proxy

RETURNED = {"fabric_id": "cmpl-1", "fabric_address": "abcd"}


class Fake:
    """A fake OpenAI server: records each body it gets, answers as told."""

    def __init__(self, answer: Any = None, status: int = 200, events: list[bytes] | None = None,
                 cut: bool = False, hang: bool = False, then: int | None = None) -> None:
        self.bodies: list[dict] = []
        self.then = then  # the status of every answer after the first, when set
        self.posted = asyncio.Condition()
        self.headers: list[dict] = []
        self.answer = answer if answer is not None else {"choices": [{"text": "ok"}]}
        self.status, self.events, self.cut, self.hang = status, events, cut, hang
        self.server: TestServer | None = None

    async def start(self) -> str:
        app = web.Application()
        for path in ("/v1/completions", "/v1/chat/completions"):
            app.router.add_post(path, self._post)
        app.router.add_get("/health", lambda r: web.Response(status=self.status))
        app.router.add_get("/v1/models", lambda r: web.json_response({"data": [{"id": "m"}]}))
        self.server = TestServer(app, host="127.0.0.1")
        await self.server.start_server()
        return str(self.server.make_url("")).rstrip("/")

    async def _post(self, request: web.Request) -> web.StreamResponse:
        self.bodies.append(await request.json())
        self.headers.append(request.headers.copy())  # case-insensitive
        async with self.posted:
            self.posted.notify_all()
        status = self.status if self.then is None or len(self.bodies) == 1 else self.then
        if self.hang:
            await asyncio.Event().wait()  # never answers: the proxy's bound must end it
        if self.events is None:
            return web.json_response(self.answer, status=status)
        out = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await out.prepare(request)
        for event in self.events:
            await out.write(event)
        if self.cut:  # the server dies mid-stream
            assert request.transport is not None
            request.transport.close()
            return out
        await out.write_eof()
        return out

    async def bodies_at_least(self, n: int, timeout_s: float = 10.0) -> list[dict]:
        async with self.posted:
            await asyncio.wait_for(self.posted.wait_for(lambda: len(self.bodies) >= n), timeout_s)
        return self.bodies

    async def close(self) -> None:
        if self.server is not None:
            await self.server.close()


def closed_port_url() -> str:
    with socket.socket() as s:  # bound, never listening: connections are refused
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


class ProxyTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self) -> None:
        self.fakes: list[Fake] = []
        self.client: TestClient | None = None

    async def asyncTearDown(self) -> None:
        if self.client is not None:
            await self.client.close()
        for fake in self.fakes:
            await fake.close()

    async def start(self, prefill: list[Fake | str], decode: list[Fake | str],
                    policy: str = "round-robin", timeout_s: float = 30.0) -> TestClient:
        async def url(x: Fake | str) -> str:
            if isinstance(x, str):
                return x
            self.fakes.append(x)
            return await x.start()

        p = [await url(x) for x in prefill]
        d = [await url(x) for x in decode]
        proxy = Proxy(Pool(p, policy), Pool(d, policy), connect_timeout_s=2.0,
                      timeout_s=timeout_s)
        self.client = TestClient(TestServer(proxy.app(), host="127.0.0.1"))
        await self.client.start_server()
        return self.client

    async def test_completion_legs_carry_one_token_then_the_returned_params(self) -> None:
        prefill = Fake({"choices": [{"text": "x"}], "kv_transfer_params": RETURNED})
        decode = Fake({"choices": [{"text": "decoded"}], "id": "d"})
        client = await self.start([prefill], [decode])
        body = {"model": "m", "prompt": [1, 2, 3], "max_tokens": 7, "min_tokens": 3,
                "kv_transfer_params": {"client": "own"}}
        resp = await client.post("/v1/completions", json=body,
                                 headers={"X-Request-Id": "r-1", "Cookie": "no"})
        self.assertEqual(resp.status, 200)
        self.assertEqual(await resp.json(), decode.answer)
        sent = prefill.bodies[0]
        self.assertEqual((sent["max_tokens"], sent["stream"]), (1, False))
        self.assertNotIn("min_tokens", sent)
        self.assertTrue(sent["kv_transfer_params"]["do_remote_decode"])
        # The decode leg is the client's body as it came, with what the producer returned.
        self.assertEqual(decode.bodies[0], {**body, "kv_transfer_params": RETURNED})
        self.assertEqual(prefill.headers[0]["X-Request-Id"], "r-1")
        self.assertNotIn("Cookie", decode.headers[0])

    async def test_chat_prefill_caps_max_completion_tokens(self) -> None:
        prefill = Fake({"choices": [], "kv_transfer_params": RETURNED})
        decode = Fake({"choices": [{"message": {"content": "hi"}}]})
        client = await self.start([prefill], [decode])
        body = {"model": "m", "messages": [{"role": "user", "content": "a"}],
                "max_completion_tokens": 9, "stream": True,
                "stream_options": {"include_usage": True}}
        decode.events = [b"data: {\"a\": 1}\n\n", b"data: [DONE]\n\n"]
        resp = await client.post("/v1/chat/completions", json=body)
        self.assertEqual(resp.status, 200)
        self.assertEqual(await resp.read(), b"".join(decode.events))
        self.assertEqual(resp.headers["Content-Type"], "text/event-stream")
        sent = prefill.bodies[0]
        self.assertEqual((sent["max_completion_tokens"], sent["max_tokens"], sent["stream"]),
                         (1, 1, False))
        self.assertNotIn("stream_options", sent)
        self.assertEqual(decode.bodies[0]["max_completion_tokens"], 9)
        self.assertTrue(decode.bodies[0]["stream"])

    async def test_no_returned_params_decodes_without_any(self) -> None:
        prefill = Fake({"choices": [{"text": "x"}]})  # e.g. a one-token prompt: nothing to move
        decode = Fake()
        client = await self.start([prefill], [decode])
        resp = await client.post("/v1/completions", json={"prompt": [5], "max_tokens": 2,
                                                          "kv_transfer_params": {"c": 1}})
        self.assertEqual(resp.status, 200)
        self.assertNotIn("kv_transfer_params", decode.bodies[0])

    async def check_error(self, resp, status: int, leg: str, words: str) -> dict:
        self.assertEqual(resp.status, status, await resp.text())
        error = (await resp.json())["error"]
        self.assertEqual(error["leg"], leg)
        self.assertEqual(error["code"], status)
        self.assertIn(words, error["message"])
        return error

    async def test_a_prefill_4xx_is_forwarded_with_its_reason(self) -> None:
        prefill = Fake({"error": {"message": "prompt is 2000 tokens, max_model_len is 1024"}},
                       status=400)
        decode = Fake()
        client = await self.start([prefill], [decode])
        resp = await client.post("/v1/completions", json={"prompt": "x", "max_tokens": 3})
        await self.check_error(resp, 400, "prefill", "max_model_len is 1024")
        self.assertEqual(decode.bodies, [])  # no decode leg after a failed prefill

    async def test_a_decode_5xx_is_forwarded_streaming_or_not(self) -> None:
        prefill = Fake({"kv_transfer_params": RETURNED})
        decode = Fake({"object": "error", "message": "Internal server error"}, status=500)
        client = await self.start([prefill], [decode])
        for stream in (False, True):
            resp = await client.post("/v1/completions",
                                     json={"prompt": "x", "max_tokens": 3, "stream": stream})
            error = await self.check_error(resp, 500, "decode", "Internal server error")
            self.assertEqual(error["upstream"], decode.server and
                             str(decode.server.make_url("")).rstrip("/"))

    async def test_a_refused_decode_leg_drains_the_producers_kv_through_that_server(self) -> None:
        # The decode server refuses the client's body (a 400: it never ran it); the proxy sends
        # it the prefill's body with the returned params, so the producer's KV is read and freed.
        prefill = Fake({"choices": [{"text": "x"}], "kv_transfer_params": RETURNED})
        decode = Fake({"error": {"message": "stream_options need stream"}}, status=400, then=200)
        client = await self.start([prefill], [decode])
        body = {"model": "m", "messages": [{"role": "user", "content": "a"}], "max_tokens": 9,
                "stream_options": {"include_usage": True}}
        resp = await client.post("/v1/chat/completions", json=body)
        await self.check_error(resp, 400, "decode", "stream_options need stream")
        drain = (await decode.bodies_at_least(2))[1]
        self.assertEqual(drain, {**prefill.bodies[0], "kv_transfer_params": RETURNED})
        self.assertEqual((drain["max_tokens"], drain["stream"]), (1, False))
        await client.close()  # the app's cleanup awaits every drain
        self.client = None
        self.assertEqual(len(decode.bodies), 2)

    async def test_no_drain_after_a_decode_5xx_or_without_returned_params(self) -> None:
        # A 5xx may come after the decode server read the KV; no params means nothing is held.
        for returned, status in ((RETURNED, 500), (None, 400)):
            prefill = Fake({"kv_transfer_params": returned} if returned else {"choices": []})
            decode = Fake({"error": {"message": "no"}}, status=status, then=200)
            client = await self.start([prefill], [decode])
            resp = await client.post("/v1/completions", json={"prompt": "x", "max_tokens": 3})
            await self.check_error(resp, status, "decode", "no")
            await client.close()  # awaits any drain: none may have been sent
            self.client = None
            self.assertEqual(len(decode.bodies), 1, (returned, status))

    async def test_an_unreachable_upstream_is_a_502(self) -> None:
        client = await self.start([closed_port_url()], [Fake()])
        resp = await client.post("/v1/completions", json={"prompt": "x"})
        error = await self.check_error(resp, 502, "prefill", "unreachable")
        self.assertEqual(error["type"], "unreachable")
        await client.close()
        self.client = None
        client = await self.start([Fake({"kv_transfer_params": RETURNED})], [closed_port_url()])
        resp = await client.post("/v1/completions", json={"prompt": "x", "stream": True})
        await self.check_error(resp, 502, "decode", "unreachable")

    async def test_a_silent_upstream_is_a_504_after_the_bound(self) -> None:
        client = await self.start([Fake(hang=True)], [Fake()], timeout_s=0.5)
        resp = await client.post("/v1/completions", json={"prompt": "x"})
        error = await self.check_error(resp, 504, "prefill", "no answer within 0.5 s")
        self.assertEqual(error["type"], "timeout")

    async def test_a_stream_cut_midway_ends_with_an_error_event_and_no_done(self) -> None:
        decode = Fake(events=[b"data: {\"choices\": [{\"text\": \"a\"}]}\n\n"], cut=True)
        client = await self.start([Fake({"kv_transfer_params": RETURNED})], [decode])
        resp = await client.post("/v1/completions", json={"prompt": "x", "stream": True})
        self.assertEqual(resp.status, 200)
        text = (await resp.read()).decode()
        self.assertTrue(text.startswith("data: {\"choices\""), text)
        self.assertNotIn("[DONE]", text)
        last = json.loads(text.strip().split("\n\n")[-1][len("data: "):])
        self.assertEqual(last["error"]["leg"], "decode")

    async def test_bad_bodies_are_refused_by_the_proxy(self) -> None:
        prefill = Fake()
        client = await self.start([prefill], [Fake()])
        for data in (b"{not json", b"[1, 2]"):
            resp = await client.post("/v1/completions", data=data,
                                     headers={"Content-Type": "application/json"})
            await self.check_error(resp, 400, "proxy", "JSON")
        self.assertEqual(prefill.bodies, [])

    async def test_malformed_returned_params_are_a_502(self) -> None:
        decode = Fake()
        client = await self.start([Fake({"kv_transfer_params": ["not", "a", "dict"]})], [decode])
        resp = await client.post("/v1/completions", json={"prompt": "x"})
        await self.check_error(resp, 502, "prefill", "not an object")
        self.assertEqual(decode.bodies, [])

    async def test_round_robin_spreads_both_legs(self) -> None:
        prefills = [Fake({"kv_transfer_params": RETURNED}) for _ in range(2)]
        decodes = [Fake() for _ in range(2)]
        client = await self.start(prefills, decodes)
        for _ in range(4):
            self.assertEqual((await client.post("/v1/completions", json={"prompt": "x"})).status,
                             200)
        self.assertEqual([len(f.bodies) for f in prefills + decodes], [2, 2, 2, 2])

    async def test_health_names_the_upstream_that_is_down(self) -> None:
        down = closed_port_url()
        client = await self.start([Fake()], [Fake(), down])
        resp = await client.get("/health")
        self.assertEqual(resp.status, 503)
        self.assertEqual(list((await resp.json())["down"]), [f"decode {down}"])
        self.assertEqual((await (await client.get("/v1/models")).json())["data"][0]["id"], "m")


class PoolTest(unittest.TestCase):
    def test_least_loaded_picks_the_idle_one(self) -> None:
        pool = Pool(["http://a", "http://b", "http://c"], "least-loaded")
        with pool.use() as first, pool.use() as second:
            self.assertNotEqual(first.url, second.url)
            with pool.use() as third:
                self.assertEqual({first.url, second.url, third.url},
                                 {"http://a", "http://b", "http://c"})
        self.assertEqual([u.in_flight for u in pool.upstreams], [0, 0, 0])

    def test_bad_pools_are_refused(self) -> None:
        with self.assertRaises(ValueError):
            Pool([], "round-robin")
        with self.assertRaises(ValueError):
            Pool(["http://a"], "random")


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() and result.testsRun > 0 else 1)

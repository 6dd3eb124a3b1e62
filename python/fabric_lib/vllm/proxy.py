"""A disaggregated-serving proxy in front of vLLM OpenAI servers: prefill on one, decode on another.

    python -m fabric_lib.vllm.proxy --prefill http://127.0.0.1:8100 [URL...] \
        --decode http://127.0.0.1:8200 [URL...] --port 8000 [--policy least-loaded]

Per request to /v1/completions or /v1/chat/completions: the prefill leg (_legs.prefill_body:
one token, no streaming, "do_remote_decode") goes to a prefill server; the kv_transfer_params
it returns go as they are, with the client's own body, to a decode server, whose answer
(streamed or not) is the client's. /v1/models and /health are answered too (docs/vllm.md).

Failures keep their meaning: an upstream 4xx/5xx is returned with its status and a JSON body
naming the cause and the leg that failed; an unreachable upstream is a 502, a silent one a 504
after the bound. A request is never answered 200 with tokens the decode server did not make.

A decode server that refuses the client's body (a 4xx: it never ran it) would leave the
producer holding the prefill's KV for its whole bound, stepping its engine meanwhile; the proxy
then sends that server the drain (_legs.drain_body) in the background, so the KV is read and
freed now. The client's error does not wait for it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import time
from typing import Any

import aiohttp
from aiohttp import web

from ._legs import decode_body, drain_body, prefill_body
from ._upstreams import POLICIES, Pool, Upstream

log = logging.getLogger("fabric_lib.vllm.proxy")

# Passed on to both legs: a client's credentials, and its request id (vLLM names requests by it).
FORWARDED_HEADERS = ("Authorization", "X-Request-Id")


class UpstreamError(Exception):
    """A leg that did not give a usable answer; becomes the client's error response."""

    def __init__(self, status: int, leg: str, upstream: str | None, message: str,
                 kind: str = "upstream_error") -> None:
        super().__init__(message)
        self.status, self.leg, self.upstream, self.kind = status, leg, upstream, kind

    def response(self) -> web.Response:
        where = f"{self.leg} server {self.upstream}" if self.upstream else self.leg
        return web.json_response(
            {"error": {"message": f"{where}: {self}", "type": self.kind, "code": self.status,
                       "leg": self.leg, "upstream": self.upstream}},
            status=self.status)


def upstream_reason(text: str) -> str:
    """The message of a vLLM error body ({"error": {"message"}} or {"message"}), else the text."""
    try:
        data = json.loads(text)
    except ValueError:
        return text.strip()[:500] or "(empty body)"
    if isinstance(data, dict):
        inner = data.get("error")
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
        if data.get("message"):
            return str(data["message"])
    return text.strip()[:500]


class Proxy:
    def __init__(self, prefill: Pool, decode: Pool, connect_timeout_s: float = 5.0,
                 timeout_s: float = 600.0) -> None:
        self.prefill = prefill
        self.decode = decode
        self.connect_timeout_s = connect_timeout_s
        # Bounds each wait for an upstream's bytes: a whole non-streamed answer, or the gap
        # between two streamed chunks.
        self.timeout_s = timeout_s
        self._session: aiohttp.ClientSession | None = None
        self._drains: set[asyncio.Task[None]] = set()  # referenced until done
        self.drained = 0  # drains a decode server accepted (tests and logs read it)
        self.drain_failures = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.on_startup.append(self._open)
        app.on_cleanup.append(self._close)
        app.router.add_post("/v1/completions", self._completions)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/health", self._health)
        return app

    async def _open(self, _app: web.Application) -> None:
        # One session for every upstream call; no cap on connections (the servers queue).
        timeout = aiohttp.ClientTimeout(total=None, connect=self.connect_timeout_s,
                                        sock_connect=self.connect_timeout_s,
                                        sock_read=self.timeout_s)
        self._session = aiohttp.ClientSession(timeout=timeout,
                                              connector=aiohttp.TCPConnector(limit=0))

    async def _close(self, _app: web.Application) -> None:
        for task in list(self._drains):
            task.cancel()
        await asyncio.gather(*self._drains, return_exceptions=True)
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None, "the proxy's app is not started"
        return self._session

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._disaggregated(request, "/v1/completions")

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._disaggregated(request, "/v1/chat/completions")

    async def _disaggregated(self, request: web.Request, path: str) -> web.StreamResponse:
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError) as e:
            return UpstreamError(400, "proxy", None, f"the request body is not JSON: {e}",
                                 "bad_request").response()
        if not isinstance(body, dict):
            return UpstreamError(400, "proxy", None, "the request body must be a JSON object",
                                 "bad_request").response()
        headers = {h: request.headers[h] for h in FORWARDED_HEADERS if h in request.headers}
        started = time.monotonic()
        returned: dict[str, Any] | None = None
        try:
            with self.prefill.use() as upstream:
                answer = await self._post_json(upstream, path, prefill_body(body), headers,
                                               "prefill")
            log.debug("%s prefill on %s: %.3f s, kv_transfer_params %s", path, upstream.url,
                      time.monotonic() - started, answer.get("kv_transfer_params"))
            returned = answer.get("kv_transfer_params")
            if returned is not None and not isinstance(returned, dict):
                raise UpstreamError(502, "prefill", upstream.url,
                                    f"returned kv_transfer_params that are not an object: "
                                    f"{returned!r:.200}")
            with self.decode.use() as upstream:
                if body.get("stream"):
                    return await self._stream(request, upstream, path,
                                              decode_body(body, returned), headers)
                answer = await self._post_json(upstream, path, decode_body(body, returned),
                                               headers, "decode")
                log.debug("%s decode on %s: done %.3f s after the prefill began", path,
                          upstream.url, time.monotonic() - started)
                return web.json_response(answer)
        except UpstreamError as e:
            log.warning("%s %s failed: %s leg: %s", request.method, path, e.leg, e)
            if e.leg == "decode" and 400 <= e.status < 500 and returned:
                self._drain(upstream, path, drain_body(body, returned), headers)
            return e.response()

    def _drain(self, upstream: Upstream, path: str, body: dict[str, Any],
               headers: dict[str, str]) -> None:
        task = asyncio.get_running_loop().create_task(self._run_drain(upstream, path, body,
                                                                      headers))
        self._drains.add(task)
        task.add_done_callback(self._drains.discard)

    async def _run_drain(self, upstream: Upstream, path: str, body: dict[str, Any],
                         headers: dict[str, str]) -> None:
        try:
            with self.decode.track(upstream):
                await self._post_json(upstream, path, body, headers, "drain")
            self.drained += 1
            log.info("drained the producer's KV of a refused decode leg through %s",
                     upstream.url)
        except UpstreamError as e:
            self.drain_failures += 1
            # The producer then frees the KV at its own bound; nothing else is lost.
            log.warning("could not drain the producer's KV through %s (it frees it at its own "
                        "bound): %s", upstream.url, e)

    def _failure(self, e: BaseException, leg: str, url: str) -> UpstreamError:
        if isinstance(e, asyncio.TimeoutError):  # before ClientError: some timeouts are both
            return UpstreamError(504, leg, url, f"no answer within {self.timeout_s:g} s "
                                 f"(connect {self.connect_timeout_s:g} s)", "timeout")
        return UpstreamError(502, leg, url, f"unreachable: {type(e).__name__}: {e}",
                             "unreachable")

    async def _post_json(self, upstream: Upstream, path: str, body: dict[str, Any],
                         headers: dict[str, str], leg: str) -> dict[str, Any]:
        url = upstream.url + path
        try:
            async with self.session.post(url, json=body, headers=headers) as resp:
                text = await resp.text()
                status = resp.status
        except (asyncio.TimeoutError, aiohttp.ClientError) as e:
            raise self._failure(e, leg, upstream.url) from e
        if status >= 400:
            raise UpstreamError(status, leg, upstream.url, upstream_reason(text))
        try:
            answer = json.loads(text)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise UpstreamError(502, leg, upstream.url,
                                f"answered {status} with a body that is not a JSON object: "
                                f"{text[:200]!r}")
        return answer

    async def _stream(self, request: web.Request, upstream: Upstream, path: str,
                      body: dict[str, Any], headers: dict[str, str]) -> web.StreamResponse:
        """The decode server's server-sent events, passed through as they come."""
        url = upstream.url + path
        try:
            resp = await self.session.post(url, json=body, headers=headers)
        except (asyncio.TimeoutError, aiohttp.ClientError) as e:
            raise self._failure(e, "decode", upstream.url) from e
        async with resp:
            if resp.status >= 400:
                try:
                    text = await resp.text()
                except (asyncio.TimeoutError, aiohttp.ClientError) as e:
                    text = f"(body unreadable: {e})"
                raise UpstreamError(resp.status, "decode", upstream.url, upstream_reason(text))
            out = web.StreamResponse(headers={
                "Content-Type": resp.headers.get("Content-Type", "text/event-stream"),
                "Cache-Control": "no-cache"})
            await out.prepare(request)
            try:
                async for chunk in resp.content.iter_any():
                    await out.write(chunk)
            except (asyncio.TimeoutError, aiohttp.ClientError) as e:
                # The status went out already: the client learns of the cut from an error
                # event, and no "[DONE]" follows, so a partial answer never looks whole.
                failure = self._failure(e, "decode", upstream.url)
                log.warning("stream from %s cut: %s", upstream.url, failure)
                event = {"error": {"message": f"decode server {upstream.url}: {failure}",
                                   "type": failure.kind, "code": failure.status, "leg": "decode",
                                   "upstream": upstream.url}}
                await out.write(f"data: {json.dumps(event)}\n\n".encode())
            await out.write_eof()
            return out

    async def _models(self, request: web.Request) -> web.Response:
        upstream = self.decode.pick()
        try:
            async with self.session.get(upstream.url + "/v1/models") as resp:
                text, status = await resp.text(), resp.status
        except (asyncio.TimeoutError, aiohttp.ClientError) as e:
            return self._failure(e, "decode", upstream.url).response()
        return web.Response(text=text, status=status, content_type="application/json")

    async def _health(self, request: web.Request) -> web.Response:
        """200 when every upstream answers its /health, else 503 naming those that do not."""
        upstreams = [("prefill", u) for u in self.prefill.upstreams]
        upstreams += [("decode", u) for u in self.decode.upstreams]
        timeout = aiohttp.ClientTimeout(total=self.connect_timeout_s)

        async def check(upstream: Upstream) -> str | None:
            try:
                async with self.session.get(upstream.url + "/health", timeout=timeout) as resp:
                    return None if resp.status == 200 else f"status {resp.status}"
            except (asyncio.TimeoutError, aiohttp.ClientError) as e:
                return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__

        reasons = await asyncio.gather(*(check(u) for _, u in upstreams))
        down = {f"{leg} {u.url}": r for (leg, u), r in zip(upstreams, reasons) if r is not None}
        if down:
            return web.json_response({"status": "unavailable", "down": down}, status=503)
        return web.json_response({"status": "ok"})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m fabric_lib.vllm.proxy",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--prefill", nargs="+", required=True, metavar="URL",
                        help="prefill (kv_producer) servers, e.g. http://127.0.0.1:8100")
    parser.add_argument("--decode", nargs="+", required=True, metavar="URL",
                        help="decode (kv_consumer) servers")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--policy", choices=POLICIES, default="round-robin")
    parser.add_argument("--connect-timeout-s", type=float, default=5.0)
    parser.add_argument("--timeout-s", type=float, default=600.0,
                        help="bound on each wait for an upstream (a whole answer, or the gap "
                             "between two streamed chunks)")
    parser.add_argument("--log-level", default="info",
                        choices=("debug", "info", "warning", "error"),
                        help="debug: each request's legs, where and how long")
    args = parser.parse_args(argv)
    logging.basicConfig(level=getattr(logging, args.log_level.upper()),
                        format="%(asctime)s %(name)s %(message)s")
    proxy = Proxy(Pool(args.prefill, args.policy), Pool(args.decode, args.policy),
                  args.connect_timeout_s, args.timeout_s)
    log.info("prefill %s, decode %s, policy %s", args.prefill, args.decode, args.policy)
    web.run_app(proxy.app(), host=args.host, port=args.port, access_log=None,
                print=lambda line: log.info("%s", line))


if __name__ == "__main__":
    main()

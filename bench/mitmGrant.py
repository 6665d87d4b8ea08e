# The grant path's job for mitmproxy (the bench's peer): a CONNECT with the run's token, the
# credential put in the one header its kind uses, the request routed to the local upstream, the
# answer scrubbed of the key. Loaded by `mitmdump -s bench/mitmGrant.py` from gateway.bench.ts.
import base64
import os

from mitmproxy import http

TOKEN = os.environ["BENCH_MITM_TOKEN"]
KEY = os.environ["BENCH_MITM_KEY"]
HOST = os.environ["BENCH_MITM_HOST"]
UPSTREAM_PORT = int(os.environ["BENCH_MITM_UPSTREAM_PORT"])


def token_of(flow: http.HTTPFlow) -> str:
    auth = flow.request.headers.get("proxy-authorization", "")
    if not auth.startswith("Basic "):
        return ""
    try:
        return base64.b64decode(auth[6:]).decode().split(":", 1)[0]
    except Exception:
        return ""


class Grant:
    def http_connect(self, flow: http.HTTPFlow) -> None:
        if token_of(flow) != TOKEN or flow.request.host != HOST:
            flow.response = http.Response.make(407 if token_of(flow) != TOKEN else 403)

    def request(self, flow: http.HTTPFlow) -> None:
        if flow.request.method == "CONNECT":
            return
        flow.request.headers["x-api-key"] = KEY
        flow.request.host = "127.0.0.1"
        flow.request.port = UPSTREAM_PORT

    def response(self, flow: http.HTTPFlow) -> None:
        if flow.request.method == "CONNECT" or flow.response is None:
            return
        body = flow.response.content
        if body and KEY.encode() in body:
            flow.response.content = body.replace(KEY.encode(), b"[redacted]")


addons = [Grant()]

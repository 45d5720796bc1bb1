"""A scripted LLM HTTP server on 127.0.0.1 speaking both the OpenAI chat-completions and
the Anthropic Messages wire formats, so that tests drive the real SDK clients.

    with ScriptedLLMServer(sequence(Reply(status=429), Reply(text="hi"))) as srv:
        client = OpenAIProvider("gpt-4o-mini", base_url=srv.openai_base_url, api_key="k")
        ...
        assert len(srv.requests) == 2

A responder sees each parsed Request and returns a Reply: text, an error status, extra
headers, a delay, a hang (until the server closes), a connection reset, a trickle of bytes
that never completes, or raw bytes.
"""

from __future__ import annotations

import itertools
import json
import re
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Literal

from agent.population.code_key import C_SUFFIXES
from tests.llm_cache import PromptCache, TooManyMarks


@dataclass
class Request:
    api: Literal["openai", "anthropic"]
    model: str
    messages: list[dict[str, str]]  # {role, content}; Anthropic's system param first, as a system message
    body: dict[str, Any]
    headers: dict[str, str]  # names lower-cased: "authorization", "x-api-key"


@dataclass
class Reply:
    text: str = ""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    hang: bool = False  # answer nothing until the server closes
    reset: bool = False  # close the socket (RST) without answering
    trickle: bool = False  # send 200 headers, then a byte every 50 ms, never finishing
    raw_body: bytes | None = None  # send exactly these bytes (with `status`)
    input_tokens: int | None = None  # default: characters / 4
    output_tokens: int | None = None
    # what the provider's prompt cache read and wrote (default: as tests/llm_cache.py imitates it;
    # OpenAI reports reads only)
    cache_read: int | None = None
    cache_write: int | None = None
    finish_reason: str | None = None  # default: "stop" (OpenAI) / "end_turn" (Anthropic)


Responder = Callable[[Request], Reply]


def sequence(*replies: Reply) -> Responder:
    """Answer the replies in order, per API, whatever the request; then repeat the last."""
    if not replies:
        raise ValueError("sequence() needs at least one Reply")
    counters: dict[str, int] = {}
    lock = threading.Lock()

    def responder(req: Request) -> Reply:
        with lock:
            i = counters.get(req.api, 0)
            counters[req.api] = i + 1
        return replies[min(i, len(replies) - 1)]

    return responder


def _text_of(content: Any) -> str:
    """Message content as plain text: a string, or a list of text blocks/parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _rough_tokens(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


_ERROR_TYPES = {
    "openai": {400: "invalid_request_error", 401: "invalid_request_error", 403: "permission_error", 404: "invalid_request_error",
               429: "rate_limit_exceeded"},
    "anthropic": {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
                  413: "request_too_large", 429: "rate_limit_error", 529: "overloaded_error"},
}


def _error_body(api: str, status: int, message: str) -> dict[str, Any]:
    kind = _ERROR_TYPES[api].get(status) or ("server_error" if api == "openai" else "api_error")
    message = message or f"scripted error {status}"
    if api == "openai":
        return {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return {"type": "error", "error": {"type": kind, "message": message}}


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True  # a stuck handler must never keep the test process alive
    owner: "ScriptedLLMServer"

    def handle_error(self, request, client_address) -> None:  # resets and abandoned clients are expected
        pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        self.server.owner._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        except (OSError, ValueError):  # the socket was reset or closed on purpose
            pass
        self.server.owner._track(self.connection, add=False)

    def do_GET(self) -> None:
        self._unmatched()

    def _unmatched(self) -> None:
        self.server.owner._unmatched_add(f"{self.command} {self.path}")
        self._send_json(404, {"error": {"message": f"no route {self.command} {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:
        owner = self.server.owner
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = self.path.split("?", 1)[0]
        api = {"/v1/chat/completions": "openai", "/v1/messages": "anthropic"}.get(path)
        if api is None:
            return self._unmatched()
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return self._send_json(400, _error_body(api, 400, "request body is not JSON"))
        messages = [{"role": str(m.get("role", "")), "content": _text_of(m.get("content"))} for m in body.get("messages") or []]
        if api == "anthropic" and body.get("system"):
            messages.insert(0, {"role": "system", "content": _text_of(body["system"])})
        req = Request(api=api, model=str(body.get("model", "")), messages=messages, body=body, headers={k.lower(): v for k, v in self.headers.items()})
        owner._record(req)
        try:
            reply = owner.responder(req)
        except Exception as e:  # a broken script shows up in the test, not as a silent hang
            owner._errors_add(f"{type(e).__name__}: {e}")
            return self._send_json(500, _error_body(api, 500, f"responder raised {type(e).__name__}: {e}"))
        self._answer(req, reply)

    def _answer(self, req: Request, reply: Reply) -> None:
        stop = self.server.owner._stop
        if reply.delay_s and stop.wait(reply.delay_s):
            return
        if reply.hang:
            stop.wait()
            return
        if reply.reset:
            # SO_LINGER 0: close() sends RST, what a crashed proxy looks like to the client.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
            return
        if reply.trickle:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(10**9))
            self.end_headers()
            try:
                while not stop.wait(0.05):
                    self.wfile.write(b" ")
                    self.wfile.flush()
            except OSError:
                pass
            self.close_connection = True
            return
        if reply.raw_body is not None:
            return self._send(reply.status, reply.raw_body, reply.headers)
        if reply.status != 200:
            return self._send_json(reply.status, _error_body(req.api, reply.status, reply.text), reply.headers)
        try:
            self._send_json(200, self._success(req, reply), reply.headers)
        except TooManyMarks as e:  # the API refuses the request as a whole
            self._send_json(400, _error_body(req.api, 400, str(e)))

    def _success(self, req: Request, reply: Reply) -> dict[str, Any]:
        owner = self.server.owner
        n_in = reply.input_tokens if reply.input_tokens is not None else _rough_tokens("".join(m["content"] for m in req.messages))
        n_out = reply.output_tokens if reply.output_tokens is not None else _rough_tokens(reply.text)
        n = owner._next_id()
        if req.api == "openai":
            read = reply.cache_read if reply.cache_read is not None else owner.prompt_cache.openai(req.model, req.messages)
            return {
                "id": f"chatcmpl-scripted-{n}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": req.model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": reply.text},
                        "finish_reason": reply.finish_reason or "stop",
                        "logprobs": None,
                    }
                ],
                "usage": {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out,
                          "prompt_tokens_details": {"cached_tokens": min(read, n_in)}},
            }
        read, write = owner.prompt_cache.anthropic(req.body)
        read, write = (reply.cache_read if reply.cache_read is not None else read), (reply.cache_write if reply.cache_write is not None else write)
        return {
            "id": f"msg_scripted_{n}",
            "type": "message",
            "role": "assistant",
            "model": req.model,
            # The real API may answer with no content block at all when the text is empty.
            "content": [{"type": "text", "text": reply.text}] if reply.text else [],
            "stop_reason": reply.finish_reason or "end_turn",
            "stop_sequence": None,
            # input_tokens: those after the last block the cache read or wrote
            "usage": {"input_tokens": max(n_in - read - write, 0), "output_tokens": n_out,
                      "cache_read_input_tokens": read, "cache_creation_input_tokens": write},
        }

    def _send_json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(payload).encode(), headers)

    def _send(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")  # one request per connection: clean shutdown
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client gave up (its deadline passed)
            pass
        self.close_connection = True


class ScriptedLLMServer:
    def __init__(self, responder: Responder | None = None):
        self.responder: Responder = responder or (lambda req: Reply(text="ok"))
        self._lock = threading.Lock()
        self._requests: list[Request] = []
        self._unmatched: list[str] = []
        self._errors: list[str] = []
        self._conns: set[socket.socket] = set()
        self._ids = itertools.count(1)
        self._stop = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._handlers: list[threading.Thread] = []
        self.prompt_cache = PromptCache()  # what each provider's cache would read and write

    # -- what tests read
    @property
    def requests(self) -> list[Request]:
        with self._lock:
            return list(self._requests)

    @property
    def unmatched(self) -> list[str]:
        """Requests to paths the server does not serve ("POST /v1/other")."""
        with self._lock:
            return list(self._unmatched)

    @property
    def errors(self) -> list[str]:
        """Exceptions the responder raised (each also answered as a 500)."""
        with self._lock:
            return list(self._errors)

    @property
    def live_handlers(self) -> int:
        """Handler threads still running (after close: those it could not end)."""
        with self._lock:
            return sum(t.is_alive() for t in self._handlers)

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("ScriptedLLMServer is not started; use it as a context manager or call start()")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def openai_base_url(self) -> str:
        return self.url + "/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.url

    # -- lifecycle
    def start(self) -> "ScriptedLLMServer":
        httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True,
                                        name="scripted-llm-server")
        self._thread.start()
        return self

    def close(self) -> None:
        if self._httpd is None:
            return
        self._stop.set()  # ends hangs, delays and trickles
        self._httpd.shutdown()
        with self._lock:
            conns = list(self._conns)
        for c in conns:  # unblock handlers waiting on a client that sends nothing
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            handlers = list(self._handlers)
        for t in handlers:
            t.join(timeout=5)
        self._httpd = None

    def __enter__(self) -> "ScriptedLLMServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- used by the handler threads
    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            if add:
                self._conns.add(conn)
                self._handlers.append(threading.current_thread())
            else:
                self._conns.discard(conn)
                self._handlers.remove(threading.current_thread())

    def _record(self, req: Request) -> None:
        with self._lock:
            self._requests.append(req)

    def _unmatched_add(self, what: str) -> None:
        with self._lock:
            self._unmatched.append(what)

    def _errors_add(self, what: str) -> None:
        with self._lock:
            self._errors.append(what)

    def _next_id(self) -> int:
        with self._lock:
            return next(self._ids)


_distinct = itertools.count()


def scripted_search(executor: Callable[[int, str], str], plan: str = "Make it faster.",
                    memory: tuple[str, ...] = ("keep it exact",)) -> Callable[[Request], Reply]:
    """A model for a whole search: a fixed plan, a lesson per child, and `executor(n, prompt)`'s
    answer for executor n (1-based)."""
    def respond(req: Request) -> Reply:
        user = req.messages[-1]["content"]
        if "You are the summarizer" in user:
            ids = re.findall(r"^## (r\d\d-c\d+):", user, re.M)
            return Reply(text=json.dumps({"children": {i: f"lesson on {i}" for i in ids}, "memory": list(memory)}))
        if "You are the planner" in user:
            return Reply(text=plan)
        return Reply(text=executor(int(re.search(r"You are executor (\d+) of", user).group(1)), user))
    return respond


def roles(executor: Responder, plan: str = "Keep the contract.", memory: str = "a lesson") -> Responder:
    """A scripted model of three roles: the planner answers `plan`, the summarizer a JSON of no
    lessons and one memory item, every other call (executors, fixes) `executor`."""
    def respond(req: Request) -> Reply:
        user = req.messages[-1]["content"]
        if "You are the summarizer" in user:
            return Reply(text=json.dumps({"children": {}, "memory": [memory]}))
        if "You are the planner" in user:
            return Reply(text=plan)
        return executor(req)
    return respond


def distinct_children(req: Request) -> Reply:
    """A model for measuring throughput: every executor answers with its parent's first file plus
    one line naming the call (variant_line), so that every candidate is a new program and is
    graded; plans and lessons are fixed."""
    user = req.messages[-1]["content"]
    if "You are the summarizer" in user:
        ids = re.findall(r"^## (r\d\d-c\d+):", user, re.M)
        return Reply(text=json.dumps({"children": {i: f"probe {i}" for i in ids}, "memory": ["a probe run"]}))
    if "You are the planner" in user:
        return Reply(text="Keep the parent as it is (a throughput probe).")
    m = re.search(r"^### (\S+)\n```(\w*)\n(.*?)\n```", user, re.M | re.S)
    if not m:
        return Reply(text="")
    path, lang, code = m.groups()
    return Reply(text=f"```{lang} {path}\n{code}\n{variant_line(path, next(_distinct))}\n```\n")


def commenting_children(req: Request) -> Reply:
    """Like distinct_children, but a function of the prompt alone (so a resumed run is answered
    as the uninterrupted one was): executor i appends variant_line(path, i), so the children of
    one parent are distinct programs, each graded, and a child of a child differs from both."""
    user = req.messages[-1]["content"]
    child = re.search(r"You are executor (\d+) of", user)
    if child is None:
        return distinct_children(req)
    m = re.search(r"^### (\S+)\n```(\w*)\n(.*?)\n```", user, re.M | re.S)
    path, lang, code = m.groups()  # type: ignore[union-attr]
    return Reply(text=f"```{lang} {path}\n{code}\n{variant_line(path, int(child.group(1)))}\n```\n")


def variant_line(path: str, n: int) -> str:
    """A line that makes a file another program (a comment would not: a near-duplicate is not
    graded, agent/population/code_key.py): an assignment in Python, a macro in C-like code."""
    if path.endswith(".py"):
        return f"_pesflow_variant = {n}"
    return f"#define PESFLOW_VARIANT_{n} {n}" if path.endswith(C_SUFFIXES) else f"# variant {n}"

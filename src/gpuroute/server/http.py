"""How ``gpuroute serve`` runs the application under uvicorn: the HTTP/1.1 protocol (h11) with the
request-line limit set from the body limit, a URL past it answered ``414 URI Too Long`` (headers past
it ``431``) in OSRM's JSON instead of a reset connection, and the server started on a socket bound
beforehand (so that a port in use is reported before anything is loaded).

A URL longer than h11's buffer used to be answered 400 and the connection closed while the client was
still sending it: the client saw a reset, not the answer. :class:`Protocol` answers, closes its side for
writing and reads the rest of the request (up to :data:`DRAIN_BYTES`, :data:`DRAIN_SECONDS`) before it
closes, as web servers' lingering close does.

Two HTTP/1.1 parsers under uvicorn (``config.SERVE_HTTP``, ``gpuroute serve --http``): ``httptools``
(llhttp, in C) on the uvloop event loop, ``pip install 'gpuroute[serve]'``, and ``h11`` (pure Python) on
asyncio's loop; ``auto`` takes httptools where httptools and uvloop import. httptools has no limit on a
request line or a header block of its own: :func:`protocol_class` counts the bytes of a request's head as
they arrive and answers 414/431 past the same limit, with the same JSON and the same lingering close. On
a 2-core machine httptools + uvloop cost less CPU per ``/route`` than h11 + asyncio (BENCHMARKS.md, "The
HTTP server and the thread hand-off"). With httptools, a ``GET`` of a service that the application
answers at once (a short request on the event loop, or a refused one: ``app.direct(scope)``) is written
by the protocol itself, head and body in one ``write``, without an ASGI task and its messages (the same
bytes and headers as uvicorn's request cycle writes; HTTP/1.0 and ``Connection: close`` close after it).
"""
from __future__ import annotations

import logging

log = logging.getLogger("gpuroute.server")

#: Smallest request-line and header limit, in bytes (h11's own default is 16 KiB).
MIN_REQUEST_BYTES = 65536
#: Most bytes of a refused request read (and dropped) before the connection is closed.
DRAIN_BYTES = 64 << 20
#: Most seconds a refused request's connection stays open to be read to its end.
DRAIN_SECONDS = 10.0

_H11_DEFAULT = 16384  # h11's request-line and header limit when uvicorn is given none
_PROTOCOLS = {}
#: The parsers :func:`config` takes (``http=``), and "auto".
PARSERS = ("auto", "httptools", "h11")


def parser(name=None):
    """The parser ``name`` (default ``config.SERVE_HTTP``) stands for: "httptools" or "h11" ("auto":
    httptools where httptools and uvloop import).

    Raises
    ------
    ValueError
        A name not in :data:`PARSERS`, or "httptools" where httptools or uvloop does not import (the
        message says what to install).
    """
    from .. import config as cfg

    name = cfg.SERVE_HTTP if name is None else name
    if name not in PARSERS:
        raise ValueError(f"HTTP parser {name!r}: expected one of {', '.join(PARSERS)}")
    if name == "h11":
        return name
    try:
        import httptools  # noqa: F401
        import uvloop  # noqa: F401
    except ImportError as e:
        if name == "auto":
            return "h11"
        raise ValueError(f"HTTP parser 'httptools' needs httptools and uvloop ({e}): pip install "
                         "'gpuroute[serve]'") from None
    return "httptools"


def _refusal(limit, line_done, msg):
    """``(status, head and body bytes)`` of a refused request: 414/431 past ``limit`` (``line_done``: the
    request line was complete), else 400 ``InvalidUrl`` with ``msg`` (``limit`` None)."""
    import orjson

    if limit is not None:
        status, reason = (431, b"Request Header Fields Too Large") if line_done else (414, b"URI Too Long")
        what = "request headers" if line_done else "URL"
        body = orjson.dumps({"code": "TooBig", "message": (
            f"{what} over the limit of {limit} bytes: send a long request as a POST body (the same "
            "options; at most the server's body limit)")})
    else:
        status, reason = 400, b"Bad Request"
        body = orjson.dumps({"code": "InvalidUrl", "message": msg})
    head = (f"HTTP/1.1 {status} ".encode() + reason + b"\r\ncontent-type: application/json\r\n"
            b"access-control-allow-origin: *\r\nconnection: close\r\ncontent-length: "
            + str(len(body)).encode() + b"\r\n\r\n")
    return status, head + body


class _NoEvent:
    def set(self):
        return None


class _Answered:
    """The request cycle of a request answered directly (complete: the protocol reads on)."""

    response_complete = True
    disconnected = False
    keep_alive = True
    message_event = _NoEvent()


_ANSWERED = _Answered()


class _Lingering:
    """The refusal and the lingering close both protocols share (a mixin over uvicorn's protocol)."""

    _draining = False
    _drained = 0

    def refuse(self, limit, line_done, msg=""):
        status, data = _refusal(limit, line_done, msg)
        self.transport.write(data)
        if status == 400 or not self.transport.can_write_eof():
            self.transport.close()
            return
        self.transport.write_eof()  # the answer is complete; read what the client still sends
        self._draining = True
        self.loop.call_later(DRAIN_SECONDS, self.transport.close)

    def drain(self, data):
        """True when ``data`` was dropped (a refused request's connection being read to its end)."""
        if not self._draining:
            return False
        self._drained += len(data)
        if self._drained > DRAIN_BYTES:
            self.transport.close()
        return True

    def eof_received(self):
        if self._draining:
            self.transport.close()
            return None
        return super().eof_received()


def protocol_class(name="h11"):
    """uvicorn's protocol class of parser ``name`` ("h11" or "httptools") with the 414/431 answers (made
    once, on first use: uvicorn is imported only by the serve extra)."""
    if name in _PROTOCOLS:
        return _PROTOCOLS[name]
    if name == "h11":
        from uvicorn.protocols.http.h11_impl import H11Protocol

        class Protocol(_Lingering, H11Protocol):
            """H11Protocol whose malformed-request answer tells an over-long URL (414) or header block (431)
            from other malformed requests (400), and reads the rest of the request before closing."""

            def send_400_response(self, msg):
                limit = int(self.config.h11_max_incomplete_event_size or _H11_DEFAULT)
                data, _ = self.conn.trailing_data
                if len(data) > limit:  # h11's "Receive buffer too long": a request line or headers unfinished
                    self.refuse(limit, b"\n" in data)
                else:
                    self.refuse(None, False, msg)

            def data_received(self, data):
                if not self.drain(data):
                    super().data_received(data)
    elif name == "httptools":
        import urllib.parse

        import httptools
        from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
        from uvicorn.protocols.utils import get_client_addr, get_path_with_query_string

        class Protocol(_Lingering, HttpToolsProtocol):
            """HttpToolsProtocol with a limit on a request's head (request line and headers: httptools has
            none): past it 414 (the request line unfinished) or 431, as the h11 protocol answers; a request
            that does not parse is answered 400 ``InvalidUrl`` in OSRM's JSON."""

            _in_head = True
            _head_bytes = 0
            _line_done = False

            def data_received(self, data):
                if self.drain(data):
                    return
                if self._in_head:
                    self._head_bytes += len(data)
                    self._line_done = self._line_done or b"\n" in data
                super().data_received(data)
                limit = int(self.config.h11_max_incomplete_event_size or _H11_DEFAULT)
                if self._in_head and self._head_bytes > limit and not self._draining and not self.transport.is_closing():
                    self.refuse(limit, self._line_done)

            def on_headers_complete(self):
                self._in_head = False
                direct = getattr(self.config, "gpuroute_direct", None)
                if direct is None or not self._answer_directly(direct):
                    super().on_headers_complete()

            def _answer_directly(self, direct):
                """A GET without a body that the application answers at once (``direct(scope)``: a short
                request, a refused one): written here in one ``write`` (head and body), as uvicorn's
                request cycle would write it, without an ASGI task; False to leave it to that cycle."""
                parser = self.parser
                if (parser.get_method() != b"GET" or parser.should_upgrade() or self.pipeline or self.root_path
                        or self.limit_concurrency is not None
                        or (self.cycle is not None and not self.cycle.response_complete)):
                    return False
                for name, value in self.headers:
                    if name == b"transfer-encoding" or (name == b"content-length" and value.strip() != b"0"):
                        return False
                try:
                    url = httptools.parse_url(self.url)
                    path = url.path.decode("ascii")
                except (httptools.HttpParserError, UnicodeDecodeError):
                    return False
                if "%" in path:
                    path = urllib.parse.unquote(path)
                version = parser.get_http_version()
                scope = {"type": "http", "method": "GET", "http_version": version, "path": path,
                         "raw_path": url.path, "query_string": url.query or b"", "headers": self.headers,
                         "scheme": self.scheme, "server": self.server, "client": self.client}
                got = direct(scope)
                if got is None:
                    return False
                status, headers, body = got
                keep_alive = version != "1.0" and parser.should_keep_alive()
                if self.access_log and self.access_logger.isEnabledFor(logging.INFO):
                    self.access_logger.info('%s - "%s %s HTTP/%s" %d', get_client_addr(scope), "GET",
                                            get_path_with_query_string(scope), version, status)
                out = [STATUS_LINE[status]]
                for name, value in (*self.server_state.default_headers, *headers):
                    out += (name, b": ", value, b"\r\n")
                if not keep_alive:
                    out.append(b"connection: close\r\n")
                out += (b"\r\n", body)
                self.transport.write(b"".join(out))
                self.cycle = _ANSWERED
                if not keep_alive:
                    self.transport.close()
                self.on_response_complete()
                return True

            def on_message_complete(self):
                super().on_message_complete()
                self._in_head, self._head_bytes, self._line_done = True, 0, False

            def send_400_response(self, msg):
                self.refuse(None, False, msg)
    else:
        raise ValueError(f"HTTP parser {name!r}: expected h11 or httptools")
    _PROTOCOLS[name] = Protocol
    return Protocol


def config(app, *, log_level="warning", max_request_bytes=None, http=None, direct=True, **kwargs):
    """The ``uvicorn.Config`` ``gpuroute serve`` runs ``app`` with.

    Parameters
    ----------
    app : starlette.applications.Starlette
        From :func:`gpuroute.server.create_app` (its ``state.limits["max_body_bytes"]`` sets the default
        request-line limit, so a GET table may be as long as a POST body).
    log_level : str
    max_request_bytes : int, optional
        Longest request line (or header block) in bytes; default ``max(MIN_REQUEST_BYTES, max_body_bytes)``.
    http : str, optional
        The parser: "auto", "httptools" or "h11" (default ``config.SERVE_HTTP``; :func:`parser`).
    direct : bool, default True
        With httptools: a GET the application answers at once (``app.direct(scope)``: a short request or
        a refused one) is written by the protocol in one write, without an ASGI task (the same bytes).
    **kwargs
        More ``uvicorn.Config`` arguments.

    Returns
    -------
    uvicorn.Config

    Raises
    ------
    ValueError
        An unknown parser, or httptools asked for where it or uvloop does not import.
    """
    import uvicorn

    name = parser(http)

    if max_request_bytes is None:
        limits = getattr(getattr(app, "state", None), "limits", None) or {}
        max_request_bytes = max(MIN_REQUEST_BYTES, int(limits.get("max_body_bytes") or 0))
    cfg = uvicorn.Config(app, log_level=log_level, http=protocol_class(name),
                         loop="uvloop" if name == "httptools" else "asyncio",
                         h11_max_incomplete_event_size=int(max_request_bytes), **kwargs)
    cfg.gpuroute_direct = getattr(app, "direct", None) if direct else None
    return cfg


def run(app, sock, *, log_level="warning", workers=1, http=None):
    """Serve ``app`` on ``sock`` (bound, not yet listening) until stopped (Ctrl-C, SIGTERM).

    The application's startup (its warm-up) completes before the socket listens.

    Parameters
    ----------
    app, sock
    log_level : str
        uvicorn's.
    workers : int
        1: this process serves (one event loop; short requests answered on it, the others in worker threads). More: that many worker processes forked
        from this one once it is warmed up (:func:`gpuroute.server.workers.serve`: each connection handed to the
        least loaded worker, or with ``config.SERVE_DISPATCH = "reuseport"`` and ``sock`` bound with
        ``SO_REUSEPORT`` each worker on its own socket).

    Returns
    -------
    bool
        Whether the server started (False: its startup failed, uvicorn logged why; with workers: they
        kept dying at start).
    http : str, optional
        The parser (:func:`parser`; default ``config.SERVE_HTTP``).
    """
    if int(workers) > 1:
        from .workers import serve as serve_workers

        return serve_workers(app, sock, int(workers), log_level=log_level, http=http)
    import uvicorn

    server = uvicorn.Server(config(app, log_level=log_level, http=http))
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # pragma: no cover - the usual way to stop it
        pass
    return bool(server.started)

"""How ``gpuroute serve`` runs the application under uvicorn: the HTTP/1.1 protocol (h11) with the
request-line limit set from the body limit, a URL past it answered ``414 URI Too Long`` (headers past
it ``431``) in OSRM's JSON instead of a reset connection, and the server started on a socket bound
beforehand (so that a port in use is reported before anything is loaded).

A URL longer than h11's buffer used to be answered 400 and the connection closed while the client was
still sending it: the client saw a reset, not the answer. :class:`Protocol` answers, closes its side for
writing and reads the rest of the request (up to :data:`DRAIN_BYTES`, :data:`DRAIN_SECONDS`) before it
closes, as web servers' lingering close does.
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

_PROTOCOL = None
_H11_DEFAULT = 16384  # h11's request-line and header limit when uvicorn is given none


def protocol_class():
    """uvicorn's h11 protocol with the 414/431 answers (a class made once, on first use: uvicorn is
    imported only by the serve extra)."""
    global _PROTOCOL
    if _PROTOCOL is not None:
        return _PROTOCOL
    import orjson
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class Protocol(H11Protocol):
        """H11Protocol whose malformed-request answer tells an over-long URL (414) or header block (431)
        from other malformed requests (400), and reads the rest of the request before closing."""

        _draining = False
        _drained = 0

        def send_400_response(self, msg):
            limit = int(self.config.h11_max_incomplete_event_size or _H11_DEFAULT)
            data, _ = self.conn.trailing_data
            if len(data) > limit:  # h11's "Receive buffer too long": a request line or headers unfinished
                line_done = b"\n" in data
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
            self.transport.write(head + body)
            if status == 400 or not self.transport.can_write_eof():
                self.transport.close()
                return
            self.transport.write_eof()  # the answer is complete; read what the client still sends
            self._draining = True
            self.loop.call_later(DRAIN_SECONDS, self.transport.close)

        def data_received(self, data):
            if self._draining:
                self._drained += len(data)
                if self._drained > DRAIN_BYTES:
                    self.transport.close()
                return
            super().data_received(data)

        def eof_received(self):
            if self._draining:
                self.transport.close()
                return None
            return super().eof_received()

    _PROTOCOL = Protocol
    return Protocol


def config(app, *, log_level="warning", max_request_bytes=None, **kwargs):
    """The ``uvicorn.Config`` ``gpuroute serve`` runs ``app`` with.

    Parameters
    ----------
    app : starlette.applications.Starlette
        From :func:`gpuroute.server.create_app` (its ``state.limits["max_body_bytes"]`` sets the default
        request-line limit, so a GET table may be as long as a POST body).
    log_level : str
    max_request_bytes : int, optional
        Longest request line (or header block) in bytes; default ``max(MIN_REQUEST_BYTES, max_body_bytes)``.
    **kwargs
        More ``uvicorn.Config`` arguments.

    Returns
    -------
    uvicorn.Config
    """
    import uvicorn

    if max_request_bytes is None:
        limits = getattr(getattr(app, "state", None), "limits", None) or {}
        max_request_bytes = max(MIN_REQUEST_BYTES, int(limits.get("max_body_bytes") or 0))
    return uvicorn.Config(app, log_level=log_level, http=protocol_class(),
                          h11_max_incomplete_event_size=int(max_request_bytes), **kwargs)


def run(app, sock, *, log_level="warning", workers=1):
    """Serve ``app`` on ``sock`` (bound, not yet listening) until stopped (Ctrl-C, SIGTERM).

    The application's startup (its warm-up) completes before the socket listens.

    Parameters
    ----------
    app, sock
    log_level : str
        uvicorn's.
    workers : int
        1: this process serves (one event loop, worker threads). More: that many worker processes forked
        from this one once it is warmed up (:func:`gpuroute.server.workers.serve`; ``sock`` bound with
        ``SO_REUSEPORT`` gives each its own socket).

    Returns
    -------
    bool
        Whether the server started (False: its startup failed, uvicorn logged why; with workers: they
        kept dying at start).
    """
    if int(workers) > 1:
        from .workers import serve as serve_workers

        return serve_workers(app, sock, int(workers), log_level=log_level)
    import uvicorn

    server = uvicorn.Server(config(app, log_level=log_level))
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # pragma: no cover - the usual way to stop it
        pass
    return bool(server.started)

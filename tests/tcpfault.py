"""A loopback TCP proxy in front of a real server that cuts one response short: the server is
stopped (``on_cut``) after the first ``cut_after`` bytes of the response to a request whose
path names one of ``cut_paths`` (any path when empty), as a registry dying mid-download."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterable
from types import TracebackType


class CuttingProxy:
    def __init__(
        self,
        upstream_port: int,
        *,
        cut_after: int,
        on_cut: Callable[[], None],
        cut_paths: Iterable[str] = (),
    ) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self.cut_after = cut_after
        self.on_cut = on_cut
        self.cut_paths = tuple(cut_paths)
        self.cuts = 0
        self.lock = threading.Lock()
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.server.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> CuttingProxy:
        self.thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.server.close()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(client,), daemon=True).start()

    def _relay(self, client: socket.socket) -> None:
        with contextlib.suppress(OSError):  # the server died or the client gave up
            self._relay_one(client)

    def _relay_one(self, client: socket.socket) -> None:
        with client:
            request = b""
            while b"\r\n\r\n" not in request:
                data = client.recv(65536)
                if not data:
                    return
                request += data
            path = request.split(b"\r\n", 1)[0].decode(errors="replace")
            try:
                upstream = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                return  # the server is gone: the client sees the connection close
            with upstream:
                upstream.sendall(request)
                self._respond(client, upstream, self._should_cut(path))

    def _should_cut(self, path: str) -> bool:
        with self.lock:
            if self.cuts or " /v2/" not in path or "/blobs/" not in path:
                return False
            if self.cut_paths and not any(p in path for p in self.cut_paths):
                return False
            self.cuts += 1
            return True

    def _respond(self, client: socket.socket, upstream: socket.socket, cut: bool) -> None:
        sent = 0
        while True:
            data = upstream.recv(65536)
            if not data:
                return
            if cut and sent + len(data) >= self.cut_after:
                client.sendall(data[: self.cut_after - sent])
                self.on_cut()
                return
            client.sendall(data)
            sent += len(data)

"""Run ``mkdocs serve`` on a socket the caller bound: ``python -m qkv_site.serve_socket FD ARGS...``.

The caller binds 127.0.0.1 port 0 (the system picks a free port, no race), passes the
socket's descriptor to this process and runs ``mkdocs ARGS...`` (``serve ...``) here; the
served URL is known before the server starts. ``-a`` is not needed.
"""

from __future__ import annotations

import socket
import sys
import wsgiref.simple_server

from mkdocs import livereload


def main() -> None:
    fd = int(sys.argv[1])

    def server_bind(self):  # adopt the bound socket instead of binding a new one
        self.socket.close()
        self.socket = socket.socket(fileno=fd)
        self.server_address = self.socket.getsockname()
        self.server_name, self.server_port = self.server_address[:2]
        wsgiref.simple_server.WSGIServer.setup_environ(self)
        self.url = f"http://{self.server_name}:{self.server_port}{self.mount_path}"

    livereload.LiveReloadServer.server_bind = server_bind
    sys.argv = ["mkdocs", *sys.argv[2:]]
    from mkdocs.__main__ import cli

    cli()


if __name__ == "__main__":
    main()

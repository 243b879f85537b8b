"""Which addresses a local TCP port is listening on, read from ``/proc/net/tcp`` and ``tcp6``."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_LISTEN = "0A"


def _address(hex_ip: str) -> str:
    raw = bytes.fromhex(hex_ip)
    if len(raw) == 4:
        return str(ipaddress.IPv4Address(raw[::-1]))
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    return str(ipaddress.IPv6Address(words))


def listening_hosts(port: int) -> set[str]:
    """The local addresses with a socket listening on ``port`` (any process)."""
    hosts = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        path = Path(table)
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            hex_ip, hex_port = local.split(":")
            if state == _LISTEN and int(hex_port, 16) == port:
                hosts.add(_address(hex_ip))
    return hosts


def loopback_only(port: int) -> bool:
    """True when ``port`` listens, and only on loopback addresses."""
    hosts = listening_hosts(port)
    return bool(hosts) and all(ipaddress.ip_address(h).is_loopback for h in hosts)


@contextmanager
def untouched_port() -> Iterator[int]:
    """A loopback port that listens, yielded; on exit, asserts that nothing connected to it."""
    listener = socket.socket()
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        yield listener.getsockname()[1]
        try:
            listener.accept()
        except BlockingIOError:
            return
        raise AssertionError("a connection arrived at a port nothing may reach")
    finally:
        listener.close()

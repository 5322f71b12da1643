"""A second machine on this one: a network namespace joined to the host by a veth pair.

The namespace has its own loopback, routes and ports, and one address on its end of
the veth pair; the host's end has an address of its own on the same /30, which
servers meant for the namespace bind (a Redis server, a Ray head). Processes started
in it (``ip netns exec``) share this machine's files and process ids, not its network.
Setting the host's end down (:meth:`Namespace.cut`) is a network partition: the
namespace's packets go nowhere and its connections stall, no error comes back, and
every process in it keeps running; :meth:`Namespace.heal` sets it up again.

Making one needs root and ``ip``; :func:`namespace` says why not where it cannot.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import random
import shutil
import subprocess
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

NETNS_DIR = Path("/run/netns")


class NoNamespaces(Exception):
    """This machine cannot make a network namespace here (the reason is the message)."""


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise NoNamespaces(f"`ip {' '.join(args)}` failed: {done.stderr.strip()}")


def _free_subnet() -> ipaddress.IPv4Network:
    """A /30 in 10.200.0.0/13 that no interface here has an address in."""
    taken = subprocess.run(
        ["ip", "-4", "-o", "addr"], capture_output=True, text=True, check=False
    ).stdout
    used = [
        ipaddress.ip_interface(word).network
        for line in taken.splitlines()
        for prev, word in zip(line.split(), line.split()[1:], strict=False)
        if prev == "inet"
    ]
    pool = ipaddress.ip_network("10.200.0.0/13")
    while True:
        block = random.randrange(pool.num_addresses // 4)
        subnet = ipaddress.ip_network(f"{pool.network_address + 4 * block}/30")
        if not any(subnet.overlaps(other) for other in used):
            return subnet


@dataclass(frozen=True)
class Namespace:
    """A network namespace and the veth pair to it.

    Attributes:
        name: the namespace (``ip netns exec NAME``).
        outside: the host's end of the veth pair.
        host_ip: the address of the host's end (what the namespace reaches the host at).
        ip: the address inside the namespace.
    """

    name: str
    outside: str
    host_ip: str
    ip: str

    def argv(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside the namespace (``ip netns exec`` execs it: same pid)."""
        return ["ip", "netns", "exec", self.name, *argv]

    def cut(self) -> None:
        """Cut the link: the namespace reaches nothing and nothing reaches it."""
        _ip("link", "set", self.outside, "down")

    def heal(self) -> None:
        """Bring the link back."""
        _ip("link", "set", self.outside, "up")

    def holds(self, pid: int) -> bool:
        """Whether process ``pid`` runs in this namespace."""
        try:
            inside = os.stat(f"/proc/{pid}/ns/net")
        except OSError:
            return False
        mine = os.stat(NETNS_DIR / self.name)
        return (inside.st_dev, inside.st_ino) == (mine.st_dev, mine.st_ino)

    def remove(self) -> None:
        """Delete the namespace and the veth pair (either end gone takes the other)."""
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True, check=False)
        subprocess.run(["ip", "link", "del", self.outside], capture_output=True, check=False)


@contextlib.contextmanager
def namespace() -> Iterator[Namespace]:
    """A new namespace linked to the host, deleted after the block.

    Raises:
        NoNamespaces: not root, no ``ip`` command, or the kernel refuses (a container
            without the capability).
    """
    if shutil.which("ip") is None:
        raise NoNamespaces("no `ip` command (iproute2) to make a network namespace")
    if os.geteuid() != 0:
        raise NoNamespaces("making a network namespace needs root")
    tag = uuid.uuid4().hex[:6]
    subnet = _free_subnet()
    host_ip, ip = (str(a) for a in list(subnet.hosts())[:2])
    made = Namespace(f"plait-{tag}", f"pv{tag}", host_ip, ip)
    inside = f"pn{tag}"
    try:
        _ip("netns", "add", made.name)
        _ip("link", "add", made.outside, "type", "veth", "peer", "name", inside,
            "netns", made.name)  # fmt: skip
        _ip("addr", "add", f"{host_ip}/30", "dev", made.outside)
        _ip("link", "set", made.outside, "up")
        _ip("netns", "exec", made.name, "ip", "addr", "add", f"{ip}/30", "dev", inside)
        _ip("netns", "exec", made.name, "ip", "link", "set", inside, "up")
        _ip("netns", "exec", made.name, "ip", "link", "set", "lo", "up")
        yield made
    finally:
        made.remove()

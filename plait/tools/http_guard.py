"""The network side of ``http_get``: public addresses only, checked where it connects.

A host name is resolved here, every address it resolves to is checked, and the
connection goes to the checked address (the URL's host stays in the ``Host`` header
and in TLS's SNI and certificate check), so a DNS answer that changes between the check
and the connect cannot swap in an internal address. Hosts an agent profile lists in
``allow_hosts`` are exempt. Imported lazily: httpx costs a CLI start a tenth of a second.
"""

from __future__ import annotations

import ipaddress
import socket

import anyio
import httpx

from plait.errors import ToolError, ToolNotPermitted

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")
)
"""Cloud instance-metadata endpoints (AWS, GCP and Azure share the first; Alibaba's)."""

_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def refusal(address: IpAddress) -> str | None:
    """Why ``address`` is no place for ``http_get`` (``"loopback"``...), or None if public."""
    if address in METADATA_ADDRESSES:
        return "cloud metadata"
    if isinstance(address, ipaddress.IPv6Address):
        # An IPv4 address carried inside IPv6 is judged as itself.
        inner = address.ipv4_mapped or address.sixtofour
        if inner is None and address in _NAT64:
            inner = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if inner is not None:
            return refusal(inner)
    for name in ("loopback", "unspecified", "link_local", "multicast", "private", "reserved"):
        if getattr(address, f"is_{name}"):
            return name.replace("_", "-")
    return None if address.is_global else "non-public"


async def public_address(host: str, port: int) -> str:
    """The first address ``host`` resolves to, if every one it resolves to is public.

    Raises:
        ToolNotPermitted: one of the addresses is loopback, private, link-local,
            multicast, unspecified, reserved or a metadata endpoint.
        ToolError: the name does not resolve.
    """
    try:
        found = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise ToolError(f"tool 'http_get': cannot resolve {host!r}: {exc}") from exc
    addresses = [ipaddress.ip_address(str(info[4][0]).partition("%")[0]) for info in found]
    for address in addresses:
        why = refusal(address)
        if why is not None:
            raise ToolNotPermitted(
                f"tool 'http_get': {host!r} resolves to {address}, a {why} address; "
                f"list {host!r} in the agent profile's allow_hosts to let it be fetched"
            )
    if not addresses:
        raise ToolError(f"tool 'http_get': {host!r} resolves to no address")
    return str(addresses[0])


class PinnedTransport(httpx.AsyncHTTPTransport):
    """An httpx transport that connects only to checked public addresses.

    Args:
        allow_hosts: host names (lower-case) reached as they resolve, unchecked.
    """

    def __init__(self, allow_hosts: frozenset[str] = frozenset()) -> None:
        super().__init__(trust_env=False)  # a proxy would connect where we never looked
        self.allow_hosts = allow_hosts

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` to the checked address of its host."""
        host = request.url.host.lower()
        if host in self.allow_hosts:
            return await super().handle_async_request(request)
        port = request.url.port or (443 if request.url.scheme == "https" else 80)
        address = await public_address(host, port)
        pinned = httpx.Request(
            request.method,
            request.url.copy_with(host=address),
            headers=request.headers,  # Host: still the name asked for
            stream=request.stream,
            extensions={**request.extensions, "sni_hostname": host},
        )
        return await super().handle_async_request(pinned)


__all__ = ["METADATA_ADDRESSES", "PinnedTransport", "public_address", "refusal"]

"""Credentials in mesh URLs: masked wherever a URL is printed.

A URL carries a secret in its user part (``redis://user:PASSWORD@host``) or in a query
option: ``?password=``, or a ``rediss://`` TLS option such as ``ssl_keyfile_password``.
Plain string work, not :func:`urllib.parse.urlsplit`, so that a malformed URL (an
unclosed ``[`` of an IPv6 host) is masked too instead of raising.
"""

from __future__ import annotations

from urllib.parse import unquote

_SECRET_WORDS = ("password", "passwd", "pwd", "secret", "token", "credential")
"""A query option whose name holds one of these is a secret."""


def _is_secret_option(name: str) -> bool:
    lowered = unquote(name).lower()
    return any(word in lowered for word in _SECRET_WORDS)


def _parts(url: str) -> tuple[str, str, str, str]:
    """``url`` as (scheme and ``://``, userinfo with its ``@``, rest up to the query, query)."""
    head, sep, tail = url.partition("://")
    if not sep:
        head, tail = "", url
    else:
        head += sep
    end = min((i for i in (tail.find(c) for c in "/?#") if i >= 0), default=len(tail))
    netloc, path = tail[:end], tail[end:]
    userinfo, at, host = netloc.rpartition("@")
    path, _, query = path.partition("?")
    return head, userinfo + at, host + path, query


def redact_url(url: str) -> str:
    """``url`` with every credential replaced by ``***``, for messages and logs.

    Masks the password of the user part and the value of every query option that
    carries a secret (``password``, ``ssl_keyfile_password``, ``token``...).
    """
    head, userinfo, rest, query = _parts(url)
    if ":" in userinfo:
        userinfo = userinfo.split(":", 1)[0] + ":***@"
    if query:
        query, hash_, fragment = query.partition("#")
        masked = []
        for option in query.split("&"):
            name, eq, _ = option.partition("=")
            masked.append(f"{name}=***" if eq and _is_secret_option(name) else option)
        query = "?" + "&".join(masked) + hash_ + fragment
    return head + userinfo + rest + query


def url_secrets(url: str) -> list[str]:
    """The credentials ``url`` carries, each as written and percent-decoded, longest first.

    For scrubbing a driver's error text, which may quote what it was given.
    """
    _, userinfo, _, query = _parts(url)
    found: set[str] = set()
    if ":" in userinfo:
        found.add(userinfo[:-1].split(":", 1)[1])
    for option in query.partition("#")[0].split("&"):
        name, eq, value = option.partition("=")
        if eq and _is_secret_option(name):
            found.add(value)
    found |= {unquote(secret) for secret in found}
    return sorted((secret for secret in found if secret), key=len, reverse=True)

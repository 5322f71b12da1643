"""The HTTP API and web console of ``plait serve``, over the services below it.

:func:`plait.api.app.create_app` builds the ASGI app over an open mesh (it needs the
``serve`` extra: ``pip install 'plait[serve]'``); bearer tokens (:mod:`plait.api.tokens`,
which need nothing more than plait) say which principal each request acts as.
"""

from __future__ import annotations

from plait.api.tokens import TokenRecord, authenticate, create_token, list_tokens, revoke_token

__all__ = ["TokenRecord", "authenticate", "create_token", "list_tokens", "revoke_token"]

"""The customer portal: a short-lived signed link to the dashboard, for one tenant.

A SaaS sending webhooks lets each customer see and mend its own endpoints (Svix's app
portal): their attempts and failures, a test request, a replay since a time, one message
resent, a new secret, disable and enable. `POST /v1/portal {"tenant", "ttl_s"}` (or `brook
portal TENANT`) answers a link; whoever opens it gets a dashboard session for that tenant
alone, until the link's time runs out, without an API key of their own.

- The link is `/ui/portal/<tenant>.<expiry ms>.<signature>` (brook/portal_links.py), an
  HMAC-SHA256 keyed by a random key the broker keeps in its storage: links outlive
  restarts and rolling deploys, and a new key (delete `portal.key`) revokes them all.
- Opening it sets the usual signed session cookie, naming `portal:<tenant>` instead of an
  API key, expiring with the link. The viewer is then a key of its own making: the
  `admin` scope (the endpoint actions) on every topic, but only its tenant's endpoints
  (server/auth.endpoint_beyond), and only the pages listed in PAGES: no topic, queue,
  timer, storage or overview page, whose data are every tenant's.
"""

from __future__ import annotations

from brook.config import ApiKey

NAME_PREFIX = "portal:"
"""A session naming `portal:<tenant>` is a portal's, never an API key's (key names have
no colon... and if one had, a portal session would not be looked up among the keys)."""
PAGES = frozenset(
    {
        ("GET", "/ui/endpoints"),
        ("GET", "/ui/endpoints/{name}"),
        ("POST", "/ui/endpoints/{name}/{action}"),
        ("GET", "/ui/event-types"),
        ("POST", "/ui/logout"),
    }
)
"""The dashboard's routes a portal may use (its tenant's endpoints, and the catalog)."""


def viewer_key(tenant: str) -> ApiKey:
    """The key a portal's visitor acts with: its tenant's endpoints, nothing else."""
    return ApiKey(
        name=f"{NAME_PREFIX}{tenant}",
        sha256="0" * 64,
        scopes=["admin"],
        topics=["*"],
        tenant=tenant,
    )


def tenant_of(session_name: str) -> str | None:
    """The tenant a session's name stands for, if it is a portal's."""
    return session_name[len(NAME_PREFIX) :] if session_name.startswith(NAME_PREFIX) else None

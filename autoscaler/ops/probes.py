"""The paths a prober asks, answered for HEAD as for GET (the daemon's API and the operator's)."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.routing import APIRoute

PROBED_PATHS = ("/healthz", "/readyz", "/metrics")


def answer_head(app: FastAPI, paths: tuple[str, ...] = PROBED_PATHS) -> None:
    """Answer HEAD on ``paths`` as their GET, without the body: uptime checkers and load balancers
    probe with HEAD, and FastAPI answers a GET-only route's HEAD with 405. uvicorn drops the body
    of a HEAD's answer and keeps its headers (Content-Length included, as HTTP asks)."""
    gets = {r.path: r for r in app.routes if isinstance(r, APIRoute) and "GET" in (r.methods or ())}
    for path in paths:
        route = gets[path]
        app.add_api_route(path, route.endpoint, methods=["HEAD"], include_in_schema=False, response_model=route.response_model,
                          name=f"{route.name}_head")

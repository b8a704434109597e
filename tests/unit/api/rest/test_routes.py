"""api/rest/routes: one router per resource module, every one of them served by the
application (a new module whose router is not included would answer nothing)."""

from __future__ import annotations

import importlib
import pkgutil

from celery import Celery
from fastapi import APIRouter
from fastapi.routing import APIRoute

import api.rest.routes
from api.rest.app import create_app
from scenarios.settings import RedisSettings, Settings


def _route_modules() -> list[str]:
    return [
        f"{api.rest.routes.__name__}.{info.name}"
        for info in pkgutil.iter_modules(api.rest.routes.__path__)
    ]


def test_every_route_module_is_served() -> None:
    # Building the app connects to nothing: Redis and the broker are used once it serves.
    app = create_app(
        Settings(redis=RedisSettings(url="redis://127.0.0.1:1/0")),
        Celery("routes", set_as_current=False),
    )
    served = {
        (path, method.upper())
        for path, operations in app.openapi()["paths"].items()
        for method in operations
    }
    modules = _route_modules()
    assert len(modules) >= 6
    for name in modules:
        router = importlib.import_module(name).router
        assert isinstance(router, APIRouter), name
        routes = [r for r in router.routes if isinstance(r, APIRoute)]
        assert routes, f"{name} has no routes"
        for route in routes:
            for method in route.methods:
                assert (route.path, method) in served, f"{name}: {method} {route.path}"

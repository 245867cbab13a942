"""kopf wiring: handlers receive bodies, call the reconcilers, and hand back status patches.

Retries: invalid specs are permanent errors (reported as events, not retried); API or database
trouble is temporary (kopf retries with backoff); draining versions re-check on a timer.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import kopf

from worldserve_operator.reconcile import Draining, TenantReconciler, WorldModelReconciler
from worldserve_operator.specs import GROUP, VERSION, SpecError

log = logging.getLogger(__name__)


class Context:
    """The reconcilers this process uses (set by main, replaced in tests)."""

    worldmodels: WorldModelReconciler | None = None
    tenants: TenantReconciler | None = None


def _wm() -> WorldModelReconciler:
    assert Context.worldmodels is not None, "operator not configured"
    return Context.worldmodels


def _tenants() -> TenantReconciler:
    assert Context.tenants is not None, "operator not configured"
    return Context.tenants


@kopf.on.create(GROUP, VERSION, "worldmodels")
@kopf.on.update(GROUP, VERSION, "worldmodels")
@kopf.on.resume(GROUP, VERSION, "worldmodels")
def reconcile_worldmodel(body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
    try:
        status = _wm().reconcile(dict(body))
    except SpecError as exc:
        kopf.exception(body, reason="InvalidSpec", message=str(exc))
        raise kopf.PermanentError(str(exc)) from exc
    patch.status.update(status)
    if status["promotion"] != "ok":
        kopf.warn(body, reason="PromotionBlocked", message=status["promotion"])
    kopf.info(body, reason="Reconciled", message=f"versions ready: {status['summary']}")


@kopf.timer(GROUP, VERSION, "worldmodels", interval=30, initial_delay=30)
def refresh_worldmodel(body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
    """Readiness changes and drain deadlines need no spec change to be acted on."""
    with contextlib.suppress(SpecError):  # already reported by the change handler
        patch.status.update(_wm().reconcile(dict(body)))


@kopf.on.delete(GROUP, VERSION, "worldmodels")
def delete_worldmodel(body: kopf.Body, **_: Any) -> None:
    try:
        _wm().delete(dict(body))
    except Draining as exc:
        kopf.info(body, reason="Draining", message=f"waiting for pinned sessions on "
                  f"{', '.join(exc.labels)}")
        raise kopf.TemporaryError(f"draining {exc.labels}", delay=max(exc.delay, 1.0)) from exc
    except SpecError:
        pass  # an invalid resource never created anything


@kopf.on.create(GROUP, VERSION, "tenants")
@kopf.on.update(GROUP, VERSION, "tenants")
@kopf.on.resume(GROUP, VERSION, "tenants")
async def reconcile_tenant(body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
    try:
        status = await _tenants().reconcile(dict(body))
    except ValueError as exc:
        kopf.exception(body, reason="InvalidSpec", message=str(exc))
        raise kopf.PermanentError(str(exc)) from exc
    patch.status.update(status)


@kopf.timer(GROUP, VERSION, "tenants", interval=60, initial_delay=10)
async def tenant_usage(body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
    """The current period's usage on the resource (kubectl get tenants shows it)."""
    patch.status.update(await _tenants().status(dict(body)))


@kopf.on.delete(GROUP, VERSION, "tenants")
async def delete_tenant(body: kopf.Body, **_: Any) -> None:
    await _tenants().delete(dict(body))

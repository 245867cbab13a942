"""kopf wiring: handlers receive bodies, call the reconcilers, and hand back status patches.

The reconcilers travel in kopf's ``memo`` (``main.operator_memo``): no module state.

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


def _wm(memo: kopf.Memo) -> WorldModelReconciler:
    reconciler: WorldModelReconciler = memo["worldmodels"]
    return reconciler


def _tenants(memo: kopf.Memo) -> TenantReconciler:
    reconciler: TenantReconciler = memo["tenants"]
    return reconciler


def reconcile_worldmodel(body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, **_: Any) -> None:
    try:
        status = _wm(memo).reconcile(dict(body))
    except SpecError as exc:
        kopf.exception(body, reason="InvalidSpec", message=str(exc))
        raise kopf.PermanentError(str(exc)) from exc
    patch.status.update(status)
    if status["promotion"] != "ok":
        kopf.warn(body, reason="PromotionBlocked", message=status["promotion"])
    kopf.info(body, reason="Reconciled", message=f"versions ready: {status['summary']}")


def refresh_worldmodel(body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, **_: Any) -> None:
    """Readiness changes and drain deadlines need no spec change to be acted on."""
    with contextlib.suppress(SpecError):  # already reported by the change handler
        patch.status.update(_wm(memo).reconcile(dict(body)))


def delete_worldmodel(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    try:
        _wm(memo).delete(dict(body))
    except Draining as exc:
        kopf.info(body, reason="Draining", message=f"waiting for pinned sessions on "
                  f"{', '.join(exc.labels)}")
        raise kopf.TemporaryError(f"draining {exc.labels}", delay=max(exc.delay, 1.0)) from exc
    except SpecError:
        pass  # an invalid resource never created anything


async def reconcile_tenant(body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, **_: Any) -> None:
    try:
        status = await _tenants(memo).reconcile(dict(body))
    except ValueError as exc:
        kopf.exception(body, reason="InvalidSpec", message=str(exc))
        raise kopf.PermanentError(str(exc)) from exc
    patch.status.update(status)


async def tenant_usage(body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, **_: Any) -> None:
    """The current period's usage on the resource (kubectl get tenants shows it)."""
    patch.status.update(await _tenants(memo).status(dict(body)))


async def delete_tenant(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    await _tenants(memo).delete(dict(body))


def register(registry: kopf.OperatorRegistry) -> kopf.OperatorRegistry:
    """Register every handler on ``registry`` (kopf's public decorators); returns it."""
    wm, tenants = (GROUP, VERSION, "worldmodels"), (GROUP, VERSION, "tenants")
    for on in (kopf.on.create, kopf.on.update, kopf.on.resume):
        on(*wm, registry=registry)(reconcile_worldmodel)
        on(*tenants, registry=registry)(reconcile_tenant)
    kopf.timer(*wm, interval=30, initial_delay=30, registry=registry)(refresh_worldmodel)
    kopf.on.delete(*wm, registry=registry)(delete_worldmodel)
    kopf.timer(*tenants, interval=60, initial_delay=10, registry=registry)(tenant_usage)
    kopf.on.delete(*tenants, registry=registry)(delete_tenant)
    return registry


register(kopf.get_default_registry())  # what `kopf.operator()` runs in production

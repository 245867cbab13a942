"""Create-or-update and delete of the objects the operator owns (kubernetes client, sync)."""

from __future__ import annotations

from typing import Any, cast

from kubernetes import client
from kubernetes.client.rest import ApiException

KSERVE = ("serving.kserve.io", "v1beta1", "inferenceservices")
LLM = ("serving.kserve.io", "v1alpha2", "llminferenceservices")
Kind = tuple[str, str, str]


class Kube:
    def __init__(self, api: client.ApiClient) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)

    def apply_isvc(self, obj: dict[str, Any], kind: Kind = KSERVE) -> dict[str, Any] | None:
        """Create or patch; returns the object the API server answered with (if any)."""
        meta = obj["metadata"]
        group, version, plural = kind
        try:
            self.custom.get_namespaced_custom_object(group, version, meta["namespace"], plural,
                                                     meta["name"])
        except ApiException as exc:
            if exc.status != 404:
                raise
            return cast(dict[str, Any], self.custom.create_namespaced_custom_object(
                group, version, meta["namespace"], plural, obj))
        return cast(dict[str, Any], self.custom.patch_namespaced_custom_object(
            group, version, meta["namespace"], plural, meta["name"],
            {"metadata": {"labels": meta["labels"], "annotations": meta["annotations"]},
             "spec": obj["spec"]}))

    def get_isvc(self, namespace: str, name: str, kind: Kind = KSERVE
                 ) -> dict[str, Any] | None:
        group, version, plural = kind
        try:
            return cast(dict[str, Any], self.custom.get_namespaced_custom_object(
                group, version, namespace, plural, name))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def delete_isvc(self, namespace: str, name: str, kind: Kind = KSERVE) -> None:
        group, version, plural = kind
        try:
            self.custom.delete_namespaced_custom_object(group, version, namespace, plural, name)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def apply_configmap(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        try:
            self.core.read_namespaced_config_map(meta["name"], meta["namespace"])
        except ApiException as exc:
            if exc.status != 404:
                raise
            self.core.create_namespaced_config_map(meta["namespace"], obj)  # type: ignore[arg-type]
            return
        self.core.patch_namespaced_config_map(meta["name"], meta["namespace"],
                                              {"data": obj["data"]})

    def delete_configmap(self, namespace: str, name: str) -> None:
        try:
            self.core.delete_namespaced_config_map(name, namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def read_configmap_key(self, namespace: str, name: str, key: str) -> str:
        cm = self.core.read_namespaced_config_map(name, namespace)
        return str((cm.data or {})[key])

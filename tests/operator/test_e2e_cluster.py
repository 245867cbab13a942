"""End to end on a real cluster with KServe: install the CRDs, run the operator, apply a
WorldModel, see its InferenceService. Runs only where KUBECONFIG points at such a cluster."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.k8s_schemas import ROOT

KUBECONFIG = os.environ.get("KUBECONFIG", "")
pytestmark = pytest.mark.skipif(
    not KUBECONFIG or not Path(KUBECONFIG).is_file(),
    reason="no Kubernetes cluster: set KUBECONFIG to a cluster with KServe to run the e2e suite "
           "(this machine has no API server, no Docker engine, no kind/k3s)")


def kubectl(*args: str) -> str:
    kubectl_bin = ROOT / ".cache" / "bin" / "kubectl"
    out = subprocess.run([str(kubectl_bin), *args], capture_output=True, text=True, check=True)
    return out.stdout


def test_worldmodel_becomes_an_inference_service(tmp_path: Path) -> None:
    ns = f"wse2e-{int(time.time())}"
    kubectl("create", "namespace", ns)
    kubectl("apply", "-f", str(ROOT / "helm" / "worldserve" / "crds"))
    operator = subprocess.Popen([sys.executable, "-m", "worldserve_operator.main"],
                                env=dict(os.environ, WORLDSERVE_OPERATOR_NAMESPACES=f'["{ns}"]'))
    try:
        manifest = tmp_path / "wm.yaml"
        manifest.write_text(
            "apiVersion: worldserve.io/v1alpha1\nkind: WorldModel\nmetadata: {name: tiny}\n"
            "spec:\n  versions:\n    - {name: v1, storageUri: 'pvc://models/tiny', "
            "runtime: worldserve, resources: {gpus: 0, cpu: '1', memory: 2Gi}}\n"
            "  aliases: {stable: v1}\n  drainSeconds: 0\n")
        kubectl("-n", ns, "apply", "-f", str(manifest))
        deadline = time.monotonic() + 120
        while "tiny-v1" not in kubectl("-n", ns, "get", "inferenceservices", "-o", "name"):
            assert time.monotonic() < deadline, "no InferenceService after 120 s"
            time.sleep(2)
        kubectl("-n", ns, "delete", "worldmodel", "tiny", "--wait=true", "--timeout=120s")
    finally:
        operator.terminate()
        operator.wait(30)
        kubectl("delete", "namespace", ns, "--wait=false")

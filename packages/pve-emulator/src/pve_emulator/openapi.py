"""OpenAPI 3.1 document generated from the compiled schema (built on first request, then cached)."""

from __future__ import annotations

import re
from typing import Any

from pve_emulator.schema import INDEX, ApiSchema, Operation
from pve_emulator.validation import coerce_value, python_regex

_KEEP = ("type", "enum", "minimum", "maximum", "maxLength", "minLength")
_JSON_TYPES = {"string", "integer", "number", "boolean", "array", "object", "null"}
#: Operations that answer 500 where Proxmox VE does, with Proxmox's message (see docs/emulator.md).
PROXMOX_500 = {
    "GET /nodes/{node}/qemu/{vmid}/agent/network-get-interfaces": "the VM is not running or has no guest "
    "agent configured (Proxmox VE answers 500)",
    "GET /nodes/{node}/lxc/{vmid}/interfaces": "the container is not running (Proxmox VE answers 500)",
}
_AGENT_500 = (
    "the VM is not running, has no guest agent configured or running, or the agent refused the command "
    "(Proxmox VE answers 500)"
)
_RRD_500 = "no RRD file for the object, or an unknown data source (Proxmox VE answers 500)"


def proxmox_500(op: Operation) -> str | None:
    """Why an operation may answer 500 as Proxmox VE does (None: it never should)."""
    if op.key in PROXMOX_500:
        return PROXMOX_500[op.key]
    if (
        op.path.startswith("/nodes/{node}/qemu/{vmid}/agent")
        and op.key != "GET /nodes/{node}/qemu/{vmid}/agent"
    ):
        return _AGENT_500
    if op.method == "GET" and op.path.endswith(("/rrd", "/rrddata")):
        return _RRD_500
    return None


def _default(spec: dict[str, Any]) -> Any:
    """The schema's default if the emulator would accept it as a value (Proxmox also writes prose there,
    such as "same as user"), as a JSON value of the declared type; ``...`` otherwise."""
    try:
        value = coerce_value(spec, spec["default"])
    except (ValueError, TypeError):
        return ...
    return bool(value) if spec.get("type") == "boolean" else value


def _json_schema(spec: dict[str, Any], depth: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {k: spec[k] for k in _KEEP if k in spec}
    kind = spec.get("type")
    if kind not in _JSON_TYPES:
        out.pop("type", None)  # Proxmox's "any" (and no type at all) is JSON Schema's empty schema
    if kind == "boolean":
        out["type"] = "boolean"
        out.pop("enum", None)
    if "default" in spec and (default := _default(spec)) is not ...:
        out["default"] = default
    if isinstance(spec.get("format"), str):
        out["format"] = spec["format"]
    if "pattern" in spec:
        # Proxmox matches the whole value (`m/^$pattern$/`); JSON Schema patterns match anywhere.
        out["pattern"] = f"^(?:{python_regex(str(spec['pattern']))})$"
    if kind == "array" and isinstance(spec.get("items"), dict) and depth < 6:
        out["items"] = _json_schema(spec["items"], depth + 1)
    if kind == "object" and isinstance(spec.get("properties"), dict) and depth < 6:
        out["properties"] = {k: _json_schema(v, depth + 1) for k, v in spec["properties"].items()}
        required = [k for k, v in spec["properties"].items() if not v.get("optional")]
        if required:
            out["required"] = required
    return out


def _operation(op: Operation) -> dict[str, Any]:
    parameters: list[dict[str, Any]] = []
    body_props: dict[str, Any] = {}
    indexed: dict[str, Any] = {}
    required: list[str] = []
    for name, spec in op.params.items():
        schema = _json_schema(spec)
        if name.endswith("[n]"):  # net0, net1, ...: the schema's `net[n]` is not itself a parameter
            indexed[f"^{re.escape(name[:-3])}{INDEX}$"] = schema
        elif name in op.path_params:
            parameters.append({"name": name, "in": "path", "required": True, "schema": schema})
        elif op.method in ("GET", "DELETE"):
            parameters.append(
                {"name": name, "in": "query", "required": not spec.get("optional"), "schema": schema}
            )
        else:
            body_props[name] = schema
            if not spec.get("optional") and not name.endswith("[n]"):
                required.append(name)
    tag = op.path.strip("/").split("/")[0] or "root"
    out: dict[str, Any] = {
        "operationId": f"{op.method.lower()}_{re.sub(r'[^a-zA-Z0-9]+', '_', op.path).strip('_')}",
        "summary": f"{op.name} ({op.method} {op.path})",
        "tags": [tag],
        "parameters": parameters,
        "responses": {
            "200": {
                "description": "success",
                "content": {
                    "application/json": {
                        "schema": {"type": "object", "properties": {"data": _json_schema(op.returns)}}
                    }
                },
            },
            "400": {"description": "invalid parameters"},
            "401": {"description": "missing or invalid authentication"},
            "403": {"description": "insufficient permissions"},
            "404": {"description": "resource does not exist"},
        },
    }
    if (why := proxmox_500(op)) is not None:
        out["responses"]["500"] = {"description": why}
    if op.path.startswith("/nodes/{node}/"):
        out["responses"]["595"] = {"description": "the node is offline (Proxmox VE's 'no route to host')"}
    if body_props or indexed:
        body_schema: dict[str, Any] = {"type": "object", "properties": body_props}
        if indexed:
            body_schema["patternProperties"] = indexed
        if not op.additional_params:
            body_schema["additionalProperties"] = False
        if required:
            body_schema["required"] = required
        out["requestBody"] = {
            "content": {
                "application/json": {"schema": body_schema},
                "application/x-www-form-urlencoded": {"schema": body_schema},
            }
        }
    if op.permissions and op.permissions.get("user") == "world":
        out["security"] = []
    return out


def build(schema: ApiSchema) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for op in schema.operations:
        paths.setdefault("/api2/json" + op.path, {})[op.method.lower()] = _operation(op)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Proxmox VE API emulator",
            "version": schema.release,
            "description": f"{len(schema.operations)} operations compiled from {schema.source}. Every operation "
            "is also served at the bare path without /api2/json.",
        },
        "servers": [{"url": "/"}],
        "components": {
            "securitySchemes": {
                "PVEAPIToken": {"type": "apiKey", "in": "header", "name": "Authorization"},
                "PVEAuthCookie": {"type": "apiKey", "in": "cookie", "name": "PVEAuthCookie"},
            }
        },
        "security": [{"PVEAPIToken": []}, {"PVEAuthCookie": []}],
        "paths": paths,
    }


# The pages load their assets from the emulator itself (``/docs-static/``, see ``docs_assets``), never from
# a CDN: they must work on a machine without internet. ``validatorUrl: null`` keeps Swagger UI from
# asking validator.swagger.io to check the document.
SWAGGER_HTML = """<!doctype html><html><head><title>Proxmox VE API emulator</title>
<link rel="icon" type="image/png" href="/docs-static/favicon.png">
<link rel="stylesheet" href="/docs-static/swagger-ui.css"></head>
<body><div id="swagger-ui"></div>
<script src="/docs-static/swagger-ui-bundle.js"></script>
<script>SwaggerUIBundle({url: "/openapi.json", dom_id: "#swagger-ui", validatorUrl: null});</script>
</body></html>"""

REDOC_HTML = """<!doctype html><html><head><title>Proxmox VE API emulator</title>
<link rel="icon" type="image/png" href="/docs-static/favicon.png"></head>
<body><redoc spec-url="/openapi.json"></redoc>
<script src="/docs-static/redoc.standalone.js"></script></body></html>"""

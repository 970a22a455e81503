"""A JSON value checked against a schema of an OpenAPI 3.1 document (the subset of JSON Schema that pydantic and
FastAPI write: $ref, anyOf, const, enum, type, properties, required, additionalProperties, items, the numeric and
length bounds), for the tests that hold `sentune serve`'s answers to its served /openapi.json; jsonschema is not one
of sentune's dependencies."""

from __future__ import annotations

TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}
KNOWN = {"$ref", "anyOf", "const", "enum", "type", "properties", "required", "additionalProperties", "items", "minimum", "maximum"}
KNOWN |= {"exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems", "minLength", "maxLength", "title", "description", "default"}


def problems(value, schema: dict, document: dict, where: str = "$") -> list[str]:
    """What in `value` does not fit `schema` (empty: it fits); `document`: the OpenAPI document its $refs point into."""
    unknown = set(schema) - KNOWN
    assert not unknown, f"{where}: the schema uses {sorted(unknown)}, which this check does not read"
    if "$ref" in schema:
        target = document
        for part in schema["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        return problems(value, target, document, where)
    if "anyOf" in schema:
        found = [problems(value, option, document, where) for option in schema["anyOf"]]
        return [] if any(not f for f in found) else [f"{where}: fits none of anyOf ({'; '.join(f[0] for f in found)})"]
    if "const" in schema and value != schema["const"]:
        return [f"{where}: {value!r} is not {schema['const']!r}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{where}: {value!r} is not one of {schema['enum']}"]
    kinds = schema.get("type")
    if kinds is not None and not any(TYPES[kind](value) for kind in ([kinds] if isinstance(kinds, str) else kinds)):
        return [f"{where}: {type(value).__name__} {str(value)[:60]!r} is not {kinds}"]
    found: list[str] = []
    if isinstance(value, dict):
        found += [f"{where}: {name!r} is missing" for name in schema.get("required", []) if name not in value]
        properties, extra = schema.get("properties", {}), schema.get("additionalProperties", True)
        for name, item in value.items():
            if name in properties:
                found += problems(item, properties[name], document, f"{where}.{name}")
            elif extra is False:
                found.append(f"{where}: {name!r} is not in the schema")
            elif isinstance(extra, dict):
                found += problems(item, extra, document, f"{where}.{name}")
    if isinstance(value, list):
        if "items" in schema:
            for i, item in enumerate(value):
                found += problems(item, schema["items"], document, f"{where}[{i}]")
        if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems", len(value)):
            found.append(f"{where}: {len(value)} items, out of the schema's bounds")
    if TYPES["number"](value):
        low, high = schema.get("minimum"), schema.get("maximum")
        if (low is not None and value < low) or (high is not None and value > high):
            found.append(f"{where}: {value} is out of [{low}, {high}]")
    return found


def answer_problems(document: dict, path: str, method: str, status: int, answer) -> list[str]:
    """What in a JSON `answer` of `method path` with `status` does not fit what `document` says that answer is."""
    responses = document["paths"][path][method.lower()]["responses"]
    assert str(status) in responses, f"{method} {path}: status {status} is not in the schema ({sorted(responses)})"
    schema = responses[str(status)]["content"]["application/json"]["schema"]
    return problems(answer, schema, document)

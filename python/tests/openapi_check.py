"""A small validator for the OpenAPI 3.0 schemas of docs/openapi.json.

It knows what that document uses: $ref (to #/components/...), type
(object, array, string, integer, number, boolean), nullable, enum,
properties, required, additionalProperties (false, or a schema for the
values of keys not in properties), items, oneOf, allOf, minimum,
maximum, maxLength and the formats date-time and byte. Anything else in
a schema is a description and is ignored. Standard library only.

    errors = validate(doc, doc["components"]["schemas"]["Job"], value)
    # [] when VALUE fits; else one "path: what is wrong" line per problem
"""

import base64
import binascii
import re

_DATE_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")


def resolve(doc, schema):
    """SCHEMA with its $ref followed (within DOC), as often as needed."""
    seen = 0
    while "$ref" in schema:
        target = schema["$ref"]
        if not target.startswith("#/"):
            raise ValueError(f"$ref {target}: only #/... is supported")
        schema = doc
        for part in target[2:].split("/"):
            schema = schema[part.replace("~1", "/").replace("~0", "~")]
        seen += 1
        if seen > 64:
            raise ValueError(f"$ref {target}: a loop")
    return schema


def _type_ok(kind, value):
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    raise ValueError(f"unknown type {kind!r}")


def validate(doc, schema, value, path="$"):
    """Every way VALUE breaks SCHEMA, as "path: reason" lines ([]: none)."""
    schema = resolve(doc, schema)
    if value is None:
        return [] if schema.get("nullable") else [f"{path}: null, but it is "
                                                  "not nullable"]
    errors = []
    for part in schema.get("allOf", ()):
        errors += validate(doc, part, value, path)
    if "oneOf" in schema:
        fits = [i for i, part in enumerate(schema["oneOf"])
                if not validate(doc, part, value, path)]
        if len(fits) != 1:
            errors.append(f"{path}: fits {len(fits)} of the oneOf schemas, "
                          "not exactly 1")
    kind = schema.get("type")
    if kind is not None and not _type_ok(kind, value):
        return errors + [f"{path}: expected {kind}, got "
                         f"{type(value).__name__} {value!r:.60}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{path}: {value} is below {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{path}: {value} is above {schema['maximum']}")
    if isinstance(value, str):
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(f"{path}: longer than {schema['maxLength']}")
        fmt = schema.get("format")
        if fmt == "date-time" and not _DATE_TIME.match(value):
            errors.append(f"{path}: {value!r} is not an RFC 3339 time")
        if fmt == "byte":
            try:
                base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                errors.append(f"{path}: not base64")
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value:
                errors.append(f"{path}: lacks the required field '{name}'")
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            where = f"{path}.{name}"
            if name in properties:
                errors += validate(doc, properties[name], item, where)
            elif extra is False:
                errors.append(f"{where}: not a field of this object")
            elif isinstance(extra, dict):
                errors += validate(doc, extra, item, where)
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            errors += validate(doc, schema["items"], item, f"{path}[{index}]")
    return errors


def response_schema(doc, method, path, status):
    """The JSON schema DOC gives the answer of METHOD PATH (a template such
    as /api/v1/jobs/{id}) with STATUS, or None when it gives none."""
    operation = doc["paths"][path][method.lower()]
    response = operation["responses"].get(str(status))
    if response is None:
        return None
    response = resolve(doc, response)
    content = response.get("content", {}).get("application/json")
    return None if content is None else content.get("schema")

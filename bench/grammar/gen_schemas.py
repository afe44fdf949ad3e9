"""Writes bench/grammar/schemas.jsonl: the JSON Schemas of `llmk bench grammar`, one a line.

Written for this project (no third-party schemas): a seeded random composition over every keyword
llmk supports (type and type lists, properties / required / additionalProperties, enum, const,
anyOf, allOf of one, $ref / $defs with recursion, items / minItems / maxItems, pattern, minLength /
maxLength, the eight formats, minimum / maximum / exclusive bounds, integer multipleOf 1), shaped
like the API-response, tool-argument and config schemas apps send. Deterministic: the same file
every run. Usage: python3 bench/grammar/gen_schemas.py [N]"""
import json
import random
import sys
from pathlib import Path

FORMATS = ["date-time", "date", "time", "email", "uuid", "ipv4", "ipv6", "uri"]
PATTERNS = ["^[A-Z]{2,3}-[0-9]{2,6}$", "^[a-z_][a-z0-9_]{0,15}$", "^\\+?[0-9]{7,12}$", "^(red|green|blue)$",
            "^[0-9a-f]{6}$", "^v[0-9]+\\.[0-9]+(\\.[0-9]+)?$"]
WORDS = ["id", "name", "title", "count", "price", "email", "tags", "items", "created", "status", "owner",
         "score", "url", "address", "city", "zip", "note", "enabled", "kind", "level", "children", "meta",
         "version", "color", "phone", "start", "end", "ratio", "limit", "query"]


def scalar(r, depth):
    k = r.randrange(14)
    if k == 0:
        return {"type": "string"}
    if k == 1:
        lo = r.randrange(0, 4)
        return {"type": "string", "minLength": lo, "maxLength": lo + r.randrange(1, 24)}
    if k == 2:
        return {"type": "string", "format": r.choice(FORMATS)}
    if k == 3:
        return {"type": "string", "pattern": r.choice(PATTERNS)}
    if k == 4:
        return {"type": "integer"}
    if k == 5:
        lo = r.randrange(-100, 100)
        return {"type": "integer", "minimum": lo, "maximum": lo + r.randrange(0, 100000)}
    if k == 6:
        return {"type": "integer", "exclusiveMinimum": r.randrange(-5, 5), "multipleOf": 1}
    if k == 7:
        return {"type": "number"}
    if k == 8:
        return {"type": "number", "minimum": 0, "maximum": r.choice([1, 100, 1000])}
    if k == 9:
        return {"type": "boolean"}
    if k == 10:
        return {"enum": r.sample(["a", "b", "c", "low", "high", 1, 2, None, True], r.randrange(1, 5))}
    if k == 11:
        return {"const": r.choice(["v1", 42, False])}
    if k == 12:
        return {"type": [r.choice(["string", "integer", "number", "boolean"]), "null"]}
    return {"anyOf": [scalar(r, depth + 1), {"type": "null"}]}


def value(r, depth):
    k = r.randrange(10)
    if depth < 3 and k < 3:
        return obj(r, depth + 1)
    if depth < 3 and k < 5:
        a = {"type": "array", "items": value(r, depth + 1)}
        if r.random() < 0.6:
            a["minItems"] = r.randrange(0, 3)
            a["maxItems"] = a["minItems"] + r.randrange(0, 6)
        return a
    return scalar(r, depth)


def obj(r, depth):
    n = r.randrange(1, 7)
    names = r.sample(WORDS, n)
    props = {p: value(r, depth) for p in names}
    o = {"type": "object", "properties": props, "additionalProperties": False}
    req = [p for p in names if r.random() < 0.7]
    if r.random() < 0.5:  # OpenAI strict mode: every property required
        req = names
    if req:
        o["required"] = req
    if r.random() < 0.3:
        o["description"] = "generated"
    return o


def schema(r, i):
    kind = i % 10
    if kind == 0:  # recursion through $defs
        return {"$defs": {"node": {"type": "object", "properties": {
            "value": scalar(r, 1), "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 3}},
            "required": ["value", "children"], "additionalProperties": False}},
            "$ref": "#/$defs/node"}
    if kind == 1:  # a shared definition used twice
        d = obj(r, 2)
        return {"type": "object", "$defs": {"part": d},
                "properties": {"a": {"$ref": "#/$defs/part"}, "b": {"allOf": [{"$ref": "#/$defs/part"}]}},
                "required": ["a"], "additionalProperties": False}
    if kind == 2:  # tool-call arguments: a union of objects
        return {"anyOf": [obj(r, 2), obj(r, 2)]}
    if kind == 3:  # a map
        return {"type": "object", "additionalProperties": scalar(r, 1)}
    return obj(r, 0)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    r = random.Random(41)
    out = Path(__file__).with_name("schemas.jsonl")
    with out.open("w") as f:
        for i in range(n):
            f.write(json.dumps(schema(r, i), separators=(",", ":")) + "\n")
    print(f"wrote {n} schemas to {out}")


if __name__ == "__main__":
    main()

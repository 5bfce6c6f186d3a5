"""MkDocs hook: the references that are generated from the code when the site is built.

A page that holds one of the markers below gets it replaced, so the page cannot drift
from the code:

* ``<!-- generated: openapi -->`` — every operation and schema of the OpenAPI document of
  ``app.main.create_app()`` (the document the service serves at ``/openapi.json``, which
  the build also publishes next to the page as ``openapi.json``);
* ``<!-- generated: settings -->`` — every field of ``app.core.config.Settings``: its
  environment variable, type, default, allowed range and description;
* ``<!-- generated: cli -->`` — the ``--help`` of ``privrank`` and of each of its
  commands (``app.cli.build_parser()``).

``settings_table`` refuses a field without a description, so a setting cannot be added
without saying what it does (``tests/test_docs_site.py`` checks it without building).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

OPENAPI_MARKER = "<!-- generated: openapi -->"
SETTINGS_MARKER = "<!-- generated: settings -->"
CLI_MARKER = "<!-- generated: cli -->"
HTTP_METHODS = ("get", "post", "put", "patch", "delete")


def _cell(text: object) -> str:
    """One Markdown table cell: one line, pipes escaped."""
    return re.sub(r"\s*\n\s*", " ", str(text)).replace("|", "\\|").strip()


# -- configuration ---------------------------------------------------------------------


def _env_name(name: str, field: Any, prefix: str) -> str:
    alias = field.validation_alias
    if isinstance(alias, str):
        return alias
    if alias is not None and hasattr(alias, "choices"):
        return " or ".join(str(c) for c in alias.choices)
    return (prefix + name).upper()


def _default(field: Any) -> str:
    value = field.default_factory() if field.default_factory is not None else field.default
    if value is None:
        return "unset"
    if value == "":
        return "empty"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    return f"`{value}`"


def _range(field: Any) -> str:
    bounds = []
    for meta in field.metadata:
        for attr, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            if getattr(meta, attr, None) is not None:
                bounds.append(f"{sign} {getattr(meta, attr)}")
    return ", ".join(bounds)


def _type(annotation: Any) -> str:
    text = getattr(annotation, "__name__", None) if isinstance(annotation, type) else None
    text = text or str(annotation).replace("typing.", "")
    return text.replace("NoneType", "None").replace(" | ", " or ")


def settings_rows(settings_cls: Any) -> list[dict[str, str]]:
    """One row per field of ``settings_cls``; ValueError names the fields without a description."""
    prefix = settings_cls.model_config.get("env_prefix", "") or ""
    rows, missing = [], []
    for name, field in settings_cls.model_fields.items():
        description = (field.description or "").strip()
        if not description:
            missing.append(name)
        rows.append(
            {
                "field": name,
                "env": _env_name(name, field, prefix),
                "type": _type(field.annotation),
                "default": _default(field),
                "range": _range(field),
                "description": description,
            }
        )
    if missing:
        raise ValueError(f"settings without a description: {', '.join(missing)}")
    return rows


def settings_table(settings_cls: Any = None) -> str:
    """The configuration reference: a Markdown table of every setting."""
    if settings_cls is None:
        from app.core.config import Settings

        settings_cls = Settings
    lines = [
        "| environment variable | type | default | allowed | meaning |",
        "|---|---|---|---|---|",
    ]
    for row in settings_rows(settings_cls):
        lines.append(
            f"| `{row['env']}` | `{_cell(row['type'])}` | {_cell(row['default'])} | "
            f"{_cell(row['range']) or '—'} | {_cell(row['description'])} |"
        )
    return "\n".join(lines)


# -- the REST API ----------------------------------------------------------------------


@cache
def openapi_document() -> dict:
    """The OpenAPI document the service serves, from ``create_app()`` on a throwaway database."""
    from app.core.config import Settings
    from app.main import create_app

    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(database_url=f"sqlite:///{Path(tmp) / 'openapi.db'}")
        return create_app(settings).openapi()


def _schema_anchor(name: str) -> str:
    return "schema-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _type_of(schema: dict | None) -> str:
    """A schema in a few words, with links to the named schemas."""
    if not schema:
        return "any"
    if "$ref" in schema:
        name = _ref_name(schema["$ref"])
        return f"[{name}](#{_schema_anchor(name)})"
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return " or ".join(_type_of(s) for s in schema[key])
    if "const" in schema:
        return f"`{json.dumps(schema['const'], ensure_ascii=False)}`"
    if "enum" in schema:
        return "one of " + ", ".join(f"`{json.dumps(v, ensure_ascii=False)}`" for v in schema["enum"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {_type_of(schema.get('items'))}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"object of {_type_of(schema['additionalProperties'])}"
    if kind == "null":
        return "null"
    fmt = schema.get("format")
    return f"{kind} ({fmt})" if fmt else str(kind)


def _constraints(schema: dict) -> str:
    words = []
    for key, sign in (
        ("minimum", "≥"),
        ("exclusiveMinimum", ">"),
        ("maximum", "≤"),
        ("exclusiveMaximum", "<"),
    ):
        if key in schema:
            words.append(f"{sign} {schema[key]}")
    for key, word in (("minLength", "length ≥"), ("maxLength", "length ≤")):
        if key in schema:
            words.append(f"{word} {schema[key]}")
    for key, word in (("minItems", "items ≥"), ("maxItems", "items ≤")):
        if key in schema:
            words.append(f"{word} {schema[key]}")
    if "default" in schema:
        words.append(f"default `{json.dumps(schema['default'], ensure_ascii=False)}`")
    return ", ".join(words)


def _operation(method: str, path: str, op: dict) -> list[str]:
    out = [f"### `{method.upper()} {path}`", ""]
    if op.get("summary"):
        out += [f"**{op['summary'].strip()}**", ""]
    if op.get("description"):
        out += [op["description"].strip(), ""]
    params = op.get("parameters", [])
    if params:
        out += ["| parameter | in | type | required | description |", "|---|---|---|---|---|"]
        for p in params:
            schema = p.get("schema", {})
            extra = _constraints(schema)
            desc = _cell(p.get("description", "") or schema.get("description", ""))
            if extra:
                desc = f"{desc} ({extra})" if desc else extra
            out.append(
                f"| `{p['name']}` | {p['in']} | {_cell(_type_of(schema))} | "
                f"{'yes' if p.get('required') else 'no'} | {desc} |"
            )
        out.append("")
    body = op.get("requestBody")
    if body:
        required = " (required)" if body.get("required") else ""
        kinds = ", ".join(
            f"`{media}`: {_type_of(content.get('schema'))}"
            for media, content in body.get("content", {}).items()
        )
        out += [f"Request body{required}: {kinds}", ""]
    responses = op.get("responses", {})
    if responses:
        out += ["| status | description | body |", "|---|---|---|"]
        for status, response in responses.items():
            content = response.get("content", {})
            kinds = "; ".join(
                f"`{media}` {_type_of(c.get('schema'))}" if c.get("schema") else f"`{media}`"
                for media, c in content.items()
            )
            out.append(f"| {status} | {_cell(response.get('description', ''))} | {_cell(kinds) or '—'} |")
        out.append("")
    return out


def _schema(name: str, schema: dict) -> list[str]:
    out = [f"### {name} {{#{_schema_anchor(name)}}}", ""]
    if schema.get("description"):
        out += [schema["description"].strip(), ""]
    props = schema.get("properties")
    if props:
        required = set(schema.get("required", []))
        out += ["| field | type | required | description |", "|---|---|---|---|"]
        for field, sub in props.items():
            desc = _cell(sub.get("description", ""))
            extra = _constraints(sub)
            if extra:
                desc = f"{desc} ({extra})" if desc else extra
            out.append(
                f"| `{field}` | {_cell(_type_of(sub))} | {'yes' if field in required else 'no'} | {desc} |"
            )
        out.append("")
    elif "enum" in schema or "type" in schema:
        out += [f"Type: {_type_of(schema)}", ""]
    return out


def openapi_markdown(doc: dict | None = None) -> str:
    """Every operation (grouped by tag, in the document's order) and every schema."""
    doc = doc or openapi_document()
    groups: dict[str, list[tuple[str, str, dict]]] = {}
    for path, item in doc.get("paths", {}).items():
        for method in HTTP_METHODS:
            if method in item:
                op = item[method]
                groups.setdefault((op.get("tags") or ["other"])[0], []).append((method, path, op))
    described = {t["name"]: t.get("description", "") for t in doc.get("tags", [])}
    order = [t for t in described if t in groups] + [t for t in groups if t not in described]
    out = [f"OpenAPI {doc.get('openapi', '')}, privrank {doc.get('info', {}).get('version', '')}.", ""]
    for tag in order:
        out += [f"## {tag.capitalize()}", ""]
        if described.get(tag):
            out += [described[tag], ""]
        for method, path, op in groups[tag]:
            out += _operation(method, path, op)
    out += ["## Schemas", ""]
    for name, schema in sorted(doc.get("components", {}).get("schemas", {}).items()):
        out += _schema(name, schema)
    return "\n".join(out)


# -- the command line ------------------------------------------------------------------


def _commands(parser: Any, name: str) -> list[tuple[str, Any]]:
    """``parser`` and its subcommands, depth first, each with its full name."""
    import argparse

    found = [(name, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, subparser in action.choices.items():
                found += _commands(subparser, f"{name} {sub}")
    return found


def cli_markdown() -> str:
    """The help of ``privrank`` and of every subcommand, as the command prints it."""
    from app.cli import build_parser

    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal: the same width on every build
    try:
        out = []
        for name, parser in _commands(build_parser(), "privrank"):
            parser.prog = name
            out += [f"## `{name}`", "", "```text", parser.format_help().rstrip(), "```", ""]
        return "\n".join(out)
    finally:
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns


# -- MkDocs events ---------------------------------------------------------------------


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if SETTINGS_MARKER in markdown:
        markdown = markdown.replace(SETTINGS_MARKER, settings_table())
    if OPENAPI_MARKER in markdown:
        markdown = markdown.replace(OPENAPI_MARKER, openapi_markdown())
    if CLI_MARKER in markdown:
        markdown = markdown.replace(CLI_MARKER, cli_markdown())
    return markdown


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    document = json.dumps(openapi_document(), indent=2, ensure_ascii=False)
    files.append(File.generated(config, "reference/openapi.json", content=document))
    return files

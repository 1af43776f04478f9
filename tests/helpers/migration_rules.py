"""Expand-then-contract (docs/UPGRADES.md): a migration of release N must leave release N-1's
code working, because during a rolling upgrade N-1's services run on N's schema. So a migration
newer than the previous release's last one may only expand (add tables, nullable columns or
columns with a default, indexes, enum values, grants, replace a function or a trigger); an
operation that takes away or changes what old code reads or writes is a contract step, allowed
only in a migration that says so with a reason, on a line of its own:

    -- contract: <why no running release still needs it>

`contract_operations` names the contract steps of one migration's SQL (pure: text in, list out).
"""

from __future__ import annotations

import re

CONTRACT_MARK = re.compile(r"^[ \t]*--[ \t]*contract:[ \t]*(\S.{9,})$", re.I | re.M)

_DOLLAR_BODY = re.compile(r"\$(\w*)\$.*?\$\1\$", re.S)
_STRING = re.compile(r"'(?:[^']|'')*'")
_LINE_COMMENT = re.compile(r"--[^\n]*")
_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_NAME = r'(?:IF\s+EXISTS\s+)?([\w."]+)'
_REPLACEABLE = ("TRIGGER", "FUNCTION", "PROCEDURE", "VIEW", "INDEX", "POLICY")
_DROP_OBJECT = re.compile(
    r"\bDROP\s+(TABLE|MATERIALIZED\s+VIEW|VIEW|TYPE|FUNCTION|PROCEDURE|INDEX(?:\s+CONCURRENTLY)?"
    r"|TRIGGER|SCHEMA|SEQUENCE|DOMAIN|POLICY|RULE|EXTENSION)\s+" + _NAME, re.I)
_ALTER_TABLE = re.compile(r"^\s*ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?:ONLY\s+)?([\w.\"]+)", re.I)
_ALTER_DROP = re.compile(
    r"\bDROP\s+(?:(CONSTRAINT|DEFAULT|NOT\s+NULL|IDENTITY|EXPRESSION)\b|(?:COLUMN\s+)?"
    + _NAME + ")", re.I)
_RENAME = re.compile(r"\bRENAME\b", re.I)
_TYPE_CHANGE = re.compile(r"\bALTER\s+(?:COLUMN\s+)?[\w\"]+\s+(?:SET\s+DATA\s+)?TYPE\b", re.I)
_SET_NOT_NULL = re.compile(r"\bALTER\s+(?:COLUMN\s+)?([\w\"]+)\s+SET\s+NOT\s+NULL\b", re.I)
_SET_DEFAULT = r"\bALTER\s+(?:COLUMN\s+)?{col}\s+SET\s+DEFAULT\b"
_ADD_COLUMN = re.compile(r"\bADD\s+(?:COLUMN\s+)?(?:IF\s+NOT\s+EXISTS\s+)?([\w\"]+)\s+([^,]*)",
                         re.I)
_ADD_CONSTRAINT = re.compile(r"\bADD\s+CONSTRAINT\b", re.I)
_CREATE_TABLE = re.compile(r"^\s*CREATE\s+(?:UNLOGGED\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?"
                           r"([\w.\"]+)", re.I)


def code_of(sql: str) -> str:
    """The SQL without comments, string literals and dollar-quoted bodies (a function's body
    may say DROP or RENAME about its own variables)."""
    sql = _BLOCK_COMMENT.sub(" ", sql)
    sql = _LINE_COMMENT.sub(" ", sql)
    sql = _DOLLAR_BODY.sub("$$ $$", sql)
    return _STRING.sub("''", sql)


def _bare(name: str) -> str:
    return name.replace('"', "").split(".")[-1].lower()


def contract_operations(sql: str) -> list[str]:
    """Every contract step in `sql` (an empty list: expand-only), each described."""
    code = code_of(sql)
    statements = [s.strip() for s in code.split(";") if s.strip()]
    created = {_bare(m.group(1)) for s in statements if (m := _CREATE_TABLE.match(s))}
    found: list[str] = []
    for i, stmt in enumerate(statements):
        flat = " ".join(stmt.split())
        for m in _DROP_OBJECT.finditer(flat):
            kind, name = " ".join(m.group(1).upper().split()[:2]), _bare(m.group(2))
            later = " ".join(statements[i + 1:])
            replaced = kind.split()[0] in _REPLACEABLE and re.search(
                rf"\bCREATE\s+(?:OR\s+REPLACE\s+)?(?:UNIQUE\s+)?(?:CONSTRAINT\s+)?"
                rf"{kind.split()[0]}\s+(?:CONCURRENTLY\s+)?(?:IF\s+NOT\s+EXISTS\s+)?"
                rf"(?:[\w\"]+\.)?\"?{re.escape(name)}\b", later, re.I)
            if not replaced:
                found.append(f"DROP {kind} {name}: {flat[:80]}")
        if _RENAME.search(flat):
            found.append(f"RENAME: {flat[:80]}")
        if _TYPE_CHANGE.search(flat):
            found.append(f"ALTER ... TYPE: {flat[:80]}")
        altered = _ALTER_TABLE.match(flat)
        if not altered:
            continue
        table = _bare(altered.group(1))
        if table in created:
            continue  # a table this very migration creates: nothing old reads it
        for m in _ALTER_DROP.finditer(flat):
            what = (m.group(1) or "").upper()
            if what.startswith("NOT"):
                continue  # DROP NOT NULL relaxes what writers may leave out
            found.append(f"DROP {what or 'COLUMN ' + _bare(m.group(2))} on {table}: {flat[:80]}")
        for m in _SET_NOT_NULL.finditer(flat):
            col = m.group(1)
            if not re.search(_SET_DEFAULT.format(col=re.escape(col)), code, re.I):
                found.append(f"SET NOT NULL without a default on {table}.{_bare(col)}")
        for m in _ADD_COLUMN.finditer(flat):
            if _bare(m.group(1)) == "constraint":
                continue
            spec = m.group(2).upper()
            if re.search(r"\bNOT\s+NULL\b", spec) and not re.search(
                    r"\bDEFAULT\b|\bGENERATED\b", spec):
                found.append(f"ADD COLUMN {_bare(m.group(1))} NOT NULL without a default on "
                             f"{table}")
        if _ADD_CONSTRAINT.search(flat):
            found.append(f"ADD CONSTRAINT on {table} (rows old code writes may break it): "
                         f"{flat[:80]}")
    return found


def contract_reason(sql: str) -> str | None:
    """The reason a migration gives for being a contract step, if it is marked as one."""
    m = CONTRACT_MARK.search(sql)
    return m.group(1).strip() if m else None


def refusals(name: str, sql: str) -> list[str]:
    """What is wrong with migration `name` under the rule: its contract steps, unless it is
    marked as a contract step with a reason."""
    if contract_reason(sql):
        return []
    return [f"{name}: {op}" for op in contract_operations(sql)]


# A positional read (`SELECT *` or `SELECT t.*` into a row type, libs/ostinato/stores/rows.py)
# takes every column the table has, so a column added under a running release shifts or
# overflows its rows: `added_to_star_tables` finds the tables the previous release reads so.
# Queries named `snapshot_*` (the rebuild-equality check reads them into dicts) are left out.
_NAMED = re.compile(r"^--\s*name:\s*(\S+)", re.M)
_STAR = re.compile(r"\bSELECT\s+(?:DISTINCT\s+)?(?:(\w+)\.)?\*\s*(?:,[^;]*?)?\bFROM\b(.*?)"
                   r"(?:\bWHERE\b|\bORDER\b|\bGROUP\b|\bLIMIT\b|\bUNION\b|;|\)|$)", re.I | re.S)
_FROM_ITEM = re.compile(r"(?:\bFROM|\bJOIN|,)\s+(?:ONLY\s+)?([\w.\"]+)(?:\s+(?:AS\s+)?(\w+))?",
                        re.I)
_NOT_ALIAS = {"on", "where", "join", "left", "right", "inner", "cross", "full", "using",
              "order", "group", "limit", "for", "natural", "lateral"}


def star_read_tables(sql: str) -> set[str]:
    """The tables `sql` (a query file) reads with `SELECT *` or `SELECT alias.*`, outside
    queries named `snapshot_*`."""
    parts = _NAMED.split(sql)
    chunks = [parts[0]] + [body for name, body in zip(parts[1::2], parts[2::2], strict=True)
                           if not name.startswith("snapshot_")]
    tables: set[str] = set()
    for chunk in chunks:
        code = code_of(chunk)
        for m in _STAR.finditer(code):
            alias, source = m.group(1), "FROM " + m.group(2)
            items = [(_bare(t), (a or "").lower()) for t, a in _FROM_ITEM.findall(source)]
            items = [(t, a if a not in _NOT_ALIAS else "") for t, a in items
                     if t not in _NOT_ALIAS and t != "("]
            if alias is None:
                tables.update(t for t, _ in items)
            else:
                tables.update(t for t, a in items if alias.lower() in (a, t))
    return tables


def added_columns(sql: str) -> list[tuple[str, str]]:
    """Every (table, column) that `sql` (a migration) adds with ALTER TABLE ... ADD COLUMN."""
    found = []
    for stmt in (s.strip() for s in code_of(sql).split(";")):
        flat = " ".join(stmt.split())
        altered = _ALTER_TABLE.match(flat)
        if not altered:
            continue
        for m in _ADD_COLUMN.finditer(flat):
            if _bare(m.group(1)) != "constraint":
                found.append((_bare(altered.group(1)), _bare(m.group(1))))
    return found


def added_to_star_tables(name: str, sql: str, star_tables: set[str]) -> list[str]:
    """A column migration `name` adds to a table the previous release reads with `SELECT *`
    (`star_tables`): refused unless the migration is marked `-- contract: <reason>`."""
    if contract_reason(sql):
        return []
    return [f"{name}: ADD COLUMN {col} on {table}, which the previous release reads with "
            "SELECT * into a positional row (put it in a table of its own)"
            for table, col in added_columns(sql) if table in star_tables]

"""Split SQL into statements and tell read-only statements from writes, without being fooled by
comments, string literals, quoted identifiers or dollar quoting.

This is the first of two read-only layers (the second is a read-only transaction in the database,
see exesql.py). It is deliberately strict: a statement is accepted only if it starts with a reading
keyword (SELECT, WITH, SHOW, EXPLAIN, DESCRIBE, VALUES, TABLE) and contains no writing keyword
anywhere outside literals (so `WITH x AS (DELETE ...)`, `EXPLAIN ANALYZE DELETE`,
`SELECT ... INTO`, and `SELECT ... FOR UPDATE` are all refused).
"""

from __future__ import annotations

from dataclasses import dataclass

READ_STARTS = frozenset({"SELECT", "WITH", "SHOW", "EXPLAIN", "DESCRIBE", "DESC", "VALUES", "TABLE"})
WRITE_WORDS = frozenset(
    {
        "INSERT", "UPDATE", "DELETE", "MERGE", "UPSERT", "CREATE", "DROP", "ALTER", "TRUNCATE", "GRANT",
        "REVOKE", "COPY", "CALL", "ATTACH", "DETACH", "PRAGMA", "INTO", "LOAD", "RENAME", "VACUUM",
        "REINDEX", "COMMIT", "ROLLBACK", "BEGIN", "SAVEPOINT", "HANDLER", "LOCK", "UNLOCK", "OUTFILE",
        "DUMPFILE", "SET", "RESET", "NOTIFY", "LISTEN", "CLUSTER", "REFRESH", "IMPORT", "EXECUTE",
        "PREPARE", "DEALLOCATE", "DISCARD", "SECURITY", "OPTIMIZE", "REPAIR", "ANALYZE", "FLUSH", "KILL",
        "SHUTDOWN", "INSTALL", "UNINSTALL",
    }
)


class SqlSyntaxError(ValueError):
    """Unterminated string, identifier, comment or dollar quote."""


@dataclass(frozen=True)
class Statement:
    text: str
    keywords: tuple[str, ...]

    @property
    def first_keyword(self) -> str:
        return self.keywords[0] if self.keywords else ""

    def write_keyword(self) -> str | None:
        """The keyword that makes this statement a write, or None when it only reads."""
        if self.first_keyword not in READ_STARTS:
            return self.first_keyword or "(empty)"
        for word in self.keywords:
            if word in WRITE_WORDS:
                return word
        return None


def split_statements(sql: str, *, mysql: bool = False) -> list[Statement]:
    """Statements in order (empty ones dropped), each with its upper-cased bare keywords.

    `mysql`: MySQL/MariaDB lexing (`#` line comments, backslash escapes in strings). Elsewhere a
    backslash is an ordinary character, as in standard SQL, so a string cannot hide a `;`.
    """
    statements: list[Statement] = []
    words: list[str] = []
    start = 0
    i, n = 0, len(sql)

    def flush(end: int) -> None:
        text = sql[start:end].strip()
        if text and words:
            statements.append(Statement(text, tuple(words)))

    while i < n:
        ch = sql[i]
        if ch == "-" and sql.startswith("--", i) or (mysql and ch == "#"):
            nl = sql.find("\n", i)
            i = n if nl < 0 else nl + 1
        elif ch == "/" and sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            if end < 0:
                raise SqlSyntaxError("unterminated /* comment")
            i = end + 2
        elif ch in ("'", '"', "`"):
            i = _skip_quoted(sql, i, ch, backslash=mysql)
        elif ch == "$":
            j = i + 1
            while j < n and (sql[j].isalnum() or sql[j] == "_"):
                j += 1
            if j < n and sql[j] == "$":
                tag = sql[i : j + 1]
                end = sql.find(tag, j + 1)
                if end < 0:
                    raise SqlSyntaxError("unterminated dollar-quoted string")
                i = end + len(tag)
            else:
                i = j
        elif ch == ";":
            flush(i)
            words = []
            i += 1
            start = i
        elif ch.isalpha() or ch == "_":
            j = i
            while j < n and (sql[j].isalnum() or sql[j] in "_$"):
                j += 1
            words.append(sql[i:j].upper())
            i = j
        else:
            i += 1
    flush(n)
    return statements


def _skip_quoted(sql: str, i: int, quote: str, *, backslash: bool) -> int:
    """Index after the literal starting at i. Doubled quotes and backslash escapes are honoured."""
    j = i + 1
    n = len(sql)
    while j < n:
        c = sql[j]
        if backslash and c == "\\" and quote in ("'", '"'):
            j += 2
            continue
        if c == quote:
            if j + 1 < n and sql[j + 1] == quote:
                j += 2
                continue
            return j + 1
        j += 1
    raise SqlSyntaxError(f"unterminated {quote} quote")

"""The secret policy: which env vars, flags and values are credentials, in one place.

Every writer asks here: the trial folder (engine log, ``command.sh``, ``engine.json``), the
trial and study records, the tables, the exports and the printed progress. It errs towards
redaction:

- an env var is secret when a part of its name is key-like (``OPENAI_KEY``, ``MY_APIKEY``,
  ``DB_PASSWD``, ``HF_TOKEN``, ``X_AUTH``, ``GOOGLE_CREDENTIALS``), or its value looks like a
  known token format;
- a flag is secret when its last word is ``key``, ``token``, ``secret`` (``--api-key``,
  ``--hf-token``) or any word is ``password``/``passwd``/``credential(s)``
  (``--ssl-keyfile-password``), or its value looks like a token; ``--max-num-batched-tokens``
  and ``--long-prefill-token-threshold`` are not secret;
- a value is a token when it has a known shape (``hf_...``, ``sk-...``, ``ghp_...``,
  ``Bearer ...``).

A secret is shown by name only: a secret flag's value is written ``${NAME}`` (``flag_env_name``)
for a shell to fill in, and a space whose secrets were left out of a stored copy reads them back
from the environment (``is_env_ref``). This module imports nothing of the project.
"""

from __future__ import annotations

import re

REDACTED = "<redacted>"

# Name parts that make an env var a credential; a part ending in one (APIKEY, AUTHTOKEN) counts.
_SECRET_PART = re.compile(
    r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$|^(PASS|AUTH|PWD|PW)$", re.IGNORECASE
)
# The old whole-name pattern, kept so nothing redacted before is shown now.
_SECRET_SUBSTRING = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY", re.IGNORECASE)
# Env names whose value is a path or setting, despite a key-like part.
_NOT_SECRET_ENV = frozenset({"PWD", "OLDPWD"})

_SECRET_LAST_WORD = frozenset({"key", "token", "secret", "key-id", "apikey"})
_SECRET_ANY_WORD = re.compile(r"password|passwd|credentials?|secret", re.IGNORECASE)
# Flags named for a credential by name, whatever the rule above says.
_SECRET_FLAGS = frozenset({"--api-key", "--hf-token", "--api-key-file"})
# The env var each engine reads for a secret flag, so "${NAME}" is the natural stand-in.
FLAG_ENV = {"--api-key": "VLLM_API_KEY", "--hf-token": "HF_TOKEN"}

# Well-known token shapes, for values under harmless names and for free text (failure reasons,
# log lines) holding a secret this process was never told about.
TOKEN_SHAPES = re.compile(
    r"\b(?:hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{20,})\b"
    r"|(?<=Bearer )[A-Za-z0-9._~+/-]{16,}=*",
    re.IGNORECASE,
)
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
ENV_NAME_RULE = "an env var name is letters, digits and '_', not starting with a digit"
_ENV_REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")


def looks_like_token(value: object) -> bool:
    return isinstance(value, str) and bool(TOKEN_SHAPES.search(value))


def is_secret_env_name(name: str) -> bool:
    if name.upper() in _NOT_SECRET_ENV:
        return False
    parts = [p for p in re.split(r"[_\W]+", name) if p]
    return bool(_SECRET_SUBSTRING.search(name)) or any(_SECRET_PART.search(p) for p in parts)


def is_secret_env(name: str, value: object = None) -> bool:
    """An env var is secret by a key-like name, by a value shaped like a token, or by a value
    that names itself (``X: ${X}``: a secret the stored space reads from the environment)."""
    return is_secret_env_name(name) or looks_like_token(value) or is_env_ref(value) == name


def is_secret_flag(flag: str, value: object = None) -> bool:
    """A flag is secret by a credential name, or by a value shaped like a token."""
    if not flag.startswith("-"):
        return False
    name = flag.split("=", 1)[0]
    bare = name.lstrip("-").lower()
    words = bare.split("-")
    return (
        name in _SECRET_FLAGS
        or words[-1] in _SECRET_LAST_WORD
        or bare.endswith("-key-id")
        or bool(_SECRET_ANY_WORD.search(bare))
        or looks_like_token(value)
    )


def flag_env_name(flag: str) -> str:
    """``--api-key`` -> ``VLLM_API_KEY``; any other secret flag -> its name in capitals."""
    return FLAG_ENV.get(flag, re.sub(r"\W", "_", flag.lstrip("-")).upper())


def env_ref(name: str) -> str:
    return "${" + name + "}"


def is_env_ref(value: object) -> str | None:
    """``'${NAME}'`` -> ``'NAME'``; anything else -> None."""
    match = _ENV_REF.match(value) if isinstance(value, str) else None
    return match.group(1) if match else None


def scrub_url(url: str) -> str:
    """``url`` without its password, for messages: the one after ``user:`` and any query
    parameter named like a credential (``?password=``, ``&sslpassword=``, as libpq reads)."""
    if "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    rest, mark, query = rest.partition("?")
    if "@" in rest:
        creds, host = rest.rsplit("@", 1)
        user = creds.split(":", 1)[0]
        rest = f"{user}:***@{host}" if ":" in creds else rest
    return f"{scheme}://{rest}{mark}{_scrub_query(query)}"


def _scrub_query(query: str) -> str:
    pairs = [p.partition("=") for p in query.split("&")] if query else []
    return "&".join(
        f"{k}{eq}***" if eq and is_secret_flag("--" + k.replace("_", "-")) else f"{k}{eq}{v}"
        for k, eq, v in pairs
    )


def scrub_text(text: str, values: list[str] | tuple[str, ...] | set[str] = ()) -> str:
    """``text`` with each known secret value (longest first) and every token shape replaced."""
    for value in sorted({v for v in values if v}, key=len, reverse=True):
        text = text.replace(value, REDACTED)
    return TOKEN_SHAPES.sub(REDACTED, text)

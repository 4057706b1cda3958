"""A PostgreSQL password given in the URL's query string (``?password=``, as libpq reads it) is
a password like the one after ``user:``: shown nowhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.postgres import Postgres
from tuner.cli import main
from tuner.secret_policy import scrub_url

PASSWORD = "query-string-pw-5813"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u@h/db?password=pw", "postgresql://u@h/db?password=***"),
        (
            "postgresql://u:pw@h:5/db?sslmode=require&sslpassword=pw&application_name=t",
            "postgresql://u:***@h:5/db?sslmode=require&sslpassword=***&application_name=t",
        ),
        ("postgresql://h/db?user=u&password=pw", "postgresql://h/db?user=u&password=***"),
        ("sqlite:///results/s/study.db", "sqlite:///results/s/study.db"),
    ],
)
def test_scrub_url_hides_every_password(url: str, shown: str) -> None:
    assert scrub_url(url) == shown


@pytest.mark.slow
def test_a_query_string_password_reaches_no_output(
    postgres: Postgres, space_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: printed on tune run's first line and written into report.html's storage row.
    url = postgres.create_db("querypw") + f"?password={PASSWORD}"
    results = tmp_path / "results"
    args = ["run", "--space", str(space_file), "--launcher", "sim", "--trials", "1"]
    assert main([*args, "--confirm", "0", "--storage", url, "--results-dir", str(results)]) == 0
    shown = capsys.readouterr()
    assert "password=***" in shown.out
    assert PASSWORD not in shown.out + shown.err
    report = (results / "small" / "report.html").read_text()
    assert "password=***" in report and PASSWORD not in report
    assert not [
        p for p in results.rglob("*") if p.is_file() and PASSWORD.encode() in p.read_bytes()
    ]

"""The extension points cannot be half-done: where the library branches over a closed
vocabulary (recovery mode, wait kind, result kind), a value added to it and not handled
is a ``mypy --strict`` error at each branch, not a silent fall into a default.

The test adds one value to each vocabulary in a copy of the library and runs mypy on the
modules that branch over them: every branch must be named.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api", reason="mypy is in the dev extra")

ROOT = Path(__file__).resolve().parent.parent.parent

#: (file, the vocabulary's last member as written, the member added after it)
_NEW_VALUES = (
    ("runkernel/kernel/policies.py", '    INDETERMINATE = "indeterminate"\n', '    NEW = "new"\n'),
    ("runkernel/kernel/values.py", '    SCHEDULED = "scheduled"\n    EXTERNAL = "external"\n', '    NEW = "new"\n'),
    ("runkernel/kernel/values.py", '    SUPPLIED = "supplied"\n    EXTERNAL = "external"\n', '    NEW = "new"\n'),
)

#: Each module that branches over one of them, and the vocabulary it branches over.
_BRANCHES = {
    "runkernel/kernel/recover.py": "RecoveryMode",
    "runkernel/adapters/drive/runtime_ports.py": "RecoveryMode",
    "runkernel/adapters/drive/actions.py": "WaitKind",
    "runkernel/integrations/pydantic_ai/_mapping.py": "ResultKind",
    "runkernel/integrations/openai_agents/_mapping.py": "ResultKind",
}

#: Packages mypy need not read (the integrations' frameworks).
_FRAMEWORKS = ("pydantic_ai", "pydantic", "pydantic_core", "agents", "openai", "httpx", "opentelemetry")


def test_a_value_added_to_a_vocabulary_is_a_type_error_at_every_branch_over_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(ROOT / "runkernel", tmp_path / "runkernel", ignore=shutil.ignore_patterns("__pycache__"))
    for name, last, added in _NEW_VALUES:
        path = tmp_path / name
        text = path.read_text()
        assert text.count(last) == 1, f"{name}: the vocabulary's last member moved"
        path.write_text(text.replace(last, last + added))
    # the frameworks' own types do not matter here, and reading them is most of the time
    skipped = "".join(f"[mypy-{package}.*]\nfollow_imports = skip\n" for package in _FRAMEWORKS)
    (tmp_path / "mypy.ini").write_text(f"[mypy]\nstrict = True\npython_version = 3.11\n{skipped}")
    monkeypatch.chdir(tmp_path)  # mypy finds the copy first, in the working directory
    modules = [module for name in _BRANCHES for module in ("-m", name[:-3].replace("/", "."))]
    out, err, _status = mypy_api.run(
        ["--config-file", str(tmp_path / "mypy.ini"), "--cache-dir", str(tmp_path / "cache"), *modules]
    )
    errors = [line for line in out.splitlines() if 'to "assert_never"' in line]
    for name, vocabulary in _BRANCHES.items():
        assert any(line.startswith(name) and f"{vocabulary}.NEW" in line for line in errors), (name, out, err)

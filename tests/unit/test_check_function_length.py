"""scripts/check_function_length.py: `make lint` fails a function over 60 lines."""

import pytest
from conftest import ROOT, load_file

pytestmark = pytest.mark.controller(reason="a project check run by make lint on the controller")


@pytest.fixture(scope="module")
def check():
    return load_file(ROOT / "scripts" / "check_function_length.py", "check_function_length")


def function(name, body_lines):
    return f"def {name}():\n" + "".join(f"    x = {i}\n" for i in range(body_lines - 1))


def test_a_function_of_61_lines_fails_and_one_of_60_passes(check, tmp_path, capsys):
    source = tmp_path / "m.py"
    method = "".join("    " + line + "\n" for line in function("long", 61).splitlines())
    source.write_text(function("short", 60) + "\n\nclass C:\n" + method)
    assert check.main([str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert out == f"{source}:64: long is 61 lines (most 60)\n"


def test_nested_functions_count_on_their_own(check):
    body = "".join(f"        x = {i}\n" for i in range(61))
    source = "def outer():\n    def inner():\n" + body + "    return inner\n"
    assert check.long_functions(source) == [(1, "outer", 64), (2, "inner", 62)]


def test_the_code_that_ships_has_no_function_over_60_lines(check, capsys):
    assert check.main([]) == 0, capsys.readouterr().out

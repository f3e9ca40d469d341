"""scripts/mutation_survivors.py: the survivors of a mutmut run sorted by what their mutation changed."""

from __future__ import annotations

import json

import mutation_survivors as ms

MODULE = """
def x_hello__mutmut_orig(name):
    if name and len(name) > 3:
        return f"hello {name}"
    return "hi"


def x_hello__mutmut_1(name):
    if name and len(name) > 3:
        return f"hello {name}"
    return "XXhiXX"


def x_hello__mutmut_2(name):
    if name and len(name) > 4:
        return f"hello {name}"
    return "hi"


def x_hello__mutmut_3(name):
    if name or len(name) > 3:
        return f"hello {name}"
    return "hi"


def x_hello__mutmut_4(name):
    if name and len(name) > 3:
        return f"hello {name}"
    return "hi"
"""


def test_survivors_are_sorted_by_what_changed(tmp_path, capsys):
    package = tmp_path / "mutants" / "pkg"
    package.mkdir(parents=True)
    (package / "mod.py").write_text(MODULE)
    codes = {f"pkg.mod.x_hello__mutmut_{n}": code for n, code in ((1, 0), (2, 0), (3, 0), (4, 1))}
    (package / "mod.py.meta").write_text(json.dumps({"exit_code_by_key": codes}))
    found = {key.rsplit("_", 1)[1]: kind for key, kind, _ in ms.survivors(tmp_path / "mutants")}
    assert found == {"1": "wording", "2": "constant", "3": "logic"}  # 4 was killed
    assert ms.main([str(tmp_path / "mutants"), "--list", "logic"]) == 0
    out = capsys.readouterr().out
    assert "1 killed" in out and "3 survived" in out
    assert "pkg.mod.x_hello__mutmut_3: and -> or" in out


def test_no_working_copy_says_so(tmp_path, capsys):
    assert ms.main([str(tmp_path / "nowhere")]) == 2
    assert "no mutmut working copy" in capsys.readouterr().err

"""scripts/wheelhouse.py: what a machine that already has torch lacks, and the closure of wheels that fills it,
followed through each wheel's own metadata for the target's Python (no index is reached here: the wheels are made
by the test, and `fetch` is the one step that would download)."""

import importlib.util
import zipfile

import pytest

from tests.conftest import REPO

spec = importlib.util.spec_from_file_location("wheelhouse", REPO / "scripts" / "wheelhouse.py")
wheelhouse = importlib.util.module_from_spec(spec)
spec.loader.exec_module(wheelhouse)


def a_wheel(folder, name, version, requires=()):
    """A wheel holding only its metadata, as pip downloads one."""
    path = folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    meta = "".join(f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{name.replace('-', '_')}-{version}.dist-info/METADATA",
                         f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{meta}")
    return path


def test_what_the_target_has_is_left_to_it_whatever_its_version():
    have = {"torch": "2.11.0", "transformers": "5.17.0", "pyyaml": None}
    lines = ["torch==2.13.0", "transformers==5.19.0", "PyYAML==6.0.3", "omegaconf==2.4.0", "mosaicml-cli==0.8.3"]
    assert wheelhouse.missing(lines, have) == ["omegaconf==2.4.0", "mosaicml-cli==0.8.3"]


def test_the_targets_list_reads_pip_freeze_and_plain_names(tmp_path):
    listed = tmp_path / "have.txt"
    listed.write_text("torch==2.11.0\nPyYAML==6.0.2\nnvidia_ml_py\n# a comment\nfoo @ file:///x.whl\n\n")
    assert wheelhouse.read_have(listed) == {"torch": "2.11.0", "pyyaml": "6.0.2", "nvidia-ml-py": None, "foo": None}


def test_requirements_hold_only_where_their_markers_hold_on_the_target(tmp_path):
    wheel = a_wheel(tmp_path, "pkg", "1.0", ["a>=1", "b; python_version < '3.12'", "c; sys_platform == 'win32'",
                                            "d; extra == 'fast'", "e; python_version >= '3.12'"])
    on_312 = [r.name for r in wheelhouse.wheel_requirements(wheel, wheelhouse.target_environment("3.12"))]
    assert on_312 == ["a", "e"]
    on_311_fast = wheelhouse.wheel_requirements(wheel, wheelhouse.target_environment("3.11"), extras={"fast"})
    assert [r.name for r in on_311_fast] == ["a", "b", "d"]


def test_the_wheelhouse_is_the_closure_of_what_the_target_lacks(tmp_path, monkeypatch):
    index = tmp_path / "index"
    index.mkdir()
    published = {"omegaconf": ["antlr4-python3-runtime==4.9.*", "PyYAML>=5.1"],
                 "antlr4-python3-runtime": [], "deepspeed": ["torch", "hjson", "pydantic>=2"],
                 "hjson": [], "pydantic": ["pydantic-core==2.50.5", "typing-extensions"], "pydantic-core": []}
    fetched = []

    def fetch(spec_text, out, python_version, platforms):  # the index, as the test made it
        name = wheelhouse.canonical(wheelhouse.requirement_name(spec_text))
        fetched.append(spec_text)
        return a_wheel(out, name, "1.0", published[name])

    monkeypatch.setattr(wheelhouse, "fetch", fetch)
    have = {"torch": None, "pyyaml": None, "typing-extensions": None}  # a plain list of names
    wheels = wheelhouse.make(tmp_path / "wh", have, ["torch==2.13.0", "omegaconf==2.4.0", "deepspeed==0.19.8",
                                                     "vllm==0.32.0"], {"vllm"}, "3.12", ())
    names = [w.name.split("-")[0] for w in wheels]
    assert names == ["omegaconf", "deepspeed", "antlr4_python3_runtime", "hjson", "pydantic", "pydantic_core"]
    assert fetched[:2] == ["omegaconf==2.4.0", "deepspeed==0.19.8"]  # the project's pins, as pinned
    assert "antlr4-python3-runtime==4.9.*" in fetched  # a dependency at its requirer's specifier


def test_missing_prints_what_this_interpreter_lacks(tmp_path, capsys):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("# what the harness needs\npytest==9.2.0  # the test runner\nno-such-package-xyz==1.0\n")
    assert wheelhouse.main(["missing", str(requirements)]) == 0
    assert capsys.readouterr().out == "no-such-package-xyz==1.0\n"


@pytest.mark.parametrize("args", [["make", "out"], ["make", "out", "--have", "x.txt"]])
def test_make_needs_the_targets_packages_and_python(args, capsys):
    with pytest.raises(SystemExit) as ended:
        wheelhouse.main(args)
    assert ended.value.code == 2 and "required" in capsys.readouterr().err


def test_a_need_the_target_has_at_a_version_outside_its_range_is_fetched(tmp_path, monkeypatch):
    """What the first GPU run met: the image's rich 14 does not serve mosaicml-cli's rich<14, and an offline install
    fails unless the wheelhouse holds a rich 13. A need whose version the list does not give is left to the target."""
    published = {"mosaicml-cli": ["rich<14.0.0,>=12.6.0", "pyyaml>=5.4.1", "termcolor>=1.1.0"], "rich": []}
    fetched = []

    def fetch(spec_text, out, python_version, platforms):
        name = wheelhouse.canonical(wheelhouse.requirement_name(spec_text))
        fetched.append(spec_text)
        return a_wheel(out, name, "13.9.4" if name == "rich" else "1.0", published[name])

    monkeypatch.setattr(wheelhouse, "fetch", fetch)
    have = {"rich": "14.2.0", "pyyaml": "6.0.3", "termcolor": None}
    wheelhouse.make(tmp_path / "wh", have, ["mosaicml-cli==0.8.3", "rich==13.9.4"], set(), "3.12", ())
    assert fetched == ["mosaicml-cli==0.8.3", "rich<14.0.0,>=12.6.0"]

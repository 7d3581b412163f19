"""components/infinilm/CMakeLists.txt against a small source tree with InfiniLM's layout, built
against tiny stand-in Infini libraries: xmake.lua's sources, exclusions, defines, include order,
RUNPATHs, no libpython, and the installed layout importing from outside any source tree."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pybind11
import pytest
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "components" / "infinilm"
EXT = str(sysconfig.get_config_var("EXT_SUFFIX"))
EXCLUDED = '#error "xmake.lua does not build this file"\n'

# --- the stand-in Infini libraries: three prefixes, as the store keeps them --------------------

STUBS = {
    "infinirt": {
        "include/infini/rt.h": "#pragma once\nint infinirt_answer();\n",
        "src.cc": '#include "infini/rt.h"\nint infinirt_answer() { return 1; }\n',
    },
    "infiniops": {
        "include/infini/ops.h": '#pragma once\n#include "infini/rt.h"\nint infiniops_answer();\n',
        # Both InfiniOps and InfiniCCL install a data_type.h; InfiniOps' must be found first.
        "include/data_type.h": "#pragma once\n#define WHICH_DATA_TYPE 1\n",
        "src.cc": '#include "infini/ops.h"\nint infiniops_answer() { return 10; }\n',
    },
    "infiniccl": {
        "include/infiniccl/infiniccl.h": "#pragma once\nint infiniccl_answer();\n",
        "include/infiniccl/data_type.h": "#pragma once\n#define WHICH_DATA_TYPE 2\n",
        "src.cc": '#include "infiniccl/infiniccl.h"\nint infiniccl_answer() { return 100; }\n',
    },
}

RUNTIME_SOURCE = """\
#ifndef ENABLE_INFINIOPS_API
#error "xmake.lua defines ENABLE_INFINIOPS_API"
#endif
#ifndef USE_INFINIRT_GRAPH
#error "xmake.lua defines USE_INFINIRT_GRAPH"
#endif
#include <infini/rt.h>
#include <infini/ops.h>
#include <infiniccl/infiniccl.h>
#include "data_type.h"
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>
#include "infinicore/core.hpp"
#include "internal.hpp"
#include "util.hpp"
static_assert(WHICH_DATA_TYPE == 1, "InfiniOps' include directory must come before InfiniCCL's");
int infinicore_answer() {
    return infinirt_answer() + infiniops_answer() + infiniccl_answer() + internal_value()
        + util_value();
}
"""

LM_TREE = {
    "csrc/infinicore/include/infinicore/core.hpp": "#pragma once\nint infinicore_answer();\n",
    "csrc/infinicore/src/internal.hpp": "#pragma once\ninline int internal_value() { return 0; }\n",
    "csrc/infinicore/utils/util.hpp": "#pragma once\nint util_value();\n",
    "csrc/infinicore/utils/util.cc": '#include "util.hpp"\nint util_value() { return 0; }\n',
    "csrc/infinicore/src/core.cc": RUNTIME_SOURCE,
    "csrc/infinicore/src/context/allocators/host_allocator.cc": "int host_alloc() { return 0; }\n",
    "csrc/infinicore/src/graph/graph.cc": "int graph() { return 0; }\n",
    "csrc/infinicore/src/nn/linear.cc": "int linear() { return 0; }\n",
    "csrc/infinicore/src/tensor/tensor.cc": "int tensor() { return 0; }\n",
    "csrc/infinicore/src/ops/add/add.cc": "int add_op() { return 0; }\n",
    "csrc/infinicore/src/ops/add/add_infiniops.cc": "int add_infiniops() { return 0; }\n",
    "csrc/infinicore/src/ops/quant/per_tensor_quant_int8/quant.cc": "int quant() { return 0; }\n",
    "csrc/infinicore/src/ops/dequant/per_tensor_dequant_int8/dq.cc": "int dq() { return 0; }\n",
    # Left out by xmake.lua's remove_files(...) and by the directories its add_files does not name.
    "csrc/infinicore/src/ops/add/add_cpu.cc": EXCLUDED,
    "csrc/infinicore/src/ops/mha/mha_flashattn.cc": EXCLUDED,
    "csrc/infinicore/src/ops/mha/mha_hygon.cc": EXCLUDED,
    "csrc/infinicore/src/ops/mha/mha_moore.cc": EXCLUDED,
    "csrc/infinicore/src/ops/mha/hygon/mha_flashattn_hygon.cc": EXCLUDED,
    "csrc/infinicore/src/adaptor/aten_adaptor.cc": EXCLUDED,
    "csrc/infinicore/src/analyzer/op_trace.cc": EXCLUDED,
    "csrc/infinicore/src/pybind11/infinicore.cc": (
        '#include <pybind11/pybind11.h>\n#include "infinicore/core.hpp"\n'
        "int from_list_value();\n"
        "PYBIND11_MODULE(_infinicore, m) {\n"
        '    m.def("answer", [] { return infinicore_answer() + from_list_value(); });\n}\n'
    ),
    "csrc/infinicore/src/pybind11/from_list.cc": "int from_list_value() { return 0; }\n",
    # _infinilm: csrc/** minus infinicore/** and models/**, plus models/*.cpp, models/qwen3/*.cpp
    "csrc/pybind11/bindings.cc": (
        '#include <pybind11/pybind11.h>\n#include "infinicore/core.hpp"\n'
        "int engine_value(); int factory_value(); int qwen3_value();\n"
        "PYBIND11_MODULE(_infinilm, m) {\n"
        '    m.def("answer", [] { return infinicore_answer() + engine_value()'
        " + factory_value() + qwen3_value(); });\n}\n"
    ),
    "csrc/engine/engine.cpp": "int engine_value() { return 1000; }\n",
    "csrc/models/model_factory.cpp": "int factory_value() { return 10000; }\n",
    "csrc/models/qwen3/qwen3_for_causal_lm.cpp": "int qwen3_value() { return 100000; }\n",
    "csrc/models/llama/llama_for_causal_lm.cpp": EXCLUDED,
    "csrc/models/qwen3/legacy/old.cpp": EXCLUDED,
    "third_party/spdlog/include/spdlog/spdlog.h": "#pragma once\n",
    "third_party/json/single_include/nlohmann/json.hpp": "#pragma once\n",
    "python/infinicore/__init__.py": (
        "from .lib import _infinicore\n\nanswer = _infinicore.answer\n"
    ),
    "python/infinicore/lib/__init__.py": "",
    "python/infinilm/__init__.py": (
        "import infinicore  # noqa: F401\n\nfrom .lib import _infinilm\n\n"
        "answer = _infinilm.answer\n"
    ),
    "python/infinilm/lib/__init__.py": "",
}


def write_tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def stub_prefix(root: Path, name: str, includes: list[Path], source: str | None = None) -> Path:
    """A prefix with include/ and lib/lib<name>.so (SONAME lib<name>.so), as an install has;
    ``source`` replaces the stub's own src.cc."""
    prefix = root / name
    write_tree(prefix, {k: v for k, v in STUBS[name].items() if k != "src.cc"})
    (prefix / "lib").mkdir()
    src = prefix / "src.cc"
    src.write_text(STUBS[name]["src.cc"] if source is None else source)
    flags = [f"-I{d}" for d in [prefix / "include", *includes]]
    subprocess.run(
        [
            "c++",
            "-shared",
            "-fPIC",
            *flags,
            f"-Wl,-soname,lib{name}.so",
            "-o",
            str(prefix / "lib" / f"lib{name}.so"),
            str(src),
        ],
        check=True,
    )
    return prefix


def cmake(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["cmake", *map(str, args)], capture_output=True, text=True, cwd=cwd, check=False
    )


def configure_args(
    build: Path, source: Path, prefixes: dict[str, Path], install: Path, *extra: str
) -> list[str | Path]:
    return [
        "-S",
        PROJECT,
        "-B",
        build,
        "-G",
        "Ninja",
        "-DCMAKE_BUILD_TYPE=Release",
        f"-DINFINILM_SOURCE_DIR={source}",
        f"-DINFINI_RT_ROOT={prefixes['infinirt']}",
        f"-DINFINI_OPS_ROOT={prefixes['infiniops']}",
        f"-DINFINI_CCL_ROOT={prefixes['infiniccl']}",
        f"-DPython_EXECUTABLE={sys.executable}",
        f"-Dpybind11_DIR={pybind11.get_cmake_dir()}",
        f"-DCMAKE_INSTALL_PREFIX={install}",
        "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
        *extra,
    ]


@dataclass
class Built:
    source: Path
    prefixes: dict[str, Path]
    build: Path
    install: Path


def make_stubs(root: Path) -> dict[str, Path]:
    rt = stub_prefix(root, "infinirt", [])
    ops = stub_prefix(root, "infiniops", [rt / "include"])
    ccl = stub_prefix(root, "infiniccl", [])
    return {"infinirt": rt, "infiniops": ops, "infiniccl": ccl}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    root = tmp_path_factory.mktemp("infinilm-cmake")
    source = root / "InfiniLM"
    write_tree(source, LM_TREE)
    prefixes = make_stubs(root / "stubs")
    build, install = root / "build", root / "install"
    configured = cmake(*configure_args(build, source, prefixes, install))
    assert configured.returncode == 0, configured.stdout + configured.stderr
    compiled = cmake("--build", build, "--parallel", str(os.cpu_count() or 2))
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    installed = cmake("--install", build)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    yield Built(source=source, prefixes=prefixes, build=build, install=install)


@dataclass
class Dyn:
    needed: list[str]
    runpath: list[str]
    rpath: list[str]


def dynamic(path: Path) -> Dyn:
    out = Dyn([], [], [])
    with path.open("rb") as f:
        for section in ELFFile(f).iter_sections():
            if isinstance(section, DynamicSection):
                for tag in section.iter_tags():
                    if tag.entry.d_tag == "DT_NEEDED":
                        out.needed.append(tag.needed)
                    elif tag.entry.d_tag == "DT_RUNPATH":
                        out.runpath += tag.runpath.split(":")
                    elif tag.entry.d_tag == "DT_RPATH":
                        out.rpath += tag.rpath.split(":")
    return out


def python_dir(b: Built) -> Path:
    return b.install / "python"


# --- what is built and installed ----------------------------------------------------------------


def test_installs_the_three_targets_where_xmake_install_puts_them(built: Built) -> None:
    py = python_dir(built)
    assert (py / "infinicore" / "lib" / "libinfinicore_runtime.so").is_file()
    assert (py / "infinicore" / "lib" / f"_infinicore{EXT}").is_file()
    assert (py / "infinilm" / "lib" / f"_infinilm{EXT}").is_file()
    for package in (
        "infinicore/__init__.py",
        "infinicore/lib/__init__.py",
        "infinilm/__init__.py",
        "infinilm/lib/__init__.py",
    ):
        assert (py / package).is_file(), package


def test_compiles_exactly_xmakes_sources_and_none_of_its_exclusions(built: Built) -> None:
    # Every excluded file holds an #error: the build passing proves none was compiled; the
    # compile database shows the included ones were.
    database = (built.build / "compile_commands.json").read_text()
    for rel, text in LM_TREE.items():
        if not rel.endswith((".cc", ".cpp")):
            continue
        if text == EXCLUDED:
            assert rel not in database, rel
        else:
            assert rel in database, rel


def test_defines_only_on_the_runtime_as_in_xmake(built: Built) -> None:
    import json

    commands = json.loads((built.build / "compile_commands.json").read_text())
    for entry in commands:
        in_runtime = "/csrc/infinicore/src/pybind11/" not in entry["file"] and (
            "/csrc/infinicore/" in entry["file"]
        )
        for define in ("-DENABLE_INFINIOPS_API", "-DUSE_INFINIRT_GRAPH"):
            assert (define in entry["command"]) == in_runtime, (define, entry["file"])


# --- RUNPATHs and DT_NEEDED ---------------------------------------------------------------------


def test_runtime_links_the_three_infini_libraries_with_origin_runpath(built: Built) -> None:
    d = dynamic(python_dir(built) / "infinicore" / "lib" / "libinfinicore_runtime.so")
    assert {"libinfiniops.so", "libinfiniccl.so", "libinfinirt.so"} <= set(d.needed)
    assert d.runpath == ["$ORIGIN"]
    assert d.rpath == []  # DT_RUNPATH, not the deprecated DT_RPATH


def test_extensions_reach_infini_libraries_only_through_the_runtime(built: Built) -> None:
    py = python_dir(built)
    core = dynamic(py / "infinicore" / "lib" / f"_infinicore{EXT}")
    lm = dynamic(py / "infinilm" / "lib" / f"_infinilm{EXT}")
    for d in (core, lm):
        assert "libinfinicore_runtime.so" in d.needed
        assert not {"libinfiniops.so", "libinfiniccl.so", "libinfinirt.so"} & set(d.needed)
        assert d.rpath == []
    assert core.runpath == ["$ORIGIN"]
    assert lm.runpath == ["$ORIGIN/../../infinicore/lib"]


def test_no_extension_links_libpython(built: Built) -> None:
    py = python_dir(built)
    for ext in (
        py / "infinicore" / "lib" / f"_infinicore{EXT}",
        py / "infinilm" / "lib" / f"_infinilm{EXT}",
    ):
        assert not [n for n in dynamic(ext).needed if n.startswith("libpython")], ext


def test_installed_tree_imports_from_outside_any_source_tree(built: Built, tmp_path: Path) -> None:
    # As the wheel and upstream's setup.py do: the Infini libraries beside the runtime.
    lib = python_dir(built) / "infinicore" / "lib"
    for name, prefix in built.prefixes.items():
        target = lib / f"lib{name}.so"
        if not target.exists():
            target.write_bytes((prefix / "lib" / f"lib{name}.so").read_bytes())
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "PYTHONPATH")}
    env["PYTHONPATH"] = str(python_dir(built))
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import infinicore, infinilm; print(infinicore.answer(), "
            "infinilm.answer(), infinilm.__file__)",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    core, lm, where = result.stdout.split()
    assert (int(core), int(lm)) == (111, 111111)
    assert Path(where).is_relative_to(python_dir(built))


# --- configure-time checks ----------------------------------------------------------------------


def test_missing_submodules_are_a_configure_error_naming_them(built: Built, tmp_path: Path) -> None:
    source = tmp_path / "InfiniLM"
    write_tree(source, {k: v for k, v in LM_TREE.items() if not k.startswith("third_party/")})
    result = cmake(*configure_args(tmp_path / "b", source, built.prefixes, tmp_path / "i"))
    assert result.returncode != 0
    assert "submodules (spdlog, json) are not checked out" in " ".join(result.stderr.split())


def test_an_operator_missing_from_infiniops_fails_the_link_naming_it(
    built: Built, tmp_path: Path
) -> None:
    ops = stub_prefix(
        tmp_path / "stubs", "infiniops", [], source="int some_other_operator() { return 0; }\n"
    )
    prefixes = {**built.prefixes, "infiniops": ops}
    build = tmp_path / "b"
    configured = cmake(*configure_args(build, built.source, prefixes, tmp_path / "i"))
    assert configured.returncode == 0, configured.stderr
    result = cmake("--build", build, "--target", "infinicore_runtime")
    assert result.returncode != 0
    assert "undefined reference to `infiniops_answer()'" in result.stdout


MISSING_OPS_TREE = {
    # An operator libinfiniops has, one it lacks, and random_sample.cc's NVIDIA fast path.
    "csrc/infinicore/src/ops/add/add_infiniops.cc": (
        '#include "base/add.h"\nint add_infiniops() { return infiniops_add(); }\n'
    ),
    "csrc/infinicore/src/ops/embedding/embedding_infiniops.cc": (
        '#include "base/embedding.h"\nint embedding_infiniops() { return infiniops_embedding(); }\n'
    ),
    "csrc/infinicore/src/ops/random_sample/random_sample.cc": (
        '#ifdef ENABLE_INFINIOPS_API\n#include "base/argmax.h"\n'
        "int sample_fast() { return infiniops_argmax(); }\n#endif\n"
        "int random_sample() { return 0; }\n"
    ),
}
OPS_HEADERS = {
    "include/base/add.h": "#pragma once\nint infiniops_add();\n",
    "include/base/embedding.h": "#pragma once\nint infiniops_embedding();\n",
    "include/base/argmax.h": "#pragma once\nint infiniops_argmax();\n",
    "include/infini/operator_call_instantiations.h": '#pragma once\n#include "base/add.h"\n',
}


def test_sources_calling_operators_infiniops_lacks_are_left_out_when_asked(
    built: Built, tmp_path: Path
) -> None:
    source = tmp_path / "InfiniLM"
    write_tree(source, {**LM_TREE, **MISSING_OPS_TREE})
    ops = stub_prefix(
        tmp_path / "stubs",
        "infiniops",
        [built.prefixes["infinirt"] / "include"],
        source='#include "infini/ops.h"\nint infiniops_answer() { return 10; }\n'
        "int infiniops_add() { return 1; }\n",
    )
    write_tree(ops, OPS_HEADERS)
    prefixes = {**built.prefixes, "infiniops": ops}
    # Without the option the link fails, naming what libinfiniops lacks.
    plain = tmp_path / "plain"
    assert cmake(*configure_args(plain, source, prefixes, tmp_path / "i")).returncode == 0
    failed = cmake("--build", plain, "--target", "infinicore_runtime")
    assert failed.returncode != 0 and "infiniops_embedding" in failed.stdout
    # With it, the configure names what it leaves out, and the runtime links.
    build = tmp_path / "b"
    configured = cmake(
        *configure_args(build, source, prefixes, tmp_path / "i", "-DINFINILM_SKIP_MISSING_OPS=ON")
    )
    assert configured.returncode == 0, configured.stderr
    said = " ".join(configured.stdout.split())
    assert (
        "left out infinicore/src/ops/embedding/embedding_infiniops.cc: libinfiniops lacks "
        "base/embedding.h" in said
    )
    assert (
        "built infinicore/src/ops/random_sample/random_sample.cc without ENABLE_INFINIOPS_API: "
        "libinfiniops lacks base/argmax.h" in said
    )
    assert "add_infiniops.cc" not in said
    linked = cmake("--build", build, "--target", "infinicore_runtime")
    assert linked.returncode == 0, linked.stdout[-3000:]


def test_graph_define_can_be_left_out_for_runtimes_without_graphs(
    built: Built, tmp_path: Path
) -> None:
    import json

    build = tmp_path / "b"
    result = cmake(
        *configure_args(
            build, built.source, built.prefixes, tmp_path / "i", "-DINFINILM_INFINIRT_GRAPH=OFF"
        )
    )
    assert result.returncode == 0, result.stderr
    commands = json.loads((build / "compile_commands.json").read_text())
    runtime = [c["command"] for c in commands if c["file"].endswith("/src/core.cc")]
    assert runtime and "-DENABLE_INFINIOPS_API" in runtime[0]
    assert all("USE_INFINIRT_GRAPH" not in c["command"] for c in commands)


def test_cxx11_abi_is_applied_to_every_target(built: Built, tmp_path: Path) -> None:
    build = tmp_path / "b"
    result = cmake(
        *configure_args(
            build, built.source, built.prefixes, tmp_path / "i", "-DINFINILM_CXX11_ABI=0"
        )
    )
    assert result.returncode == 0, result.stderr
    commands = (build / "compile_commands.json").read_text()
    assert commands.count("-D_GLIBCXX_USE_CXX11_ABI=0") == commands.count('"file"')


def test_cxx11_abi_from_torch_fails_clearly_without_torch(built: Built, tmp_path: Path) -> None:
    probe = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, check=False)
    if probe.returncode == 0:
        pytest.skip("torch is importable here")
    result = cmake(
        *configure_args(
            tmp_path / "b",
            built.source,
            built.prefixes,
            tmp_path / "i",
            "-DINFINILM_CXX11_ABI=TORCH",
        )
    )
    assert result.returncode != 0
    # CMake wraps messages to its terminal width, which depends on the paths in them.
    said = " ".join(result.stderr.split())
    assert "INFINILM_CXX11_ABI=TORCH but" in said
    assert "cannot import torch" in said

"""The CPython C API: an ELF file that defines these names carries an interpreter of its own.

Families of CPython's C API (Include/*.h) are ``Py<Family>_...``; a project's own ``PyImaging_*``
(Pillow) or ``PyArray_*`` (NumPy) is not the interpreter and must not be mistaken for it.
"""

from __future__ import annotations

import re

PYTHON_API_FAMILIES = frozenset(
    {
        "AST",
        "Arg",
        "AsyncGen",
        "BaseObject",
        "Bool",
        "Buffer",
        "ByteArray",
        "Bytes",
        "CFunction",
        "CMethod",
        "CallIter",
        "Callable",
        "Capsule",
        "Cell",
        "ClassMethod",
        "Code",
        "Codec",
        "Compile",
        "Complex",
        "Config",
        "Context",
        "ContextToken",
        "ContextVar",
        "Coro",
        "Descr",
        "Dict",
        "DictProxy",
        "Ellipsis",
        "Enum",
        "Err",
        "Eval",
        "Exc",
        "Exception",
        "File",
        "Filter",
        "Float",
        "Frame",
        "FrozenSet",
        "Function",
        "GC",
        "GILState",
        "Gen",
        "Hash",
        "Import",
        "InstanceMethod",
        "Interpreter",
        "InterpreterState",
        "Iter",
        "List",
        "Long",
        "Map",
        "Mapping",
        "Marshal",
        "Mem",
        "MemoryView",
        "Method",
        "Module",
        "ModuleDef",
        "Mutex",
        "Node",
        "Number",
        "OS",
        "Object",
        "Parser",
        "PickleBuffer",
        "PreConfig",
        "Property",
        "Range",
        "Reversed",
        "Run",
        "Seq",
        "SeqIter",
        "Sequence",
        "Set",
        "Slice",
        "State",
        "StaticMethod",
        "Status",
        "StructSequence",
        "Super",
        "Sys",
        "Thread",
        "ThreadState",
        "Time",
        "TraceBack",
        "TraceMalloc",
        "Tuple",
        "Type",
        "Unicode",
        "UnicodeDecodeError",
        "UnicodeEncodeError",
        "UnicodeTranslateError",
        "Unstable",
        "Vectorcall",
        "WeakRef",
        "Weakref",
        "WideStringList",
        "Wrapper",
        "Zip",
    }
)
# Symbols every libpython defines: one of these exported means an interpreter is linked in.
PYTHON_CORE = frozenset(
    {
        "Py_Initialize",
        "Py_InitializeEx",
        "Py_InitializeFromConfig",
        "Py_Finalize",
        "Py_FinalizeEx",
        "Py_Main",
        "Py_BytesMain",
        "Py_RunMain",
        "Py_IsInitialized",
        "PyEval_EvalCode",
        "PyRun_SimpleString",
        "PyRun_SimpleStringFlags",
        "PyImport_ImportModule",
        "PyObject_GetAttr",
        "PyType_Ready",
        "PyLong_FromLong",
        "PyUnicode_FromString",
        "PyErr_SetString",
        "_PyRuntime",
        "_Py_Dealloc",
        "_Py_NoneStruct",
        "_Py_TrueStruct",
    }
)
STATIC_PYTHON_MIN = 20  # this many C-API definitions also mean an interpreter inside
PYTHON_PREFIXES = ("Py", "_Py")  # what the names of the interpreter's own symbols start with


_FAMILY = re.compile(r"^Py([A-Za-z]+)_")


def is_python_api(symbol: str) -> bool:
    """``Py_Initialize``, ``_Py_Dealloc``, ``PyObject_GetAttr``: yes; ``PyImaging_New``: no."""
    if symbol.startswith(("Py_", "_Py")):
        return True
    match = _FAMILY.match(symbol)
    return match is not None and match[1] in PYTHON_API_FAMILIES

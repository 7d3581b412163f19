"""A small Itanium C++ ABI demangler, for comparing exported symbols with demangled signatures.

Why a demangler and not the reverse (mangling the requested signature): a requested signature
such as ``flash::mha_fwd(at::Tensor&, std::optional<at::Tensor const>&, ...)`` cannot be mangled
without knowing which names are classes, templates or typedefs, and which substitutions the
compiler emitted; demangling needs no such knowledge. The output follows GNU c++filt (libiberty),
the tool upstream's resolve_linked_ops.py compares against, e.g. ``char const*``, ``> >``,
``[abi:cxx11]``; matching is then whitespace-insensitive.

Covered: functions and data in namespaces and classes, constructors and destructors, operators,
conversion operators, ABI tags, templates (including template parameters, argument packs and
integer/bool literals), substitutions and the std abbreviations, CV/ref qualifiers, pointers,
references, function types, arrays, pointers to members, vtables/typeinfo/guard variables and
thunks, clone suffixes. Anything else (local names, lambdas, expressions in templates, decltype)
raises :class:`Unsupported`; a caller treats such a symbol as not matching. The test suite checks
every symbol this module accepts against libstdc++'s own ``__cxa_demangle``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class Unsupported(ValueError):
    """The symbol uses a part of the ABI this demangler does not cover (or is malformed)."""


BUILTINS = {
    "v": "void",
    "w": "wchar_t",
    "b": "bool",
    "c": "char",
    "a": "signed char",
    "h": "unsigned char",
    "s": "short",
    "t": "unsigned short",
    "i": "int",
    "j": "unsigned int",
    "l": "long",
    "m": "unsigned long",
    "x": "long long",
    "y": "unsigned long long",
    "n": "__int128",
    "o": "unsigned __int128",
    "f": "float",
    "d": "double",
    "e": "long double",
    "g": "__float128",
    "z": "...",
}
D_BUILTINS = {
    "d": "decimal64",
    "e": "decimal128",
    "f": "decimal32",
    "h": "half",
    "i": "char32_t",
    "s": "char16_t",
    "u": "char8_t",
    "a": "auto",
    "c": "decltype(auto)",
    "n": "decltype(nullptr)",
}
LITERAL_SUFFIX = {"i": "", "j": "u", "l": "l", "m": "ul", "x": "ll", "y": "ull"}
OPERATORS = {
    "nw": "new",
    "na": "new[]",
    "dl": "delete",
    "da": "delete[]",
    "ps": "+",
    "ng": "-",
    "ad": "&",
    "de": "*",
    "co": "~",
    "pl": "+",
    "mi": "-",
    "ml": "*",
    "dv": "/",
    "rm": "%",
    "an": "&",
    "or": "|",
    "eo": "^",
    "aS": "=",
    "pL": "+=",
    "mI": "-=",
    "mL": "*=",
    "dV": "/=",
    "rM": "%=",
    "aN": "&=",
    "oR": "|=",
    "eO": "^=",
    "ls": "<<",
    "rs": ">>",
    "lS": "<<=",
    "rS": ">>=",
    "eq": "==",
    "ne": "!=",
    "lt": "<",
    "gt": ">",
    "le": "<=",
    "ge": ">=",
    "ss": "<=>",
    "nt": "!",
    "aa": "&&",
    "oo": "||",
    "pp": "++",
    "mm": "--",
    "cm": ",",
    "pm": "->*",
    "pt": "->",
    "cl": "()",
    "ix": "[]",
    "qu": "?",
    "aw": "co_await",
}
STD_ABBREVIATIONS = {
    # code: (short form, full form (used for constructors), the class name)
    "a": ("std::allocator", "std::allocator", "allocator"),
    "b": ("std::basic_string", "std::basic_string", "basic_string"),
    "s": (
        "std::string",
        "std::basic_string<char, std::char_traits<char>, std::allocator<char> >",
        "basic_string",
    ),
    "i": ("std::istream", "std::basic_istream<char, std::char_traits<char> >", "basic_istream"),
    "o": ("std::ostream", "std::basic_ostream<char, std::char_traits<char> >", "basic_ostream"),
    "d": ("std::iostream", "std::basic_iostream<char, std::char_traits<char> >", "basic_iostream"),
}
SPECIAL = {
    "TV": "vtable for ",
    "TT": "VTT for ",
    "TI": "typeinfo for ",
    "TS": "typeinfo name for ",
    "GV": "guard variable for ",
}


# -- the tree --------------------------------------------------------------------------------------


class Node:
    def render(self, suffix: str = "") -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.render()


@dataclass
class Name(Node):
    text: str
    base: str = ""  # the last unqualified name, for constructors and destructors
    full: str = ""  # the long form of a std abbreviation, for its constructors
    template: bool = False  # ends in template arguments
    args: list[Node] = field(default_factory=list)  # those arguments, for T_ references
    special: bool = False  # a constructor, destructor or conversion operator: no return type
    reused: bool = False  # came from a substitution: never a new substitution candidate

    def render(self, suffix: str = "") -> str:
        return self.text + suffix


@dataclass
class Qualified(Node):
    inner: Node
    quals: str  # " const", " volatile", ...

    def render(self, suffix: str = "") -> str:
        inner = unwrap(self.inner)
        if isinstance(inner, Pack):
            return ", ".join(Qualified(item, self.quals).render(suffix) for item in inner.items)
        if isinstance(inner, Array):  # a qualified array is an array of qualified elements
            return Array(Qualified(inner.inner, self.quals), inner.dim).render(suffix)
        if isinstance(inner, Qualified):  # T const, with T = U const: print "const" once
            extra = "".join(f" {q}" for q in self.quals.split() if q not in inner.quals.split())
            return inner.render(extra + suffix)
        if isinstance(inner, Function):
            return inner.render(suffix, extra=self.quals)
        return inner.render(self.quals + suffix)


@dataclass
class Pointer(Node):
    inner: Node
    sigil: str  # "*", "&", "&&"

    def render(self, suffix: str = "") -> str:
        inner = unwrap(self.inner)
        if isinstance(inner, Pack):  # a pack expansion: the pointer applies to each element
            return ", ".join(Pointer(item, self.sigil).render(suffix) for item in inner.items)
        if self.sigil != "*" and isinstance(inner, Pointer) and inner.sigil != "*":
            # Reference collapsing (T& && -> T&, T&& && -> T&&), as c++filt prints it.
            sigil = "&" if "&" in (self.sigil, inner.sigil) else "&&"
            return Pointer(inner.inner, sigil).render(suffix)
        return self.inner.render(self.sigil + suffix)


@dataclass
class Function(Node):
    ret: Node | None
    params: list[Node]
    quals: str = ""

    def render(self, suffix: str = "", extra: str = "") -> str:
        ret = self.ret.render() if self.ret is not None else ""
        middle = f" ({suffix})" if suffix else " "
        return f"{ret}{middle}({params_text(self.params)}){self.quals}{extra}"


@dataclass
class Array(Node):
    inner: Node
    dim: str

    def render(self, suffix: str = "") -> str:
        middle = f" ({suffix}) " if suffix else " "
        return f"{self.inner.render()}{middle}[{self.dim}]"


@dataclass
class MemberPointer(Node):
    owner: Node
    member: Node

    def render(self, suffix: str = "") -> str:
        member = unwrap(self.member)
        if isinstance(member, Function):
            return member.render(f"{self.owner.render()}::*{suffix}")
        if isinstance(member, Qualified) and isinstance(member.inner, Function):
            return member.inner.render(f"{self.owner.render()}::*{suffix}", extra=member.quals)
        return member.render(f" {self.owner.render()}::*{suffix}")


@dataclass
class Reused(Node):
    """A substitution: rendered like its target, never itself a new substitution candidate."""

    target: Node

    def render(self, suffix: str = "") -> str:
        return self.target.render(suffix)


@dataclass
class Param(Node):
    """A template parameter (``T_``): rendered as the argument it stands for."""

    target: Node

    def render(self, suffix: str = "") -> str:
        return self.target.render(suffix)


def unwrap(node: Node) -> Node:
    while isinstance(node, Reused | Param):
        node = node.target
    return node


@dataclass
class Pack(Node):
    items: list[Node]

    def render(self, suffix: str = "") -> str:
        return ", ".join(i.render(suffix) for i in self.items)


def params_text(params: list[Node]) -> str:
    if len(params) == 1 and isinstance(params[0], Name) and params[0].text == "void":
        return ""
    return join_list([p.render() for p in params])[0]


def template_text(args: list[Node]) -> str:
    inner, trimmed = join_list([a.render() for a in args])
    # c++filt separates '> >', except right after it dropped a trailing ", " (empty pack).
    return f"<{inner} >" if inner.endswith(">") and not trimmed else f"<{inner}>"


def join_list(texts: list[str]) -> tuple[str, bool]:
    """Join as libiberty does: ``a, <rest>``, dropping the ", " only when the rest is empty
    (so an empty pack in the middle leaves ``a, , b``); also say whether it dropped one last."""
    if not texts:
        return "", False
    if len(texts) == 1:
        return texts[0], False
    rest, trimmed = join_list(texts[1:])
    if rest == "":
        return texts[0], True
    return f"{texts[0]}, {rest}", trimmed


# -- the parser ------------------------------------------------------------------------------------


class Parser:
    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0
        self.subs: list[Node] = []
        self.template_args: list[Node] = []

    def peek(self, n: int = 1) -> str:
        return self.s[self.i : self.i + n]

    def eat(self, token: str) -> bool:
        if self.s.startswith(token, self.i):
            self.i += len(token)
            return True
        return False

    def expect(self, token: str) -> None:
        if not self.eat(token):
            raise Unsupported(f"expected {token!r} at {self.i} in {self.s!r}")

    def number(self) -> int:
        start = self.i
        while self.i < len(self.s) and self.s[self.i].isdigit():
            self.i += 1
        if start == self.i:
            raise Unsupported(f"expected a number at {start}")
        return int(self.s[start : self.i])

    def seq_id(self) -> int:
        """``_`` -> 0, ``<base 36>_`` -> value + 1."""
        if self.eat("_"):
            return 0
        start = self.i
        while self.i < len(self.s) and (self.s[self.i].isdigit() or self.s[self.i].isupper()):
            self.i += 1
        value = int(self.s[start : self.i], 36) if self.i > start else -1
        self.expect("_")
        return value + 1

    # -- encodings

    def encoding(self) -> str:
        for code, text in SPECIAL.items():
            if self.eat(code):
                return text + self.type().render()
        if self.eat("Th"):
            self.call_offset("h")
            return "non-virtual thunk to " + self.encoding()
        if self.eat("Tv"):
            self.call_offset("v")
            return "virtual thunk to " + self.encoding()
        name, cv_ref = self.name()
        if self.i >= len(self.s) or self.peek() in ("E", "."):
            return name.text
        has_return = name.template and not name.special
        if name.template:
            self.template_args = name.args
        ret = self.type() if has_return else None
        params = [self.type()]
        while self.i < len(self.s) and self.peek() not in ("E", "."):
            params.append(self.type())
        text = f"{name.text}({params_text(params)}){cv_ref}"
        return f"{ret.render()} {text}" if ret is not None else text

    def call_offset(self, kind: str) -> None:
        for _ in range(1 if kind == "h" else 2):
            self.eat("n")
            self.number()
            self.expect("_")

    # -- names

    def name(self) -> tuple[Name, str]:
        """A (possibly nested) name, and the cv/ref qualifiers a nested name carries."""
        if self.eat("N"):
            return self.nested()
        if self.peek() == "Z":
            raise Unsupported("local names")
        if self.peek(2) == "St":
            self.i += 2
            name = self.unqualified(prefix="std::")
        elif self.peek() == "S":
            name = self.as_name(self.substitution())
            if self.peek() != "I":
                raise Unsupported("a substitution used as a plain name")
        else:
            name = self.unqualified(prefix="")
        if self.peek() == "I":
            if not name.reused:
                self.subs.append(name)
            name = self.with_args(name)
        return name, ""

    def nested(self) -> tuple[Name, str]:
        quals = self.cv_qualifiers()
        ref = " &&" if self.eat("O") else " &" if self.eat("R") else ""
        current: Name | None = None
        while not self.eat("E"):
            if current is not None and not current.reused:
                self.subs.append(current)
            if self.peek() == "I":
                if current is None:
                    raise Unsupported("template arguments without a name")
                current = self.with_args(current)
            elif self.peek() == "S" and current is None:
                current = self.std_or_substitution()
            elif self.peek() == "T" and current is None:
                current = self.as_name(self.template_param())
            elif self.peek() == "M":
                raise Unsupported("data-member prefixes")
            else:
                prefix = current.text + "::" if current is not None else ""
                current = self.unqualified(prefix=prefix, owner=current)
        if current is None:
            raise Unsupported("an empty nested name")
        return current, quals + ref

    def std_or_substitution(self) -> Name:
        if self.eat("St"):
            return self.unqualified(prefix="std::")
        return self.as_name(self.substitution())

    def as_name(self, node: Node) -> Name:
        node = unwrap(node)
        if isinstance(node, Name):
            return Name(
                text=node.text,
                base=node.base,
                full=node.full,
                template=node.template,
                args=node.args,
                reused=True,
            )
        return Name(text=node.render(), base=node.render(), reused=True)

    def with_args(self, name: Name) -> Name:
        args = self.template_arguments()
        space = " " if name.text.endswith("<") else ""
        return Name(
            text=name.text + space + template_text(args),
            base=name.base,
            template=True,
            args=args,
            special=name.special,
        )

    def unqualified(self, *, prefix: str, owner: Name | None = None) -> Name:
        self.eat("L")  # an internal-linkage name: printed like any other
        c, after = self.peek(), self.peek(2)[1:]
        if c.isdigit():
            ident = self.source_name()
            name = Name(text=prefix + ident, base=ident)
        elif owner is not None and (
            (c == "C" and after and after in "12345I") or (c == "D" and after and after in "012345")
        ):
            name = self.ctor_dtor(owner)
        elif c.islower():
            name = self.operator(prefix)
        else:
            raise Unsupported(f"unqualified name at {self.s[self.i : self.i + 8]!r}")
        while self.eat("B"):
            tag = self.source_name()
            name = Name(text=f"{name.text}[abi:{tag}]", base=name.base)
        return name

    def source_name(self) -> str:
        length = self.number()
        ident = self.s[self.i : self.i + length]
        if len(ident) != length:
            raise Unsupported("a truncated identifier")
        self.i += length
        if ident.startswith("_GLOBAL__N"):
            return "(anonymous namespace)"
        return ident

    def ctor_dtor(self, owner: Name) -> Name:
        base = owner.base
        if self.eat("C"):
            if self.eat("I"):
                raise Unsupported("inheriting constructors")
            self.i += 1
            text = (owner.full or owner.text) + "::" + base.split("<")[0]
            return Name(text=text, base=base, special=True)
        self.expect("D")
        self.i += 1
        text = (owner.full or owner.text) + "::~" + base.split("<")[0]
        return Name(text=text, base="~" + base, special=True)

    def operator(self, prefix: str) -> Name:
        code = self.peek(2)
        if code == "cv":
            self.i += 2
            target = self.type().render()
            return Name(text=f"{prefix}operator {target}", base=f"operator {target}", special=True)
        if code == "li":
            self.i += 2
            ident = self.source_name()
            return Name(text=f'{prefix}operator"" {ident}', base=f"operator {ident}")
        if code not in OPERATORS:
            raise Unsupported(f"operator {code!r}")
        self.i += 2
        symbol = OPERATORS[code]
        spaced = f"operator {symbol}" if symbol[0].isalpha() else f"operator{symbol}"
        return Name(text=prefix + spaced, base="operator " + symbol)

    def substitution(self) -> Node:
        self.expect("S")
        code = self.peek()
        if code in STD_ABBREVIATIONS:
            self.i += 1
            short, full, base = STD_ABBREVIATIONS[code]
            return Name(text=short, base=base, full=full, reused=True)
        index = self.seq_id()
        if index >= len(self.subs):
            raise Unsupported(f"substitution {index} of {len(self.subs)}")
        return Reused(self.subs[index])

    # -- template arguments

    def template_arguments(self) -> list[Node]:
        self.expect("I")
        args: list[Node] = []
        while not self.eat("E"):
            args.append(self.template_argument())
        return args

    def template_argument(self) -> Node:
        if self.eat("L"):
            return self.literal()
        if self.eat("J"):
            items: list[Node] = []
            while not self.eat("E"):
                items.append(self.template_argument())
            return Pack(items)
        if self.peek() == "X":
            raise Unsupported("expressions in template arguments")
        return self.type()

    def literal(self) -> Node:
        if self.peek(2) == "_Z":
            raise Unsupported("external names as template arguments")
        kind = self.peek()  # "" at the end: not a builtin, so type() raises Unsupported
        if kind in BUILTINS:
            self.i += 1
        else:  # an enumeration (or other class) type: printed as a cast
            kind = "(" + self.type().render() + ")"
        negative = self.eat("n")
        start = self.i
        while self.i < len(self.s) and self.s[self.i] != "E":
            self.i += 1
        value = ("-" if negative else "") + self.s[start : self.i]
        self.expect("E")
        if kind == "b" and value in ("0", "1"):
            return Name(text="true" if value == "1" else "false")
        if kind in LITERAL_SUFFIX:
            return Name(text=value + LITERAL_SUFFIX[kind])
        if kind in BUILTINS:
            return Name(text=f"({BUILTINS[kind]}){value}")
        return Name(text=kind + value)

    def template_param(self) -> Node:
        self.expect("T")
        index = self.seq_id()
        if index >= len(self.template_args):
            raise Unsupported(f"template parameter {index} out of range")
        return Param(self.template_args[index])

    # -- types

    def type(self) -> Node:
        c = self.peek()
        if c in BUILTINS:
            self.i += 1
            return Name(text=BUILTINS[c])
        if c == "D" and self.peek(2)[1:] in D_BUILTINS:
            code = self.s[self.i + 1]
            self.i += 2
            return Name(text=D_BUILTINS[code])
        node = self.compound_type()
        if not (isinstance(node, Name) and node.reused) and not isinstance(node, Reused):
            self.subs.append(node)
        return node

    def compound_type(self) -> Node:
        c = self.peek()
        if c in ("r", "V", "K"):
            quals = self.cv_qualifiers()
            if self.peek() == "F":  # a const member function: only the qualified type counts
                return Qualified(self.function_type(), quals)
            return Qualified(self.type(), quals)
        if c in ("P", "R", "O"):
            self.i += 1
            return Pointer(self.type(), {"P": "*", "R": "&", "O": "&&"}[c])
        if c == "F":
            return self.function_type()
        if c == "A":
            self.i += 1
            dim = str(self.number()) if self.peek().isdigit() else ""
            self.expect("_")
            return Array(self.type(), dim)
        if c == "M":
            self.i += 1
            owner = self.type()
            member = self.type()
            return MemberPointer(owner, member)
        if c == "T":
            node = self.template_param()
            if self.peek() == "I":
                self.subs.append(node)
                return self.with_args(self.as_name(node))
            return node
        if self.eat("Dp"):
            inner = self.type()
            target = unwrap(inner)
            return target if isinstance(target, Pack) else Pack([inner])
        if c == "u":
            self.i += 1
            return Name(text=self.source_name())
        if c in ("N", "Z") or c.isdigit() or c == "S":
            return self.class_type()
        raise Unsupported(f"type at {self.s[self.i : self.i + 8]!r}")

    def class_type(self) -> Node:
        if self.peek() == "S" and self.peek(2) != "St":
            node = self.substitution()
            return self.with_args(self.as_name(node)) if self.peek() == "I" else node
        name, quals = self.name()
        if quals:
            raise Unsupported("a qualified nested type")
        return name

    def function_type(self) -> Function:
        self.expect("F")
        self.eat("Y")
        ret = self.type()
        params = [self.type()]
        while not self.eat("E"):
            if self.peek(2) in ("RE", "OE"):
                ref = " &" if self.s[self.i] == "R" else " &&"
                self.i += 2
                return Function(ret, params, ref)
            params.append(self.type())
        return Function(ret, params)

    def cv_qualifiers(self) -> str:
        quals = ""
        if self.eat("r"):
            quals = " restrict" + quals
        if self.eat("V"):
            quals = " volatile" + quals
        if self.eat("K"):
            quals = " const" + quals
        return quals


def demangle(symbol: str) -> str:
    """The c++filt form of an Itanium-mangled ``symbol``; raises :class:`Unsupported`."""
    if not symbol.startswith("_Z"):
        raise Unsupported("not a mangled name")
    body, _, clone = symbol[2:].partition(".")
    parser = Parser(body)
    text = parser.encoding()
    if parser.i != len(body):
        raise Unsupported(f"trailing characters {body[parser.i :]!r}")
    if clone:
        text += "".join(f" [clone .{part}]" for part in clone.split("."))
    return text
